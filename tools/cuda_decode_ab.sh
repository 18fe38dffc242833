#!/usr/bin/env bash
# GPU machine, after tools/cuda_decode_profile.sh or cuda_bench.sh start (build
# and models in place): tg128 of akunu under each decode setting, in one run.
#   tools/cuda_decode_ab.sh [SHAPES] [FORMATS] [SETTING ...]
# FORMATS default F16 (Q4_0 etc.: after bench_cuda.py quantize); a SETTING is
# VAR=VALUE for env ("-" for the defaults). Without settings: the defaults,
# then plain launches (AKUNU_CUDA_PDL=0), no weight prefetch before the wait,
# and x rounded in every GEMV block (AKUNU_CUDA_GEMV_ROUND_KB=65536).
set -uo pipefail
cd "$(dirname "$0")/.."
SHAPES="${1:-qwen3-0.6b,llama-3.1-8b}"; FORMATS="${2:-F16}"
shift 2 2>/dev/null || shift $#
SETTINGS=("$@")
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=(- AKUNU_CUDA_PDL=0 AKUNU_CUDA_GEMV_PREFETCH=0 AKUNU_CUDA_GEMV_ROUND_KB=65536)
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
for s in ${SHAPES//,/ }; do
    for f in ${FORMATS//,/ }; do
        [ -f /tmp/bench-models/$s-$f.gguf ] || continue
        for setting in "${SETTINGS[@]}"; do
            printf '%-34s %-22s ' "$setting" "$s-$f"
            [ "$setting" = - ] && setting=AKUNU_AB_DEFAULTS=1
            env $setting python3 -m akunu.cli.bench /tmp/bench-models/$s-$f.gguf --device cuda -p 0 -n 128 -r 3 |
                grep tg128 | awk -F'|' '{print $8}'
        done
    done
done
