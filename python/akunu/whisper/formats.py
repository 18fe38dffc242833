"""Transcripts as text, SRT, WebVTT and JSON (OpenAI's verbose_json shape)."""

from __future__ import annotations

import json
from typing import Any, Dict

from .transcribe import TranscriptionResult


def timestamp(seconds: float, decimal: str = ".", always_hours: bool = True) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    head = f"{h:02d}:" if always_hours or h else ""
    return f"{head}{m:02d}:{s:02d}{decimal}{ms:03d}"


def to_srt(result: TranscriptionResult) -> str:
    blocks = []
    for i, s in enumerate(result.segments, 1):
        blocks.append(f"{i}\n{timestamp(s.start, ',')} --> {timestamp(s.end, ',')}\n{s.text.strip()}\n")
    return "\n".join(blocks)


def to_vtt(result: TranscriptionResult) -> str:
    lines = ["WEBVTT", ""]
    for s in result.segments:
        lines += [f"{timestamp(s.start)} --> {timestamp(s.end)}", s.text.strip(), ""]
    return "\n".join(lines)


def to_verbose_dict(result: TranscriptionResult, task: str = "transcribe") -> Dict[str, Any]:
    from .tokens import LANGUAGE_NAMES

    return {
        "task": task,
        "language": LANGUAGE_NAMES.get(result.language or "", result.language),
        "duration": result.duration,
        "text": result.text,
        "segments": [{"id": s.id, "seek": s.seek, "start": s.start, "end": s.end, "text": s.text,
                      "tokens": s.tokens, "temperature": s.temperature, "avg_logprob": s.avg_logprob,
                      "compression_ratio": s.compression_ratio, "no_speech_prob": s.no_speech_prob}
                     for s in result.segments],
    }


def to_json(result: TranscriptionResult, task: str = "transcribe") -> str:
    return json.dumps(to_verbose_dict(result, task), ensure_ascii=False, indent=2)


FORMATS = {"text": lambda r: r.text, "srt": to_srt, "vtt": to_vtt, "json": to_json}
