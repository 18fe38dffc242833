"""Word error rate: word-level edit distance / reference words, after lowercasing
and dropping punctuation (hyphens split words)."""

from __future__ import annotations

import re
from typing import List

import numpy as np


def words(text: str) -> List[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower().replace("-", " ")).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    r, h = words(reference), words(hypothesis)
    d = np.arange(len(h) + 1)
    for i, rw in enumerate(r, 1):
        prev, d[0] = d.copy(), i
        for j, hw in enumerate(h, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (rw != hw))
    return float(d[len(h)]) / max(1, len(r))
