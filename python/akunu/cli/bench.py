"""akunu-bench: how fast a model runs, in llama-bench's format (markdown or
JSON), and with --compare beside its peer on the same machine in the same
run: llama.cpp for text models (pp and tg tok/s), sentence-transformers for
embedding models (sentences/s), faster-whisper for Whisper models (audio
seconds transcribed per second)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from .. import __version__, _core
from .common import CliError, add_model_args, load_model, run


def _ints(text: str) -> List[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    if any(v < 0 for v in vals):
        raise argparse.ArgumentTypeError("values must be >= 0")
    return vals


def _params(model) -> int:
    n = 0
    for t in model._core().tensors:
        k = 1
        for d in t["shape"]:
            k *= d
        n += k
    return n


def _model_type(model, params: int) -> str:
    c = model.config
    label = f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"
    ftype = {0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
             11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
             18: "Q6_K", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16",
             38: "MXFP4_MOE"}.get(getattr(model, "metadata", {}).get(
                 "general.file_type"), "?")
    return f"{c.get('architecture', '?')} {label} {ftype}"


def _kind(model) -> str:
    if getattr(model, "is_whisper", False):
        return "speech"
    return "embeddings" if getattr(model, "is_embedding_model", False) else "text"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="akunu-bench", description=__doc__)
    add_model_args(ap)
    ap.add_argument("-p", "--n-prompt", type=_ints, default=[512], help="prompt lengths (default 512)")
    ap.add_argument("-n", "--n-gen", type=_ints, default=[128], help="generation lengths (default 128)")
    ap.add_argument("-d", "--n-depth", type=_ints, default=[0],
                    help="tokens already in the context when each text test starts, as llama-bench's -d "
                         "(default 0)")
    ap.add_argument("-r", "--repetitions", type=int, default=5, help="runs per test (default 5)")
    ap.add_argument("-o", "--output", choices=["md", "json", "jsonl"], default="md")
    ap.add_argument("--compare", metavar="PEER", default=None,
                    help="also run the peer on the same model and print the ratio akunu / peer: llama.cpp "
                         "(text), sentence-transformers (embeddings), faster-whisper (Whisper)")
    ap.add_argument("--llama-bench", metavar="PATH", default=None,
                    help="llama.cpp's llama-bench binary (or its folder) for --compare llama.cpp (default: "
                         "llama-bench on PATH, else llama-cpp-python)")
    g = ap.add_argument_group("embedding models")
    g.add_argument("--batch", type=int, default=32, help="sentences per call (default 32)")
    g.add_argument("--tokens", type=int, default=128, help="tokens per sentence (default 128)")
    g = ap.add_argument_group("Whisper models")
    g.add_argument("--audio", default=None, help="audio file (or .npy of 16 kHz samples), repeated up to --seconds "
                   "(default: espeak-ng speech)")
    g.add_argument("--seconds", type=float, default=60.0, help="clip length (default 60)")
    args = ap.parse_args(argv)
    args.speech_ok = True

    def body() -> int:
        from ..bench import peer_for, embeddings, speech, text

        if args.repetitions < 1:
            raise CliError("-r must be at least 1")
        tests = [(kind, n, d) for d in args.n_depth for kind, ns in (("pp", args.n_prompt), ("tg", args.n_gen))
                 for n in ns if n > 0]
        need = max([n + d for _, n, d in tests] + [1]) + 1
        if args.ctx is None:
            args.ctx = max(need, 512)
        model = load_model(args, quiet=args.output != "md")
        kind = _kind(model)
        peer = peer_for(kind, args.compare)
        threads = args.threads or _core.default_threads()  # the peer runs akunu's thread count
        path = _model_path(args, model)
        if kind == "text":
            if need > model.n_ctx:
                raise CliError(f"a test needs {need} tokens of context but --ctx is {model.n_ctx}")
            rows = text.akunu_rows(model, tests, args.repetitions)
            if peer:
                kv_types = (model.config.get("k_cache_type", "f16"), model.config.get("v_cache_type", "f16"))
                rows += text.peer_rows(path, tests, args.repetitions, model.device, threads, args.ctx,
                                       args.llama_bench, kv_types)
        elif kind == "embeddings":
            if args.batch < 1 or args.tokens < 3:
                raise CliError("--batch must be at least 1 and --tokens at least 3")
            rows = embeddings.akunu_rows(model, args.batch, args.tokens, args.repetitions)
            if peer:
                rows += embeddings.peer_rows(model, path, args.batch, args.tokens, args.repetitions, model.device,
                                             args.threads)
        else:
            if args.seconds <= 0:
                raise CliError("--seconds must be positive")
            samples = speech.clip(args.audio, args.seconds)
            rows = speech.akunu_rows(model, samples, args.repetitions)
            if peer:
                rows += speech.peer_rows(path, samples, args.repetitions, model.device, args.threads,
                                         rows[0].get("text", ""))
        _describe(rows, model, kind, path, threads, args.model)
        _print(rows, args.output, model, peer)
        return 0

    return run("akunu-bench", body, argv)


def _model_path(args, model) -> str:
    from ..model_zoo import resolve_model_path

    return getattr(model, "path", None) or resolve_model_path(args.model)


def _describe(rows: List[Dict[str, Any]], model, kind: str, path: str, threads: int, name: str) -> None:
    """The fields llama-bench writes for each row, for the machine and the model."""
    try:
        params = _params(model)
        size = sum(t["n_bytes"] for t in model._core().tensors)
    except (AttributeError, KeyError, TypeError):
        params = size = 0
    if kind == "text":
        mtype = _model_type(model, params)
    else:  # a named model by its name, a directory or file by its own
        label = name if not os.path.exists(name) else os.path.basename(os.path.normpath(path))
        mtype = f"{model.config.get('architecture', kind)} {label}"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for r in rows:
        r.update({"build_commit": "akunu", "build_number": 0, "akunu_version": __version__,
                  "backends": model.device.upper(), "cpu_info": _cpu_name(),
                  "gpu_info": _gpu_name() if model.device != "cpu" else "", "model_filename": path,
                  "model_type": mtype, "model_size": size, "model_n_params": params, "n_threads": threads,
                  "tensor_parallel": getattr(model, "tensor_parallel", 1), "test_time": stamp})
        if kind == "text":  # the KV cache's types, as llama-bench's type_k / type_v
            r.update({"type_k": model.config.get("k_cache_type", "f16"),
                      "type_v": model.config.get("v_cache_type", "f16")})
        r.setdefault("n_prompt", 0)
        r.setdefault("n_gen", 0)


def _ratios(rows: List[Dict[str, Any]]) -> None:
    """ratio_vs_akunu on each peer row: akunu's rate / the peer's, for the same test."""
    ours = {r["test"]: r["avg_ts"] for r in rows if r["engine"] == "akunu"}
    for r in rows:
        if r["engine"] != "akunu" and r["test"] in ours and r["avg_ts"] > 0:
            r["akunu_over_peer"] = ours[r["test"]] / r["avg_ts"]


def _print(rows: List[Dict[str, Any]], output: str, model, peer: Optional[str]) -> None:
    _ratios(rows)
    for r in rows:
        r.pop("text", None)
    if output == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    if output == "jsonl":
        for r in rows:
            sys.stdout.write(json.dumps(r) + "\n")
        return
    if not peer:
        unit = rows[0]["unit"] if rows else "t/s"
        print("| model                          |       size |     params | backend    | threads |"
              f"          test | {unit:>20} |")
        print("| ------------------------------ | ---------: | ---------: | ---------- | ------: |"
              " ------------: | -------------------: |")
        for r in rows:
            print(f"| {r['model_type']:<30} | {r['model_size'] / 2**30:6.2f} GiB | {r['model_n_params'] / 1e9:8.2f} B"
                  f" | {r['backends']:<10} | {r['n_threads']:>7} | {r['test']:>13} |"
                  f" {r['avg_ts']:>11.2f} ± {r['stddev_ts']:<6.2f} |")
    else:
        print(markdown_table(rows))
        for b in dict.fromkeys(f"{r['peer_build']} ({r['peer_settings']})" for r in rows if r.get("peer_build")):
            print(f"\npeer: {b}")
    where = _cpu_name() if model.device == "cpu" else _gpu_name()
    print(f"\nbuild: akunu {__version__}, device: {model.device} ({where})")


def markdown_table(rows: List[Dict[str, Any]]) -> str:
    """akunu and its peer side by side: one line per test and peer setting, mean ± sd, ratio akunu / peer."""
    _ratios(rows)
    ours = {r["test"]: r for r in rows if r["engine"] == "akunu"}
    peers = [r for r in rows if r["engine"] != "akunu"]
    name = peers[0]["engine"] if peers else "peer"
    unit = next(iter(ours.values()))["unit"] if ours else "t/s"
    lines = [f"| model | backend | test | akunu {unit} | {name} {unit} | ratio |", "|---|---|---|---:|---:|---:|"]
    for r in peers or list(ours.values()):
        a = ours.get(r["test"])
        cell = (lambda x: f"{x['avg_ts']:.2f} ± {x['stddev_ts']:.2f}" if x else "-")
        test = r["test"] + (f" ({r['peer_settings']})" if r.get("peer_settings") == "float16" else "")
        ratio = f"{r['akunu_over_peer']:.2f}x" if "akunu_over_peer" in r else "-"
        lines.append(f"| {r['model_type']} | {r['backends']} | {test} | {cell(a)} | "
                     f"{cell(r) if r is not a else '-'} | {ratio} |")
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _gpu_name() -> str:
    """The NVIDIA GPU (nvidia-smi), or on a Mac the Apple chip whose GPU Metal runs on; "" if neither."""
    if sys.platform == "darwin":
        return _apple_chip()
    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _apple_chip() -> str:
    try:
        out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


if __name__ == "__main__":
    sys.exit(main())
