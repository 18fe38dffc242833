#!/usr/bin/env bash
# GPU machine: a private copy of the working tree for a run that outlives its
# device call. Every later call re-syncs the tracked files, and a build that
# is running meanwhile can find a source file missing (seen twice); the copy
# is out of the sync's way. Build outputs and carried parts are left behind.
#   tools/cuda_tree_copy.sh DEST
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf "$1" && mkdir -p "$1" && cp -r . "$1"/ && rm -rf "$1"/build-cuda "$1"/.big
