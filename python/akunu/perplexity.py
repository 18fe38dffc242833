"""Perplexity with llama-perplexity's method: the text is cut into chunks of
n_ctx tokens, each evaluated from an empty context, and only the second half of
each chunk is scored (the first half is context)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .errors import AkunuError


def perplexity(model, tokens: Sequence[int], n_ctx: int = 512) -> float:
    tokens = [int(t) for t in tokens]
    if n_ctx < 4 or len(tokens) < n_ctx:
        raise AkunuError(f"perplexity needs at least n_ctx = {n_ctx} tokens, got {len(tokens)}")
    nll, count = 0.0, 0
    for start in range(0, len(tokens) - n_ctx + 1, n_ctx):
        chunk = tokens[start : start + n_ctx]
        logits = model.logits(chunk).astype(np.float64)
        rows = logits[n_ctx // 2 : n_ctx - 1]
        targets = np.array(chunk[n_ctx // 2 + 1 : n_ctx])
        m = rows.max(axis=1)
        lse = m + np.log(np.exp(rows - m[:, None]).sum(axis=1))
        nll += float((lse - rows[np.arange(len(targets)), targets]).sum())
        count += len(targets)
    return math.exp(nll / count)
