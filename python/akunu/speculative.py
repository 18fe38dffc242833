"""Draft tokens from n-gram statistics of the context (book: "Speculative
Decoding with N-grams"): no draft model; the target model verifies a draft
in one batched forward pass and keeps the longest correct prefix."""

from __future__ import annotations

from collections import Counter, deque
from typing import Deque, Dict, List, Sequence, Tuple


class NgramPredictor:
    MAX_ORDER = 4      # up to 4-grams: contexts of 1 to 3 tokens
    MAX_HISTORY = 512  # tokens of context whose n-grams are counted

    def __init__(self, draft_count: int = 4):
        self.draft_count = draft_count
        self._history: Deque[int] = deque()
        # per context length: context tuple -> counts of the next token
        self._tables: List[Dict[Tuple[int, ...], Counter]] = [dict() for _ in range(self.MAX_ORDER - 1)]

    def update(self, token: int) -> None:
        h = self._history
        for n in range(1, self.MAX_ORDER):
            if len(h) >= n:
                ctx = tuple(list(h)[-n:]) if n > 1 else (h[-1],)
                self._tables[n - 1].setdefault(ctx, Counter())[token] += 1
        h.append(token)
        if len(h) > self.MAX_HISTORY:
            self._forget(h.popleft())

    def update_all(self, tokens: Sequence[int]) -> None:
        for t in tokens:
            self.update(int(t))

    def _forget(self, oldest: int) -> None:
        # the n-grams that started at the dropped token leave the window
        h = self._history
        seq = [oldest] + [h[i] for i in range(min(len(h), self.MAX_ORDER - 1))]
        for n in range(1, self.MAX_ORDER):
            if len(seq) > n:
                ctx, nxt = tuple(seq[:n]), seq[n]
                c = self._tables[n - 1].get(ctx)
                if c is not None:
                    c[nxt] -= 1
                    if c[nxt] <= 0:
                        del c[nxt]
                    if not c:
                        del self._tables[n - 1][ctx]

    def predict(self) -> List[int]:
        """Up to draft_count tokens, each from the longest context seen before."""
        ctx = list(self._history)[-(self.MAX_ORDER - 1):]
        draft: List[int] = []
        for _ in range(self.draft_count):
            nxt = None
            for n in range(min(self.MAX_ORDER - 1, len(ctx)), 0, -1):
                c = self._tables[n - 1].get(tuple(ctx[-n:]))
                if c:
                    # most frequent; ties to the smallest id for determinism
                    nxt = min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0]
                    break
            if nxt is None:
                break
            draft.append(nxt)
            ctx.append(nxt)
        return draft
