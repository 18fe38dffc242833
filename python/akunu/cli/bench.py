"""akunu-bench: prompt processing (pp) and text generation (tg) speed, in
llama-bench's format (markdown or JSON), so results sit beside llama.cpp's."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from .. import __version__
from .common import CliError, add_model_args, load_model, run


def _ints(text: str) -> List[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    if any(v < 0 for v in vals):
        raise argparse.ArgumentTypeError("values must be >= 0")
    return vals


def _params(model) -> int:
    n = 0
    for t in model._core().tensors:
        k = 1
        for d in t["shape"]:
            k *= d
        n += k
    return n


def _model_type(model) -> str:
    c = model.config
    size = _params(model)
    label = f"{size / 1e9:.1f}B" if size >= 1e9 else f"{size / 1e6:.0f}M"
    ftype = {0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
             11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
             18: "Q6_K", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16"}.get(model.metadata.get("general.file_type"), "?")
    return f"{c['architecture']} {label} {ftype}"


def bench_pp(model, n: int, rng) -> float:
    core = model._core()
    toks = rng.integers(0, model.config["vocab_size"], n).tolist()
    core.truncate(0)
    t0 = time.perf_counter()
    core.prefill(toks)
    return time.perf_counter() - t0


def bench_tg(model, n: int, rng) -> float:
    """n tokens one at a time from an empty context, as llama-bench's tg."""
    core = model._core()
    core.truncate(0)
    start = int(rng.integers(0, model.config["vocab_size"]))
    t0 = time.perf_counter()
    first = core.prefill([start])
    if n > 1:
        core.decode_greedy(first, n - 1, [])
    return time.perf_counter() - t0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-bench", description=__doc__)
    add_model_args(ap)
    ap.add_argument("-p", "--n-prompt", type=_ints, default=[512], help="prompt lengths (default 512)")
    ap.add_argument("-n", "--n-gen", type=_ints, default=[128], help="generation lengths (default 128)")
    ap.add_argument("-r", "--repetitions", type=int, default=5, help="runs per test (default 5)")
    ap.add_argument("-o", "--output", choices=["md", "json", "jsonl"], default="md")
    args = ap.parse_args(argv)

    def body() -> int:
        if args.repetitions < 1:
            raise CliError("-r must be at least 1")
        tests = [("pp", n) for n in args.n_prompt if n > 0] + [("tg", n) for n in args.n_gen if n > 0]
        need = max([n for _, n in tests] + [1]) + 1
        if args.ctx is None:
            args.ctx = max(need, 512)
        model = load_model(args, quiet=args.output != "md")
        if need > model.n_ctx:
            raise CliError(f"a test needs {need} tokens of context but --ctx is {model.n_ctx}")
        rng = np.random.default_rng(0)
        size = sum(t["n_bytes"] for t in model._core().tensors)
        params = _params(model)
        threads = args.threads or os.cpu_count() or 1
        rows: List[Dict[str, Any]] = []
        for kind, n in tests:
            fn = bench_pp if kind == "pp" else bench_tg
            fn(model, n, rng)  # warm-up, as llama-bench
            times = [fn(model, n, rng) for _ in range(args.repetitions)]
            ts = [n / t for t in times]
            rows.append({
                "build_commit": "akunu", "build_number": 0, "akunu_version": __version__,
                "backends": model.device.upper(), "cpu_info": _cpu_name(), "gpu_info": "",
                "model_filename": model.path, "model_type": _model_type(model), "model_size": size,
                "model_n_params": params, "n_threads": threads, "n_prompt": n if kind == "pp" else 0,
                "n_gen": n if kind == "tg" else 0, "test_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "avg_ns": int(statistics.mean(times) * 1e9),
                "stddev_ns": int(statistics.stdev(times) * 1e9) if len(times) > 1 else 0,
                "avg_ts": statistics.mean(ts), "stddev_ts": statistics.stdev(ts) if len(ts) > 1 else 0.0,
                "samples_ns": [int(t * 1e9) for t in times], "samples_ts": ts, "test": f"{kind}{n}",
            })
        if args.output == "json":
            json.dump(rows, sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif args.output == "jsonl":
            for r in rows:
                sys.stdout.write(json.dumps(r) + "\n")
        else:
            print("| model                          |       size |     params | backend    | threads |"
                  "          test |                  t/s |")
            print("| ------------------------------ | ---------: | ---------: | ---------- | ------: |"
                  " ------------: | -------------------: |")
            for r in rows:
                print(f"| {r['model_type']:<30} | {r['model_size'] / 2**30:6.2f} GiB | {r['model_n_params'] / 1e9:8.2f} B"
                      f" | {r['backends']:<10} | {r['n_threads']:>7} | {r['test']:>13} |"
                      f" {r['avg_ts']:>11.2f} ± {r['stddev_ts']:<6.2f} |")
            print(f"\nbuild: akunu {__version__}, device: {model.device} ({_cpu_name() if model.device == 'cpu' else ''})")
        return 0

    return run("akunu-bench", body, argv)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
