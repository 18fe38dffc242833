"""akunu-inspect: what is inside a GGUF file or model directory (no weights are
loaded); for a Hugging Face repo id, what the repo holds, what is cached here and
which files the name loads (nothing is downloaded but a small index file)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Any, Dict, List, Optional

from .. import __version__, _core, hub
from ..model_zoo import is_named_model, resolve_model_path
from .common import CliError, _model_bytes, run


def _short(v: Any, limit: int = 80) -> str:
    if isinstance(v, list):
        head = ", ".join(_short(x, 20) for x in v[:4])
        return f"[{head}{', ...' if len(v) > 4 else ''}] ({len(v)} items)"
    s = repr(v) if isinstance(v, str) else str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


def summarize(info: Dict[str, Any]) -> Dict[str, Any]:
    md = info["metadata"]
    arch = md.get("general.architecture", "?")
    p = f"{arch}."
    tensors = info["tensors"]
    by_dtype: Dict[str, Dict[str, int]] = defaultdict(lambda: {"tensors": 0, "params": 0, "bytes": 0})
    params = 0
    for t in tensors:
        n = 1
        for d in t["shape"]:
            n *= d
        params += n
        e = by_dtype[t["dtype"]]
        e["tensors"] += 1
        e["params"] += n
        e["bytes"] += t["n_bytes"]
    # Mixture of experts: a token reads expert_used_count of the expert_count
    # matrices stacked in each *_exps tensor (the router, attention and any
    # shared expert always).
    n_exp, n_used = md.get(p + "expert_count") or 0, md.get(p + "expert_used_count") or 0
    active = params
    if n_exp and n_used:
        for t in tensors:
            if "_exps." in t["name"] and len(t["shape"]) == 3 and t["shape"][2] == n_exp:
                n = t["shape"][0] * t["shape"][1]
                active -= n * (n_exp - n_used)
    tokens = md.get("tokenizer.ggml.tokens") or []
    kv_cache = _kv_cache_bytes(md, p)
    return {
        "file": ({"format": "gguf", "gguf_version": info["version"], "size_bytes": info["file_size"],
                  "alignment": info["alignment"]} if "version" in info else
                 {"format": info.get("format", "safetensors"), "size_bytes": info["size_bytes"]}),
        "model": {"name": md.get("general.name"), "architecture": arch,
                  "context_length": md.get(p + "context_length"), "embedding_length": md.get(p + "embedding_length"),
                  "block_count": md.get(p + "block_count"), "feed_forward_length": md.get(p + "feed_forward_length"),
                  "head_count": md.get(p + "attention.head_count"),
                  "head_count_kv": md.get(p + "attention.head_count_kv"),
                  "rope_freq_base": md.get(p + "rope.freq_base"),
                  **({"expert_count": n_exp, "expert_used_count": n_used} if n_exp else {}),
                  **({"kv_bytes_per_token": kv_cache} if kv_cache else {})},
        "tokenizer": {"model": md.get("tokenizer.ggml.model"), "pre": md.get("tokenizer.ggml.pre"),
                      "vocab_size": len(tokens), "bos_token_id": md.get("tokenizer.ggml.bos_token_id"),
                      "eos_token_id": md.get("tokenizer.ggml.eos_token_id"),
                      "chat_template": "in file" if md.get("tokenizer.chat_template") else "none (built-in used)"},
        "totals": {"tensors": len(tensors), "params": params, "active_params": active,
                   "bytes": sum(t["n_bytes"] for t in tensors),
                   "by_dtype": dict(by_dtype)},
        "tensors": [{"name": t["name"], "dtype": t["dtype"], "shape": t["shape"], "bytes": t["n_bytes"]}
                    for t in tensors],
        "metadata": {k: v for k, v in md.items() if not (isinstance(v, list) and len(v) > 64)},
    }


def _kv_cache_bytes(md: Dict[str, Any], p: str) -> Dict[str, int]:
    """KV cache bytes a token takes over all layers, per cache type (--kv-type), from the metadata."""
    from ..kv_types import KV_TYPES, kv_row_bytes

    layers, heads, kv_heads = md.get(p + "block_count"), md.get(p + "attention.head_count"), \
        md.get(p + "attention.head_count_kv")
    if not all(isinstance(x, int) and x > 0 for x in (layers, heads)) or isinstance(kv_heads, list):
        return {}
    kv_heads = kv_heads or heads
    head_dim = md.get(p + "attention.key_length") or (md.get(p + "embedding_length") or 0) // heads
    if not head_dim:
        return {}
    kv_dim = kv_heads * head_dim
    return {t: layers * 2 * kv_row_bytes(t, kv_dim) for t in KV_TYPES
            if t in ("f16", "bf16") or head_dim % 32 == 0}


def print_text(s: Dict[str, Any], show_tensors: bool, out=sys.stdout) -> None:
    f, m, t, tot = s["file"], s["model"], s["tokenizer"], s["totals"]
    w = out.write
    if f["format"] == "gguf":
        w(f"GGUF v{f['gguf_version']}, {_human(f['size_bytes'])}, alignment {f['alignment']}\n\n")
    else:
        kind = "CTranslate2 directory (model.bin)" if f["format"] == "ctranslate2" else \
            "Hugging Face / MLX directory (safetensors)"
        w(f"{kind}, {_human(f['size_bytes'])}; names and metadata as akunu maps them to GGUF's\n\n")
    w("model\n")
    for k, v in m.items():
        if isinstance(v, dict):  # kv_bytes_per_token: one figure per cache type
            v = ", ".join(f"{t} {n}" for t, n in v.items())
        w(f"  {k:<20} {v}\n")
    w("\ntokenizer\n")
    for k, v in t.items():
        w(f"  {k:<20} {v}\n")
    w("\nmetadata\n")
    for k, v in s["metadata"].items():
        if k != "tokenizer.chat_template":
            w(f"  {k:<44} {_short(v)}\n")
    if show_tensors:
        w(f"\n{'tensor':<40} {'dtype':<8} {'shape':<22} {'bytes':>12}\n")
        for x in s["tensors"]:
            w(f"{x['name']:<40} {x['dtype']:<8} {'x'.join(map(str, x['shape'])):<22} {x['bytes']:>12}\n")
    w(f"\ntotals: {tot['tensors']} tensors, {tot['params'] / 1e6:.1f} M parameters, {_human(tot['bytes'])}\n")
    if tot["active_params"] != tot["params"]:
        w(f"  mixture of experts: {tot['active_params'] / 1e6:.1f} M parameters active a token "
          f"({m['expert_used_count']} of {m['expert_count']} experts)\n")
    for d, e in sorted(tot["by_dtype"].items(), key=lambda kv: -kv[1]["bytes"]):
        w(f"  {d:<8} {e['tensors']:>5} tensors {e['params'] / 1e6:>10.1f} M params {_human(e['bytes']):>12}\n")


def _where(where: Optional[str]) -> str:
    return {"hf": "cached", "llama.cpp": "in llama.cpp's cache"}.get(where or "", "-")


def print_repo(d: Dict[str, Any], out=None) -> None:
    """akunu-inspect's account of a repo id (hub.describe)."""
    out = out or sys.stdout
    w = out.write
    commit = f", commit {d['commit'][:12]}" if d.get("commit") else ""
    w(f"Hugging Face repo {d['repo']} (revision {d['revision']}{commit}) at {d['endpoint']}"
      f"{'; gated' if d.get('gated') else ''}\n\n")
    if "repo_files" in d:
        w("the repo holds\n")
        for name, f in d["repo_files"].items():
            size = _human(f["size"]) if f["size"] is not None else "?"
            w(f"  {name:<60} {size:>12}  {_where(f['cached'])}\n")
    else:
        w(f"the repo's files: not asked ({'HF_HUB_OFFLINE=1' if d['offline'] else d.get('repo_error')})\n")
    if d["gguf_models"]:
        w("\nGGUF models\n")
        for m in d["gguf_models"]:
            parts = f" ({len(m['files'])}/{m['splits']} splits)" if m["splits"] > 1 else ""
            w(f"  {m['quant']:<12} {m['files'][0] + parts:<56} {_human(m['size']):>12}  "
              f"{'cached' if m['cached'] else '-'}\n")
    c = d["cached"]
    w(f"\ncached here ({d['hf_cache']})\n")
    if not c["snapshots"] and not c["llama_cpp"]:
        w("  nothing\n")
    for ref, commit in sorted(c["refs"].items()):
        w(f"  ref {ref} -> {commit[:12]}\n")
    for commit, files in c["snapshots"].items():
        w(f"  snapshot {commit[:12]}: {len(files)} file{'' if len(files) == 1 else 's'}, "
          f"{_human(sum(files.values()))}\n")
        for name, size in files.items():
            w(f"    {name:<58} {_human(size):>12}\n")
    for name, path in c["llama_cpp"].items():
        w(f"  llama.cpp: {path}\n")
    loads = d["loads"]
    if "error" in loads:
        w(f"\n'{d['name']}' loads nothing: {loads['error']}\n")
    else:
        what = f"GGUF {loads['quant']}" if loads["kind"] == "gguf" else loads["kind"] + " directory"
        w(f"\n'{d['name']}' loads {what}: {', '.join(loads['weights'])} ({_human(loads['size'])}, "
          f"{'all cached' if loads['cached'] else 'to fetch on first load'})\n")


