"""Tensor parallelism on several NVIDIA GPUs of one host, akunu beside llama.cpp:
pp512 and tg128 tok/s of random-weight models at real shapes (Llama-3.1-8B in
F16 and Q4_K_M, Llama-3.2-1B in F16 by default), both engines on the same
files in one run. akunu runs through akunu-bench at tensor-parallel degree
TP = 1, 2, 4, 8 (as many as GPUs are visible, at most --tp-max; TP = 1 is the
plain single-GPU path); llama.cpp runs as llama-bench with every layer on the
GPUs and flash attention (-ngl 99 -fa 1) on the first N GPUs
(CUDA_VISIBLE_DEVICES) for the same N, with -sm none at N = 1 and each of
-sm layer, row (and tensor, where that llama-bench offers it) above; its best
mode is the column akunu is compared with. Every child runs with
NCCL_NVLS_ENABLE=0 unless it is set already.

  pip install ".[test]"     # with nvcc on PATH, so that akunu builds its CUDA backend
  python -m bench.tensor_parallel --llama-cpp SRC [-r 3] [--tp-max 8]
  python -m bench.tensor_parallel --llama-bench BIN_DIR       # prebuilt llama-bench and llama-quantize
  python -m bench.tensor_parallel --skip-llama                # akunu alone
  python -m bench.tensor_parallel --llama-cpp SRC --shapes llama-3.1-70b --formats Q4_K_M

SRC is a llama.cpp source tree, built with CMake and -DGGML_CUDA=ON into
SRC/build-cuda (as bench.text_cuda does; with neither flag the sources are
fetched from PyPI). --shapes and --formats, either given, run every shape in
every format. The llama-3.1-70b shape is opt-in: its F16 source is about
140 GB on disk, and is written from memory (a host with that much RAM).
Models are written once to --models (default ~/.cache/akunu-bench/models).
Prints a Markdown table (one line per model, format and test) and every
llama.cpp split mode's result below it; every row goes to JSON (--json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional

from . import common, text_models

DEFAULTS = [("llama-3.1-8b", "F16"), ("llama-3.1-8b", "Q4_K_M"), ("llama-3.2-1b", "F16")]
OWN_SHAPES = {  # shapes of this driver alone, beside text_models.SHAPES
    "llama-3.1-70b": ("llama", dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, head_dim=128, ffn_dim=28672,
                                    vocab=128256, ctx=131072)),
}
TP_DEGREES = (1, 2, 4, 8)
LLAMA_FLAGS = ["-ngl", "99", "-fa", "1"]


def visible_gpus() -> List[str]:
    """The GPUs a child may use, as CUDA_VISIBLE_DEVICES names them (its own list where it is set)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    except OSError:
        return []
    listed = [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip()][:len(listed)]
    return [str(i) for i in range(len(listed))]


def gpu_line(n: int) -> str:
    """"2 x NVIDIA H100 80GB HBM3, GPU0-GPU1 link NV18" (the link as nvidia-smi topo -m names it)."""
    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True).stdout.strip().splitlines()
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    row = next((line.split() for line in topo.splitlines() if line.startswith("GPU0")), [])
    link = f", GPU0-GPU1 link {row[2]}" if len(row) > 2 else ""
    return f"{n} x {names[0] if names else '?'}{link}"


def check_akunu_tp() -> None:
    """Fails early when this akunu-bench has no --tp (see also text_cuda.check_akunu_cuda)."""
    out = subprocess.run([sys.executable, "-m", "akunu.cli.bench", "--help"], capture_output=True, text=True)
    if "--tp" not in out.stdout:
        sys.exit("this akunu-bench has no --tp flag (an akunu without tensor parallelism): reinstall it "
                 "(pip install .)")


def model_file(folder: str, shape: str, fmt: str, bins: Optional[str]) -> str:
    """text_models.quantized_model's file; the F16 source of a shape of OWN_SHAPES is written here first,
    at the path text_models gives it, so that its quantizer finds it. Format "Q4_K_M-blocks": random Q4_K /
    Q6_K blocks placed as llama.cpp's Q4_K_M places them, written directly (no F16 source: a 70B shape's
    file in minutes, on a disk that could not hold its F16 one)."""
    if fmt == "Q4_K_M-blocks":
        from tests.fixtures import random_gguf

        path = os.path.join(folder, f"{shape}-{fmt}.gguf")
        if not os.path.exists(path):
            os.makedirs(folder, exist_ok=True)
            arch, dims = {**text_models.SHAPES, **OWN_SHAPES}[shape]
            print(f"writing {path}", file=sys.stderr, flush=True)
            random_gguf.write_model(path + ".part", arch, fmt, seed=1, shape=random_gguf.Shape(**dims))
            os.replace(path + ".part", path)
        return path
    if shape in OWN_SHAPES:
        from tests.fixtures import random_gguf

        path = os.path.join(folder, f"{shape}-F16.gguf")
        if not os.path.exists(path):
            os.makedirs(folder, exist_ok=True)
            arch, dims = OWN_SHAPES[shape]
            print(f"writing {path}", file=sys.stderr, flush=True)
            random_gguf.write_model(path + ".part", arch, "F16", seed=1, shape=random_gguf.Shape(**dims),
                                    fast_normals=True)
            os.replace(path + ".part", path)
    return text_models.quantized_model(folder, shape, fmt, bins)


