"""Whisper transcription speed for akunu and faster-whisper on the same
CTranslate2 directory: audio seconds transcribed per second of processing
(1 / real-time factor; higher is faster).

Both engines decode greedily (temperature 0, no fallback) with timestamps,
window after window over the whole clip, language English. Without an audio
file the clip is made from espeak-ng sentences. The peer's row carries its
text's word error rate against akunu's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Dict, List, Optional

import numpy as np

from . import PeerMissing, require, row, timed

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "The weather today is sunny with a light breeze from the west.",
    "Please open the door and turn on the lights in the kitchen.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "Machine learning models can turn recorded speech into written text.",
    "My phone number has seven digits and I moved here in the spring.",
]
RATE = 16000


def speech_clip(seconds: float) -> np.ndarray:
    """`seconds` of espeak-ng speech at 16 kHz, half a second of silence between sentences."""
    from ..whisper import load_audio

    if shutil.which("espeak-ng") is None:
        raise PeerMissing("no --audio given and espeak-ng is not installed to speak a clip "
                          "(apt-get install espeak-ng)")
    parts, total, i = [], 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        while total < seconds:
            wav = os.path.join(tmp, "s.wav")
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", wav, SENTENCES[i % len(SENTENCES)]],
                           check=True)
            a = load_audio(wav)
            parts += [a, np.zeros(RATE // 2, np.float32)]
            total += (a.size + RATE // 2) / RATE
            i += 1
    return np.concatenate(parts)[: int(seconds * RATE)]


def clip(audio: Optional[str], seconds: float) -> np.ndarray:
    """The clip to transcribe: an audio file (or .npy of 16 kHz samples) repeated up to `seconds`, or speech."""
    from ..whisper import load_audio

    if not audio:
        return speech_clip(seconds)
    a = np.load(audio) if audio.endswith(".npy") else load_audio(audio)
    while a.size < seconds * RATE:
        a = np.concatenate([a, np.zeros(RATE // 2, np.float32), a])
    return a[: int(seconds * RATE)]


def test_name(samples: np.ndarray) -> str:
    return f"transcribe {samples.size / RATE:.0f}s"


def akunu_rows(model, samples: np.ndarray, reps: int) -> List[Dict]:
    model.transcribe(samples[: RATE * 5], language="en", temperature=0.0)  # warm-up
    out = {}

    def run():
        out["text"] = model.transcribe(samples, language="en", timestamps=True, temperature=0.0).text

    times = timed(run, reps, warmup=False)
    dur = samples.size / RATE
    return [row("akunu", test_name(samples), "audio s/s", times, dur, rtf=round(sum(times) / len(times) / dur, 4),
                text=out["text"])]


def peer_rows(path: str, samples: np.ndarray, reps: int, device: str, threads: int,
              akunu_text: str = "") -> List[Dict]:
    if not os.path.exists(os.path.join(path, "model.bin")):
        raise PeerMissing(f"--compare faster-whisper needs a CTranslate2 Whisper directory (model.bin), not {path}")
    fw_mod = require("faster_whisper", "faster-whisper", "pip install faster-whisper")
    from ..whisper.metrics import word_error_rate

    fw = fw_mod.WhisperModel(path, device=device, compute_type="float32",
                             cpu_threads=threads or os.cpu_count() or 0)
    out = {}

    def run():
        segs, _ = fw.transcribe(samples, language="en", beam_size=1, temperature=0.0, vad_filter=False)
        out["text"] = "".join(s.text for s in segs).strip()

    times = timed(run, reps)
    dur = samples.size / RATE
    return [row("faster-whisper", test_name(samples), "audio s/s", times, dur, rtf=round(sum(times) / len(times) / dur, 4),
                peer_build=f"faster-whisper {fw_mod.__version__}", peer_settings="compute_type=float32 beam_size=1",
                wer_vs_akunu=round(word_error_rate(akunu_text, out["text"]), 3) if akunu_text else None)]
