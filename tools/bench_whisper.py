"""Whisper real-time factor (processing seconds / audio seconds, lower is faster),
akunu against faster-whisper and transformers, same weights, machine and run.

  python tools/bench_whisper.py [MODEL] [--device cpu|cuda] [--audio CLIP.npy|.wav] [--seconds 60]

MODEL: a Whisper directory or GGUF, or whisper-tiny.en / whisper-base (default
whisper-tiny.en). Without --audio, a clip of --seconds is made from espeak-ng
sentences. All engines decode greedily (temperature 0, no fallback) with
timestamps, window after window (long-form). transformers runs the same weights
(tools/hf_models.whisper_reference) in its automatic-speech-recognition
pipeline; faster-whisper (CPU only here) loads the CTranslate2 directory itself
with compute_type float32.
Prints one JSON line per engine: seconds (median of --reps), RTF, the text's
word error rate against akunu's text.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
try:  # an installed (or staged) akunu first; else the source tree's
    import akunu  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "The weather today is sunny with a light breeze from the west.",
    "Please open the door and turn on the lights in the kitchen.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "Machine learning models can turn recorded speech into written text.",
    "My phone number has seven digits and I moved here in the spring.",
]


def speech_clip(seconds: float) -> np.ndarray:
    from akunu.whisper import load_audio

    parts, total = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        i = 0
        while total < seconds:
            wav = os.path.join(tmp, "s.wav")
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", wav, SENTENCES[i % len(SENTENCES)]],
                           check=True)
            a = load_audio(wav)
            parts += [a, np.zeros(8000, np.float32)]
            total += (a.size + 8000) / 16000
            i += 1
    return np.concatenate(parts)[: int(seconds * 16000)]


def timed(fn, reps: int):
    out, times = None, []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def transformers_pipeline(path: str, device: str, dtype: str, model):
    """transformers' automatic-speech-recognition pipeline (sequential long-form decoding with
    timestamps) over the same weights, with the model's special tokens and suppression lists."""
    import torch
    import transformers as tf

    import hf_models

    tok = model.tokenizer
    ref = hf_models.whisper_reference(path).to(device=device, dtype=getattr(torch, dtype))
    gc = ref.generation_config
    gc.decoder_start_token_id, gc.eos_token_id, gc.pad_token_id, gc.bos_token_id = tok.sot, tok.eot, tok.eot, tok.eot
    gc.no_timestamps_token_id, gc.is_multilingual = tok.no_timestamps, tok.multilingual
    gc.suppress_tokens, gc.begin_suppress_tokens = list(model.suppress_tokens), tok.space + [tok.eot]
    gc.max_initial_timestamp_index, gc.forced_decoder_ids = 50, None
    if tok.multilingual:
        gc.lang_to_id = {f"<|{c}|>": i for c, i in tok.languages.items()}
        gc.task_to_id = {"transcribe": tok.transcribe, "translate": tok.translate}
    ref.config.decoder_start_token_id, ref.config.pad_token_id, ref.config.eos_token_id = tok.sot, tok.eot, tok.eot
    tok_file = os.path.join(path, "tokenizer.json")
    if not os.path.isdir(path):  # a GGUF carries tokenizer.json in its metadata
        tok_file = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
        with open(tok_file, "w", encoding="utf-8") as f:
            f.write(model.metadata["tokenizer.huggingface.json"])
    hft = tf.WhisperTokenizerFast(tokenizer_file=tok_file)
    pipe = tf.pipeline("automatic-speech-recognition", model=ref, tokenizer=hft,
                       feature_extractor=tf.WhisperFeatureExtractor(feature_size=ref.config.num_mel_bins),
                       device=device, torch_dtype=getattr(torch, dtype))
    kw = {"num_beams": 1, "temperature": 0.0}
    if tok.multilingual:
        kw["language"] = "en"

    def run(audio):
        return pipe(audio.copy(), return_timestamps=True, generate_kwargs=kw)["text"].strip()

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="whisper-tiny.en")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--audio", default=None)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engines", default="akunu,faster-whisper,transformers")
    a = ap.parse_args()

    import akunu
    from akunu.model_zoo import resolve_model_path
    from akunu.whisper import load_audio

    path = resolve_model_path(a.model)
    if a.audio:
        audio = np.load(a.audio) if a.audio.endswith(".npy") else load_audio(a.audio)
        while audio.size < a.seconds * 16000:  # repeat a short clip up to --seconds
            audio = np.concatenate([audio, np.zeros(8000, np.float32), audio])
        audio = audio[: int(a.seconds * 16000)]
    else:
        audio = speech_clip(a.seconds)
    dur = audio.size / 16000
    results = {}
    engines = a.engines.split(",")
    m = akunu.load(path, device=a.device)
    if "akunu" in engines:
        m.transcribe(audio[:16000 * 5], language="en", temperature=0.0)  # warm-up
        text, secs = timed(lambda: m.transcribe(audio, language="en", timestamps=True, temperature=0.0).text,
                           a.reps)
        results["akunu"] = (text, secs)
    if "faster-whisper" in engines and a.device == "cpu" and os.path.exists(os.path.join(path, "model.bin")):
        from faster_whisper import WhisperModel

        fw = WhisperModel(path, device="cpu", compute_type="float32", cpu_threads=os.cpu_count() or 0)

        def fw_run():
            segs, _ = fw.transcribe(audio, language="en", beam_size=1, temperature=0.0, vad_filter=False)
            return "".join(s.text for s in segs).strip()

        fw_run()
        results["faster-whisper"] = timed(fw_run, a.reps)
    if "transformers" in engines:
        for dtype in (("float32", "float16") if a.device == "cuda" else ("float32",)):
            run = transformers_pipeline(path, a.device, dtype, m)
            run(audio[:16000 * 5])
            results[f"transformers-pipeline-{dtype}"] = timed(lambda: run(audio), a.reps)
    from akunu.whisper.metrics import word_error_rate

    base = results.get("akunu", next(iter(results.values())))[0]
    for name, (text, secs) in results.items():
        print(json.dumps({"engine": name, "device": a.device, "model": os.path.basename(os.path.normpath(path)),
                          "audio_s": round(dur, 1), "seconds": round(secs, 3), "rtf": round(secs / dur, 4),
                          "wer_vs_akunu": round(word_error_rate(base, text), 3)}))
    if "akunu" in results:
        for name, (_, secs) in results.items():
            if name != "akunu":
                print(f"akunu speedup over {name}: {secs / results['akunu'][1]:.2f}x")


if __name__ == "__main__":
    main()
