"""Prepares what a machine without internet access needs to build, test and
benchmark akunu, into one folder to copy there:

  DEST/wheels/      wheels of the Python packages the tests and the benchmark
                    model writer import that such a machine often lacks (gguf,
                    at the version pyproject.toml pins), for its Python version
  DEST/llama.cpp/   llama.cpp's sources (as vendored by the llama-cpp-python
                    release the recorded tables used), for bench.text_cuda to
                    build llama-bench and llama-quantize from
  tests/.cache/whisper-cuda/   inputs of the Whisper tests on a GPU: Whisper
                    base's tokenizer.json, tiny.en converted to a Q5_0 GGUF,
                    espeak-ng clips as 16 kHz .npy (with --whisper)

  python -m tools.prepare_offline DEST [--python 3.12] [--whisper]

There, from the repository root:
  pip install --no-index --find-links DEST/wheels gguf
  python -m bench.text_cuda --llama-cpp DEST/llama.cpp
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHISPER_INPUTS = os.path.join(ROOT, "tests", ".cache", "whisper-cuda")
SENTENCES = ["The quick brown fox jumps over the lazy dog.",
             "Please call Stella and ask her to bring these things with her from the store.",
             "Machine learning models can turn recorded speech into written text."]


def pinned(package: str) -> str:
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        m = re.search(rf'"{re.escape(package)}==([0-9.]+)"', f.read())
    return f"{package}=={m.group(1)}" if m else package


def wheels(dest: str, python: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", python, "--implementation", "cp", "-d", os.path.join(dest, "wheels"),
                    pinned("gguf")], check=True)


def whisper_inputs() -> None:
    import numpy as np

    from akunu.convert_gguf import convert
    from akunu.model_zoo import resolve_model_path
    from akunu.whisper import load_audio

    os.makedirs(WHISPER_INPUTS, exist_ok=True)
    shutil.copy(os.path.join(resolve_model_path("whisper-base"), "tokenizer.json"), WHISPER_INPUTS)
    convert(resolve_model_path("whisper-tiny.en"), os.path.join(WHISPER_INPUTS, "tiny.en-q5_0.gguf"), "q5_0")
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(SENTENCES):
            wav = os.path.join(tmp, f"{i}.wav")
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", wav, text], check=True)
            np.save(os.path.join(WHISPER_INPUTS, f"clip{i}.npy"), load_audio(wav))


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.prepare_offline", description=__doc__.split("\n\n")[0])
    ap.add_argument("dest")
    ap.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                    help="Python version of the offline machine (default: this one's)")
    ap.add_argument("--whisper", action="store_true", help="also write the Whisper test inputs")
    a = ap.parse_args()
    from bench.text_models import fetch_llama_cpp_sources

    os.makedirs(a.dest, exist_ok=True)
    wheels(a.dest, a.python)
    fetch_llama_cpp_sources(a.dest)
    if a.whisper:
        whisper_inputs()
    for path in sorted(os.listdir(a.dest)):
        print(os.path.join(a.dest, path))


if __name__ == "__main__":
    main()
