"""akunu-pull: fetch a model into the Hugging Face cache without loading it, for
containers and air-gapped copies (a later load with HF_HUB_OFFLINE=1 finds it there).
Prints the local path of each model on stdout."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from .. import __version__, hub
from ..model_zoo import is_named_model, resolve_model_path
from .common import run


def _size(n: Optional[int]) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _cached(where: Optional[str]) -> str:
    return {"hf": "cached", "llama.cpp": "in llama.cpp's cache"}.get(where or "", "to fetch")


def describe_plan(p: hub.Plan, out=None) -> None:
    out = out or sys.stdout
    what = f"GGUF {p.quant}" + (f", {len(p.weights)} splits" if len(p.weights) > 1 else "") if p.kind == "gguf" \
        else {"safetensors": "Hugging Face / MLX directory", "ctranslate2": "CTranslate2 directory"}[p.kind]
    commit = f", commit {p.commit[:12]}" if p.commit else ""
    out.write(f"{p.spec} ({what}; revision {p.spec.revision or 'main'}{commit}"
              f"{'' if p.online else '; from the cache: ' + p.note})\n")
    for name in p.files:
        f = p.repo_files[name]
        out.write(f"  {name:<56} {_size(f.size):>10}  {_cached(f.where)}\n")
    n = len(p.to_download)
    out.write(f"  to fetch: {_size(p.download_bytes)} in {n} file{'' if n == 1 else 's'}, into {hub.hf_cache_dir()}\n")


def model_path(p: hub.Plan, paths) -> str:
    return paths[p.weights[0]] if p.kind == "gguf" else os.path.dirname(paths["config.json"])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-pull", description=__doc__)
    ap.add_argument("models", nargs="+", metavar="MODEL",
                    help="owner/repo (a safetensors / MLX directory, or a GGUF repo's Q4_K_M), owner/repo:QUANT, "
                         "owner/repo/FILE.gguf, each with an optional @REV; or a named model such as gemma3-270m")
    ap.add_argument("--revision", default=None, help="branch, tag or commit of the repo (as @REV)")
    ap.add_argument("--dry-run", action="store_true", help="list the files and what is already cached; fetch "
                    "nothing")
    ap.add_argument("--verbose", action="store_true", help="show tracebacks")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = ap.parse_args(argv)

    def body() -> int:
        for name in args.models:
            spec = None if os.path.exists(name) or is_named_model(name) else hub.parse_repo_id(name, args.revision)
            if spec is None:  # a path, or a model from PyPI: nothing to fetch from the hub
                print(resolve_model_path(name, args.revision), flush=True)
                continue
            p = hub.plan(spec)
            if args.dry_run:
                describe_plan(p)
                continue
            need = p.download_bytes
            paths = hub.fetch(p)
            splits = len(p.weights) if p.kind == "gguf" and len(p.weights) > 1 else 0
            n = len(p.files)
            sys.stderr.write(f"akunu-pull: {spec}: {n} file{'' if n == 1 else 's'}, {_size(need)} fetched"
                             f"{'' if p.online else ' (from the cache: ' + p.note + ')'}"
                             f"{f'; {splits} splits, joined when loaded' if splits else ''}\n")
            print(model_path(p, paths), flush=True)
        return 0

    return run("akunu-pull", body, argv)


if __name__ == "__main__":
    sys.exit(main())
