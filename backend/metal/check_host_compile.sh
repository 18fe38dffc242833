#!/usr/bin/env bash
# Compiles backend/metal/metal_device.mm (Objective-C++, ARC) on a machine
# without macOS: clang++ against host_check/include, hand-written
# declarations of exactly the Metal, Foundation, CoreFoundation, IOKit and
# Mach API the file uses (from Apple's documentation, spelled as Apple spells
# them). Syntax and types only (-fsyntax-only: nothing links or runs); a
# selector the file calls that the declarations lack, or a wrong argument
# type, fails it. Warnings are errors.
# Usage: backend/metal/check_host_compile.sh [file.mm]  (default: metal_device.mm)
# Exit: 0 compiled, 1 compile errors, 2 no clang++ with Objective-C++ ARC here.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="${1:-$here/metal_device.mm}"
cxx="${CLANGXX:-clang++}"
flags=(-x objective-c++ -std=c++17 -fobjc-arc -fobjc-runtime=gnustep-2.0 -fblocks -Wall -Werror -fsyntax-only)
if ! command -v "$cxx" > /dev/null; then
    echo "no $cxx here (Debian: apt-get install clang)" >&2
    exit 2
fi
probe="$(mktemp --suffix=.mm)"
trap 'rm -f "$probe"' EXIT
printf '@interface P\n- (void)f;\n@end\nvoid g(P* p) { [p f]; }\n' > "$probe"
if ! "$cxx" "${flags[@]}" -Wno-objc-root-class "$probe" 2> /dev/null; then
    echo "$cxx here cannot compile Objective-C++ with ARC (-fobjc-arc -fobjc-runtime=gnustep-2.0)" >&2
    exit 2
fi
"$cxx" "${flags[@]}" -I "$here/host_check/include" -I "$root/src" -I "$root/backend" -I "$here" -I "$root/include" \
    "$src" || exit 1
echo "compiled $(basename "$src") against host_check/include"
