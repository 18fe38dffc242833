"""Python threads sharing one loaded model: aggregate output tok/s of N
threads calling ``generate`` at once on a model loaded as by default
(overlapping generations batched together; ``--parallel N`` loads with
parallel=N instead), against the same calls made one after another (each
alone, on the single-stream path).

  python -m bench.threads MODEL [--device cpu] [--threads 1,4,16] [--max-tokens 64] [--prompt-tokens 128]
                          [--parallel N]

MODEL: a GGUF file or a named model (gemma3-270m). Each thread sends one
request of --prompt-tokens random token ids (seed 0) with greedy decoding.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

import akunu


def prompts(vocab: int, n: int, length: int):
    rng = np.random.default_rng(0)
    return [[int(t) for t in rng.integers(100, vocab - 100, size=length)] for _ in range(n)]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", default="1,4,16")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("-c", "--ctx", type=int, default=1024)
    ap.add_argument("--parallel", type=int, default=None, help="load with parallel=N (default: as akunu.load)")
    a = ap.parse_args()
    print(f"| threads | one after another tok/s | threads at once tok/s | ratio |\n|---|---|---|---|")
    for n in (int(x) for x in a.threads.split(",")):
        solo = akunu.load(a.model, device=a.device, n_ctx=a.ctx, parallel=1)
        ps = prompts(solo.config["vocab_size"], n, a.prompt_tokens)
        warm = [p[::-1][:32] for p in ps]  # not the prompts' own blocks (no prefix hits later)
        solo.generate(warm[0], max_tokens=8)
        out = []

        def sequential():
            for p in ps:
                solo.reset()
                out.append(len(solo.generate(p, max_tokens=a.max_tokens).tokens))

        t_seq = timed(sequential)
        seq_tokens = sum(out)
        solo.close()
        m = akunu.load(a.model, device=a.device, n_ctx=a.ctx, parallel=a.parallel)
        m.generate(warm[0], max_tokens=8)  # both paths warm (CUDA graphs captured)
        m.generate_batch(warm, max_tokens=8)
        m.reset()
        got = [0] * n

        def one(i):
            got[i] = len(m.generate(ps[i], max_tokens=a.max_tokens).tokens)

        def together():
            ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        t_par = timed(together)
        m.close()
        r_seq, r_par = seq_tokens / t_seq, sum(got) / t_par
        print(f"| {n} | {r_seq:.1f} | {r_par:.1f} | {r_par / r_seq:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
