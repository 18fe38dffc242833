#!/usr/bin/env bash
# GPU machine: benchmark akunu (CUDA) against llama.cpp (CUDA) side by side.
#   tools/cuda_bench.sh llama OUT   # only start the llama.cpp build in the background
#   tools/cuda_bench.sh start OUT   # llama.cpp build in the background, akunu build, F16 models, akunu-profile
#   tools/cuda_bench.sh finish OUT  # wait for llama.cpp, quantize, both benchmarks -> OUT/bench.md
# Expects the trimmed llama.cpp sources (from the llama-cpp-python sdist) at .llama/llama.cpp.tgz
# and the gguf wheel installed from .whl: tools/cuda_carry.sh makes both, to carry.
set -uo pipefail
cd "$(dirname "$0")/.."
PHASE="$1"; OUT="$2"; mkdir -p "$OUT"
MODELS=/tmp/bench-models; LL=/tmp/llama.cpp; LLB=$LL/build/bin
PY=python3
stage() { bash tools/cuda_stage.sh "$OUT/akunu_build.log" || exit 1; }
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
start_llama() {
    if [ ! -x "$LLB/llama-bench" ] && [ ! -f /tmp/llama_started ]; then
        touch /tmp/llama_started
        rm -rf $LL && mkdir -p /tmp && tar xzf .llama/llama.cpp.tgz -C /tmp
        setsid bash -c "cd $LL && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/llama_build.log 2>&1 && \
            cmake --build build -j 12 --target llama-bench llama-quantize >> /tmp/llama_build.log 2>&1; \
            touch /tmp/llama_done" > /dev/null 2>&1 < /dev/null &
    fi
}
if [ "$PHASE" = llama ]; then
    start_llama
elif [ "$PHASE" = start ]; then
    start_llama
    stage
    $PY tools/bench_cuda.py make-models $MODELS
    $PY -m akunu.cli.profile $MODELS/qwen3-0.6b-F16.gguf --device cuda -r 5 | tee "$OUT/profile_qwen3_f16.txt"
    $PY -m akunu.cli.bench $MODELS/qwen3-0.6b-F16.gguf --device cuda -p 512 -n 128 -r 3 | tee "$OUT/akunu_f16.md"
elif [ "$PHASE" = finish ]; then
    [ -d build-cuda/stage ] || stage
    for i in $(seq 1 60); do [ -f /tmp/llama_done ] && break; sleep 5; done
    [ -x "$LLB/llama-bench" ] || { tail -30 /tmp/llama_build.log; exit 1; }
    $PY tools/bench_cuda.py quantize $MODELS $LLB
    $PY tools/bench_cuda.py bench $MODELS $LLB | tee "$OUT/bench.md"
fi
