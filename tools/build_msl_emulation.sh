#!/usr/bin/env bash
# Builds the Metal kernels as C++ for the CPU (backend/metal/emulation) with
# clang++ and prints the library's path; device="metal-emu" loads it through
# AKUNU_MSL_EMU_LIB. Usage: tools/build_msl_emulation.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-msl-emu}"
command -v clang++ > /dev/null || { echo "clang++ not found (Debian: apt-get install clang)" >&2; exit 1; }
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
cmake -S "$root/backend/metal/emulation" -B "$build" "${gen[@]}" -DCMAKE_CXX_COMPILER=clang++ > /dev/null
cmake --build "$build" -j "$(nproc)" > /dev/null
for lib in "$build"/libakunu_msl_emu.so "$build"/libakunu_msl_emu.dylib; do
    [ -f "$lib" ] && { echo "$lib"; exit 0; }
done
echo "the build made no libakunu_msl_emu library" >&2
exit 1