def _cached_model(spec: hub.RepoSpec, d: Dict[str, Any]) -> Optional[str]:
    """The local path of what the repo id loads, where all of it is cached and it is one file or directory."""
    loads = d["loads"]
    if "error" in loads or not loads["cached"] or (loads["kind"] == "gguf" and len(loads["weights"]) > 1):
        return None
    try:
        p = hub.plan_offline(spec)
    except Exception:
        return None
    if p.weights != loads["weights"] or any(p.repo_files[n].local is None for n in p.files):
        return None
    paths = hub.fetch(p)
    return paths[p.weights[0]] if p.kind == "gguf" else os.path.dirname(paths["config.json"])


def _read(path: str) -> Dict[str, Any]:
    if os.path.isdir(path):
        info = _core.read_model(path)
        info["size_bytes"] = _model_bytes(path)
        return info
    return _core.read_gguf(path)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-inspect", description=__doc__)
    ap.add_argument("model", help="GGUF file, Hugging Face / MLX / CTranslate2 directory, a named model such as "
                    "gemma3-270m, or a Hugging Face repo id (owner/repo, owner/repo:QUANT, owner/repo/FILE.gguf, @REV)")
    ap.add_argument("--revision", default=None, help="branch, tag or commit of a repo id (as @REV)")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--no-tensors", action="store_true", help="leave out the tensor table")
    ap.add_argument("--verbose", action="store_true", help="show tracebacks")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = ap.parse_args(argv)

    def body() -> int:
        name = args.model
        spec = None if os.path.exists(name) or is_named_model(name) else hub.parse_repo_id(name, args.revision)
        if spec is None:
            s: Optional[Dict[str, Any]] = summarize(_read(resolve_model_path(name, args.revision)))
            repo = None
        else:
            repo = hub.describe(spec)
            path = _cached_model(spec, repo)
            s = summarize(_read(path)) if path else None
        if s is not None and args.no_tensors:
            s.pop("tensors")
        if args.json:
            json.dump(s if repo is None else {"hub": repo, "model": s}, sys.stdout, indent=1, default=str)
            sys.stdout.write("\n")
            return 0
        if repo is not None:
            print_repo(repo)
            if s is not None:
                sys.stdout.write("\n")
        if s is not None:
            print_text(s, not args.no_tensors, sys.stdout)
        return 0

    return run("akunu-inspect", body, argv)


if __name__ == "__main__":
    sys.exit(main())