def run_akunu(path: str, tp: int, gpus: List[str], tests: List[str]) -> List[Dict]:
    """akunu-bench's rows at tensor-parallel degree tp on the first tp GPUs; an error row when it fails."""
    cmd = [sys.executable, "-m", "akunu.cli.bench", path, "--device", "cuda", *tests, "-o", "json"]
    cmd += ["--tp", str(tp)] if tp > 1 else []
    rows = run_json(cmd, {"CUDA_VISIBLE_DEVICES": ",".join(gpus[:tp])})
    for r in rows:
        r.update(engine="akunu", gpus=tp, split_mode=f"tp{tp}")
    return rows


def llama_modes(binary: str) -> List[str]:
    """The split modes above one GPU that this llama-bench lists in --help."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    line = next((x for x in (out.stdout + out.stderr).splitlines() if "split-mode" in x), "")
    return ["layer", "row"] + (["tensor"] if re.search(r"\btensor\b", line) else [])


def run_llama(binary: str, path: str, n: int, mode: str, gpus: List[str], tests: List[str], settings: str
              ) -> List[Dict]:
    """llama-bench's rows with -sm mode on the first n GPUs; an error row when it fails."""
    cmd = [binary, "-m", path, *tests, "-o", "json", *LLAMA_FLAGS, "-sm", mode]
    rows = run_json(cmd, {"CUDA_VISIBLE_DEVICES": ",".join(gpus[:n])})
    for r in rows:
        r.update(engine="llama.cpp", gpus=n, split_mode=mode)
        if "error" not in r:
            test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
            r.update(test=test, peer_build=f"llama-bench {r.get('build_commit', '?')}",
                     peer_settings=settings)
    return [r for r in rows if "error" in r or not (r["n_prompt"] and r["n_gen"])]


def measure(path: str, n: int, gpus: List[str], tests: List[str], binary: Optional[str], modes: List[str],
            settings: str) -> List[Dict]:
    """akunu at TP = n and llama.cpp in each split mode on n GPUs."""
    rows = run_akunu(path, n, gpus, tests)
    for mode in (["none"] if n == 1 else modes) if binary else []:
        rows += run_llama(binary, path, n, mode, gpus, tests, settings)
    return rows


def run_json(cmd: List[str], env: Dict[str, str]) -> List[Dict]:
    """The JSON list a bench command prints; [{"error": ...}] when it fails (a model too large for N GPUs)
    or hangs for an hour."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=3600)
        if out.returncode == 0:
            return json.loads(out.stdout)
        err = (out.stderr.strip().splitlines() or ["?"])[-1][-300:]
    except subprocess.TimeoutExpired:
        err = "no result in an hour"
    except ValueError:
        err = "no JSON on its output"
    print(f"failed ({' '.join(cmd[2:] if cmd[0] == sys.executable else cmd)}): {err}", file=sys.stderr)
    return [{"error": err}]


def cell(r: Optional[Dict]) -> str:
    return f"{r['avg_ts']:.1f} ± {r['stddev_ts']:.1f}" if r and r.get("avg_ts") else "-"


def ratio(a: Optional[Dict], b: Optional[Dict]) -> str:
    return f"{a['avg_ts'] / b['avg_ts']:.2f}x" if a and b and a.get("avg_ts") and b.get("avg_ts") else "-"


def best_llama(rows: List[Dict], n: int) -> Optional[Dict]:
    got = [r for r in rows if r["engine"] == "llama.cpp" and r["gpus"] == n and r.get("avg_ts")]
    return max(got, key=lambda r: r["avg_ts"]) if got else None


def tp_table(rows: List[Dict], tps: List[int], peer: bool = True) -> str:
    """One line per (model, format, test): akunu at each TP, llama.cpp's best mode at each N, the ratios
    akunu / llama.cpp at each N (without peer: neither) and akunu's TP=N / TP=1."""
    peers = tps if peer else []
    head = ["model", "format", "test"] + [f"akunu TP={n}" for n in tps] + [f"llama.cpp N={n}" for n in peers]
    head += [f"ratio N={n}" for n in peers] + [f"akunu TP={n}/TP=1" for n in tps[1:]]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * (len(head) - 3)]
    for key in dict.fromkeys((r["shape"], r["format"], r["test"]) for r in rows if r.get("test")):
        sub = [r for r in rows if (r["shape"], r["format"], r.get("test")) == key]
        ak = {n: next((r for r in sub if r["engine"] == "akunu" and r["gpus"] == n), None) for n in tps}
        ll = {n: best_llama(sub, n) for n in peers}
        parts = list(key) + [cell(ak[n]) for n in tps]
        parts += [cell(ll[n]) + (f" ({ll[n]['split_mode']})" if ll[n] else "") for n in peers]
        parts += [ratio(ak[n], ll[n]) for n in peers] + [ratio(ak[n], ak[1]) for n in tps[1:]]
        lines.append("| " + " | ".join(parts) + " |")
    return "\n".join(lines)


