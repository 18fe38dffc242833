"""What every akunu command shares: model and sampling flags, loading with a
progress bar, and errors written for people (one line, non-zero exit, no
traceback unless --verbose)."""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

from .. import __version__
from ..errors import AkunuError


class CliError(Exception):
    """A mistake in how the command was called: message and what to do."""


def add_model_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("model", help="GGUF file, model directory, named model such as gemma3-270m, or Hugging Face "
                    "repo id (owner/repo, owner/repo:Q4_K_M, owner/repo/file.gguf, @REV)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "metal", "auto"],
                    help="backend to run on (default: cpu)")
    ap.add_argument("-c", "--ctx", type=int, default=None, help="context size in tokens (default: the model's, "
                    "at most 4096)")
    ap.add_argument("-t", "--threads", type=int, default=0, help="CPU threads (default: one per physical core this process may run on)")
    ap.add_argument("-b", "--batch-size", type=int, default=None, help="prompt tokens per prefill pass "
                    "(default: the device's, 256 on the CPU, 512 on CUDA)")
    add_tensor_parallel_arg(ap)
    add_kv_type_args(ap)
    ap.add_argument("--verbose", action="store_true", help="show tracebacks and load details")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def add_tensor_parallel_arg(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tp", "--tensor-parallel", dest="tp", type=int, default=1, metavar="N",
                    help="split the model over N devices (tensor parallelism: GPUs 0..N-1 over NCCL with "
                         "--device cuda; default 1)")


def add_kv_type_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--kv-type", default=None, metavar="TYPE",
                    help="KV cache element type: f16 (default), bf16, q8_0 or q4_0; K,V for two types "
                         "(q8_0,f16)")
    ap.add_argument("-ctk", "--cache-type-k", dest="cache_type_k", default=None, metavar="TYPE",
                    help="the K cache's type alone (llama.cpp's -ctk)")
    ap.add_argument("-ctv", "--cache-type-v", dest="cache_type_v", default=None, metavar="TYPE",
                    help="the V cache's type alone (llama.cpp's -ctv)")


def kv_type_of(args: argparse.Namespace):
    """The kv_type argument of akunu.load for --kv-type / -ctk / -ctv (None: F16)."""
    from ..kv_types import parse_kv_type, KV_TYPE_NAMES

    kv = getattr(args, "kv_type", None)
    ctk, ctv = getattr(args, "cache_type_k", None), getattr(args, "cache_type_v", None)
    if kv is None and ctk is None and ctv is None:
        return None
    try:
        k, v = (KV_TYPE_NAMES[c] for c in parse_kv_type(kv))
        if ctk is not None:
            k = KV_TYPE_NAMES[parse_kv_type(ctk)[0]]
        if ctv is not None:
            v = KV_TYPE_NAMES[parse_kv_type(ctv)[0]]
    except AkunuError as e:
        raise CliError(f"{e}") from None
    return (k, v)


def add_sampling_args(ap: argparse.ArgumentParser, temperature: float = 0.0) -> None:
    g = ap.add_argument_group("sampling")
    g.add_argument("--temperature", "--temp", type=float, default=temperature,
                   help=f"0 = greedy (default: {temperature})")
    g.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0 = off)")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (1 = off)")
    g.add_argument("--min-p", type=float, default=0.0, help="drop tokens below min_p x the best (0 = off)")
    g.add_argument("--repeat-penalty", type=float, default=1.0, help="llama.cpp's repeat penalty (1 = off)")
    g.add_argument("--repeat-last-n", type=int, default=64, help="tokens the penalties look back over")
    g.add_argument("--presence-penalty", type=float, default=0.0)
    g.add_argument("--frequency-penalty", type=float, default=0.0)
    g.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    g.add_argument("-n", "--max-tokens", type=int, default=None, help="tokens to generate at most")
    g.add_argument("--ignore-eos", action="store_true", help="never stop at end-of-turn tokens (as llama.cpp)")


