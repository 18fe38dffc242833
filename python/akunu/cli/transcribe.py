"""akunu-transcribe: speech to text with a Whisper model, as text, SRT, WebVTT or JSON."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .common import CliError, load_model, run


def build_parser(prog: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Transcribe (or translate to English) speech with a "
                                 "Whisper model.")
    ap.add_argument("audio", help="audio file (WAV, FLAC, OGG ...; any sample rate and channel count)")
    ap.add_argument("-m", "--model", default="whisper-tiny.en",
                    help="Whisper GGUF, Hugging Face or CTranslate2 directory, or a named model: whisper-tiny.en, "
                    "whisper-base (default: whisper-tiny.en)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "metal", "auto"])
    ap.add_argument("-t", "--threads", type=int, default=0, help="CPU threads (default: all cores)")
    ap.add_argument("-f", "--format", default="text", choices=["text", "srt", "vtt", "json"],
                    help="output format (default: text)")
    ap.add_argument("-o", "--output", default=None, help="write to this file instead of stdout")
    ap.add_argument("-l", "--language", default=None, help="language code such as en, de (default: detect)")
    ap.add_argument("--task", default="transcribe", choices=["transcribe", "translate"])
    ap.add_argument("--timestamps", action=argparse.BooleanOptionalAction, default=True,
                    help="decode Whisper's timestamp tokens (default, as faster-whisper; phrase-level "
                    "segments); --no-timestamps decodes text alone (srt, vtt and json keep them on)")
    ap.add_argument("--beam-size", type=int, default=1, help="beam search width (default: 1 = greedy)")
    ap.add_argument("--temperature", type=float, default=None,
                    help="fixed temperature (default: 0 with fallback to 0.2 .. 1.0)")
    ap.add_argument("--prompt", default=None, help="initial prompt (vocabulary, spelling, style)")
    ap.add_argument("--stream", action="store_true", help="print segments as they are decoded (text format)")
    ap.add_argument("--verbose", action="store_true", help="show tracebacks")
    return ap


def main(argv: Optional[List[str]] = None, prog: str = "akunu-transcribe") -> int:
    args = build_parser(prog).parse_args(argv)

    def body() -> int:
        from ..whisper.formats import FORMATS, timestamp

        if args.beam_size < 1:
            raise CliError(f"--beam-size must be >= 1, got {args.beam_size}")
        args.ctx, args.speech_ok = None, True
        model = load_model(args, quiet=True)
        if not getattr(model, "is_whisper", False):
            raise CliError(f"'{args.model}' is not a Whisper model")
        kw = dict(language=args.language, task=args.task, timestamps=args.timestamps or args.format != "text",
                  beam_size=args.beam_size, initial_prompt=args.prompt)
        if args.temperature is not None:
            kw["temperature"] = args.temperature
        if args.stream and args.format == "text" and args.output is None:
            for seg in model.transcribe_stream(args.audio, **kw):
                sys.stdout.write(f"[{timestamp(seg.start, always_hours=False)} --> "
                                 f"{timestamp(seg.end, always_hours=False)}] {seg.text.strip()}\n")
                sys.stdout.flush()
            return 0
        result = model.transcribe(args.audio, **kw)
        out = FORMATS[args.format](result) if args.format != "json" else FORMATS["json"](result, args.task)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out if out.endswith("\n") else out + "\n")
        else:
            sys.stdout.write(out if out.endswith("\n") else out + "\n")
        return 0

    return run(prog, body, argv if argv is not None else None)


if __name__ == "__main__":
    sys.exit(main())
