"""akunu-complete: plain completion of a prompt, streamed to stdout."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .common import CliError, add_model_args, add_sampling_args, load_model, run, sampling_kwargs


def build_parser(prog: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Complete a prompt with a GGUF model, streaming the text.")
    add_model_args(ap)
    ap.add_argument("-p", "--prompt", default=None, help="prompt text (default: read stdin)")
    ap.add_argument("-f", "--file", default=None, help="read the prompt from a file")
    ap.add_argument("--echo", action="store_true", help="print the prompt before the completion")
    ap.add_argument("--stop", action="append", default=None, help="stop string (may repeat)")
    ap.add_argument("--json-schema", default=None, help="JSON Schema file the output must satisfy ('any': any "
                    "JSON object)")
    ap.add_argument("--grammar", default=None, help="GBNF grammar file the output must match")
    ap.add_argument("--speculative", action="store_true", help="n-gram speculative decoding (greedy only)")
    ap.add_argument("--stats", action="store_true", help="print token counts and speeds to stderr")
    add_sampling_args(ap)
    return ap


def main(argv: Optional[List[str]] = None, prog: str = "akunu-complete") -> int:
    args = build_parser(prog).parse_args(argv)

    def body() -> int:
        if args.prompt is not None and args.file is not None:
            raise CliError("give the prompt with -p or -f, not both")
        if args.file is not None:
            with open(args.file, encoding="utf-8") as f:
                prompt = f.read()
        elif args.prompt is not None:
            prompt = args.prompt
        else:
            prompt = sys.stdin.read()
        if not prompt:
            raise CliError("the prompt is empty (pass -p TEXT, -f FILE, or pipe text to stdin)")
        schema = None
        if args.json_schema is not None:
            if args.json_schema == "any":
                schema = "any"
            else:
                with open(args.json_schema, encoding="utf-8") as f:
                    schema = f.read()
        grammar = None
        if args.grammar is not None:
            with open(args.grammar, encoding="utf-8") as f:
                grammar = f.read()
        model = load_model(args)
        max_tokens = 256 if args.max_tokens is None else args.max_tokens
        stream = model.generate(prompt, max_tokens=max_tokens, stop=args.stop, json_schema=schema,
                                grammar=grammar, speculative=args.speculative, stream=True, **sampling_kwargs(args, model))
        if args.echo:
            sys.stdout.write(prompt)
        for piece in stream:
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
        if args.stats:
            s = stream.result.stats
            sys.stderr.write(f"prompt {s.prompt_tokens} tokens ({s.prefill_tok_s:.1f} tok/s), generated "
                             f"{s.generated_tokens} ({s.decode_tok_s:.1f} tok/s), finish: "
                             f"{stream.result.finish_reason}\n")
        return 0

    return run(prog, body, argv if argv is not None else None)


if __name__ == "__main__":
    sys.exit(main())
