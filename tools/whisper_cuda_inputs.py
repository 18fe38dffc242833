"""Inputs of the CUDA Whisper tests (tests/test_cuda.py) for a GPU machine
without internet, under tests/.cache/whisper-cuda/: Whisper base's
tokenizer.json, tiny.en as a Q5_0 GGUF (fits the device tool's carry limit),
and espeak-ng clips resampled to 16 kHz as .npy.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tools")]
OUT = os.path.join(ROOT, "tests", ".cache", "whisper-cuda")
SENTENCES = ["The quick brown fox jumps over the lazy dog.",
             "Please call Stella and ask her to bring these things with her from the store.",
             "Machine learning models can turn recorded speech into written text."]


def main() -> None:
    import shutil

    from akunu.model_zoo import resolve_model_path
    from akunu.whisper import load_audio
    from convert_hf_to_gguf import convert

    os.makedirs(OUT, exist_ok=True)
    shutil.copy(os.path.join(resolve_model_path("whisper-base"), "tokenizer.json"), OUT)
    convert(resolve_model_path("whisper-tiny.en"), os.path.join(OUT, "tiny.en-q5_0.gguf"), "q5_0")
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(SENTENCES):
            wav = os.path.join(tmp, f"{i}.wav")
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", wav, text], check=True)
            np.save(os.path.join(OUT, f"clip{i}.npy"), load_audio(wav))
    print(OUT)


if __name__ == "__main__":
    main()
