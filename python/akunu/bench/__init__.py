"""What akunu-bench measures, and the peers it measures beside akunu.

Each area has a module: ``text`` (prompt processing and generation, against
llama.cpp's llama-bench or llama-cpp-python), ``embeddings`` (sentences per
second, against sentence-transformers) and ``speech`` (Whisper transcription,
against faster-whisper). Every function returns rows of one shape
(:func:`row`), so one table prints them all. Peers are imported only when
asked for; a missing one raises :class:`PeerMissing`, which says how to
install it.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Optional

from ..errors import AkunuError

PEERS = ("llama.cpp", "sentence-transformers", "faster-whisper")


class PeerMissing(AkunuError):
    """The peer asked for is not installed here."""


def row(engine: str, test: str, unit: str, times: List[float], work: float, **extra: Any) -> Dict[str, Any]:
    """One result: `work` units (tokens, sentences, audio seconds) done in each of `times` seconds."""
    rates = [work / t for t in times]
    return dict(engine=engine, test=test, unit=unit, avg_ts=statistics.mean(rates),
                stddev_ts=statistics.stdev(rates) if len(rates) > 1 else 0.0,
                avg_ns=int(statistics.mean(times) * 1e9), samples_ts=rates,
                samples_ns=[int(t * 1e9) for t in times], **extra)


def timed(fn: Callable[[], Any], reps: int, warmup: bool = True,
          before: Optional[Callable[[], Any]] = None) -> List[float]:
    """Seconds of `reps` calls of fn, after one untimed call; `before`, untimed, ahead of every call."""
    times = []
    for i in range(reps + (1 if warmup else 0)):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        if i or not warmup:
            times.append(time.perf_counter() - t0)
    return times


def require(module: str, peer: str, install: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise PeerMissing(f"--compare {peer} needs {module} ({e}); install it with: {install}") from None


def peer_for(kind: str, name: Optional[str]) -> Optional[str]:
    """Checks that the peer fits the model: llama.cpp for text, sentence-transformers for embeddings,
    faster-whisper for speech."""
    if name is None:
        return None
    want = {"text": "llama.cpp", "embeddings": "sentence-transformers", "speech": "faster-whisper"}[kind]
    aliases = {"llama-cpp": "llama.cpp", "llamacpp": "llama.cpp", "llama-bench": "llama.cpp",
               "st": "sentence-transformers", "sentence_transformers": "sentence-transformers",
               "faster_whisper": "faster-whisper"}
    name = aliases.get(name, name)
    if name != want:
        raise AkunuError(f"a {kind} model compares with --compare {want}, not {name}")
    return name
