"""Where the time of one continuous-batching decode step goes.

  python -m tools.profile_batch_step MODEL [--device cuda] [--rows 1,4,16] [--context 256]

For each row count: that many sequences are prefilled with --context random
tokens, then one decode pass of the batch table (every row a generated
token) is timed as the scheduler runs it (graph replay on CUDA: the mean of
20 steps) and once command by command (the device's own timings), summed
per command label and per layer-independent kind. MODEL: a GGUF file, a
named model or a Hugging Face directory.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

import akunu


def profile(model, rows: int, context: int, steps: int):
    core = model._core()
    engine = core.enable_batching(max(rows, 2), 0, 16)
    vocab = model.config["vocab_size"]
    rng = np.random.default_rng(0)
    seqs = []
    for _ in range(rows):
        prompt = [int(t) for t in rng.integers(100, vocab - 100, size=context)]
        seq, cached = engine.open(prompt)
        for i in range(cached, len(prompt), engine.max_pass_tokens):
            chunk = prompt[i:i + engine.max_pass_tokens]
            engine.step([(seq, chunk, i + len(chunk) == len(prompt), False)])
        seqs.append(seq)
    entries = [(seq, [int(rng.integers(100, vocab - 100))], True, True) for seq in seqs]
    engine.step(entries)  # the first pass of a size captures its graph on CUDA
    engine.step(entries)
    t0 = time.perf_counter()
    for _ in range(steps):
        engine.step(entries)
    step_ms = (time.perf_counter() - t0) / steps * 1e3
    _, per_command = engine.profile_step(entries)
    by_label = collections.OrderedDict()
    for label, seconds in per_command:
        count, total = by_label.get(label, (0, 0.0))
        by_label[label] = (count + 1, total + seconds)
    for seq in seqs:
        engine.close(seq)
    return step_ms, len(per_command), by_label


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.profile_batch_step", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", default="1,4,16")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("-c", "--ctx", type=int, default=4096)
    a = ap.parse_args()
    model = akunu.load(a.model, device=a.device, n_ctx=a.ctx)
    for rows in (int(x) for x in a.rows.split(",")):
        step_ms, n_cmds, by_label = profile(model, rows, a.context, a.steps)
        total = sum(t for _, t in by_label.values())
        print(f"\n{rows} rows: {step_ms:.3f} ms a step (replayed), {n_cmds} commands, "
              f"{total * 1e3:.3f} ms run one by one")
        print("| command | count | ms | share |\n|---|---:|---:|---:|")
        for label, (count, seconds) in sorted(by_label.items(), key=lambda kv: -kv[1][1]):
            print(f"| {label} | {count} | {seconds * 1e3:.3f} | {seconds / total:.0%} |")
    model.close()


if __name__ == "__main__":
    main()
