#!/usr/bin/env bash
# GPU machine: one session's whole check-and-benchmark run, in the background
# so that it outlives a single device call (the machine stays up while calls
# follow each other). Three tracks at once: llama.cpp's build and then the
# quantized files (CPU), the F16 benchmark files (disk), and on the GPU the
# akunu build, tools/cuda_check.sh (per-op tests under every setting, greedy
# tokens vs CPU, compute-sanitizer), then the side-by-side benchmark
# (tools/bench_cuda.py, every shape and format), bandwidth, A/B runs and ncu
# profiles. Logs and results in /tmp/sess.
#   tools/cuda_session.sh start               # launch it (after installing the carried gguf wheel)
#   tools/cuda_session.sh wait OUT SECONDS    # follow it for up to SECONDS, copy results to OUT
#   tools/cuda_session.sh probe OUT           # a short run instead (~9 min, in the foreground): build,
#       the GEMM tests, pp512 A/B on the F16 files, tools/sync_cost_bench.cu, decode profiles
# Needs what tools/cuda_carry.sh makes (.whl, .llama) in the working tree.
set -uo pipefail
cd "$(dirname "$0")/.."
S=/tmp/sess
MODELS=/tmp/bench-models
LLB=/tmp/llama.cpp/build/bin
# SESSION_SHAPES: fewer shapes; SESSION_QUICK=1: the side-by-side table alone
# (no checks, A/B, bandwidth or profiles: when device time is short)
ALL=${SESSION_SHAPES:-qwen3-0.6b,llama-3.2-1b,llama-3.1-8b}
QUICK=${SESSION_QUICK:-0}

step() { echo "[$(date +%T)] $*" >> $S/progress.txt; }

