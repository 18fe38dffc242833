"""bench.serving's load generator against guidellm (an established one) on the
same akunu-serve and the same load shape: concurrent streams, fixed prompt
and output lengths (end-of-turn ignored), rounds alternating between the two
so that a machine's drift shows in both. Output tokens/s, time to first token
and inter-token latency (medians), and the CPU seconds each generator's own
process took (on a machine of few cores they are taken from the server);
the ratio column is ours / guidellm's.

  pip install guidellm        # or in its own environment: --guidellm PATH/TO/bin/guidellm
  python -m bench.serving_check [--model gemma3-270m] [--device cpu] [--clients 4] [--requests 16]
                                [--input 128] [--output 64] [--rounds 2]

guidellm makes its prompts from synthetic text through the model's own
tokenizer (written here as a tokenizer.json folder); ours are random token
ids of the same length.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Dict, List

import numpy as np

from . import common, guidellm_load
from .serving import akunu_cmd, free_port, run_load, serve, stop


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.serving_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--input", type=int, default=128, help="prompt tokens a request")
    ap.add_argument("--output", type=int, default=64, help="output tokens a request")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--guidellm", default=shutil.which("guidellm"), help="the guidellm executable")
    a = ap.parse_args()
    if not a.guidellm:
        sys.exit("guidellm not found: pip install guidellm (or --guidellm PATH)")
    import akunu

    work = tempfile.mkdtemp(prefix="akunu-serving-check-")
    model = akunu.load(a.model, n_ctx=256)  # (for its vocabulary and tokenizer only)
    tokenizer_dir = os.path.join(work, "tokenizer")
    model.tokenizer.save_tokenizer_json(tokenizer_dir)
    vocab = model.config["vocab_size"]
    model.close()
    rng = np.random.default_rng(0)
    prompts = [[int(t) for t in rng.integers(100, vocab - 100, size=a.input)] for _ in range(a.requests)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc, log = serve(akunu_cmd(a.model, port, a.device, a.clients, a.input + a.output + 256, None), port,
                      os.path.join(work, "serve.log"))
    rows: List[Dict] = []
    try:
        run_load(url, prompts[:2], min(a.clients, 2), 8, {"ignore_eos": True})  # warm-up
        for rnd in range(a.rounds):
            cpu0 = time.process_time()
            ours = run_load(url, prompts, a.clients, a.output, {"ignore_eos": True})
            rows.append({"generator": "bench.serving", "round": rnd, **ours, "client_cpu_s": time.process_time() - cpu0})
            g = guidellm_load.run(a.guidellm, url, tokenizer_dir, a.clients, a.requests, a.input, a.output, work)
            rows.append({"generator": "guidellm", "round": rnd, **g})
            print(json.dumps(rows[-2:]), file=sys.stderr, flush=True)
    finally:
        stop(proc, log)
    print(f"- Date / commit: {common.commit()}; {a.model} on {a.device}, {a.clients} streams, "
          f"{a.requests} requests of {a.input} -> {a.output} tokens")
    print(f"- Command: `{common.command_line('bench.serving_check')}`\n")
    print("| round | bench.serving tok/s | guidellm tok/s | ratio | TTFT p50 ms ours / guidellm "
          "| ITL p50 ms ours / guidellm | client CPU s ours / guidellm |")
    print("|---|---|---|---|---|---|---|")
    for rnd in range(a.rounds):
        o, g = rows[2 * rnd], rows[2 * rnd + 1]
        print(f"| {rnd} | {o['tok_s']:.1f} | {g['tok_s']:.1f} | {o['tok_s'] / g['tok_s']:.2f}x | "
              f"{o['ttft_p50_ms']:.0f} / {g['ttft_p50_ms']:.0f} | {o['itl_p50_ms']:.1f} / {g['itl_p50_ms']:.1f} | "
              f"{o['client_cpu_s']:.1f} / {g['client_cpu_s']:.1f} |")
    print(f"\nrows: {common.save_json('serving_check', None, rows)}")


if __name__ == "__main__":
    main()
