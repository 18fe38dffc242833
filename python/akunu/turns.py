"""Callers of one model take turns in arrival order.

A loaded model runs one request at a time; threads and asyncio tasks that
call it while it is busy wait for their turn instead of failing. The turn
of a streamed generation lasts until the stream ends or is closed, so a
thread holding an open stream that starts another call on the same model
would wait for itself: that is an error that says so.
"""

from __future__ import annotations

import threading
from typing import Optional

from .errors import AkunuError


class TurnLock:
    """A first-come, first-served lock: tickets are served in the order taken."""

    def __init__(self, max_waiting: int = 0) -> None:
        self._max_waiting = max_waiting  # 0: no limit
        self._cond = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._serving = 0
        self._owner: Optional[int] = None  # thread that took the current turn

    def acquire(self) -> None:
        """Waits for this caller's turn and takes it."""
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                raise AkunuError("this thread already has a generation open on this model (a stream not yet "
                                 "read to its end); finish or close it first")
            waiting = self._next_ticket - self._serving - 1  # beyond the one being served
            if self._max_waiting and waiting >= self._max_waiting:
                from .batching import QueueFullError

                raise QueueFullError(f"{waiting} callers are already waiting for this model "
                                     f"(max_queue = {self._max_waiting}); try again later")
            ticket = self._next_ticket
            self._next_ticket += 1
            while self._serving != ticket:
                self._cond.wait()
            self._owner = me

    def try_acquire(self) -> bool:
        """Takes the turn only if nobody holds it or waits for it; never waits."""
        with self._cond:
            if self._next_ticket != self._serving:
                return False
            self._next_ticket += 1
            self._owner = threading.get_ident()
            return True

    def callers(self) -> int:
        """Callers holding the turn or waiting for it."""
        with self._cond:
            return self._next_ticket - self._serving

    def held_here(self) -> bool:
        """Whether this thread holds the turn."""
        with self._cond:
            return self._owner == threading.get_ident()

    def release(self) -> None:
        with self._cond:
            self._owner = None
            self._serving += 1
            self._cond.notify_all()

    # ``with turns:`` is one turn
    def __enter__(self) -> "TurnLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
