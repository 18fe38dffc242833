"""CPU decode attention over a long cache: milliseconds of the `attention`
kernel for one token at a depth, by thread count (best of -r runs, threads
already awake), at the layer shapes of Gemma 3 270M (one KV head of 256;
global and 512-window layers), Qwen3-0.6B and Llama-3.1-8B. With
--baseline DIR (a folder holding another build's `akunu` package, such as
the parent commit's) that build is timed in the same run beside this one.

  python -m bench.cpu_attention [--threads 2,4,8,16] [-r 50] [--baseline DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List

from . import common

# name: (query heads, KV heads, head_dim, depth, window)
SHAPES = {
    "Gemma 3 270M global, d4096": (4, 1, 256, 4096, 0),
    "Gemma 3 270M global, d32768": (4, 1, 256, 32768, 0),
    "Gemma 3 270M window 512, d32768": (4, 1, 256, 32768, 512),
    "Qwen3-0.6B, d4096": (16, 8, 128, 4096, 0),
    "Llama-3.1-8B, d32768": (32, 8, 128, 32768, 0),
}


def measure(threads: List[int], reps: int) -> Dict[str, Dict[int, float]]:
    """ms per call of the attention kernel of the akunu on sys.path."""
    import numpy as np
    from akunu import _testing
    from tests.fixtures import kernel_params as kp

    out: Dict[str, Dict[int, float]] = {}
    for name, (H, KV, hd, depth, window) in SHAPES.items():
        rng = np.random.default_rng(0)
        max_ctx = depth + 9
        q = rng.standard_normal((1, H * hd)).astype(np.float32)
        kc = rng.standard_normal((max_ctx, KV * hd)).astype(np.float16).view(np.uint16)
        vc = rng.standard_normal((max_ctx, KV * hd)).astype(np.float16).view(np.uint16)
        y = np.zeros((1, H * hd), np.float32)
        params = kp.attention(H, KV, hd, 1, depth, window, H * hd, H * hd, 1 / np.sqrt(hd), max_ctx)
        out[name] = {}
        for t in threads:
            for _ in range(5):
                _testing.run_kernel("attention", [q, kc, vc, y], params, n_threads=t)
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                _testing.run_kernel("attention", [q, kc, vc, y], params, n_threads=t)
                best = min(best, time.perf_counter() - t0)
            out[name][t] = best * 1e3
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform
        return platform.processor() or platform.machine()


def run_build(path: str, threads: List[int], reps: int) -> Dict[str, Dict[int, float]]:
    """measure() in a process importing akunu from `path` first."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([path, common.ROOT, os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "bench.cpu_attention", "--worker", "--threads", ",".join(map(str, threads)),
           "-r", str(reps)]
    res = subprocess.run(cmd, env=env, cwd=common.ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"the build in {path} failed:\n{res.stderr.strip()[-2000:]}")
    return {k: {int(t): v for t, v in d.items()} for k, d in json.loads(res.stdout).items()}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.cpu_attention", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="2,4,8,16")
    ap.add_argument("-r", "--repetitions", type=int, default=50)
    ap.add_argument("--baseline", default=None, help="folder holding another build's akunu package")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if a.worker:
        json.dump(measure(threads, a.repetitions), sys.stdout)
        return
    ours = measure(threads, a.repetitions)
    base = run_build(a.baseline, threads, a.repetitions) if a.baseline else None
    print(common.header([{"cpu_info": cpu_name()}], common.command_line("bench.cpu_attention")))
    print()
    cols = " | ".join(f"{t} threads" for t in threads)
    print(f"| shape | build | {cols} |")
    print("|---|---|" + "---|" * len(threads))
    for name in SHAPES:
        if base:
            print(f"| {name} | baseline | " + " | ".join(f"{base[name][t]:.3f}" for t in threads) + " |")
        print(f"| {name} | this | " + " | ".join(f"{ours[name][t]:.3f}" for t in threads) + " |")
    print(f"\nrows: {common.save_json('cpu_attention', a.json, {'this': ours, 'baseline': base})}")


if __name__ == "__main__":
    main()
