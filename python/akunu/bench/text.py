"""Prompt processing (ppN) and text generation (tgN), as llama-bench defines
them, for akunu and for llama.cpp on the same GGUF file.

- ppN: N random tokens prefilled from an empty context.
- tgN: N tokens generated one at a time from an empty context (the first
  token's prefill included, as llama-bench counts it).
- ppN @ dD, tgN @ dD (llama-bench's ``-d``): the same after D tokens already
  in the context; their prefill is not timed.

llama.cpp runs through its own ``llama-bench`` when a binary is given or on
PATH (on a GPU with every layer offloaded and flash attention, ``-ngl 99 -fa
1``, taking the better of its default and ``GGML_CUDA_GRAPH_OPT=1``; on the
CPU with as many threads as akunu), else through llama-cpp-python in this
process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import PeerMissing, row, timed

Test = Tuple[str, int, int]  # ("pp", 512, depth) or ("tg", 128, depth)


def test_name(kind: str, n: int, depth: int) -> str:
    """llama-bench's name of a test: "pp512", "tg128 @ d4096"."""
    return f"{kind}{n}" + (f" @ d{depth}" if depth else "")


def bench_pp(core, n: int, rng, vocab: int) -> None:
    core.prefill(rng.integers(0, vocab, n).tolist())


def bench_tg(core, n: int, rng, vocab: int) -> None:
    first = core.prefill([int(rng.integers(0, vocab))])
    if n > 1:
        core.decode_greedy(first, n - 1, [])


def back_to(core, context: List[int]) -> None:
    """The context a run starts from: truncated back to it, or, where a
    sliding-window ring has moved past its keys (Gemma 3's local layers at a
    depth beyond their window), fed again from empty. Not timed."""
    depth = len(context)
    if core.reusable_prefix(depth) == depth:
        core.truncate(depth)
    else:
        core.truncate(0)
        core.prefill(context)


def akunu_rows(model, tests: List[Test], reps: int) -> List[Dict]:
    core, vocab = model._core(), model.config["vocab_size"]
    rng = np.random.default_rng(0)
    rows = []
    for kind, n, depth in tests:
        context = rng.integers(0, vocab, depth).tolist()  # the context the test starts from
        core.truncate(0)
        if context:
            core.prefill(context)
        fn = bench_pp if kind == "pp" else bench_tg
        # one warm-up run first, as llama-bench
        times = timed(lambda: fn(core, n, rng, vocab), reps, before=lambda: back_to(core, context))
        rows.append(row("akunu", test_name(kind, n, depth), "t/s", times, n, n_prompt=n if kind == "pp" else 0,
                        n_gen=n if kind == "tg" else 0, n_depth=depth))
    return rows


def find_llama_bench(path: Optional[str]) -> Optional[str]:
    """The llama-bench binary: the path given (a file, or a folder holding it), else one on PATH."""
    if path:
        cand = os.path.join(path, "llama-bench") if os.path.isdir(path) else path
        if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
            raise PeerMissing(f"--llama-bench {path}: no llama-bench binary there")
        return cand
    return shutil.which("llama-bench")


