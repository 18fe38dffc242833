"""akunu-generate: stream a completion of a prompt from a GGUF model."""

from __future__ import annotations

import argparse
import sys

from .. import AkunuError, load


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-generate", description=__doc__)
    ap.add_argument("model", help="GGUF file, or a named model such as gemma3-270m")
    ap.add_argument("-p", "--prompt", default=None, help="prompt text (default: read stdin)")
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    try:
        model = load(args.model, device=args.device, n_ctx=args.n_ctx)
        sys.stdout.write(prompt)
        pieces = model.generate(prompt, max_tokens=args.max_tokens, temperature=args.temperature,
                                top_k=args.top_k, top_p=args.top_p, seed=args.seed, stream=True)
        for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
    except AkunuError as e:
        print(f"akunu-generate: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
