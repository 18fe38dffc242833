"""akunu-profile: where the time of one decode step (or, with --prompt, one
prefill pass) goes, per operation of the dispatch table (each command run to
completion on its own)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from typing import List, Optional

from .common import CliError, add_model_args, load_model, run


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-profile", description=__doc__)
    add_model_args(ap)
    ap.add_argument("--position", type=int, default=128, help="context length the step runs at (default 128)")
    ap.add_argument("-r", "--repetitions", type=int, default=10, help="steps averaged (default 10)")
    ap.add_argument("--prompt", type=int, default=0, metavar="N",
                    help="time one prefill pass of N prompt tokens at --position instead of a decode step")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)

    def body() -> int:
        if args.repetitions < 1:
            raise CliError("-r must be at least 1")
        if args.position < 0:
            raise CliError("--position must be >= 0")
        if args.prompt < 0:
            raise CliError("--prompt must be >= 0")
        if args.ctx is None:
            args.ctx = max(args.position + args.prompt + 2, 256)
        model = load_model(args, quiet=True)
        if args.position + max(args.prompt, 1) >= model.n_ctx:
            raise CliError(f"--position {args.position} and --prompt {args.prompt} do not fit --ctx {model.n_ctx}")
        core = model._core()
        vocab = model.config["vocab_size"]
        # a prompt of varied ids (one id repeated would route every token of
        # a mixture of experts to the same experts)
        prompt = [(7919 * i + 11) % vocab for i in range(args.prompt)]

        def one_step():
            if not args.prompt:
                return core.profile_decode(0)
            core.truncate(args.position)  # each pass at the same position
            return core.profile_prefill(prompt)

        core.truncate(0)
        if args.position:
            core.prefill([1 % vocab] * args.position)
        per_cmd = None
        for _ in range(args.repetitions + 1):  # the first step warms up
            step = one_step()
            if per_cmd is None:
                per_cmd = [[label, 0.0] for label, _ in step]
                continue
            for row, (_, t) in zip(per_cmd, step):
                row[1] += t / args.repetitions
        ops: "OrderedDict[str, List[float]]" = OrderedDict()
        for label, t in per_cmd:
            e = ops.setdefault(label, [0, 0.0])
            e[0] += 1
            e[1] += t
        total = sum(t for _, t in per_cmd)
        if args.json:
            json.dump({"device": model.device, "position": args.position, "prompt": args.prompt,
                       "total_ms": total * 1e3,
                       "ops": [{"op": k, "count": c, "ms": t * 1e3, "share": t / total} for k, (c, t) in ops.items()]},
                      sys.stdout, indent=1)
            sys.stdout.write("\n")
            return 0
        what = f"one prefill pass of {args.prompt} tokens" if args.prompt else "one decode step"
        print(f"{model.name} on {model.device}: {what} at position {args.position}, "
              f"mean of {args.repetitions}, commands run one at a time\n")
        print(f"{'operation':<20} {'count':>6} {'ms':>10} {'share':>7}")
        for k, (c, t) in sorted(ops.items(), key=lambda kv: -kv[1][1]):
            print(f"{k:<20} {c:>6} {t * 1e3:>10.3f} {t / total:>7.1%}")
        tokens = args.prompt or 1
        print(f"{'total':<20} {len(per_cmd):>6} {total * 1e3:>10.3f}  ({tokens / total:.1f} tok/s if run back to back)")
        return 0

    return run("akunu-profile", body, argv)


if __name__ == "__main__":
    sys.exit(main())