models_track() {  # one writer a shape, at once (the 8B file sets the pace)
    for shape in ${ALL//,/ }; do
        SHAPES=$shape python3 tools/bench_cuda.py make-models $MODELS > $S/models_$shape.log 2>&1 &
    done
    wait
    touch $S/models_done
}

quantize_track() {
    for i in $(seq 1 180); do [ -f /tmp/llama_done ] && [ -f $S/models_done ] && break; sleep 5; done
    [ -x $LLB/llama-quantize ] || { step "llama.cpp build failed"; touch $S/quant_done; return; }
    for shape in ${ALL//,/ }; do
        SHAPES=$shape python3 tools/bench_cuda.py quantize $MODELS $LLB > $S/quantize_$shape.log 2>&1 &
    done
    wait
    touch $S/quant_done
}

# tg/pp of one file under each setting ("-" = defaults), one process each
ab() {
    local file=$1 test=$2; shift 2
    for setting in "$@"; do
        local env_set=$setting
        [ "$setting" = - ] && env_set=AKUNU_AB_DEFAULTS=1
        local args="-p 512 -n 0"
        [ "$test" = tg ] && args="-p 0 -n 128"
        printf '%-34s %-26s ' "$setting" "$(basename $file .gguf)"
        env $env_set python3 -m akunu.cli.bench $file --device cuda $args -r 3 | grep -E 'pp512|tg128' | awk -F'|' '{print $8}'
    done
}

gpu_track() {
    step "akunu build"
    bash tools/cuda_stage.sh $S/akunu_build.log || { step "akunu build FAILED"; touch $S/all_done; return; }
    export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
    step "cuBLAS: $(python3 - <<'PY' 2>&1 | tail -1
import os, akunu, random_gguf
random_gguf.write_model("/tmp/blas.gguf", "llama", "F16", seed=5)
os.environ["AKUNU_CUDA_GEMM"] = "blas"
m = akunu.load("/tmp/blas.gguf", device="cuda", n_ctx=256)
print("forced cuBLAS prefill generate ok:", m.generate("hello world " * 20, max_tokens=4).tokens)
PY
)"
    if [ "$QUICK" = 1 ]; then
        for i in $(seq 1 240); do [ -f $S/quant_done ] && break; sleep 5; done
        step "side-by-side benchmark"
        SHAPES=$ALL python3 tools/bench_cuda.py bench $MODELS $LLB > $S/bench.md 2> $S/bench.err
        step "done"
        touch $S/all_done
        return
    fi
    step "cuda_check"
    bash tools/cuda_check.sh $S/check > $S/check.log 2>&1
    step "cuda_check exit $? ($(grep -h -E '[0-9]+ (passed|failed)|q8 link' $S/check/test_kernels.log $S/check/test_cuda.log | tr '\n' ' '))"
    # A new path whose checks failed stays out of the benchmark (said in the progress log).
    BENCH_ENV=""
    grep -q -E "FAILED.*test_attention.*decode" $S/check/test_kernels.log &&
        BENCH_ENV="$BENCH_ENV AKUNU_CUDA_ATTN_DECODE=warp_per_key"
    [ -n "$BENCH_ENV" ] && step "benchmarks run with$BENCH_ENV" && export $BENCH_ENV
    for i in $(seq 1 120); do [ -f $S/models_done ] && break; sleep 5; done
    for i in $(seq 1 240); do [ -f $S/quant_done ] && break; sleep 5; done
    step "decode A/B: a graph a step (not 8), float rows' L2 prefetch"
    for f in llama-3.2-1b-F16 llama-3.1-8b-F16; do
        ab $MODELS/$f.gguf tg - AKUNU_CUDA_GRAPH_STEPS=1 AKUNU_CUDA_GEMV_FLOAT_PREFETCH=0
    done > $S/decode_ab.txt 2>&1
    ab $MODELS/qwen3-0.6b-F16.gguf tg - AKUNU_CUDA_GEMV_FLOAT_PREFETCH=0 AKUNU_CUDA_GRAPH_STEPS=1 >> $S/decode_ab.txt 2>&1
    ab $MODELS/llama-3.2-1b-Q4_0.gguf tg - AKUNU_CUDA_GRAPH_STEPS=1 >> $S/decode_ab.txt 2>&1
    step "side-by-side benchmark"
    SHAPES=$ALL python3 tools/bench_cuda.py bench $MODELS $LLB > $S/bench.md 2> $S/bench.err
    step "bandwidth"
    SHAPES=llama-3.1-8b python3 tools/bench_cuda.py bandwidth $MODELS > $S/bandwidth.txt 2>&1
    step "ncu decode profiles"
    python3 tools/ncu_decode.py $MODELS/qwen3-0.6b-Q4_0.gguf 128 > $S/ncu_qwen3_q4_0.txt 2>&1
    python3 tools/ncu_decode.py $MODELS/llama-3.1-8b-Q4_0.gguf 128 > $S/ncu_8b_q4_0.txt 2>&1
    python3 tools/ncu_decode.py $MODELS/llama-3.1-8b-Q4_K_M.gguf 128 > $S/ncu_8b_q4_k_m.txt 2>&1
    step "done"
    touch $S/all_done
}

probe() {
    local OUT=$1
    rm -rf $S && mkdir -p $S
    bash tools/cuda_bench.sh llama $S/llama > /dev/null 2>&1
    (SHAPES=$ALL python3 tools/bench_cuda.py make-models $MODELS > $S/models.log 2>&1; touch $S/models_done) &
    nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/sync_cost tools/sync_cost_bench.cu && /tmp/sync_cost | tee $S/sync_cost.txt
    bash tools/cuda_stage.sh $S/akunu_build.log || return 1
    export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
    for setting in - AKUNU_CUDA_GEMM=blas AKUNU_CUDA_GEMM=tc; do
        echo "== GEMM tests, $setting"
        [ "$setting" = - ] && setting=AKUNU_AB_DEFAULTS=1
        env $setting python3 -m pytest -q tests/test_device_kernels.py -k "matmul or gemm" 2>&1 | tail -3
    done | tee $S/gemm_tests.txt
    wait
    for s in ${ALL//,/ }; do ab $MODELS/$s-F16.gguf pp - AKUNU_CUDA_GEMM=tc; done | tee $S/pp_ab.txt
    python3 tools/ncu_decode.py $MODELS/qwen3-0.6b-F16.gguf 128 > $S/ncu_qwen3_f16.txt 2>&1
    head -30 $S/ncu_qwen3_f16.txt
    for i in $(seq 1 40); do [ -f /tmp/llama_done ] && break; sleep 5; done
    if [ -x $LLB/llama-quantize ]; then
        $LLB/llama-quantize $MODELS/qwen3-0.6b-F16.gguf $MODELS/qwen3-0.6b-Q4_0.gguf Q4_0 > /dev/null 2>&1
        ab $MODELS/qwen3-0.6b-Q4_0.gguf tg - | tee -a $S/pp_ab.txt
        python3 tools/ncu_decode.py $MODELS/qwen3-0.6b-Q4_0.gguf 128 > $S/ncu_qwen3_q4_0.txt 2>&1
        head -30 $S/ncu_qwen3_q4_0.txt
    fi
    tar czf "$OUT/probe.tgz" -C /tmp sess
}

if [ "$1" = probe ]; then
    probe "$2"
elif [ "$1" = start ]; then
    if [ "${AKUNU_TREE_COPY:-}" != done ]; then  # run from a copy: the wait calls re-sync this tree
        bash tools/cuda_tree_copy.sh /tmp/session_tree
        AKUNU_TREE_COPY=done exec bash /tmp/session_tree/tools/cuda_session.sh start
    fi
    rm -rf $S && mkdir -p $S
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $S/gpu.txt
    step "start on $(cat $S/gpu.txt)"
    bash tools/cuda_bench.sh llama $S/llama > /dev/null 2>&1
    setsid bash "$0" _models < /dev/null > /dev/null 2>&1 &
    setsid bash "$0" _quantize < /dev/null > /dev/null 2>&1 &
    setsid bash "$0" _gpu < /dev/null > $S/gpu_track.log 2>&1 &
    exit 0
elif [ "$1" = _models ]; then models_track
elif [ "$1" = _quantize ]; then quantize_track
elif [ "$1" = _gpu ]; then gpu_track
elif [ "$1" = wait ]; then
    OUT="$2"; LIMIT="$3"; t0=$(date +%s)
    while [ ! -f $S/all_done ] && [ $(( $(date +%s) - t0 )) -lt "$LIMIT" ]; do sleep 10; done
    mkdir -p "$OUT"
    tar czf "$OUT/sess.tgz" -C /tmp sess 2> /dev/null
    cat $S/progress.txt
    for f in decode_ab.txt bench.md bandwidth.txt; do [ -s $S/$f ] && { echo "== $f"; cat $S/$f; }; done
    [ -f $S/all_done ] && echo "ALL DONE" || echo "still running"
fi
