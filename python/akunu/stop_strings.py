"""Stop strings matched across token boundaries and never emitted."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from .errors import AkunuError


def normalize_stop(stop: Union[None, str, Sequence[str]]) -> List[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    out = []
    for s in stop:
        if not isinstance(s, str):
            raise AkunuError(f"stop must be a string or a list of strings, got {s!r}")
        if s:
            out.append(s)
    return out


class StopStringFilter:
    """Feed text pieces; get back the text that is safe to show.

    Text that could be the start of a stop string is held back until it is
    known not to be one, so a stop string split over several tokens is
    caught and no part of it reaches the output.
    """

    def __init__(self, stops: Sequence[str]):
        self.stops = list(stops)
        self._held = ""
        self.stopped = False

    def feed(self, piece: str) -> str:
        if self.stopped:
            return ""
        if not self.stops:
            return piece
        text = self._held + piece
        hit = self._first_stop(text)
        if hit is not None:
            self.stopped = True
            self._held = ""
            return text[:hit]
        keep = self._partial_suffix(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The end of generation: held text was not a stop string after all."""
        out, self._held = self._held, ""
        return "" if self.stopped else out

    def _first_stop(self, text: str) -> Optional[int]:
        found = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        return min(found) if found else None

    def _partial_suffix(self, text: str) -> int:
        best = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:n]):
                    best = n
                    break
        return best
