"""Whisper speech-to-text on akunu's engine (book Part VIII)."""

from .audio import SAMPLE_RATE, AudioError, load_audio
from .mel import log_mel_spectrogram
from .model import WhisperModel
from .transcribe import Segment, TranscriptionResult

__all__ = ["SAMPLE_RATE", "AudioError", "Segment", "TranscriptionResult", "WhisperModel", "load_audio",
           "log_mel_spectrogram"]
