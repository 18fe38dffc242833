"""Whisper's log-mel spectrogram (book Part VIII): 25 ms Hann windows every
10 ms (n_fft 400, hop 160 at 16 kHz), power spectrum, Slaney-scale mel filter
bank with Slaney normalization, log10 with a 1e-10 floor, an 80 dB dynamic
range below the maximum, and (x + 4) / 4. Same numbers as transformers'
WhisperFeatureExtractor and openai-whisper.
"""

from __future__ import annotations

import functools

import numpy as np

from .audio import SAMPLE_RATE

N_FFT = 400
HOP_LENGTH = 160
CHUNK_SECONDS = 30
N_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE  # 480000 samples in a 30-second window
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 frames in a window
FRAME_SECONDS = HOP_LENGTH / SAMPLE_RATE  # 10 ms


def _hz_to_mel(f):
    """Slaney's mel scale: linear below 1 kHz, logarithmic above (librosa's htk=False)."""
    f = np.asarray(f, dtype=np.float64)
    mel = 3.0 * f / 200.0
    log_region = f >= 1000.0
    return np.where(log_region, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), mel)


def _mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    f = 200.0 * m / 3.0
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), f)


@functools.lru_cache(maxsize=4)
def mel_filters(n_mels: int) -> np.ndarray:
    """[n_mels, 201] triangular filters over 0..8 kHz, each with unit area (Slaney norm)."""
    fft_freqs = np.linspace(0, SAMPLE_RATE / 2, N_FFT // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(SAMPLE_RATE / 2), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32)


@functools.lru_cache(maxsize=1)
def _hann() -> np.ndarray:
    n = np.arange(N_FFT)
    return (0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)).astype(np.float32)  # periodic, as torch.hann_window


def log_mel_spectrogram(audio: np.ndarray, n_mels: int = 80, padding: int = 0) -> np.ndarray:
    """[n_mels, n_frames] log-mel of 16 kHz float32 audio (after appending `padding`
    zero samples), n_frames = (len + padding) // 160. The dynamic range is taken
    over the whole input, as openai-whisper and faster-whisper do for long audio."""
    x = np.asarray(audio, dtype=np.float32)
    if padding:
        x = np.concatenate([x, np.zeros(padding, dtype=np.float32)])
    half = N_FFT // 2
    if x.size <= half:  # reflect padding needs more samples than half a window
        x = np.concatenate([x, np.zeros(half + 1 - x.size, dtype=np.float32)])
    padded = np.pad(x, (half, half), mode="reflect")
    n_frames = 1 + (padded.size - N_FFT) // HOP_LENGTH
    frames = np.lib.stride_tricks.as_strided(
        padded, shape=(n_frames, N_FFT), strides=(padded.strides[0] * HOP_LENGTH, padded.strides[0]))
    spectrum = np.fft.rfft(frames * _hann(), axis=1)
    power = (spectrum.real ** 2 + spectrum.imag ** 2).astype(np.float32)[:-1]  # drop the last frame
    mel = mel_filters(n_mels) @ power.T
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def pad_or_trim(mel: np.ndarray, n_frames: int = N_FRAMES) -> np.ndarray:
    """A [n_mels, n_frames] window: cut, or padded with zeros (as the reference pads segments)."""
    if mel.shape[1] >= n_frames:
        return mel[:, :n_frames]
    return np.pad(mel, ((0, 0), (0, n_frames - mel.shape[1])))
