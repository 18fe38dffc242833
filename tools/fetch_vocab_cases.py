"""Fetch llama.cpp's tokenizer test vocabularies (ggml-vocab-*.gguf with their
.inp/.out cases) and its chat templates (models/templates/*.jinja) from the
llama-cpp-python sdist on PyPI into a cache folder (templates go to a
"templates" folder beside it).

Usage: python tools/fetch_vocab_cases.py [DEST]   (default: tests/.cache/vocab)
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DEST = os.path.join(ROOT, "tests", ".cache", "vocab")
SDIST = "llama-cpp-python==0.3.36"
WANTED = ("llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "starcoder", "refact", "command-r", "mpt", "bert-bge")


def templates_dir(dest: str = DEFAULT_DEST) -> str:
    return os.path.join(os.path.dirname(dest), "templates")


def fetch(dest: str = DEFAULT_DEST) -> str:
    templates = templates_dir(dest)
    if all(os.path.exists(os.path.join(dest, f"ggml-vocab-{n}.gguf.out")) for n in WANTED) and glob.glob(
        os.path.join(templates, "*.jinja")
    ):
        return dest
    os.makedirs(templates, exist_ok=True)
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # --no-build-isolation: only the sdist is wanted, not its build environment
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", "-q", "-d", tmp, SDIST], check=True)
        (archive,) = glob.glob(os.path.join(tmp, "*.tar.gz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                base = os.path.basename(member.name)
                if "/vendor/llama.cpp/models/" in member.name and any(
                    base.startswith(f"ggml-vocab-{n}.gguf") for n in WANTED
                ):
                    member.name = base
                    tar.extract(member, dest)
                elif "/vendor/llama.cpp/models/templates/" in member.name and base.endswith(".jinja"):
                    member.name = base
                    tar.extract(member, templates)
    return dest


if __name__ == "__main__":
    print(fetch(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DEST))
