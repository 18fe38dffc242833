#!/usr/bin/env bash
# GPU machine: akunu's decode speed alone and where its time goes, on the F16
# files of the benchmark shapes (no llama.cpp build: a quick loop between full
# side-by-side runs; compare with BENCHMARKS.md's rows from the same machine).
#   tools/cuda_decode_profile.sh OUT [SHAPES]   # default qwen3-0.6b,llama-3.2-1b,llama-3.1-8b
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="$1"; SHAPES="${2:-qwen3-0.6b,llama-3.2-1b,llama-3.1-8b}"; mkdir -p "$OUT"
MODELS=/tmp/bench-models
bash tools/cuda_stage.sh "$OUT/build.log" || exit 1
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
python3 -m pytest -q tests/test_device_kernels.py -k "matmul or gemv_multi" 2>&1 | tail -2
SHAPES=$SHAPES python3 tools/bench_cuda.py make-models $MODELS > /dev/null
for s in ${SHAPES//,/ }; do
    f=$MODELS/$s-F16.gguf
    python3 -m akunu.cli.bench "$f" --device cuda -p 0 -n 128 -r 3 | grep tg128
    python3 tools/ncu_decode.py "$f" 128 > "$OUT/ncu_$s.txt" 2>&1
    head -14 "$OUT/ncu_$s.txt"
done
