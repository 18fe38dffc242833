"""Where the time of one continuous-batching decode step (or prompt pass) goes.

  python -m tools.profile_batch_step MODEL [--device cuda] [--rows 1,4,16] [--context 256]
  python -m tools.profile_batch_step MODEL --prompt [--rows 64,512] [--context 1536] [-b 2048]

For each row count: that many sequences are prefilled with --context random
tokens, then one decode pass of the batch table (every row a generated
token) is timed as the scheduler runs it (graph replay on CUDA: the mean of
20 steps) and once command by command (the device's own timings), summed
per command label and per layer-independent kind. With --prompt: one pass
of that many prompt rows of a sequence whose first --context tokens are
cached (each timed pass a fresh sequence sharing those blocks), timed as
run (the mean of --steps passes) and command by command. MODEL: a GGUF
file, a named model or a Hugging Face directory.
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
    by_label = sum_by_label(per_command)
    for seq in seqs:
        engine.close(seq)
    return step_ms, len(per_command), by_label


def sum_by_label(per_command):
    by_label = collections.OrderedDict()
    for label, seconds in per_command:
        count, total = by_label.get(label, (0, 0.0))
        by_label[label] = (count + 1, total + seconds)
    return by_label


def profile_prompt(model, rows: int, context: int, steps: int):
    """One pass of `rows` prompt rows after `context` cached tokens of the same sequence."""
    engine = model._core().enable_batching(2, 0, 16)
    if rows > engine.max_pass_tokens:
        raise SystemExit(f"--rows {rows}: a pass takes at most {engine.max_pass_tokens} tokens")
    vocab = model.config["vocab_size"]
    rng = np.random.default_rng(0)
    head = [int(t) for t in rng.integers(100, vocab - 100, size=context)]

    def pass_after_head(run):
        prompt = head + [int(t) for t in rng.integers(100, vocab - 100, size=rows)]
        seq, cached = engine.open(prompt)
        for i in range(cached, context, engine.max_pass_tokens):  # (the first time only: later ones share it)
            engine.step([(seq, prompt[i:min(context, i + engine.max_pass_tokens)], False, False)])
        out = run([(seq, prompt[context:], True, False)])
        engine.close(seq)
        return out

    pass_after_head(engine.step)  # warm: the head's blocks cached, scratch grown
    t0 = time.perf_counter()
    for _ in range(steps):
        pass_after_head(engine.step)
    pass_ms = (time.perf_counter() - t0) / steps * 1e3
    _, per_command = pass_after_head(engine.profile_step)
    return pass_ms, len(per_command), sum_by_label(per_command)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.profile_batch_step", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", default="1,4,16")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("-c", "--ctx", type=int, default=4096)
    ap.add_argument("--prompt", action="store_true", help="profile a pass of prompt rows instead of decode rows")
    ap.add_argument("-b", "--batch-size", type=int, default=None, help="tokens a pass takes at most (default: "
                    "the device's)")
    a = ap.parse_args()
    model = akunu.load(a.model, device=a.device, n_ctx=a.ctx, n_batch=a.batch_size)
    for rows in (int(x) for x in a.rows.split(",")):
        if a.prompt:
            step_ms, n_cmds, by_label = profile_prompt(model, rows, a.context, a.steps)
            what = f"prompt rows after {a.context} cached tokens: {step_ms:.3f} ms a pass"
        else:
            step_ms, n_cmds, by_label = profile(model, rows, a.context, a.steps)
            what = f"rows: {step_ms:.3f} ms a step (replayed)"
        total = sum(t for _, t in by_label.values())
        print(f"\n{rows} {what}, {n_cmds} commands, {total * 1e3:.3f} ms run one by one")
        print("| command | count | ms | share |\n|---|---:|---:|---:|")
        for label, (count, seconds) in sorted(by_label.items(), key=lambda kv: -kv[1][1]):
            print(f"| {label} | {count} | {seconds * 1e3:.3f} | {seconds / total:.0%} |")
    model.close()


if __name__ == "__main__":
    main()
