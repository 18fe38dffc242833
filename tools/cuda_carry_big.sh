#!/usr/bin/env bash
# A file larger than the device tool's carry limit (64 MiB a call, the working
# tree included: the real Gemma 3 270M is 253 MB) taken to the GPU machine in
# parts over back-to-back calls, which find the same warm machine.
#   here:   tools/cuda_carry_big.sh split FILE [MB]     # parts of MB each (default 36) in /tmp/akunu_big
#   here:   tools/cuda_carry_big.sh keep N              # .big/ (git-excluded) holds part N alone
#   device: tools/cuda_carry_big.sh append PART DEST    # one call a part, with carry [".big"]
#   device: tools/cuda_carry_big.sh check DEST SHA256   # after the last part
# 36 MB a part leaves room for the ~22 MB of tracked files.
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=/tmp/akunu_big  # every part, outside the tree (only .big/ travels)
case "${1:-}" in
split)
    file="$2"; mb="${3:-36}"; name=$(basename "$file")
    grep -qx '/.big/' .git/info/exclude 2>/dev/null || echo /.big/ >> .git/info/exclude
    mkdir -p "$ALL" && rm -f "$ALL/$name".part*
    split -b "${mb}M" -d -a 2 "$file" "$ALL/$name".part
    sha=$(sha256sum "$file" | cut -d' ' -f1)
    ls "$ALL/$name".part*
    echo "sha256 $sha"
    echo "for each part N: tools/cuda_carry_big.sh keep N here, then a call with carry [\".big\"]:"
    echo "  bash tools/cuda_carry_big.sh append .big/$name.partNN /tmp/big/$name"
    echo "after the last: bash tools/cuda_carry_big.sh check /tmp/big/$name $sha"
    ;;
keep)  # .big/ holds part N alone
    n=$(printf '%02d' "$2")
    mkdir -p .big && rm -f .big/*.part*
    cp "$ALL"/*.part"$n" .big/
    ls -l .big
    ;;
append)
    part="$2"; dest="$3"
    mkdir -p "$(dirname "$dest")"
    case "$part" in *part00) : > "$dest" ;; esac  # the first part starts the file
    cat "$part" >> "$dest"
    ls -l "$dest"
    ;;
check)
    dest="$2"; want="$3"
    got=$(sha256sum "$dest" | cut -d' ' -f1)
    [ "$got" = "$want" ] && echo "ok $dest" || { echo "MISMATCH $dest: $got vs $want"; exit 1; }
    ;;
*)
    sed -n '2,9p' "$0"; exit 2 ;;
esac
