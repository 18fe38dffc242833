"""akunu-serve: an OpenAI-compatible HTTP server for one or more models.

Each MODEL is a GGUF path or a named model, optionally as ID=PATH to choose
the id clients send as "model" (default: the file name without .gguf).
Each text-generation model serves up to --parallel requests at once through
continuous batching (their tokens are those each request gets alone); more
wait in arrival order, at most --max-queue of them (then: 429 with a
Retry-After header). With --parallel 1 a model serves one request at a time.
Different models run in parallel. With --models-dir, the models in that
directory load on their first request (and with --idle-unload unload when
unused); POST /v1/messages serves Anthropic's Messages API beside OpenAI's.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional

from .. import __version__
from .common import CliError, add_kv_type_args, add_tensor_parallel_arg, load_model, run


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="akunu-serve", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", metavar="MODEL",
                    help="GGUF file, model directory, named model or Hugging Face repo id, optionally ID=PATH")
    ap.add_argument("--models-dir", metavar="DIR", default=None,
                    help="load the models in DIR (GGUF files and model directories, named without extension) "
                    "on their first request")
    ap.add_argument("--idle-unload", type=float, metavar="SECONDS", default=None,
                    help="unload models no request has used for this long")
    ap.add_argument("--rate-limit-rpm", type=int, metavar="N", default=None,
                    help="requests a minute per API key (default: no limit; more get HTTP 429)")
    ap.add_argument("--rate-limit-tpm", type=int, metavar="N", default=None,
                    help="tokens a minute per API key (default: no limit; more get HTTP 429)")
    ap.add_argument("--max-json-depth", type=int, metavar="N", default=64,
                    help="deepest nesting of a JSON request body (default 64)")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--api-key", default=os.environ.get("AKUNU_API_KEY"),
                    help="require 'Authorization: Bearer KEY' (default: $AKUNU_API_KEY, else no key)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "metal", "auto"])
    ap.add_argument("-c", "--ctx", type=int, default=None, help="context size per model")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("-b", "--batch-size", type=int, default=None, metavar="N",
                    help="tokens per forward pass: prompt tokens of a prefill, and of a batched step decode rows "
                    "plus prompt chunks (default: the device's, 256 on the CPU, 512 on CUDA; at least --parallel)")
    add_tensor_parallel_arg(ap)
    add_kv_type_args(ap)
    ap.add_argument("--max-tokens", type=int, default=4096, help="largest max_tokens a request may ask "
                    "(and the default)")
    ap.add_argument("--max-body-bytes", type=int, default=16 << 20, help="largest request body (default 16 MiB)")
    ap.add_argument("--parallel", type=int, default=None, metavar="N",
                    help="generations each text model serves at once, continuously batched (default: 4 on a "
                    "GPU device, 2 on the CPU; 1 serves one request at a time)")
    ap.add_argument("--kv-budget", type=int, default=None, metavar="TOKENS",
                    help="KV cache of a batched model in tokens, shared by its running requests (default: "
                    "--parallel whole contexts, as far as memory allows); when it runs out the newest request "
                    "pauses and resumes later")
    ap.add_argument("--max-queue", type=int, default=256, metavar="N",
                    help="requests that may wait for a model beyond those it serves; more get HTTP 429 "
                    "(default 256; 0: no limit)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return ap


def model_ids(specs: List[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            path = spec
            base = os.path.basename(spec)
            name = base[:-5] if base.endswith(".gguf") else base
        if not name or not path:
            raise CliError(f"bad model argument '{spec}' (expected PATH or ID=PATH)")
        if name in out:
            raise CliError(f"two models have the id '{name}'; name them with ID=PATH")
        out[name] = path
    return out


def default_parallel(model) -> int:
    """Generations served at once when --parallel is not given: a GPU has the
    throughput to batch more streams than the CPU's cores."""
    return 2 if getattr(model, "device", "cpu") == "cpu" else 4


def start_batching(model, args: argparse.Namespace) -> None:
    """Turns on continuous batching for a text-generation model (not for
    embedding or Whisper models, which the server runs one request at a time)."""
    if getattr(model, "is_whisper", False) or getattr(model, "is_embedding_model", False):
        return
    parallel = args.parallel if args.parallel is not None else default_parallel(model)
    if parallel > 1:
        try:
            model.enable_batching(parallel, kv_tokens=args.kv_budget, max_queue=args.max_queue)
        except MemoryError:
            raise CliError("out of memory for the batched KV cache; try a smaller --kv-budget or --parallel") \
                from None


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        try:
            import uvicorn

            from ..server import ServerLimits, create_app
        except ImportError:
            raise CliError("the server needs FastAPI and uvicorn: pip install 'akunu[server]'") from None
        if not 0 < args.port < 65536:
            raise CliError(f"--port must be 1-65535, got {args.port}")
        if args.max_tokens < 1 or args.max_body_bytes < 1024:
            raise CliError("--max-tokens must be >= 1 and --max-body-bytes >= 1024")
        if args.parallel is not None and args.parallel < 1:
            raise CliError(f"--parallel must be >= 1, got {args.parallel}")
        if args.kv_budget is not None and args.kv_budget < 1:
            raise CliError(f"--kv-budget must be >= 1, got {args.kv_budget}")
        if args.max_queue < 0:
            raise CliError(f"--max-queue must be >= 0, got {args.max_queue}")
        if not args.models and not args.models_dir:
            raise CliError("name at least one MODEL, or --models-dir DIR")
        if args.models_dir is not None and not os.path.isdir(args.models_dir):
            raise CliError(f"--models-dir: '{args.models_dir}' is not a directory")
        if args.idle_unload is not None and args.idle_unload <= 0:
            raise CliError(f"--idle-unload must be > 0 seconds, got {args.idle_unload}")
        for flag in ("rate_limit_rpm", "rate_limit_tpm", "max_json_depth"):
            if getattr(args, flag) is not None and getattr(args, flag) < 1:
                raise CliError(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")

        def loader(path: str):  # a copy of the options per load: loads of two models may overlap
            a = argparse.Namespace(**{**vars(args), "model": path, "speech_ok": True})
            m = load_model(a)
            start_batching(m, a)
            return m

        paths = model_ids(args.models)
        models = {name: loader(path) for name, path in paths.items()}
        if args.host not in ("127.0.0.1", "localhost", "::1") and not args.api_key:
            sys.stderr.write("akunu-serve: warning: listening beyond this machine without --api-key\n")
        app = create_app(models, api_key=args.api_key,
                         limits=ServerLimits(max_body_bytes=args.max_body_bytes, max_tokens=args.max_tokens,
                                             max_queue=args.max_queue),
                         models_dir=args.models_dir, idle_unload=args.idle_unload, loader=loader, model_paths=paths,
                         rate_limit_rpm=args.rate_limit_rpm, rate_limit_tpm=args.rate_limit_tpm,
                         max_json_depth=args.max_json_depth)
        names = ", ".join(models) or "no model yet"
        where = f" (more from {args.models_dir})" if args.models_dir else ""
        sys.stderr.write(f"akunu-serve: {names}{where} on http://{args.host}:{args.port}/v1\n")
        # open streams get 5 s to finish on shutdown, then are cut
        uvicorn.run(app, host=args.host, port=args.port, log_level="info" if args.verbose else "warning",
                    timeout_graceful_shutdown=5)
        return 0

    return run("akunu-serve", body, argv)


if __name__ == "__main__":
    sys.exit(main())
