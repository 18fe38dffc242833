#!/usr/bin/env bash
# GPU machine, after tools/cuda_check.sh built build-cuda: the sampler's cost
# (greedy vs sampled decode, F16 Qwen3-0.6B shape), akunu-bench pp512/tg128 on
# that model, and embedding throughput (akunu vs sentence-transformers, random
# weights at all-MiniLM-L6-v2's shape: the real weights are over the carry
# limit; tests/.cache/minilm-meta holds its config and tokenizer).
#   tools/cuda_embed_sampling.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-/tmp/akunu-cuda}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
PY=python3
for tokens in 128 32; do
    $PY tools/bench_embeddings.py --random-like tests/.cache/minilm-meta --device cuda --batch 32 \
        --tokens $tokens --reps 10 2>&1 | grep '^{' | tee -a "$OUT/embeddings.txt"
done
$PY - <<'PY'
import random_gguf, bench_cuda
arch, shape = bench_cuda.SHAPES["qwen3-0.6b"]
random_gguf.write_model("/tmp/qwen3-0.6b-F16.gguf", arch, "F16", seed=1, shape=random_gguf.Shape(**shape))
PY
$PY -m akunu.cli.bench /tmp/qwen3-0.6b-F16.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | tee "$OUT/bench_qwen3_f16.md"
$PY tools/bench_cuda_sampling.py /tmp/qwen3-0.6b-F16.gguf 2>&1 | tee "$OUT/sampling.txt"