def modes_table(rows: List[Dict]) -> str:
    """Every llama.cpp run: one line per model, format, test, GPU count and split mode."""
    lines = ["| model | format | test | GPUs | -sm | llama.cpp t/s |", "|---|---|---|---:|---|---:|"]
    for r in (r for r in rows if r["engine"] == "llama.cpp"):
        lines.append(f"| {r['shape']} | {r['format']} | {r.get('test', '-')} | {r['gpus']} | {r['split_mode']} | "
                     f"{'failed' if 'error' in r else cell(r)} |")
    return "\n".join(lines)


def combos(a) -> List[tuple]:
    """The (shape, format) pairs to measure: DEFAULTS, or every shape given in every format given."""
    if a.shapes is None and a.formats is None:
        return DEFAULTS
    shapes = (a.shapes or "llama-3.1-8b,llama-3.2-1b").split(",")
    known = list(text_models.SHAPES) + list(OWN_SHAPES)
    for s in shapes:
        if s not in known:
            sys.exit(f"unknown shape {s}: one of {', '.join(known)}")
    return [(s, f) for s in shapes for f in (a.formats or "F16,Q4_K_M").split(",")]


def parse_args():
    ap = argparse.ArgumentParser(prog="python -m bench.tensor_parallel", description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--shapes", default=None, help="comma-separated, of " +
                    ", ".join(list(text_models.SHAPES) + list(OWN_SHAPES)) + " (default llama-3.1-8b,llama-3.2-1b)")
    ap.add_argument("--formats", default=None, help="comma-separated llama.cpp file types (default F16,Q4_K_M; "
                    "with neither flag: the 8B shape in F16 and Q4_K_M, the 1B in F16)")
    ap.add_argument("--tp-max", type=int, default=8, help="largest TP and GPU count (default 8, or fewer visible)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-cpp", metavar="SRC", help="llama.cpp sources to build with -DGGML_CUDA=ON")
    src.add_argument("--llama-bench", metavar="BIN_DIR", help="folder of prebuilt llama-bench and llama-quantize")
    ap.add_argument("--skip-llama", action="store_true", help="akunu alone (llama.cpp, where given, only "
                    "quantizes the models; else llama-quantize on PATH or llama-cpp-python does)")
    ap.add_argument("--cuda-arch", default=None,
                    help="CMAKE_CUDA_ARCHITECTURES for llama.cpp (default: the GPU's compute capability, e.g. 90)")
    ap.add_argument("--models", default=os.path.join(common.CACHE, "models"))
    ap.add_argument("--json", default=None, help="where to write every row (default ~/.cache/akunu-bench/)")
    return ap.parse_args()


def main() -> None:
    a = parse_args()
    todo = combos(a)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    gpus = visible_gpus()
    if len(gpus) < 2:
        sys.exit(f"tensor parallelism needs at least 2 NVIDIA GPUs; {len(gpus)} visible here (nvidia-smi -L)")
    from .text_cuda import check_akunu_cuda, gpu_arch

    check_akunu_cuda()
    check_akunu_tp()
    tps = [n for n in TP_DEGREES if n <= min(len(gpus), a.tp_max)]
    if len(tps) < 2:
        sys.exit("--tp-max must be at least 2")
    bins = a.llama_bench
    if not bins and (a.llama_cpp or not a.skip_llama):
        srcdir = a.llama_cpp or text_models.fetch_llama_cpp_sources(os.path.join(common.CACHE, "src"))
        bins = text_models.build_llama_cpp(srcdir, cuda=True, cuda_arch=a.cuda_arch or gpu_arch())
    binary = os.path.join(bins, "llama-bench") if bins and not a.skip_llama else None
    modes = llama_modes(binary) if binary else []
    tests = ["-p", str(a.n_prompt), "-n", str(a.n_gen), "-r", str(a.repetitions)]
    settings = (f"{' '.join(LLAMA_FLAGS)} -r {a.repetitions}; -sm none on 1 GPU, -sm {' / '.join(modes)} on N "
                "(CUDA_VISIBLE_DEVICES: the first N)")
    rows: List[Dict] = []
    for shape, fmt in todo:
        path = model_file(a.models, shape, fmt, bins)
        for n in tps:
            for r in measure(path, n, gpus, tests, binary, modes, settings):
                r.update(shape=shape, format=fmt)
                rows.append(r)
                if "error" not in r:  # (failures are told as they happen)
                    print(f"{shape} {fmt} {r['engine']} {r['split_mode']} N={n} {r['test']}: {cell(r)}",
                          file=sys.stderr, flush=True)
    ok = sorted((r for r in rows if r.get("avg_ts")), key=lambda r: r["engine"] != "akunu")  # akunu's first
    print(common.header(ok, common.command_line("bench.tensor_parallel")) + f"\n- GPUs: {gpu_line(len(gpus))}")
    print(f"\n{tp_table(rows, tps, peer=binary is not None)}")
    if binary:
        print(f"\n{modes_table(rows)}")
    print(f"\nrows: {common.save_json('tensor_parallel', a.json, rows)}")


if __name__ == "__main__":
    main()
