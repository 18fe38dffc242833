#!/usr/bin/env bash
# GPU machine: the real Gemma 3 270M (Q4_K_M) on CUDA, against llama.cpp, while
# its file arrives in parts (tools/cuda_carry_big.sh: one part a call). In the
# background: llama.cpp's build, akunu's build, the per-op kernel tests and
# test_cuda; once the file is whole (sha256), test_gemma3_real.py on the GPU
# (greedy tokens and logits against llama.cpp's recorded outputs) and
# akunu-bench beside llama-bench (-ngl 99 -fa 1, default and
# GGML_CUDA_GRAPH_OPT=1) on it. Results in /tmp/gemma_run.
#   tools/cuda_real_gemma.sh start           # with .whl's gguf installed and .llama carried
#   tools/cuda_real_gemma.sh wait OUT SECS   # follow for up to SECS, copy results to OUT
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/gemma_run
GEMMA=/tmp/big/gemma-3-270m-q4_k_m.gguf
SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
LLB=/tmp/llama.cpp/build/bin
step() { echo "[$(date +%T)] $*" >> $R/progress.txt; }

run() {
    export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
    step "akunu build"
    bash tools/cuda_stage.sh $R/akunu_build.log || { step "akunu build FAILED"; touch $R/done; return; }
    python3 -m pytest -q -rs tests/test_device_kernels.py > $R/test_kernels.log 2>&1
    step "test_device_kernels: $(tail -1 $R/test_kernels.log)"
    python3 -m pytest -q -rs tests/test_cuda.py -k "models_match_cpu or greedy or bert or sampling" > $R/test_cuda.log 2>&1
    step "test_cuda: $(tail -1 $R/test_cuda.log)"
    for i in $(seq 1 240); do
        [ -f $GEMMA ] && [ "$(sha256sum $GEMMA | cut -d' ' -f1)" = $SHA ] && break
        sleep 5
    done
    [ -f $GEMMA ] || { step "no Gemma file"; touch $R/done; return; }
    AKUNU_GEMMA3_270M=$GEMMA AKUNU_GEMMA_DEVICE=cuda python3 -m pytest -q -rs tests/test_gemma3_real.py > $R/test_gemma.log 2>&1
    step "test_gemma3_real on cuda: $(tail -1 $R/test_gemma.log)"
    python3 -m akunu.cli.profile $GEMMA --device cuda -r 5 > $R/profile.txt 2>&1
    for i in $(seq 1 120); do [ -f /tmp/llama_done ] && break; sleep 5; done
    {
        python3 -m akunu.cli.bench $GEMMA --device cuda -p 512 -n 128 -r 5 2>&1 | grep -E "pp512|tg128"
        $LLB/llama-bench -m $GEMMA -ngl 99 -fa 1 -p 512 -n 128 -r 5 2>&1 | grep -E "pp512|tg128"
        GGML_CUDA_GRAPH_OPT=1 $LLB/llama-bench -m $GEMMA -ngl 99 -fa 1 -p 512 -n 128 -r 5 2>&1 | grep -E "pp512|tg128"
        for setting in AKUNU_CUDA_Q8_LINK=all AKUNU_CUDA_Q8_LINK=0; do
            echo "$setting: $(env $setting python3 -m akunu.cli.bench $GEMMA --device cuda -p 0 -n 128 -r 5 2>&1 | grep tg128)"
        done
    } > $R/bench.txt
    step "bench done"
    touch $R/done
}

case "${1:-}" in
start)
    if [ "${AKUNU_TREE_COPY:-}" != done ]; then  # run from a copy: the part calls re-sync this tree
        bash tools/cuda_tree_copy.sh /tmp/gemma_tree
        AKUNU_TREE_COPY=done exec bash /tmp/gemma_tree/tools/cuda_real_gemma.sh start
    fi
    rm -rf $R && mkdir -p $R
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/gpu.txt
    step "start on $(cat $R/gpu.txt)"
    bash tools/cuda_bench.sh llama $R/llama > /dev/null 2>&1
    setsid bash "$0" _run < /dev/null > $R/run.log 2>&1 &
    ;;
_run) run ;;
wait)
    OUT="$2"; secs="$3"
    for i in $(seq 1 $((secs / 5))); do [ -f $R/done ] && break; sleep 5; done
    cat $R/progress.txt; [ -f $R/bench.txt ] && cat $R/bench.txt
    [ -f $R/done ] && echo "ALL DONE" || echo "still running"
    tar czf "$OUT/gemma_run.tgz" -C /tmp gemma_run
    ;;
*) sed -n 2,10p "$0"; exit 2 ;;
esac
