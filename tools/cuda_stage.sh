#!/usr/bin/env bash
# Builds the extension with the CUDA backend (Release, in build-cuda) and
# stages a package tree whose _core is that build, at build-cuda/stage (put it
# first on PYTHONPATH): the source tree's CUDA build without installing it.
# tools/cuda_check.sh runs its tests against it.
#   tools/cuda_stage.sh LOG_FILE
set -uo pipefail
cd "$(dirname "$0")/.."
LOG="$1"
BUILD=${STAGE_BUILD:-build-cuda}  # STAGE_BUILD / STAGE_CUDA_FLAGS: a second build for an A/B
{
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAKUNU_CUDA=ON ${STAGE_CUDA_FLAGS:+"-DCMAKE_CUDA_FLAGS=$STAGE_CUDA_FLAGS"} \
        -Dpybind11_DIR="$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())')" &&
        cmake --build "$BUILD" -j 16
} > "$LOG" 2>&1 || { tail -50 "$LOG"; exit 1; }
STAGE="$BUILD/stage"
rm -rf "$STAGE" && mkdir -p "$STAGE" && cp -r python/akunu "$STAGE/akunu" && rm -f "$STAGE"/akunu/_core*.so
cp "$BUILD"/_core*.so "$STAGE/akunu/"
