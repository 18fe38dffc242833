"""Long-form transcription (openai-whisper's transcribe loop, as faster-whisper
runs it): the log-mel of the whole input, 30-second windows from a seek
position, temperature fallback on repetitive or improbable output, silence
skipping, segments cut at timestamp pairs, and the previous text as the prompt
of the next window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence

import numpy as np

from .decoding import DecodeOptions, WindowDecoder, WindowResult
from .mel import FRAME_SECONDS, N_FRAMES, pad_or_trim
from .tokens import TIME_PRECISION


@dataclass
class Segment:
    id: int
    seek: int  # window start, in mel frames
    start: float  # seconds
    end: float
    text: str
    tokens: List[int]
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    temperature: float


@dataclass
class TranscriptionResult:
    text: str
    segments: List[Segment]
    language: Optional[str]
    language_probability: Optional[float] = None
    duration: float = 0.0  # seconds of audio
    language_probs: dict = field(default_factory=dict, repr=False)


@dataclass
class TranscribeOptions:
    temperatures: Sequence[float] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    compression_ratio_threshold: Optional[float] = 2.4
    log_prob_threshold: Optional[float] = -1.0
    no_speech_threshold: Optional[float] = 0.6
    condition_on_previous_text: bool = True
    prompt_reset_on_temperature: float = 0.5
    initial_prompt: Optional[str] = None


def decode_with_fallback(decoder: WindowDecoder, previous: Sequence[int], base: DecodeOptions,
                         opts: TranscribeOptions) -> WindowResult:
    results, below_cr = [], []
    result = None
    for t in opts.temperatures:
        wopts = DecodeOptions(**{**base.__dict__, "temperature": float(t)})
        result = decoder.decode(previous, wopts)
        results.append(result)
        fallback = False
        if opts.compression_ratio_threshold is not None:
            if result.compression_ratio > opts.compression_ratio_threshold:
                fallback = True  # too repetitive
            else:
                below_cr.append(result)
        if opts.log_prob_threshold is not None and result.avg_logprob < opts.log_prob_threshold:
            fallback = True  # too improbable
        if (opts.no_speech_threshold is not None and result.no_speech_prob > opts.no_speech_threshold
                and opts.log_prob_threshold is not None and result.avg_logprob < opts.log_prob_threshold):
            fallback = False  # silence: no point in retrying
        if not fallback:
            return result
    best = max(below_cr or results, key=lambda r: r.avg_logprob)
    best.temperature = result.temperature  # the last one tried, for prompt resetting
    return best


def split_segments(tokens: List[int], ts_begin: int, time_offset: float, window_frames: int,
                   seek: int) -> tuple:
    """(list of (start, end, tokens), next seek) from a window's tokens."""
    out = []
    single_ending = len(tokens) >= 2 and tokens[-2] < ts_begin <= tokens[-1]
    consecutive = [i for i in range(1, len(tokens)) if tokens[i] >= ts_begin and tokens[i - 1] >= ts_begin]
    if consecutive:
        slices = consecutive + ([len(tokens)] if single_ending else [])
        last = 0
        for cut in slices:
            part = tokens[last:cut]
            out.append((time_offset + (part[0] - ts_begin) * TIME_PRECISION,
                        time_offset + (part[-1] - ts_begin) * TIME_PRECISION, part))
            last = cut
        if single_ending:
            seek += window_frames
        else:  # the last segment is unfinished: start the next window at its timestamp
            seek += (tokens[last - 1] - ts_begin) * 2  # 2 mel frames per encoder position
    else:
        duration = window_frames * FRAME_SECONDS
        stamps = [t for t in tokens if t >= ts_begin]
        if stamps and stamps[-1] != ts_begin:
            duration = (stamps[-1] - ts_begin) * TIME_PRECISION
        out.append((time_offset, time_offset + duration, tokens))
        seek += window_frames
    return out, seek


def iterate_segments(core, decoder: WindowDecoder, mel: np.ndarray, base: DecodeOptions,
                     opts: TranscribeOptions) -> Iterator[Segment]:
    """Segments of `mel` ([n_mels, frames + 1], the last frame is padding) in order."""
    tok = decoder.tok
    content_frames = mel.shape[1] - 1
    seek = 0
    all_tokens: List[int] = []
    prompt_reset = 0
    if opts.initial_prompt:
        all_tokens = tok.encode(" " + opts.initial_prompt.strip())
    n_segments = 0
    while seek < content_frames:
        window_frames = min(N_FRAMES, content_frames - seek)
        time_offset = seek * FRAME_SECONDS
        core.encode(np.ascontiguousarray(pad_or_trim(mel[:, seek:seek + window_frames]).T))
        result = decode_with_fallback(decoder, all_tokens[prompt_reset:], base, opts)
        if opts.no_speech_threshold is not None:
            skip = result.no_speech_prob > opts.no_speech_threshold
            if opts.log_prob_threshold is not None and result.avg_logprob > opts.log_prob_threshold:
                skip = False  # confident text despite the silence token
            if skip:
                seek += window_frames
                continue
        window_start = seek
        parts, seek = split_segments(result.tokens, tok.timestamp_begin, time_offset, window_frames, seek)
        for start, end, part in parts:
            text = tok.decode(part)
            if start == end or not text.strip():
                continue
            all_tokens.extend(part)
            yield Segment(id=n_segments, seek=window_start, start=round(start, 3), end=round(end, 3), text=text,
                          tokens=list(part), avg_logprob=result.avg_logprob,
                          compression_ratio=result.compression_ratio, no_speech_prob=result.no_speech_prob,
                          temperature=result.temperature)
            n_segments += 1
        if not opts.condition_on_previous_text or result.temperature > opts.prompt_reset_on_temperature:
            prompt_reset = len(all_tokens)
