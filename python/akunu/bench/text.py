"""Prompt processing (ppN) and text generation (tgN), as llama-bench defines
them, for akunu and for llama.cpp on the same GGUF file.

- ppN: N random tokens prefilled from an empty context.
- tgN: N tokens generated one at a time from an empty context (the first
  token's prefill included, as llama-bench counts it).

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

Test = Tuple[str, int]  # ("pp", 512) or ("tg", 128)


def bench_pp(core, n: int, rng, vocab: int) -> None:
    toks = rng.integers(0, vocab, n).tolist()
    core.truncate(0)
    core.prefill(toks)


def bench_tg(core, n: int, rng, vocab: int) -> None:
    core.truncate(0)
    first = core.prefill([int(rng.integers(0, vocab))])
    if n > 1:
        core.decode_greedy(first, n - 1, [])


def akunu_rows(model, tests: List[Test], reps: int) -> List[Dict]:
    core, vocab = model._core(), model.config["vocab_size"]
    rng = np.random.default_rng(0)
    rows = []
    for kind, n in tests:
        fn = bench_pp if kind == "pp" else bench_tg
        times = timed(lambda: fn(core, n, rng, vocab), reps)  # one warm-up run first, as llama-bench
        rows.append(row("akunu", f"{kind}{n}", "t/s", times, n, n_prompt=n if kind == "pp" else 0,
                        n_gen=n if kind == "tg" else 0))
    return rows


def find_llama_bench(path: Optional[str]) -> Optional[str]:
    """The llama-bench binary: the path given (a file, or a folder holding it), else one on PATH."""
    if path:
        cand = os.path.join(path, "llama-bench") if os.path.isdir(path) else path
        if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
            raise PeerMissing(f"--llama-bench {path}: no llama-bench binary there")
        return cand
    return shutil.which("llama-bench")


def llama_bench_rows(binary: str, path: str, tests: List[Test], reps: int, device: str, threads: int) -> List[Dict]:
    """llama-bench's own measurement; on a GPU the better of its default and GGML_CUDA_GRAPH_OPT=1 per test."""
    best: Dict[str, Dict] = {}
    envs = [{}, {"GGML_CUDA_GRAPH_OPT": "1"}] if device == "cuda" else [{}]
    for env in envs:
        for kind, n in tests:
            cmd = [binary, "-m", path, "-r", str(reps), "-o", "json", "-t", str(threads),
                   "-p", str(n if kind == "pp" else 0), "-n", str(n if kind == "tg" else 0)]
            cmd += ["-ngl", "99", "-fa", "1"] if device == "cuda" else ["-ngl", "0"]
            out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
            if out.returncode != 0:
                raise PeerMissing(f"llama-bench failed ({' '.join(cmd)}): {out.stderr.strip()[-400:]}")
            for r in json.loads(out.stdout):
                if r["n_prompt"] and r["n_gen"]:
                    continue
                test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
                got = dict(engine="llama.cpp", test=test, unit="t/s", avg_ts=r["avg_ts"], stddev_ts=r["stddev_ts"],
                           avg_ns=r["avg_ns"], samples_ts=r.get("samples_ts", []),
                           samples_ns=r.get("samples_ns", []), n_prompt=r["n_prompt"], n_gen=r["n_gen"],
                           peer_build=f"llama-bench {r.get('build_commit', '?')}",
                           peer_settings=" ".join(["-t", str(threads), "-r", str(reps)] + cmd[cmd.index("-ngl"):])
                           + "".join(f" {k}={v}" for k, v in env.items()))
                if test not in best or got["avg_ts"] > best[test]["avg_ts"]:
                    best[test] = got
    return [best[f"{k}{n}"] for k, n in tests if f"{k}{n}" in best]


def llama_cpp_python_rows(path: str, tests: List[Test], reps: int, device: str, threads: int, n_ctx: int,
                          n_batch: int) -> List[Dict]:
    """llama.cpp through llama-cpp-python, timed as akunu is (same tests, warm-up, random tokens)."""
    try:
        import llama_cpp
    except ImportError as e:
        raise PeerMissing(
            f"--compare llama.cpp needs llama-bench (--llama-bench PATH, or on PATH) or llama-cpp-python ({e}): "
            "pip install llama-cpp-python (on CPUs where llama.cpp's native build fails, with "
            "CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON\")") from None
    gpu = device == "cuda"
    ll = llama_cpp.Llama(path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=threads,
                         n_threads_batch=threads, n_gpu_layers=99 if gpu else 0, flash_attn=gpu, verbose=False)
    vocab = ll.n_vocab()
    rng = np.random.default_rng(0)

    def pp(n):
        ll.reset()
        ll.eval(rng.integers(0, vocab, n).tolist())

    def tg(n):
        ll.reset()
        for t in rng.integers(0, vocab, n).tolist():
            ll.eval([t])

    rows = []
    for kind, n in tests:
        fn = pp if kind == "pp" else tg
        times = timed(lambda: fn(n), reps)
        rows.append(row("llama.cpp", f"{kind}{n}", "t/s", times, n, n_prompt=n if kind == "pp" else 0,
                        n_gen=n if kind == "tg" else 0, peer_build=f"llama-cpp-python {llama_cpp.__version__}",
                        peer_settings=f"n_threads={threads} n_batch={n_batch} n_gpu_layers={99 if gpu else 0} "
                                      f"flash_attn={gpu}"))
    return rows


def peer_rows(path: str, tests: List[Test], reps: int, device: str, threads: int, n_ctx: int,
              llama_bench: Optional[str] = None) -> List[Dict]:
    binary = find_llama_bench(llama_bench)
    if binary:
        return llama_bench_rows(binary, path, tests, reps, device, threads)
    return llama_cpp_python_rows(path, tests, reps, device, threads, n_ctx, 512)
