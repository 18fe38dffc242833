"""One generation: prefill what the KV cache lacks, then decode on the path
the settings call for (greedy chain, device sampler, grammar, speculative),
yielding text pieces with stop strings held back."""

from __future__ import annotations

import codecs
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .errors import AkunuError
from .grammar import GrammarState
from .sampling import SamplingConfig
from .speculative import NgramPredictor
from .stop_strings import StopStringFilter


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens whose KV was reused, not recomputed
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    draft_tokens: int = 0     # speculative: tokens proposed by the n-gram predictor
    accepted_tokens: int = 0  # speculative: proposals the model confirmed

    @property
    def prefill_tok_s(self) -> float:
        n = self.prompt_tokens - self.cached_tokens
        return n / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        # the first generated token comes from the prefill pass
        n = max(self.generated_tokens - 1, 0)
        return n / self.decode_seconds if self.decode_seconds > 0 else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0


@dataclass
class GenerationResult:
    text: str
    tokens: List[int]
    stats: GenerationStats = field(default_factory=GenerationStats)
    finish_reason: str = "length"  # "stop" (end-of-turn token or stop string) or "length"


@dataclass
class GenerationRequest:
    ids: List[int]
    max_tokens: int
    sampling: SamplingConfig
    stops: List[str]
    grammar: Optional[object]  # compiled xgrammar grammar
    speculative: bool
    seed: int
    stream_chunk: int


_NO_MASK = np.zeros(0, dtype=np.uint32)


class TokenEmitter:
    """Turns a generation's tokens into text: end-of-turn tokens, the
    grammar's state, whole UTF-8 characters, stop strings held back."""

    def __init__(self, model, req: GenerationRequest, result: GenerationResult):
        self.m = model
        self.result = result
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop_text = StopStringFilter(req.stops)
        self.grammar = GrammarState(req.grammar, model.config["vocab_size"]) if req.grammar is not None else None

    def emit(self, tok: int) -> Tuple[bool, str]:
        """Adds one generated token; returns (generation finished, text to show)."""
        self.result.tokens.append(tok)
        self.result.stats.generated_tokens += 1
        if tok in self.m.stop_ids:
            self.result.finish_reason = "stop"
            piece = self.tail()
            return True, piece
        if self.grammar is not None:
            self.grammar.accept(tok)
        piece = self._stop_text.feed(self._utf8.decode(self.m.tokenizer.token_bytes(tok)))
        self.result.text += piece
        if self._stop_text.stopped:
            self.result.finish_reason = "stop"
            return True, piece
        if self.grammar is not None and self.grammar.terminated:
            self.result.finish_reason = "stop"
            return True, piece
        return False, piece

    def tail(self) -> str:
        """The text held back at the end (an incomplete character, a partial stop string)."""
        piece = self._stop_text.feed(self._utf8.decode(b"", final=True)) + self._stop_text.flush()
        self.result.text += piece
        return piece


