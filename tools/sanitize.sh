#!/usr/bin/env bash
# Builds the extension with AddressSanitizer + UndefinedBehaviorSanitizer and
# runs the tests that exercise parsing, hostile files, kernels and generation
# under it. Any report fails the run.
#   tools/sanitize.sh [pytest args...]   (default: the subset below)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-asan
PYBIND11_DIR="$(python -c 'import pybind11; print(pybind11.get_cmake_dir())')"
configure() {
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAKUNU_SANITIZE=ON -DAKUNU_CUDA=OFF \
        -Dpybind11_DIR="$PYBIND11_DIR" > /dev/null
}
# Once seen on a loaded machine: CMake's compiler probe failed ("No known
# features for CXX compiler"); a fresh build directory configured cleanly.
configure || { echo "configure failed; retrying in a fresh $BUILD" >&2; rm -rf "$BUILD"; configure; }
cmake --build "$BUILD" --target _core _testing akunu
# A package tree whose _core (and the test hooks, _testing) are the sanitized build
STAGE="$BUILD/stage"
rm -rf "$STAGE" && mkdir -p "$STAGE"
cp -r python/akunu "$STAGE/akunu"
rm -f "$STAGE"/akunu/_core*.so "$STAGE"/akunu/_testing*.so
cp "$BUILD"/_core*.so "$BUILD"/_testing*.so "$STAGE/akunu/"
# the C API (libakunu), which the C test programs and the ctypes tests load
mkdir -p "$STAGE/akunu/lib" && cp "$BUILD"/libakunu.so "$STAGE/akunu/lib/"
# Python itself is not instrumented: preload the runtimes; leaks of the
# interpreter are not ours, so leak checking is off.
export LD_PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export PYTHONPATH="$STAGE"
if [ "$#" -eq 0 ]; then
    set -- tests/test_bad_input.py tests/test_gguf_parser.py tests/test_fuzz_corpus.py tests/test_kernels.py \
        tests/test_generate.py tests/test_sampling.py tests/test_decoding.py \
        tests/test_c_api.py tests/test_c_tokenizer.py tests/test_c_chat.py tests/test_c_grammar.py \
        tests/test_c_speculation.py tests/test_c_batch.py tests/test_tensor_parallel.py \
        -k "not real_model and not gemma and not tiny and not pkg_config and not find_package"
fi
python -m pytest -q -p no:cacheprovider "$@"
