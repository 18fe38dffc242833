"""Embedding throughput, akunu against sentence-transformers, same machine and run.

  python tools/bench_embeddings.py [MODEL_DIR] [--device cpu|cuda] [--batch 32] [--tokens 128]
  python tools/bench_embeddings.py --random-like DIR ...   (random weights at DIR's shape and tokenizer,
                                                            for machines without the real weights)

Sentences are made exactly --tokens long ([CLS] + words + [SEP]); each side
embeds the same --batch sentences per call; sentences/s is the median of
--reps timed calls after a warm-up. Prints one JSON line per engine and the
ratio, plus the cosine agreement of the two engines' embeddings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np




def random_like(src: str, dst: str) -> str:
    """A copy of a sentence-transformers directory with random weights (same config, tokenizer, modules)."""
    import torch
    import transformers as tf

    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    torch.manual_seed(0)
    tf.BertModel(tf.BertConfig.from_pretrained(src), add_pooling_layer=False).save_pretrained(dst)
    return dst


def make_texts(tokenizer_dir: str, n: int, tokens: int):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    words = ("the model reads every sentence quickly while engineers measure throughput on many machines "
             "across several days and nights with patience").split()
    texts = []
    for i in range(n):
        w = [words[(i + j) % len(words)] for j in range(tokens * 2)]
        while len(tok.encode(" ".join(w)).ids) > tokens:
            w.pop()
        while len(tok.encode(" ".join(w)).ids) < tokens:  # one-token filler up to the exact length
            w.append("a")
        texts.append(" ".join(w))
    return texts


def timed(fn, reps: int):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="all-minilm-l6-v2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--random-like", metavar="DIR")
    a = ap.parse_args()

    import akunu
    import torch
    from akunu.model_zoo import resolve_model_path
    from sentence_transformers import SentenceTransformer

    tmp = None
    path = resolve_model_path(a.model) if not a.random_like else random_like(
        a.random_like, tmp := tempfile.mkdtemp(prefix="akunu-bench-"))
    texts = make_texts(path, a.batch, a.tokens)
    m = akunu.load(path, device=a.device, n_threads=a.threads)
    assert all(len(m.tokenize(t)) == a.tokens for t in texts), "sentences are not exactly --tokens long"
    results = {}
    t_ak = timed(lambda: m.embed(texts), a.reps)
    results["akunu"] = a.batch / t_ak
    e_ak = m.embed(texts)
    if a.threads:
        torch.set_num_threads(a.threads)
    st = SentenceTransformer(path, device=a.device)
    st.max_seq_length = max(st.max_seq_length, a.tokens)

    def st_encode():
        out = st.encode(texts, batch_size=a.batch, convert_to_numpy=True)
        if a.device == "cuda":
            torch.cuda.synchronize()
        return out

    t_st = timed(st_encode, a.reps)
    results["sentence-transformers fp32"] = a.batch / t_st
    e_st = st_encode()
    cos = float(((e_ak * e_st).sum(1) / (np.linalg.norm(e_ak, axis=1) * np.linalg.norm(e_st, axis=1))).min())
    if a.device == "cuda":
        st.half()
        results["sentence-transformers fp16"] = a.batch / timed(st_encode, a.reps)
    info = {"model": os.path.basename(os.path.normpath(path)) if not a.random_like else "random " + a.random_like,
            "device": a.device, "batch": a.batch, "tokens": a.tokens, "min_cosine_akunu_vs_st": round(cos, 6),
            "sentences_per_s": {k: round(v, 1) for k, v in results.items()},
            "ratio_vs_st_fp32": round(results["akunu"] / results["sentence-transformers fp32"], 3)}
    if "sentence-transformers fp16" in results:
        info["ratio_vs_st_fp16"] = round(results["akunu"] / results["sentence-transformers fp16"], 3)
    print(json.dumps(info))
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
