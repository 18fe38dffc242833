"""Audio in for Whisper: files (WAV, FLAC, OGG ... through libsndfile) and
float32 numpy arrays, converted to 16 kHz mono float32.
"""

from __future__ import annotations

import io
import math
import os
from typing import Union

import numpy as np

from ..errors import AkunuError

SAMPLE_RATE = 16000
# Longer inputs are refused rather than allocated (24 h at 16 kHz is 5.5 GB of float32 mel work).
MAX_SECONDS = 4 * 3600


class AudioError(AkunuError):
    """The audio could not be read or is not usable (empty, corrupt, wrong type)."""


AudioInput = Union[str, os.PathLike, bytes, bytearray, np.ndarray]


def resample(audio: np.ndarray, rate: int, target: int = SAMPLE_RATE) -> np.ndarray:
    """Polyphase resampling (scipy), exact for integer rate ratios."""
    if rate == target:
        return audio.astype(np.float32, copy=False)
    from scipy.signal import resample_poly

    g = math.gcd(int(rate), int(target))
    return resample_poly(audio.astype(np.float64), target // g, int(rate) // g).astype(np.float32)


def _read_file(source) -> tuple:
    import soundfile as sf

    try:
        data, rate = sf.read(io.BytesIO(bytes(source)) if isinstance(source, (bytes, bytearray)) else source,
                             dtype="float32", always_2d=True)
    except (RuntimeError, sf.LibsndfileError, TypeError, ValueError) as e:
        what = "the audio bytes" if isinstance(source, (bytes, bytearray)) else f"'{source}'"
        raise AudioError(f"cannot read {what} as audio: {e}") from None
    return data, rate


def load_audio(source: AudioInput, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """16 kHz mono float32 samples from a file path, file bytes, or an array.

    An array is taken as float samples at `sample_rate` Hz: 1-D mono, or 2-D
    (samples, channels), which is averaged to mono.
    """
    if isinstance(source, np.ndarray):
        if source.dtype.kind != "f":
            raise AudioError(f"audio arrays must be float (samples in [-1, 1]), got dtype {source.dtype}")
        if source.ndim == 2:
            source = source.mean(axis=1)
        elif source.ndim != 1:
            raise AudioError(f"audio arrays must be 1-D (mono) or 2-D (samples, channels), got {source.ndim}-D")
        data, rate = source.astype(np.float32, copy=False), int(sample_rate)
        if rate <= 0:
            raise AudioError(f"sample_rate must be positive, got {sample_rate}")
    elif isinstance(source, (str, os.PathLike, bytes, bytearray)):
        if isinstance(source, (str, os.PathLike)) and not os.path.isfile(source):
            raise AudioError(f"audio file '{source}' does not exist")
        if isinstance(source, (bytes, bytearray)) and len(source) == 0:
            raise AudioError("the audio is empty (0 bytes)")
        frames, rate = _read_file(source)
        data = frames.mean(axis=1) if frames.shape[1] > 1 else frames[:, 0]
    else:
        raise AudioError(f"audio must be a file path, bytes or a float numpy array, not {type(source).__name__}")
    if data.size == 0:
        raise AudioError("the audio has no samples")
    if data.size / rate > MAX_SECONDS:
        raise AudioError(f"the audio is {data.size / rate / 3600:.1f} h long; the limit is {MAX_SECONDS // 3600} h")
    if not np.all(np.isfinite(data)):
        raise AudioError("the audio contains NaN or infinite samples")
    return resample(data, rate)
