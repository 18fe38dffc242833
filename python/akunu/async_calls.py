"""asyncio faces of a model's calls: the blocking work runs on a thread of
the call's own (never the event loop's, never a shared pool whose workers
could all be waiting for a turn), and a cancelled task ends its generation
at the next piece, which frees the model for the callers behind it."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Iterator

_END = object()
_local = threading.local()  # the stop event of the task a thread works for


def _own_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="akunu-call")


async def _await(pool: ThreadPoolExecutor, fn: Callable[[], Any], on_abandon: Callable[[Future], None]) -> Any:
    """fn() on the call's thread; if the task is cancelled meanwhile, on_abandon(future) runs once fn is done."""
    cf = pool.submit(fn)
    try:
        return await asyncio.wrap_future(cf)
    except asyncio.CancelledError:
        cf.add_done_callback(on_abandon)
        raise


def _close_result(f: Future) -> None:
    if not f.cancelled() and f.exception() is None and f.result() is not None:
        f.result().close()


async def iterate(make: Callable[[], Iterator[Any]]) -> AsyncIterator[Any]:
    """The items of make()'s iterator (one with close(): a generation stream or
    chunk iterator), each computed on the call's thread."""
    pool = _own_thread()
    it = None
    try:
        it = await _await(pool, make, _close_result)
        while True:
            # (cancelled meanwhile: the finally below closes the stream once this piece is done)
            item = await _await(pool, lambda: next(it, _END), lambda f: None)
            if item is _END:
                break
            yield item
    finally:
        if it is not None:
            pool.submit(it.close)  # after anything still running on the thread
        pool.shutdown(wait=False)


def cancelled() -> bool:
    """Whether the asyncio task this thread works for was cancelled (checked
    between the pieces of a generation that is not streamed)."""
    stop = getattr(_local, "stop", None)
    return stop is not None and stop.is_set()


async def call(fn: Callable[[], Any]) -> Any:
    """fn() on a thread of its own; a cancelled task's generation stops at its next piece."""
    pool = _own_thread()
    stop = threading.Event()

    def run():
        _local.stop = stop
        try:
            return fn()
        finally:
            _local.stop = None

    try:
        return await _await(pool, run, lambda f: None)
    except asyncio.CancelledError:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=False)