def sampling_kwargs(args: argparse.Namespace, model=None) -> Dict[str, Any]:
    kw = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
              repeat_penalty=args.repeat_penalty, penalty_last_n=args.repeat_last_n,
              presence_penalty=args.presence_penalty, frequency_penalty=args.frequency_penalty, seed=args.seed)
    if model is not None and args.ignore_eos:
        kw["logit_bias"] = {i: float("-inf") for i in model.stop_ids}
    return kw


def _available_memory() -> Optional[int]:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _warm_with_progress(path: str, quiet: bool) -> None:
    """Reads the file once (into the page cache, where the engine maps it
    from), drawing a progress bar on a terminal."""
    size = os.path.getsize(path)
    show = not quiet and sys.stderr.isatty() and size > 32 << 20
    done, t0 = 0, time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            chunk = f.read(16 << 20)
            if not chunk:
                break
            done += len(chunk)
            if show:
                frac = done / size
                bar = "#" * int(frac * 30)
                sys.stderr.write(f"\rloading {os.path.basename(path)} [{bar:<30}] {frac:4.0%} "
                                 f"{done / 2**20:.0f}/{size / 2**20:.0f} MiB")
                sys.stderr.flush()
    if show:
        sys.stderr.write(f"\rloaded {os.path.basename(path)} ({size / 2**20:.0f} MiB) in "
                         f"{time.perf_counter() - t0:.1f} s{' ' * 30}\n")


def _model_bytes(path: str) -> int:
    """A GGUF file's size, or a model directory's weights (safetensors, CTranslate2 model.bin)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
               if f.endswith(".safetensors") or f == "model.bin")


def load_model(args: argparse.Namespace, quiet: bool = False):
    from ..model import load
    from ..model_zoo import resolve_model_path

    if args.ctx is not None and args.ctx <= 0:
        raise CliError(f"--ctx must be positive, got {args.ctx}")
    if args.threads < 0:
        raise CliError(f"--threads must be >= 0, got {args.threads}")
    if getattr(args, "batch_size", None) is not None and args.batch_size <= 0:
        raise CliError(f"--batch-size must be positive, got {args.batch_size}")
    if getattr(args, "tp", 1) < 1:
        raise CliError(f"--tp must be at least 1, got {args.tp}")
    path = resolve_model_path(args.model)
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "config.json")):
        raise CliError(f"'{path}' is a directory without config.json; give a .gguf file or a Hugging Face / "
                       f"MLX model directory")
    mem = _available_memory()
    size = _model_bytes(path)
    if mem and size > mem:
        raise CliError(f"the model needs {size / 2**30:.1f} GiB but this machine has {mem / 2**30:.1f} GiB of "
                       f"memory; use a smaller or more quantized model")
    if os.path.isfile(path):
        _warm_with_progress(path, quiet)
    try:
        model = load(path, device=args.device, n_ctx=args.ctx, n_threads=args.threads,
                     chat_template=getattr(args, "chat_template", None), n_batch=getattr(args, "batch_size", None),
                     tensor_parallel=getattr(args, "tp", 1), kv_type=kv_type_of(args))
    except MemoryError:
        raise CliError("out of memory while loading the model; try a smaller --ctx") from None
    if getattr(model, "is_whisper", False) and not getattr(args, "speech_ok", False):
        raise CliError(f"'{args.model}' is a Whisper speech-to-text model: use akunu-transcribe (or akunu-serve)")
    return model


def run(prog: str, main: Callable[[], int], argv_verbose: Optional[List[str]] = None) -> int:
    """Runs `main`, turning failures into one line on stderr and an exit code."""
    verbose = "--verbose" in (sys.argv[1:] if argv_verbose is None else argv_verbose)
    try:
        return main()
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return 130
    except BrokenPipeError:
        return 0
    except (AkunuError, CliError, OSError) as e:
        if verbose:
            traceback.print_exc()
        msg = str(e)
        if isinstance(e, OSError) and not isinstance(e, AkunuError):
            msg = f"{e.strerror or e}: {e.filename}" if getattr(e, "filename", None) else str(e)
        sys.stderr.write(f"{prog}: error: {msg}\n")
        return 1
