"""``akunu.load()`` of a Whisper model returns a :class:`WhisperModel`:
``transcribe()`` / ``transcribe_stream()`` / ``detect_language()`` over audio
files or arrays, with the encoder and decoder passes in the native core.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, async_calls
from ..cuda_libraries import export_cublas_dirs
from ..errors import AkunuError, UnsupportedModelError
from .audio import SAMPLE_RATE, AudioInput, load_audio
from .decoding import DecodeOptions, WindowDecoder
from .mel import N_FRAMES, log_mel_spectrogram, pad_or_trim
from .tokens import WhisperTokenizer
from .transcribe import Segment, TranscribeOptions, TranscriptionResult, iterate_segments
from ..turns import TurnLock

DEFAULT_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


class WhisperModel:
    """A Whisper speech-to-text model on a device. Create it with :func:`akunu.load`."""

    is_embedding_model = False
    is_whisper = True

    def __init__(self, path: str, device: str = "cpu", n_threads: int = 0, n_beams: int = 5, max_queue: int = 0):
        if not isinstance(n_beams, int) or not 1 <= n_beams <= 16:
            raise AkunuError(f"n_beams must be an integer in [1, 16], got {n_beams!r}")
        self.path = path
        if device in ("cuda", "auto"):
            export_cublas_dirs()  # before the CUDA backend first loads cuBLAS
        self._m = _core.WhisperModel(path, device, int(n_threads), n_beams)
        self.metadata: Dict[str, Any] = self._m.metadata
        self.format: str = self._m.format
        cfg = self._m.config
        if os.path.isdir(path):
            self.tokenizer = WhisperTokenizer.from_directory(path, cfg["vocab_size"])
        elif isinstance(self.metadata.get("tokenizer.huggingface.json"), str):
            self.tokenizer = WhisperTokenizer.from_json(self.metadata["tokenizer.huggingface.json"], cfg["vocab_size"])
        else:
            raise UnsupportedModelError("this Whisper GGUF carries no tokenizer (tokenizer.huggingface.json)")
        tok = self.tokenizer
        suppress = self.metadata.get("whisper.suppress_tokens")
        base = [t for t in suppress if t >= 0] if isinstance(suppress, list) else tok.non_speech_tokens()
        specials = [tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm, tok.no_speech]
        self.suppress_tokens = tuple(sorted({t for t in list(base) + specials
                                             if t is not None and 0 <= t < cfg["vocab_size"]}))
        self._decoder = WindowDecoder(self._m, tok, cfg["n_text_ctx"])
        # Threads and asyncio tasks take turns in arrival order (akunu.turns);
        # a streamed transcription holds its turn until it ends or is closed.
        self._turns = TurnLock(max_queue)

    # -- introspection --------------------------------------------------------
    @property
    def config(self) -> Dict[str, Any]:
        return dict(self._core().config, architecture="whisper", multilingual=self.tokenizer.multilingual)

    @property
    def n_ctx(self) -> int:
        """The text decoder's context (448 tokens)."""
        return self._core().config["n_text_ctx"]

    @property
    def device(self) -> str:
        return self._core().device_name

    @property
    def is_multilingual(self) -> bool:
        return self.tokenizer.multilingual

    @property
    def languages(self) -> Tuple[str, ...]:
        return tuple(self.tokenizer.languages) if self.tokenizer.multilingual else ("en",)

    def _core(self):
        if self._m is None:
            raise AkunuError("this model has been closed")
        return self._m

    def close(self) -> None:
        self._m = None

    def __enter__(self) -> "WhisperModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the passes -----------------------------------------------------------
    def mel(self, audio: AudioInput, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        """[n_mels, frames + 1] log-mel of the audio (the last frame is padding)."""
        samples = load_audio(audio, sample_rate)
        return log_mel_spectrogram(samples, self._core().config["n_mels"], padding=160)

    def encode(self, mel_window: np.ndarray) -> np.ndarray:
        """Encoder output [n_audio_ctx, dim] of one [n_mels, 3000] window (also fills the cross cache)."""
        m = self._core()
        mel_window = np.asarray(mel_window, dtype=np.float32)
        if mel_window.ndim != 2 or mel_window.shape[0] != m.config["n_mels"]:
            raise AkunuError(f"expected a [{m.config['n_mels']}, frames] log-mel window, got {mel_window.shape}")
        with self._turns:
            m.encode(np.ascontiguousarray(pad_or_trim(mel_window).T))
            return m.encoder_output()

    def detect_language(self, audio: AudioInput, sample_rate: int = SAMPLE_RATE) -> Tuple[str, float]:
        """(language code, probability) from the first 30 seconds."""
        code, probs = self._detect(self.mel(audio, sample_rate))
        return code, probs.get(code, 1.0)

    def _detect(self, mel: np.ndarray):
        if not self.tokenizer.multilingual:
            return "en", {"en": 1.0}
        m = self._core()
        with self._turns:
            m.encode(np.ascontiguousarray(pad_or_trim(mel[:, :N_FRAMES]).T))
            return self._decoder.detect_language()

    # -- transcription --------------------------------------------------------
    def _options(self, language, task, timestamps, beam_size, temperature, best_of, initial_prompt,
                 condition_on_previous_text, seed) -> Tuple[DecodeOptions, TranscribeOptions]:
        if task not in ("transcribe", "translate"):
            raise AkunuError(f"task must be 'transcribe' or 'translate', got {task!r}")
        if not isinstance(beam_size, int) or beam_size < 1:
            raise AkunuError(f"beam_size must be a positive integer, got {beam_size!r}")
        if beam_size > self._core().n_slots:
            raise AkunuError(f"beam_size {beam_size} exceeds n_beams={self._core().n_slots} given at load")
        temps = (temperature,) if isinstance(temperature, (int, float)) else tuple(temperature)
        if not temps or any(not isinstance(t, (int, float)) or t < 0 for t in temps):
            raise AkunuError(f"temperature must be a non-negative number or a sequence of them, got {temperature!r}")
        if language is not None:
            language = language.lower()
            if not self.tokenizer.multilingual and language != "en":
                raise AkunuError(f"this model is English-only; language={language!r} is not available")
            if self.tokenizer.multilingual and language not in self.tokenizer.languages:
                raise AkunuError(f"unknown language {language!r}")
        if task == "translate" and not self.tokenizer.multilingual:
            raise AkunuError("this model is English-only and cannot translate")
        base = DecodeOptions(task=task, language=language, timestamps=bool(timestamps), beam_size=beam_size,
                             best_of=best_of, suppress_tokens=self.suppress_tokens, seed=seed)
        opts = TranscribeOptions(temperatures=temps, initial_prompt=initial_prompt,
                                 condition_on_previous_text=condition_on_previous_text)
        return base, opts

    def transcribe_stream(self, audio: AudioInput, language: Optional[str] = None, task: str = "transcribe",
                          timestamps: bool = True, beam_size: int = 1,
                          temperature: Union[float, Sequence[float]] = DEFAULT_TEMPERATURES, best_of: int = 5,
                          initial_prompt: Optional[str] = None, condition_on_previous_text: bool = True,
                          sample_rate: int = SAMPLE_RATE, seed: int = 0) -> Iterator[Segment]:
        """Segments as they are decoded (see :meth:`transcribe` for the arguments)."""
        result = self._begin(audio, language, task, timestamps, beam_size, temperature, best_of, initial_prompt,
                             condition_on_previous_text, sample_rate, seed)
        return result[1]

    def _begin(self, audio, language, task, timestamps, beam_size, temperature, best_of, initial_prompt,
               condition_on_previous_text, sample_rate, seed):
        mel = self.mel(audio, sample_rate)
        probs: Dict[str, float] = {}
        if language is None:
            language, probs = self._detect(mel)
        base, opts = self._options(language, task, timestamps, beam_size, temperature, best_of, initial_prompt,
                                   condition_on_previous_text, seed)
        m = self._core()

        def run():
            with self._turns:
                yield from iterate_segments(m, self._decoder, mel, base, opts)

        return (language, probs, (mel.shape[1] - 1) * 0.01), run()

    def transcribe(self, audio: AudioInput, language: Optional[str] = None, task: str = "transcribe",
                   timestamps: bool = True, beam_size: int = 1,
                   temperature: Union[float, Sequence[float]] = DEFAULT_TEMPERATURES, best_of: int = 5,
                   initial_prompt: Optional[str] = None, condition_on_previous_text: bool = True,
                   on_segment: Optional[Callable[[Segment], None]] = None, sample_rate: int = SAMPLE_RATE,
                   seed: int = 0) -> TranscriptionResult:
        """Transcribe (or translate to English) speech.

        `audio`: a file path or file bytes (WAV, FLAC, OGG ...; any rate and
        channel count) or a float32 array at `sample_rate`. `language`: a code
        such as "en" (None: detected from the first 30 s). `timestamps`: decode
        Whisper's timestamp tokens (the default, as openai-whisper and
        faster-whisper do: they also steer the text), giving one segment per
        phrase; False decodes text alone, one segment per 30-second window. `beam_size` > 1: beam search. `temperature`: a value
        or the fallback sequence tried when the output is repetitive or
        improbable. `on_segment` is called with each segment as it is decoded.
        """
        (lang, probs, duration), segments = self._begin(
            audio, language, task, timestamps, beam_size, temperature, best_of, initial_prompt,
            condition_on_previous_text, sample_rate, seed)
        out = []
        for seg in segments:
            out.append(seg)
            if on_segment is not None:
                on_segment(seg)
        return TranscriptionResult(text="".join(s.text for s in out).strip(), segments=out, language=lang,
                                   language_probability=probs.get(lang) if probs else None,
                                   duration=round(duration, 3), language_probs=probs)

    async def atranscribe(self, audio: AudioInput, **kwargs: Any) -> TranscriptionResult:
        """:meth:`transcribe` for asyncio (same arguments): the work runs on a thread of its own,
        waiting its turn on the model as threads do."""
        return await async_calls.call(lambda: self.transcribe(audio, **kwargs))