# GGML's type ids of the KV cache types (llama-cpp-python's type_k / type_v)
GGML_KV_TYPES = {"f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2}


# akunu's devices whose llama.cpp peer offloads every layer (llama.cpp's CUDA and Metal backends)
GPU_DEVICES = ("cuda", "metal")


def llama_bench_rows(binary: str, path: str, tests: List[Test], reps: int, device: str, threads: int,
                     kv_types=("f16", "f16")) -> List[Dict]:
    """llama-bench's own measurement; on a GPU (CUDA or Metal) every layer offloaded with flash attention
    (-ngl 99 -fa 1), and for prompts over 512 tokens also 2048-token micro-batches (-ub 2048), its fastest
    there; on CUDA the best of its default and GGML_CUDA_GRAPH_OPT=1 per test; the KV cache of akunu's
    types (-ctk / -ctv; a quantized V cache needs flash attention there, -fa 1)."""
    best: Dict[str, Dict] = {}
    gpu = device in GPU_DEVICES
    envs = [{}, {"GGML_CUDA_GRAPH_OPT": "1"}] if device == "cuda" else [{}]
    for env in envs:
        for kind, n, depth in tests:
            batches = [[], ["-b", "2048", "-ub", "2048"]] if gpu and kind == "pp" and n > 512 else [[]]
            for ub in batches:
                cmd = [binary, "-m", path, "-r", str(reps), "-o", "json", "-t", str(threads),
                       "-p", str(n if kind == "pp" else 0), "-n", str(n if kind == "tg" else 0), "-d", str(depth)]
                cmd += (["-ngl", "99", "-fa", "1"] if gpu else ["-ngl", "0"]) + ub
                if tuple(kv_types) != ("f16", "f16"):
                    cmd += ["-ctk", kv_types[0], "-ctv", kv_types[1]] + (["-fa", "1"] if not gpu else [])
                for got in _llama_bench_run(cmd, env, threads, reps):
                    if got["test"] not in best or got["avg_ts"] > best[got["test"]]["avg_ts"]:
                        best[got["test"]] = got
    return [best[test_name(*t)] for t in tests if test_name(*t) in best]


def _llama_bench_run(cmd: List[str], env: Dict[str, str], threads: int, reps: int) -> List[Dict]:
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if out.returncode != 0:
        raise PeerMissing(f"llama-bench failed ({' '.join(cmd)}): {out.stderr.strip()[-400:]}")
    rows = []
    for r in json.loads(out.stdout):
        if r["n_prompt"] and r["n_gen"]:
            continue
        test = test_name("pp" if r["n_prompt"] else "tg", r["n_prompt"] or r["n_gen"], r.get("n_depth", 0))
        rows.append(dict(engine="llama.cpp", test=test, unit="t/s", avg_ts=r["avg_ts"], stddev_ts=r["stddev_ts"],
                         avg_ns=r["avg_ns"], samples_ts=r.get("samples_ts", []), samples_ns=r.get("samples_ns", []),
                         n_prompt=r["n_prompt"], n_gen=r["n_gen"], n_depth=r.get("n_depth", 0),
                         peer_build=f"llama-bench {r.get('build_commit', '?')}",
                         peer_settings=" ".join(["-t", str(threads), "-r", str(reps)] + cmd[cmd.index("-ngl"):])
                         + "".join(f" {k}={v}" for k, v in env.items())))
    return rows


def llama_cpp_python_rows(path: str, tests: List[Test], reps: int, device: str, threads: int, n_ctx: int,
                          n_batch: int, kv_types=("f16", "f16")) -> List[Dict]:
    """llama.cpp through llama-cpp-python, timed as akunu is (same tests, warm-up, random tokens)."""
    try:
        import llama_cpp
    except ImportError as e:
        raise PeerMissing(
            f"--compare llama.cpp needs llama-bench (--llama-bench PATH, or on PATH) or llama-cpp-python ({e}): "
            "pip install llama-cpp-python (on CPUs where llama.cpp's native build fails, with "
            "CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON\")") from None
    gpu = device in GPU_DEVICES
    kv = {} if tuple(kv_types) == ("f16", "f16") else dict(type_k=GGML_KV_TYPES[kv_types[0]],
                                                           type_v=GGML_KV_TYPES[kv_types[1]])
    fa = gpu or bool(kv)  # llama.cpp keeps a quantized V cache only with flash attention
    ll = llama_cpp.Llama(path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=threads,
                         n_threads_batch=threads, n_gpu_layers=99 if gpu else 0, flash_attn=fa, verbose=False, **kv)
    vocab = ll.n_vocab()
    rng = np.random.default_rng(0)

    def at_depth(depth):  # the context a test starts from, dropped back to its first `depth` tokens
        if ll.n_tokens < depth:
            ll.reset()
            ll.eval(rng.integers(0, vocab, depth).tolist())
        ll._ctx.kv_cache_seq_rm(-1, depth, -1)
        ll.n_tokens = depth

    def pp(n, depth):
        at_depth(depth)
        ll.eval(rng.integers(0, vocab, n).tolist())

    def tg(n, depth):
        at_depth(depth)
        for t in rng.integers(0, vocab, n).tolist():
            ll.eval([t])

    rows = []
    for kind, n, depth in tests:
        fn = pp if kind == "pp" else tg
        ll.reset()
        at_depth(depth)
        times = timed(lambda: fn(n, depth), reps)
        rows.append(row("llama.cpp", test_name(kind, n, depth), "t/s", times, n, n_prompt=n if kind == "pp" else 0,
                        n_gen=n if kind == "tg" else 0, n_depth=depth,
                        peer_build=f"llama-cpp-python {llama_cpp.__version__}",
                        peer_settings=f"n_threads={threads} n_batch={n_batch} n_gpu_layers={99 if gpu else 0} "
                                      f"flash_attn={fa}" + "".join(f" {k}={v}" for k, v in kv.items())))
    return rows


def peer_rows(path: str, tests: List[Test], reps: int, device: str, threads: int, n_ctx: int,
              llama_bench: Optional[str] = None, kv_types=("f16", "f16")) -> List[Dict]:
    binary = find_llama_bench(llama_bench)
    if binary:
        return llama_bench_rows(binary, path, tests, reps, device, threads, kv_types)
    return llama_cpp_python_rows(path, tests, reps, device, threads, n_ctx, 512, kv_types)
