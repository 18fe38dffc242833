"""Sentence-embedding throughput (sentences per second) for akunu and
sentence-transformers on the same model directory.

Sentences are made exactly `tokens` long ([CLS] + words + [SEP]); each engine
embeds the same `batch` sentences per call. The rows also carry the smallest
cosine between the two engines' embeddings of a sentence.
"""

from __future__ import annotations

import os
from typing import Dict, List

import numpy as np

from . import PeerMissing, require, row, timed

WORDS = ("the model reads every sentence quickly while engineers measure throughput on many machines "
         "across several days and nights with patience").split()


def make_texts(model, n: int, tokens: int) -> List[str]:
    """n different sentences of exactly `tokens` tokens under the model's tokenizer."""
    texts = []
    for i in range(n):
        w = [WORDS[(i + j) % len(WORDS)] for j in range(tokens * 2)]
        while len(w) > 1 and len(model.tokenize(" ".join(w))) > tokens:
            w.pop()
        while len(model.tokenize(" ".join(w))) < tokens:  # one-token filler up to the exact length
            w.append("a")
        texts.append(" ".join(w))
    return texts


def test_name(batch: int, tokens: int) -> str:
    return f"embed {batch}x{tokens}"


def akunu_rows(model, batch: int, tokens: int, reps: int) -> List[Dict]:
    texts = make_texts(model, batch, tokens)
    times = timed(lambda: model.embed(texts), reps)
    return [row("akunu", test_name(batch, tokens), "sent/s", times, batch)]


def peer_rows(model, path: str, batch: int, tokens: int, reps: int, device: str, threads: int) -> List[Dict]:
    """sentence-transformers on the same directory (float32; on a GPU also float16)."""
    if not os.path.isdir(path):
        raise PeerMissing(
            f"--compare sentence-transformers needs a sentence-transformers directory, not {path}")
    st_mod = require("sentence_transformers", "sentence-transformers", "pip install sentence-transformers")
    import torch

    if threads:
        torch.set_num_threads(threads)
    texts = make_texts(model, batch, tokens)
    st = st_mod.SentenceTransformer(path, device=device)
    st.max_seq_length = max(st.max_seq_length, tokens)

    def encode():
        out = st.encode(texts, batch_size=batch, convert_to_numpy=True)
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    e_ak, e_st = model.embed(texts), encode()
    cos = float(((e_ak * e_st).sum(1) / (np.linalg.norm(e_ak, axis=1) * np.linalg.norm(e_st, axis=1))).min())
    build = f"sentence-transformers {st_mod.__version__} (torch {torch.__version__})"
    rows = [row("sentence-transformers", test_name(batch, tokens), "sent/s", timed(encode, reps), batch,
                peer_build=build, peer_settings="float32", min_cosine_vs_akunu=round(cos, 6))]
    if device == "cuda":
        st.half()
        rows.append(row("sentence-transformers", test_name(batch, tokens), "sent/s", timed(encode, reps),
                        batch, peer_build=build, peer_settings="float16"))
    return rows
