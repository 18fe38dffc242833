"""Decoding strategies side by side on one model in one run: plain greedy vs
n-gram speculative (repetitive and ordinary text), and sampled vs greedy (the
sampler's cost; on a GPU, --device cuda).

  python -m bench.decoding [MODEL] [--device cpu|cuda] [-n 128] [-r 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import akunu

REPETITIVE = ("Repeat the following list exactly three times, one item per line: apple, banana, cherry, "
              "date, elderberry, fig, grape, honeydew.")
ORDINARY = "Write a short story about a lighthouse keeper who finds a message in a bottle."
CODE = "Write a Python function that prints the numbers from 1 to 20, each with its square and its cube."


def tok_s(model, prompt, n, reps, **kw):
    rates, last = [], None
    for _ in range(reps):
        model.reset()
        t0 = time.perf_counter()
        r = model.generate(prompt, max_tokens=n, **kw)
        dt = time.perf_counter() - t0 - r.stats.prefill_seconds
        rates.append((len(r.tokens) - 1) / dt)
        last = r
    return statistics.mean(rates), statistics.pstdev(rates), last


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.decoding", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="gemma3-270m")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    a = ap.parse_args()
    m = akunu.load(a.model, device=a.device, n_ctx=1024)
    print(f"model {a.model} on {m.device}; {a.n} tokens, mean of {a.r} runs (tok/s, decode only)\n")
    print("| text | greedy | speculative | ratio | accepted drafts | same tokens |")
    print("|---|---|---|---|---|---|")
    for name, text in (("repetitive list", REPETITIVE), ("code", CODE), ("ordinary prose", ORDINARY)):
        ids = m.tokenize(m.apply_chat_template([{"role": "user", "content": text}]), add_bos=False)
        g, gs, gr = tok_s(m, ids, a.n, a.r)
        s, ss, sr = tok_s(m, ids, a.n, a.r, speculative=True)
        print(f"| {name} | {g:.1f} ± {gs:.1f} | {s:.1f} ± {ss:.1f} | {s / g:.2f}x | "
              f"{sr.stats.accepted_tokens}/{sr.stats.draft_tokens} | {gr.tokens == sr.tokens} |")
    ids = m.tokenize(m.apply_chat_template([{"role": "user", "content": ORDINARY}]), add_bos=False)
    ban = {i: -float("inf") for i in m.stop_ids}
    g, gs, _ = tok_s(m, ids, a.n, a.r, logit_bias=ban)
    print(f"\n| decode (stop tokens banned, {a.n} tokens) | tok/s |\n|---|---|")
    print(f"| greedy (argmax, chain) | {g:.1f} ± {gs:.1f} |")
    for name, kw in (("T 0.8 only", dict(temperature=0.8)),
                     ("T 0.8 + top-p 0.95", dict(temperature=0.8, top_p=0.95)),
                     ("T 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat 1.1",
                      dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1))):
        s, ss, _ = tok_s(m, ids, a.n, a.r, seed=1, logit_bias=ban, **kw)
        print(f"| sampled: {name} | {s:.1f} ± {ss:.1f} ({s / g:.2f}x greedy) |")


if __name__ == "__main__":
    main()
