#!/usr/bin/env bash
# GPU machine, after tools/cuda_decode_profile.sh (build and models in place):
# tg128 of the F16 models under each decode GEMV setting, in one run (for the
# quantized GEMVs' occupancy, SMEM_KB caps blocks per SM: 100 -> 2, 60 -> 3;
# run it on the quantized files too).
#   tools/cuda_decode_ab.sh [SHAPES] [FORMATS]   # FORMATS default F16 (Q4_0 etc.: after bench_cuda.py quantize)
set -uo pipefail
cd "$(dirname "$0")/.."
SHAPES="${1:-qwen3-0.6b,llama-3.1-8b}"; FORMATS="${2:-F16}"
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
for setting in "AKUNU_CUDA_GEMV_NORM=kernel" "AKUNU_CUDA_GEMV_NORM=block" "AKUNU_CUDA_GEMV_NORM=prefetch" \
    "AKUNU_CUDA_GEMV_FIXED=1" "AKUNU_CUDA_GEMV_SMEM_KB=100" "AKUNU_CUDA_GEMV_SMEM_KB=60"; do
    for s in ${SHAPES//,/ }; do
        for f in ${FORMATS//,/ }; do
            printf '%-55s %-22s ' "$setting" "$s-$f"
            env $setting python3 -m akunu.cli.bench /tmp/bench-models/$s-$f.gguf --device cuda -p 0 -n 128 -r 3 |
                grep tg128 | awk -F'|' '{print $8}'
        done
    done
done
