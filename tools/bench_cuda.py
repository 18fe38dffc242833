"""Side-by-side decode/prefill benchmark on a GPU machine: akunu (CUDA) and
llama.cpp's llama-bench (CUDA, -ngl 99 -fa 1) on the same GGUF files:
random-weight models at real shapes, quantized by llama.cpp's llama-quantize.

  python tools/bench_cuda.py make-models DIR           # F16 files at the shapes
  python tools/bench_cuda.py quantize DIR LLAMA_BIN    # Q4_0, Q8_0, Q4_K_M next to them
  python tools/bench_cuda.py bench DIR [LLAMA_BIN] > results.md
  python tools/bench_cuda.py bandwidth DIR            # weight bytes per token, device copy bandwidth
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import random_gguf

SHAPES = {
    "qwen3-0.6b": ("qwen3", dict(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, ffn_dim=3072,
                                 vocab=151936, ctx=40960)),
    "llama-3.2-1b": ("llama", dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64, ffn_dim=8192,
                                   vocab=128256, ctx=131072)),
    "llama-3.1-8b": ("llama", dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, ffn_dim=14336,
                                   vocab=128256, ctx=131072)),
}
QUANTS = ["Q4_0", "Q8_0", "Q4_K_M"]


def make_models(d: str, names) -> None:
    os.makedirs(d, exist_ok=True)
    for name in names:
        arch, shape = SHAPES[name]
        path = os.path.join(d, f"{name}-F16.gguf")
        if not os.path.exists(path):
            random_gguf.write_model(path, arch, "F16", seed=1, shape=random_gguf.Shape(**shape))
            print("wrote", path, flush=True)


def quantize(d: str, bin_dir: str, names) -> None:
    for name in names:
        src = os.path.join(d, f"{name}-F16.gguf")
        for q in QUANTS:
            dst = os.path.join(d, f"{name}-{q}.gguf")
            if not os.path.exists(dst):
                subprocess.run([os.path.join(bin_dir, "llama-quantize"), src, dst, q], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                print("quantized", dst, flush=True)


def akunu_bench(path: str, reps: int):
    out = subprocess.run([sys.executable, "-m", "akunu.cli.bench", path, "--device", "cuda", "-p", "512", "-n", "128",
                          "-r", str(reps), "-o", "json"], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-300:]}
    return {r["test"]: (r["avg_ts"], r["stddev_ts"]) for r in json.loads(out.stdout)}


def llama_bench(path: str, bin_dir: str, reps: int, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    out = subprocess.run([os.path.join(bin_dir, "llama-bench"), "-m", path, "-ngl", "99", "-fa", "1", "-p", "512",
                          "-n", "128", "-r", str(reps), "-o", "json"], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-300:]}
    res = {}
    for r in json.loads(out.stdout):
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        res[test] = (r["avg_ts"], r["stddev_ts"])
    return res


def bench(d: str, bin_dir, names, reps: int = 3) -> None:
    print("| model | format | akunu pp512 | llama.cpp pp512 | ratio | akunu tg128 | llama.cpp tg128 | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for q in ["F16"] + QUANTS:
            path = os.path.join(d, f"{name}-{q}.gguf")
            if not os.path.exists(path):
                continue
            a = akunu_bench(path, reps)
            ll = {}
            if bin_dir:
                ll = llama_bench(path, bin_dir, reps)
                alt = llama_bench(path, bin_dir, reps, {"GGML_CUDA_GRAPH_OPT": "1"})
                for k in ("pp512", "tg128"):  # the peer's better setting
                    if k in alt and (k not in ll or alt[k][0] > ll[k][0]):
                        ll[k] = alt[k]

            def cell(r, k):
                return f"{r[k][0]:.1f} ± {r[k][1]:.1f}" if k in r else r.get("error", "-")[:60]

            def ratio(k):
                return f"{a[k][0] / ll[k][0]:.2f}x" if k in a and k in ll else "-"

            print(f"| {name} | {q} | {cell(a, 'pp512')} | {cell(ll, 'pp512')} | {ratio('pp512')} | "
                  f"{cell(a, 'tg128')} | {cell(ll, 'tg128')} | {ratio('tg128')} |", flush=True)


def weight_bytes_per_token(path: str) -> int:
    """Bytes of weights one decode step reads: every tensor but the token
    embedding (one row of it), which is also the output head when no
    output.weight exists."""
    import gguf
    r = gguf.GGUFReader(path)
    sizes = {t.name: int(t.n_bytes) for t in r.tensors}
    emb = sizes.pop("token_embd.weight", 0)
    return sum(sizes.values()) + (emb if "output.weight" not in sizes else 0)


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written), best of 10 copies of 1 GiB."""
    import torch
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(10):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        b.copy_(a)
        t1.record()
        torch.cuda.synchronize()
        best = min(best, t0.elapsed_time(t1) / 1e3)
    return 2 * a.numel() / best / 1e9


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    names = os.environ.get("SHAPES", "qwen3-0.6b,llama-3.2-1b").split(",")
    if cmd == "make-models":
        make_models(d, names)
    elif cmd == "quantize":
        quantize(d, sys.argv[3], names)
    elif cmd == "bandwidth":
        print(f"device copy bandwidth: {copy_bandwidth():.0f} GB/s (read + write)")
        for name in names:
            for q in ["F16"] + QUANTS:
                path = os.path.join(d, f"{name}-{q}.gguf")
                if os.path.exists(path):
                    print(f"{name} {q}: {weight_bytes_per_token(path) / 1e9:.3f} GB of weights per token")
    elif cmd == "bench":
        bench(d, sys.argv[3] if len(sys.argv) > 3 else None, names)
