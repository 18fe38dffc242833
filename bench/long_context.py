"""Long context on one NVIDIA GPU, akunu beside llama.cpp: pp512 and tg128
tok/s after 0 to 32768 tokens already in the context (llama-bench's -d), and
the time to first token of long prompts, on random-weight models at the
shapes and vocabularies of Llama-3.2-1B and Llama-3.1-8B, both engines on the
same files in one run. llama.cpp runs as llama-bench with every layer on the
GPU and flash attention (-ngl 99 -fa 1), the better of its default and
GGML_CUDA_GRAPH_OPT=1, and for prompts over 512 tokens also with -ub 2048.

  pip install ".[test]"     # with nvcc on PATH, so that akunu builds its CUDA backend
  python -m bench.long_context --llama-cpp SRC [-r 3] [--models llama-3.1-8b:F16,...] [--depths 0,4096,...]
                               [--kv-type q8_0]   # both engines' KV cache type (llama.cpp's -ctk / -ctv)

Beside each tg row, the limit: the bytes one decode step must read (the
weights it uses plus the KV cache at that depth) over the GPU's measured
copy bandwidth, and akunu's share of it. SRC and --llama-bench are as in
bench.text_cuda.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional

from . import common, text_models
from .serving import copy_bandwidth
from .text_cuda import check_akunu_cuda, gpu_arch

MODELS = "llama-3.2-1b:Q4_K_M,llama-3.1-8b:Q4_K_M,llama-3.1-8b:F16"


def step_weight_bytes(path: str) -> int:
    """Bytes of the weights one decode step reads: all but the token embedding table (of which a step
    reads one row) when the model has its own output matrix."""
    import gguf

    tensors = {t.name: int(t.n_bytes) for t in gguf.GGUFReader(path).tensors}
    skip = "token_embd.weight" if "output.weight" in tensors else None
    return sum(b for name, b in tensors.items() if name != skip)


def kv_bytes_per_token(shape: str, kv_type: str = "f16") -> int:
    """K and V of one position over every layer, in the cache type (akunu's row layout: llama.cpp's
    blocks take the same bytes at these shapes)."""
    from akunu.kv_types import kv_row_bytes

    _, d = text_models.SHAPES[shape]
    return 2 * d["n_layers"] * kv_row_bytes(kv_type, d["n_kv_heads"] * d["head_dim"])


def depth_table(results: List[tuple], depths: List[int], pp: int, tg: int, bandwidth: Optional[float]) -> str:
    lines = [f"| model | depth | llama.cpp pp{pp} | akunu pp{pp} | ratio | llama.cpp tg{tg} | akunu tg{tg} | ratio "
             "| tg limit | akunu / limit |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, weights, kv, rows in results:
        by = {(r["engine"], r["test"]): r for r in rows}
        for d in depths:
            suffix = f" @ d{d}" if d else ""
            parts = [name, str(d)]
            for test in (f"pp{pp}{suffix}", f"tg{tg}{suffix}"):
                a, p = by.get(("akunu", test)), by.get(("llama.cpp", test))
                parts += [common.cell(p), common.cell(a), f"{a['avg_ts'] / p['avg_ts']:.2f}x" if a and p else "-"]
            a = by.get(("akunu", f"tg{tg}{suffix}"))
            # a tg run's steps see depth + 0 .. tg - 1 keys: on average depth + tg / 2
            limit = bandwidth / (weights + kv * (d + tg / 2)) if bandwidth else None
            parts += [f"{limit:.1f}" if limit else "-", f"{a['avg_ts'] / limit:.0%}" if a and limit else "-"]
            lines.append("| " + " | ".join(parts) + " |")
    return "\n".join(lines)


def ttft_table(results: List[tuple], prompts: List[int]) -> str:
    lines = ["| model | prompt | llama.cpp first token (s) | akunu first token (s) | ratio |", "|---|---|---|---|---|"]
    for name, _, _, rows in results:
        by = {(r["engine"], r["test"]): r for r in rows}
        for n in prompts:
            a, p = by.get(("akunu", f"pp{n}")), by.get(("llama.cpp", f"pp{n}"))
            if not (a and p):
                continue
            ta, tp = n / a["avg_ts"], n / p["avg_ts"]
            lines.append(f"| {name} | {n} | {tp:.3f} ({p['peer_settings'].split('-fa 1')[-1].strip() or 'default'}) "
                         f"| {ta:.3f} | {tp / ta:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.long_context", description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--models", default=MODELS, help=f"shape:format list (default {MODELS})")
    ap.add_argument("--depths", default="0,4096,16384,32768")
    ap.add_argument("--prompts", default="8192,32768", help="long prompts timed to their first token")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-cpp", metavar="SRC", help="llama.cpp sources to build with -DGGML_CUDA=ON")
    src.add_argument("--llama-bench", metavar="BIN_DIR", help="folder of prebuilt llama-bench and llama-quantize")
    ap.add_argument("--models-dir", default=os.path.join(common.CACHE, "models"))
    ap.add_argument("--json", default=None, help="where to write every row (default ~/.cache/akunu-bench/)")
    ap.add_argument("--kv-type", default="f16", choices=["f16", "bf16", "q8_0", "q4_0"],
                    help="KV cache type of both engines (llama.cpp: -ctk / -ctv)")
    a = ap.parse_args()
    check_akunu_cuda()
    if a.llama_bench:
        bins = a.llama_bench
    else:
        srcdir = a.llama_cpp or text_models.fetch_llama_cpp_sources(os.path.join(common.CACHE, "src"))
        bins = text_models.build_llama_cpp(srcdir, cuda=True, cuda_arch=gpu_arch())
    depths = [int(x) for x in a.depths.split(",") if x]
    prompts = [int(x) for x in a.prompts.split(",") if x]
    bandwidth = copy_bandwidth("cuda")
    base = ["--device", "cuda", "-r", str(a.repetitions), "--compare", "llama.cpp", "--llama-bench",
            os.path.join(bins, "llama-bench"), "--kv-type", a.kv_type]
    results: List[tuple] = []
    for spec in a.models.split(","):
        shape, fmt = spec.split(":")
        path = text_models.quantized_model(a.models_dir, shape, fmt, bins)
        rows: List[Dict] = common.akunu_bench(path, *base, "-p", "512", "-n", "128", "-d", a.depths)
        if prompts:
            rows += common.akunu_bench(path, *base, "-p", ",".join(map(str, prompts)), "-n", "0")
        label = f"{shape} {fmt}" + (f" KV {a.kv_type}" if a.kv_type != "f16" else "")
        results.append((label, step_weight_bytes(path), kv_bytes_per_token(shape, a.kv_type), rows))
        print(depth_table(results[-1:], depths, 512, 128, bandwidth), file=sys.stderr, flush=True)
    rows = [r for *_, rs in results for r in rs]
    print(common.header(rows, common.command_line("bench.long_context")))
    if bandwidth:
        print(f"- Device-to-device copy: {bandwidth / 1e9:.0f} GB/s")
    print()
    print(depth_table(results, depths, 512, 128, bandwidth))
    if prompts:
        print()
        print(ttft_table(results, prompts))
    print(f"\nrows: {common.save_json('long_context', a.json, rows)}")


if __name__ == "__main__":
    main()
