#!/usr/bin/env bash
# Developer machine, before GPU-machine runs: what tools/cuda_check.sh and
# tools/cuda_bench.sh need that the GPU machine lacks and cannot download,
# into git-ignored folders to name in the device call's carry list:
#   .whl/              the gguf wheel (the tests and the model writer import it)
#   .llama/llama.cpp.tgz  llama.cpp's sources from the llama-cpp-python sdist,
#                      trimmed of models/, docs/ and media/ (~12 MB) for llama-bench
# On the GPU machine, first:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#   tools/cuda_carry.sh [LLAMA_CPP_PYTHON_VERSION]   # default 0.3.36
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:-0.3.36}"
mkdir -p .git/info
for d in /.whl/ /.llama/; do grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude; done
GGUF=$(sed -n 's/.*"gguf==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .whl \
    "gguf==$GGUF"
if [ ! -f .llama/llama.cpp.tgz ]; then
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation -d "$tmp" \
        "llama-cpp-python==$VERSION"
    tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
    mkdir -p .llama
    tar czf .llama/llama.cpp.tgz -C "$tmp"/llama_cpp_python-*/vendor \
        --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/media llama.cpp
    rm -rf "$tmp"
fi
ls -la .whl .llama
