#!/usr/bin/env bash
# GPU machine, a few minutes: a quick A/B of decode settings without the
# full session. Uses a carried stage (build-cuda/stage, built here for sm_90
# with the same Python) when it imports, else builds; writes files of every
# layer of Qwen3-0.6B and Llama-3.2-1B (32768 vocabulary; QUICK_FORMATS,
# default "Q4_0 Q8_0"; QUICK_SHAPES, default both), runs the kernel tests QUICK_TESTS selects, then tg128
# of each file under each setting in turn, QUICK_ROUNDS times (ABAB: drift in
# the GPU's clocks falls on every setting alike).
#   QUICK_TESTS="attention" tools/cuda_quick_ab.sh OUT - AKUNU_X=0 ...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=$1; shift
SETTINGS=("$@")
mkdir -p "$OUT" /tmp/quick-models
export PYTHONPATH="$PWD/build-cuda/stage:$PWD/tools:${PYTHONPATH:-}"
python3 - <<'PY' > "$OUT/models.log" 2>&1 &
import os, random_gguf as r
from bench_cuda import SHAPES
for name in os.environ.get("QUICK_SHAPES", "llama-3.2-1b qwen3-0.6b").split():
    arch, shape = SHAPES[name]
    for q in os.environ.get("QUICK_FORMATS", "Q4_0 Q8_0").split():
        r.write_model(f"/tmp/quick-models/{name}-{q}.gguf", arch, q, seed=1,
                      shape=r.Shape(**dict(shape, ctx=4096, vocab=32768)))
PY
if ! python3 -c "import akunu._core" 2> /dev/null; then
    echo "building (the carried stage does not import here)"
    bash tools/cuda_stage.sh "$OUT/build.log" || exit 1
fi
[ -n "${QUICK_TESTS:-}" ] && python3 -m pytest -q tests/test_device_kernels.py -k "$QUICK_TESTS" 2>&1 | tail -2 | tee "$OUT/tests.txt"
wait
for f in /tmp/quick-models/*.gguf; do
    for round in $(seq 1 "${QUICK_ROUNDS:-2}"); do
        for setting in "${SETTINGS[@]}"; do
            [ "$setting" = - ] && env_set=AKUNU_AB_DEFAULTS=1 || env_set=$setting
            printf '%-28s %-36s %s\n' "$(basename "$f" .gguf)" "$setting" \
                "$(env $env_set python3 -m akunu.cli.bench "$f" --device cuda -p 0 -n 128 -r 3 2>&1 | grep tg128 | awk -F'|' '{print $8}')"
        done
    done
done | tee "$OUT/ab.txt"
