#!/usr/bin/env bash
# GPU machine: pp512 of the tensor-core GEMM's tile shapes side by side
# (defaults vs AKUNU_CUDA_GEMM_BM=128 vs AKUNU_CUDA_GEMM_BM=64; AKUNU_CUDA_GEMM_BK=32 selects the first version's 32-wide steps), after the
# GEMM per-op tests under each. Builds akunu and the F16 models it needs.
#   tools/cuda_gemm_ab.sh OUT [MODEL_NAMES...]   (default: llama-3.2-1b llama-3.1-8b)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="$1"; shift; MODELS=/tmp/bench-models
NAMES="${*:-llama-3.2-1b llama-3.1-8b}"
bash tools/cuda_stage.sh "$OUT/build.log" || exit 1
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
CONFIGS=("" "AKUNU_CUDA_GEMM_BM=128" "AKUNU_CUDA_GEMM_BM=64")
for c in "${CONFIGS[@]}"; do
    echo "per-op [${c:-default}]: $(env $c python3 -m pytest -q tests/test_device_kernels.py -k 'matmul or gemm' 2>&1 | tail -1)"
done
(cd tools && SHAPES="${NAMES// /,}" python3 bench_cuda.py make-models $MODELS > /dev/null)
for n in $NAMES; do
    for c in "${CONFIGS[@]}"; do
        echo "$n-F16 [${c:-default}] pp512 $(env $c python3 -m akunu.cli.bench $MODELS/$n-F16.gguf --device cuda \
            -p 512 -n 0 -r 3 | grep pp512 | awk -F'|' '{print $8}')"
    done
done | tee "$OUT/gemm_ab.txt"
