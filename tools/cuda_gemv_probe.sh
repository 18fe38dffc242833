#!/usr/bin/env bash
# GPU machine, a few minutes: where the decode GEMVs lose bandwidth. Builds
# akunu, writes 2-layer models at the Llama-3.1-8B and Qwen3-0.6B shapes in
# Q4_0 / Q8_0 (gguf-py's quantizer: no llama.cpp needed), prints each decode
# command's time (akunu-profile) and ncu's detail sections (memory, warp
# stalls, occupancy) for one layer's gemv_multi launches; then
# tools/gemv_layout_bench.cu (the GEMV's bandwidth by weight layout).
#   PROBE_AB="AKUNU_X=1 ..." PROBE_NCU=1 PROBE_LAYOUT=1 PROBE_FULL=1 tools/cuda_gemv_probe.sh OUT
# (PROBE_FULL: every layer of Qwen3-0.6B and Llama-3.2-1B, 8 of Llama-3.1-8B, and tg128 alone;
#  PROBE_FULL=real: every layer of all three and their real vocabularies)
# (PROBE_FORMATS: the files' formats, default "Q4_0 Q8_0"; Q4_K_M-blocks: random_gguf's
#  Q4_K_M placement of random K-quant blocks. PROBE_LANE: tools/gemv_lane_bench.cu too;
#  PROBE_NCU_STEP: tools/ncu_decode.py's whole-step profile of the 8B file, default and REPACK=0)
# (PROBE_AB: settings profiled and benchmarked after the defaults; PROBE_PP: pp512 too;
#  PROBE_TEST_SETTINGS / PROBE_TESTS: more settings / another -k for the kernel tests)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/gemv_probe}
mkdir -p "$OUT"
M=/tmp/probe-models
mkdir -p $M
python3 - <<'PY' > "$OUT/models.log" 2>&1 &
import sys; sys.path.insert(0, "tools")
import random_gguf as r
from bench_cuda import SHAPES
import os
full = os.environ.get("PROBE_FULL")  # every layer of the small shapes, 8 of the 8B's
plan = ((("llama-3.1-8b", 32 if full == "real" else 8), ("llama-3.2-1b", 16), ("qwen3-0.6b", 28)) if full
        else (("llama-3.1-8b", 2), ("qwen3-0.6b", 4)))
for name, layers in plan:
    arch, shape = SHAPES[name]
    shape = dict(shape, n_layers=layers, ctx=4096, **({} if full == "real" else {"vocab": 32768}))
    for q in os.environ.get("PROBE_FORMATS", "Q4_0 Q8_0").split():
        r.write_model(f"/tmp/probe-models/{name}-{q}.gguf", arch, q, seed=1, shape=r.Shape(**shape))
        print("wrote", name, q, flush=True)
PY
nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/gemv_layout tools/gemv_layout_bench.cu &
nvcc -O3 -arch=sm_90 -std=c++17 -I src -I backend/cuda/kernels -o /tmp/gemv_lane tools/gemv_lane_bench.cu &
bash tools/cuda_stage.sh "$OUT/akunu_build.log" || exit 1
wait
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
for setting in - AKUNU_CUDA_GEMV_LEAN=1 "AKUNU_CUDA_GEMV_LEAN=1 AKUNU_CUDA_GEMV_SPLIT=8" ${PROBE_TEST_SETTINGS:-}; do
    [ "$setting" = - ] && env_set=AKUNU_AB_DEFAULTS=1 || env_set=$setting
    echo "== tests $setting: $(env $env_set python3 -m pytest -q tests/test_device_kernels.py -k "${PROBE_TESTS:-gemv or matmul}" 2>&1 | tail -1)"
done | tee "$OUT/tests.txt"
for f in $M/*.gguf; do
    for setting in - ${PROBE_AB:-}; do
        [ "$setting" = - ] && env_set=AKUNU_AB_DEFAULTS=1 || env_set=$setting
        echo "== $(basename $f) $setting"
        [ -z "${PROBE_FULL:-}" ] && env $env_set python3 -m akunu.cli.profile "$f" --device cuda -r 5 2>&1 | tail -n +3
        env $env_set python3 -m akunu.cli.bench "$f" --device cuda -p 0 -n 128 -r 3 2>&1 | grep tg128
        [ -n "${PROBE_PP:-}" ] && env $env_set python3 -m akunu.cli.bench "$f" --device cuda -p 512 -n 0 -r 3 2>&1 | grep pp512
    done
done | tee "$OUT/profile.txt"
if [ -n "${PROBE_NCU:-}" ]; then
    first=$(echo ${PROBE_FORMATS:-Q4_0} | cut -d' ' -f1)
    for f in llama-3.1-8b-$first qwen3-0.6b-$first; do
        AKUNU_NCU_CHILD=1 timeout 240 ncu --cache-control none --clock-control none --profile-from-start off \
            -k regex:gemv_multi -c 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
            --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
            python3 tools/ncu_decode.py $M/$f.gguf 128 > "$OUT/ncu_$f.txt" 2>&1
        grep -E "gemv_multi|Duration|Memory Throughput  .*byte|Registers Per|Achieved Occupancy|Grid Size" \
            "$OUT/ncu_$f.txt" | head -60
    done
fi
if [ -n "${PROBE_NCU_STEP:-}" ]; then  # the whole decode step of the first format's 8B file, by kernel
    f=$M/llama-3.1-8b-$(echo ${PROBE_FORMATS:-Q4_0} | cut -d' ' -f1).gguf
    python3 tools/ncu_decode.py $f 128 > "$OUT/ncu_step.txt" 2>&1
    AKUNU_CUDA_REPACK=0 python3 tools/ncu_decode.py $f 128 > "$OUT/ncu_step_repack0.txt" 2>&1
    head -30 "$OUT/ncu_step.txt" "$OUT/ncu_step_repack0.txt"
fi
[ -n "${PROBE_LAYOUT:-}" ] && /tmp/gemv_layout | tee "$OUT/layout.txt"
[ -n "${PROBE_LANE:-}" ] && /tmp/gemv_lane | tee "$OUT/lane.txt"
exit 0