class Generation:
    """Iterate for (text piece, result so far); ``result`` is final when iteration ends."""

    def __init__(self, model, req: GenerationRequest):
        self.m = model
        self.core = model._core()
        self.req = req
        self.result = GenerationResult(text="", tokens=[], stats=GenerationStats(prompt_tokens=len(req.ids)))
        self.emitter = TokenEmitter(model, req, self.result)
        self._ctx = list(req.ids)  # every token of the context; ctx[:n_past] is in the KV cache
        self._grammar = self.emitter.grammar
        self._predictor: Optional[NgramPredictor] = None
        # Asked between decode chunks with the tokens still to generate: True stops
        # here so the generation can go on elsewhere (the batch scheduler), from
        # `emitter` and `decode_started`; ``handed_over`` then says so.
        self.hand_over: Optional[Callable[[int], bool]] = None
        self.handed_over = False
        self.decode_started = 0.0

    # -- the KV cache ---------------------------------------------------------
    def _sync_cache(self) -> None:
        self.m._cached = self._ctx[: self.core.n_past]

    def _prefill(self) -> int:
        ids = self.req.ids
        cached = self.m._cached
        common = 0
        limit = min(len(cached), len(ids) - 1)  # at least one token is fed, for its logits
        while common < limit and cached[common] == ids[common]:
            common += 1
        common = self.core.reusable_prefix(common)  # 0 when a sliding-window ring has moved past it
        self.core.truncate(common)
        self.result.stats.cached_tokens = common
        try:
            return self.core.prefill(ids[common:])
        finally:
            self._sync_cache()

    # -- the loop -------------------------------------------------------------
    def __iter__(self) -> Iterator[Tuple[str, GenerationResult]]:
        req, core, stats = self.req, self.core, self.result.stats
        if req.max_tokens == 0:
            return
        sampled = req.sampling.needs_sampler or self._grammar is not None
        core.set_sampling(**req.sampling.core_kwargs(req.seed))
        core.set_mask(self._grammar.mask_words() if self._grammar else _NO_MASK)
        t0 = time.perf_counter()
        first = self._prefill()
        if sampled:
            first = core.sample_next()
        stats.prefill_seconds = time.perf_counter() - t0
        if req.speculative:
            self._predictor = NgramPredictor()
            self._predictor.update_all(req.ids)
        pending = [first]
        t1 = self.decode_started = time.perf_counter()
        try:
            while pending:
                for tok in pending:
                    finished, piece = self._emit(tok)
                    if piece:
                        yield piece, self.result
                    if finished:
                        return
                remaining = req.max_tokens - len(self.result.tokens)
                if remaining <= 0:
                    break
                if self.hand_over is not None and self.hand_over(remaining):
                    self.handed_over = True
                    return
                pending = self._next_tokens(self._ctx[-1], remaining, sampled)
            tail = self.emitter.tail()
            if tail:
                yield tail, self.result
        finally:
            stats.decode_seconds = time.perf_counter() - t1
            self._sync_cache()

    def _emit(self, tok: int) -> Tuple[bool, str]:
        """Adds one generated token; returns (generation finished, text to show)."""
        self._ctx.append(tok)
        if self._predictor is not None:
            self._predictor.update(tok)
        return self.emitter.emit(tok)

    def _next_tokens(self, last: int, remaining: int, sampled: bool) -> List[int]:
        core, stop_ids = self.core, self.m.stop_ids
        try:
            if self._grammar is not None:
                core.set_mask(self._grammar.mask_words())
                return core.decode_sampled(last, 1, stop_ids)
            if self._predictor is not None:
                return self._speculative_step(last, remaining)
            chunk = min(remaining, self.req.stream_chunk)
            if sampled:
                return core.decode_sampled(last, chunk, stop_ids)
            return core.decode_greedy(last, chunk, stop_ids)
        finally:
            self._sync_cache()

    def _speculative_step(self, last: int, remaining: int) -> List[int]:
        """Feeds `last` plus an n-gram draft in one batched pass; keeps the
        longest prefix of the draft that greedy decoding would have produced."""
        core, stats = self.core, self.result.stats
        room = self.m.config["n_ctx"] - core.n_past
        draft = self._predictor.predict()[: max(min(remaining, room) - 1, 0)]
        if not draft:
            return core.decode_greedy(last, 1, self.m.stop_ids)
        base = core.n_past
        verified = core.verify([last] + draft)
        accepted = 0
        while accepted < len(draft) and verified[accepted] == draft[accepted]:
            accepted += 1
        core.truncate(base + 1 + accepted)  # drop the KV of rejected draft tokens
        stats.draft_tokens += len(draft)
        stats.accepted_tokens += accepted
        out = draft[:accepted] + [verified[accepted]]
        for i, t in enumerate(out):  # the chain stops after a stop token
            if t in self.m.stop_ids:
                core.truncate(base + 1 + i)
                return out[: i + 1]
        return out
