"""Continuous batching: many generations of one model advance together.

A scheduler thread owns the model's batch engine (akunu._core.BatchEngine:
a paged KV cache, ragged passes, one device draw per sequence). Between two
passes requests join and leave; each pass carries one decode row for every
running request plus, with the room left, a chunk of the next waiting
prompt, so a long prompt never stops the others' streams for its whole
prefill. Prompts that begin with cached blocks (a system prompt, an earlier
turn) share them instead of computing them again.

When the KV budget runs out the newest request is preempted: its blocks are
freed and it waits, to resume from its prompt plus what it generated so far
(mostly from cached blocks). A request's tokens do not depend on what else
is in the batch: every kernel computes a row from that row alone and draws
are keyed by (seed, position).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Deque, Iterator, List, Optional, Sequence, Tuple

from .errors import AkunuError
from .generation import GenerationRequest, GenerationResult, GenerationStats, TokenEmitter

_DONE = object()


class QueueFullError(AkunuError):
    """More callers are waiting for the model than its max_queue allows."""


class BatchedRequest:
    """One generation inside the scheduler; its pieces arrive on a queue."""

    def __init__(self, model, req: GenerationRequest, emitter: Optional[TokenEmitter] = None):
        self.req = req
        if emitter is None:
            emitter = TokenEmitter(model, req, GenerationResult(
                text="", tokens=[], stats=GenerationStats(prompt_tokens=len(req.ids))))
        # a generation handed over from the single-stream path keeps its text state and result
        self.emitter = emitter
        self.result = emitter.result
        # Drawn token ids for the reader to turn into text (its own thread: the
        # scheduler's loop stays short), or text pieces the scheduler made itself
        # (grammar requests, whose next mask needs the token accepted first);
        # then _DONE or an exception.
        self.events: "queue.SimpleQueue" = queue.SimpleQueue()
        self.inline = self.emitter.grammar is not None
        self.stop_ids = frozenset(model.stop_ids)
        self.drawn: List[int] = list(self.result.tokens)  # every token drawn so far
        self.cancelled = threading.Event()
        self.seq = -1
        self.feed: List[int] = []  # tokens to run before the next draw (prompt remainder, or the last draw)
        self.prompt_left = 0  # leading tokens of feed that come from the prompt (the rest were generated)
        self.submitted = time.perf_counter()
        self.first_token_at: Optional[float] = None

    def context(self) -> List[int]:
        """The prompt and every token generated so far (a preempted request resumes from it)."""
        return list(self.req.ids) + list(self.drawn)


class BatchedStream:
    """Iterator of text pieces of a batched generation; ``result`` is final once it ends.
    Closing it (or dropping it) cancels the request and frees its KV blocks."""

    def __init__(self, job: BatchedRequest, scheduler: "BatchScheduler"):
        self._job = job
        self._scheduler = scheduler
        self.result: GenerationResult = job.result
        self._ended = False

    def __iter__(self) -> "BatchedStream":
        return self

    def __next__(self) -> str:
        job = self._job
        while not self._ended:
            item = job.events.get()
            if isinstance(item, int):  # a drawn token: its text here, on the reader's thread
                finished, piece = job.emitter.emit(item)
                if finished:  # an end-of-turn token or a stop string: nothing after it counts
                    self.close()
                if piece:
                    return piece
                continue
            if item is _DONE:
                self._ended = True
                tail = job.emitter.tail() if not job.inline else ""
                if tail:
                    return tail
                break
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            return item  # a piece the scheduler made (grammar requests)
        raise StopIteration

    def ready(self) -> bool:
        """Whether the next piece (or the end) is already here: next() would not wait for a pass."""
        return self._ended or not self._job.events.empty()

    def close(self) -> None:
        if not self._ended:
            self._ended = True
            self._scheduler.cancel(self._job)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class BatchScheduler:
    """Admits requests, builds each pass, hands tokens back; one per model."""

    def __init__(self, model, parallel: int, kv_tokens: int = 0, max_queue: int = 0, block_size: int = 16):
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise AkunuError(f"parallel must be a positive integer, got {parallel!r}")
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 0:
            raise AkunuError(f"max_queue must be a non-negative integer (0: no limit), got {max_queue!r}")
        self._model = model
        self.engine = model._core().enable_batching(parallel, int(kv_tokens or 0), block_size)
        self._n_ctx = self.engine.n_ctx
        self.parallel = parallel
        self.max_queue = max_queue
        self._cond = threading.Condition(threading.Lock())
        self._waiting: Deque[BatchedRequest] = deque()
        self._running: List[BatchedRequest] = []  # admission order
        self._stopping = False
        self.preemptions = 0
        self._thread = threading.Thread(target=self._loop, name="akunu-batch", daemon=True)
        self._thread.start()

    # -- callers --------------------------------------------------------------
    def submit(self, req: GenerationRequest) -> BatchedRequest:
        job = BatchedRequest(self._model, req)
        with self._cond:
            if self._stopping:
                raise AkunuError("this model has been closed")
            # those the next pass admits (free slots) are not waiting for a turn
            queued = len(self._waiting) - max(0, self.parallel - len(self._running))
            if self.max_queue and queued >= self.max_queue:
                raise QueueFullError(f"{queued} requests are already waiting for this model "
                                     f"(max_queue = {self.max_queue}); try again later")
            self._waiting.append(job)
            self._cond.notify_all()
        return job

    def take_over(self, req: GenerationRequest, emitter: TokenEmitter, started: float,
                  cached: Sequence[int]) -> BatchedRequest:
        """A generation that ran so far on the single-stream path joins the batch, from its
        prompt and the tokens it has drawn (``emitter.result.tokens``); never refused by
        max_queue. Called while its caller still holds the single-stream cache, whose rows
        of `cached` (the leading tokens of its context there) the sequence takes over
        instead of computing them again, when a slot is free now; otherwise it waits first
        in line (it came before those waiting)."""
        job = BatchedRequest(self._model, req, emitter)
        job.submitted = job.first_token_at = started
        core = self._model._core()
        with self._cond:
            if self._stopping:
                raise AkunuError("this model has been closed")
            ctx = job.context()
            common = 0
            while common < min(len(cached), len(ctx) - 1) and cached[common] == ctx[common]:
                common += 1
            adopt = (lambda seq: core.adopt_into_batch(seq, ctx[:common], common)) if common else None
            if not (len(self._running) < self.parallel and self._open(job, adopt)):
                self._waiting.appendleft(job)
            self._cond.notify_all()
        return job

    def busy(self) -> bool:
        """Whether any request runs or waits in the batch."""
        with self._cond:
            return bool(self._running or self._waiting)

    def cancel(self, job: BatchedRequest) -> None:
        job.cancelled.set()
        with self._cond:
            self._cond.notify_all()

    def stats(self) -> dict:
        with self._cond:
            running, waiting = len(self._running), len(self._waiting)
        s = self.engine.stats()
        s.update(running=running, waiting=waiting, parallel=self.parallel, preemptions=self.preemptions)
        return s

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    # -- the loop -------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._running and not self._waiting:
                    self._cond.wait()
                if self._stopping:
                    for job in list(self._running) + list(self._waiting):
                        job.events.put(AkunuError("this model has been closed"))
                    self._waiting.clear()
                    self._running.clear()
                    return
                self._drop_cancelled()
                self._admit()
                running = list(self._running)
            if not running:
                continue
            try:
                self._step(running)
            except BaseException as e:  # a failed pass fails the requests in it, never the thread
                err = e if isinstance(e, AkunuError) else AkunuError(f"batched generation failed: {e}")
                with self._cond:
                    for job in running:
                        if job in self._running:
                            self._finish(job, err)

    def _drop_cancelled(self) -> None:
        for job in [j for j in self._running if j.cancelled.is_set()]:
            self._finish(job, None)
        for job in [j for j in self._waiting if j.cancelled.is_set()]:
            self._waiting.remove(job)
            job.events.put(_DONE)

    def _admit(self) -> None:
        """Opens sequences for waiting requests while slots and KV blocks allow."""
        while self._waiting and len(self._running) < self.parallel:
            job = self._waiting[0]
            if job.req.max_tokens - len(job.drawn) <= 0:
                self._waiting.popleft()
                job.events.put(_DONE)
                continue
            if not self._open(job):
                return
            self._waiting.popleft()

    def _open(self, job: BatchedRequest, adopt=None) -> bool:
        """Opens a sequence for `job` and runs it, if a slot and KV blocks allow. `adopt(seq)`:
        takes cached rows from elsewhere (returns the sequence's length after)."""
        engine = self.engine
        ctx = job.context()
        seq, cached = engine.open(ctx)
        if seq < 0:
            return False
        if adopt is not None:
            cached = max(cached, adopt(seq))
        # room for the prompt's first pass and a block of growth for each running request
        need = engine.blocks_needed(seq, min(len(ctx) - cached, engine.max_pass_tokens))
        spare = engine.blocks_available() - need - len(self._running)
        if self._running and spare < 0:
            engine.close(seq)
            return False
        job.seq = seq
        job.feed = ctx[cached:]
        job.prompt_left = max(0, len(job.req.ids) - cached)
        if not job.drawn:
            job.result.stats.cached_tokens = cached
        self._apply_settings(job)
        self._running.append(job)
        return True

    def _apply_settings(self, job: BatchedRequest) -> None:
        self.engine.set_sampling(job.seq, **job.req.sampling.core_kwargs(job.req.seed))
        if job.emitter.grammar is not None:
            self.engine.set_mask(job.seq, job.emitter.grammar.mask_words())

    def _plan(self, running: Sequence[BatchedRequest]) -> List[Tuple[BatchedRequest, List[int], bool, bool]]:
        """This pass as (request, tokens, draw after them, tokens were generated): every decoding
        request's generated tokens (one, or those a resumed request had drawn), then prompt
        chunks in arrival order. A chunk never mixes the two kinds (the kind picks a row's kernels)."""
        room = self.engine.max_pass_tokens
        plan = []
        for job in running:
            if job.prompt_left == 0 and job.feed and room > 0:
                toks = job.feed[:room]
                plan.append((job, toks, len(toks) == len(job.feed), True))
                room -= len(toks)
        for job in running:
            if job.prompt_left > 0 and room > 0:
                toks = job.feed[:min(room, job.prompt_left)]
                plan.append((job, toks, len(toks) == len(job.feed), False))
                room -= len(toks)
        return plan

    def _step(self, running: List[BatchedRequest]) -> None:
        engine = self.engine
        plan = self._plan(running)
        # KV blocks for the pass: preempt the newest requests until it fits
        while True:
            # (one call for the pass: each call into the engine lets the reader threads take the GIL)
            if engine.pass_shortfall([(job.seq, len(toks)) for job, toks, _, _ in plan]) == 0:
                break
            with self._cond:
                victim = self._running[-1] if self._running else None
                if victim is None or len(self._running) == 1:
                    if victim is not None:
                        self._finish(victim, AkunuError(
                            f"this request needs more KV cache than the model's budget of "
                            f"{engine.stats()['blocks_total'] * engine.block_size} tokens holds; load with a "
                            f"larger kv_tokens or send a shorter prompt"))
                    return
                self._preempt(victim)
            plan = [p for p in plan if p[0] is not victim]
        if not plan:
            return
        for job, _, sample, _ in plan:
            if sample and job.emitter.grammar is not None:
                engine.set_mask(job.seq, job.emitter.grammar.mask_words())
        drawn = iter(engine.step([(job.seq, toks, sample, gen) for job, toks, sample, gen in plan]))
        now = time.perf_counter()
        with self._cond:
            for job, toks, sample, generated in plan:
                job.feed = job.feed[len(toks):]
                if not generated:
                    job.prompt_left -= len(toks)
                if not sample:
                    continue
                tok = next(drawn)
                if job not in self._running:  # closed meanwhile (the model is closing)
                    continue
                stats = job.result.stats
                if job.first_token_at is None:
                    job.first_token_at = now
                    stats.prefill_seconds = now - job.submitted
                job.drawn.append(tok)
                if job.inline:
                    finished, piece = job.emitter.emit(tok)
                    if piece:
                        job.events.put(piece)
                else:  # the reader makes the text (and stops at a stop string)
                    finished = tok in job.stop_ids
                    job.events.put(tok)
                if not finished and (len(job.drawn) >= job.req.max_tokens
                                     or len(job.req.ids) + len(job.drawn) >= self._n_ctx):
                    finished = True
                    if job.inline:
                        job.result.finish_reason = "length"
                        tail = job.emitter.tail()
                        if tail:
                            job.events.put(tail)
                if finished:
                    self._finish(job, None)
                else:
                    job.feed = [tok]

    def _preempt(self, job: BatchedRequest) -> None:
        """Frees a running request's blocks; it waits at the front to resume."""
        self.engine.close(job.seq)
        job.seq = -1
        self._running.remove(job)
        self._waiting.appendleft(job)
        self.preemptions += 1

    def _finish(self, job: BatchedRequest, error: Optional[BaseException]) -> None:
        if job.seq >= 0:
            self.engine.close(job.seq)
            job.seq = -1
        if job in self._running:
            self._running.remove(job)
        if job.first_token_at is not None:
            job.result.stats.decode_seconds = time.perf_counter() - job.first_token_at
        job.events.put(error if error is not None else _DONE)


def run_to_end(stream: Iterator[str], cancelled=lambda: False) -> None:
    """Reads a stream to its end (closing it early when `cancelled()` says so)."""
    for _ in stream:
        if cancelled():
            stream.close()
            break


def results_of(streams, cancelled=lambda: False) -> list:
    """The results of batched streams submitted together, each read to its end in turn (they
    advance together in the scheduler), every one closed whatever happens."""
    try:
        for s in streams:
            run_to_end(s, cancelled)
    finally:
        for s in streams:
            s.close()
    return [s.result for s in streams]
