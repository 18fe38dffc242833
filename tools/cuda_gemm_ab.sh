#!/usr/bin/env bash
# GPU machine: pp512 of the tensor-core GEMM's step widths side by side
# (AKUNU_CUDA_GEMM_BK=32 vs the default 64), after the GEMM per-op tests.
# Expects tools/cuda_bench.sh start to have run (build, F16 models); quantized
# files are made when the llama.cpp build of tools/cuda_bench.sh is there.
#   tools/cuda_gemm_ab.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="$1"; MODELS=/tmp/bench-models; LLB=/tmp/llama.cpp/build/bin
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
python3 -m pytest -q tests/test_device_kernels.py -k "matmul or gemm" 2>&1 | tail -2
ab() {
    for f in "$@"; do
        for bk in 32 64; do
            echo "$f BK=$bk $(AKUNU_CUDA_GEMM_BK=$bk python3 -m akunu.cli.bench $MODELS/$f.gguf --device cuda \
                -p 512 -n 0 -r 3 | grep pp512 | awk -F'|' '{print $8}')"
        done
    done
}
ab qwen3-0.6b-F16 llama-3.2-1b-F16 | tee "$OUT/gemm_ab.txt"
for i in $(seq 1 60); do [ -f /tmp/llama_done ] && break; sleep 5; done
if [ -x "$LLB/llama-quantize" ]; then
    python3 tools/bench_cuda.py quantize $MODELS $LLB > /dev/null
    ab llama-3.2-1b-Q8_0 llama-3.2-1b-Q4_0 llama-3.2-1b-Q4_K_M | tee -a "$OUT/gemm_ab.txt"
fi
