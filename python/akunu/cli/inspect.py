"""akunu-inspect: what is inside a GGUF file (no weights are loaded)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Any, Dict, List, Optional

from .. import __version__, _core
from ..model_zoo import resolve_model_path
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
    tokens = md.get("tokenizer.ggml.tokens") or []
    return {
        "file": ({"format": "gguf", "gguf_version": info["version"], "size_bytes": info["file_size"],
                  "alignment": info["alignment"]} if "version" in info else
                 {"format": info.get("format", "safetensors"), "size_bytes": info["size_bytes"]}),
        "model": {"name": md.get("general.name"), "architecture": arch,
                  "context_length": md.get(p + "context_length"), "embedding_length": md.get(p + "embedding_length"),
                  "block_count": md.get(p + "block_count"), "feed_forward_length": md.get(p + "feed_forward_length"),
                  "head_count": md.get(p + "attention.head_count"),
                  "head_count_kv": md.get(p + "attention.head_count_kv"),
                  "rope_freq_base": md.get(p + "rope.freq_base")},
        "tokenizer": {"model": md.get("tokenizer.ggml.model"), "pre": md.get("tokenizer.ggml.pre"),
                      "vocab_size": len(tokens), "bos_token_id": md.get("tokenizer.ggml.bos_token_id"),
                      "eos_token_id": md.get("tokenizer.ggml.eos_token_id"),
                      "chat_template": "in file" if md.get("tokenizer.chat_template") else "none (built-in used)"},
        "totals": {"tensors": len(tensors), "params": params, "bytes": sum(t["n_bytes"] for t in tensors),
                   "by_dtype": dict(by_dtype)},
        "tensors": [{"name": t["name"], "dtype": t["dtype"], "shape": t["shape"], "bytes": t["n_bytes"]}
                    for t in tensors],
        "metadata": {k: v for k, v in md.items() if not (isinstance(v, list) and len(v) > 64)},
    }


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
    for d, e in sorted(tot["by_dtype"].items(), key=lambda kv: -kv[1]["bytes"]):
        w(f"  {d:<8} {e['tensors']:>5} tensors {e['params'] / 1e6:>10.1f} M params {_human(e['bytes']):>12}\n")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-inspect", description=__doc__)
    ap.add_argument("model", help="GGUF file, Hugging Face / MLX / CTranslate2 directory, or a named model such as "
                    "gemma3-270m")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--no-tensors", action="store_true", help="leave out the tensor table")
    ap.add_argument("--verbose", action="store_true", help="show tracebacks")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = ap.parse_args(argv)

    def body() -> int:
        path = resolve_model_path(args.model)
        if os.path.isdir(path):
            info = _core.read_model(path)
            info["size_bytes"] = _model_bytes(path)
        else:
            info = _core.read_gguf(path)
        s = summarize(info)
        if args.json:
            if args.no_tensors:
                s.pop("tensors")
            json.dump(s, sys.stdout, indent=1, default=str)
            sys.stdout.write("\n")
        else:
            print_text(s, not args.no_tensors)
        return 0

    return run("akunu-inspect", body, argv)


if __name__ == "__main__":
    sys.exit(main())
