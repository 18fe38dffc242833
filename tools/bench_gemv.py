"""CPU GEMV throughput per weight format: GB/s of weights read for a
4096 x 14336 matrix (rows x columns: an 8B model's FFN down projection)
against this machine's measured memory bandwidth.

Usage: python tools/bench_gemv.py [--threads 2] [--reps 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import kernel_params as kp  # noqa: E402
from quant_samples import FORMATS, random_matrix  # noqa: E402

from akunu import _core  # noqa: E402

NAMES = {"F32": "f32", "F16": "f16", "BF16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0", "Q5_0": "q5_0",
         "Q4_K": "q4_k", "Q6_K": "q6_k", "Q4_1": "q4_1", "Q5_1": "q5_1", "Q2_K": "q2_k", "Q3_K": "q3_k",
         "Q5_K": "q5_k", "IQ4_NL": "iq4_nl", "IQ4_XS": "iq4_xs"}


def memory_bandwidth(n_bytes: int = 1 << 29, reps: int = 5) -> float:
    """Copy bandwidth (read + write bytes per second) of a large buffer, best of reps."""
    a = np.ones(n_bytes // 4, np.float32)
    b = np.empty_like(a)
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(b, a)
        best = max(best, 2 * n_bytes / (time.perf_counter() - t))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    rows, cols = 4096, 14336
    bw = memory_bandwidth()
    print(f"memory copy bandwidth: {bw / 1e9:.1f} GB/s (read + write)")
    print("| format | weight MB | ms / GEMV | GB/s of weights | % of copy bandwidth |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    for qtype in FORMATS:
        raw, _ = random_matrix(qtype, rows, cols, rng)
        y = np.zeros((1, rows), np.float32)
        params = kp.matmul(rows, cols, 1, int(qtype), cols, rows)
        name = f"gemv_{NAMES[qtype.name]}"
        _core._run_cpu_kernel(name, [raw, x, y], params, args.threads)
        best = float("inf")
        for _ in range(args.reps):
            t = time.perf_counter()
            _core._run_cpu_kernel(name, [raw, x, y], params, args.threads)
            best = min(best, time.perf_counter() - t)
        gbs = raw.nbytes / best / 1e9
        print(f"| {qtype.name} | {raw.nbytes / 1e6:.1f} | {best * 1e3:.2f} | {gbs:.1f} | {100 * gbs * 1e9 / bw:.0f}% |",
              flush=True)
        del raw


if __name__ == "__main__":
    main()
