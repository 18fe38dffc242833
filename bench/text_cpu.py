"""Text on the CPU, akunu beside llama.cpp: prompt processing and generation
tok/s on Gemma 3 270M (Q4_K_M, from PyPI) and on Qwen3-0.6B- and
Llama-3.2-1B-shaped random-weight models in Q4_0, Q4_K_M, Q8_0 (llama.cpp's
quantizer) and F16, same threads, same machine, one run.

  python -m bench.text_cpu [-r 5] [-p 128] [-n 64] [-t THREADS] [--llama-bench PATH | --llama-cpp SRC] [--json FILE]

llama.cpp runs as llama-bench when --llama-bench (a binary or its build
folder) is given, or --llama-cpp names llama.cpp's sources to build it from,
or one is on PATH; else through llama-cpp-python in the same process. Both
builds here leave out llama.cpp's native CPU tuning, which crashes on some
machines with AMX: install llama-cpp-python with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON".
"""

from __future__ import annotations

import argparse
import os

from akunu import _core

from . import common, text_models


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.text_cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=_core.default_threads(),
                    help="threads of both (default: akunu's, one per physical core this process may run on)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-bench", default=None, help="llama-bench binary or its folder")
    src.add_argument("--llama-cpp", metavar="SRC", default=None, help="llama.cpp sources to build llama-bench from")
    ap.add_argument("--models", default=os.path.join(common.CACHE, "models"), help="folder for the made models")
    ap.add_argument("--only", default=None, help="comma-separated subset: gemma3-270m, qwen3-0.6b-FORMAT, "
                    "llama-3.2-1b-FORMAT (FORMAT q4_0, q4_k_m, q8_0, f16)")
    ap.add_argument("--json", default=None, help="where to write every row (default ~/.cache/akunu-bench/)")
    a = ap.parse_args()
    if a.llama_cpp:
        a.llama_bench = text_models.build_llama_cpp(a.llama_cpp, cuda=False)
    bin_dir = a.llama_bench if a.llama_bench and os.path.isdir(a.llama_bench) else (
        os.path.dirname(a.llama_bench) if a.llama_bench else None)
    models = {"gemma3-270m": ("Gemma 3 270M", "Q4_K_M", lambda: "gemma3-270m")}
    for shape, name in (("qwen3-0.6b", "Qwen3-0.6B shape"), ("llama-3.2-1b", "Llama-3.2-1B shape")):
        for q in ("Q4_0", "Q4_K_M", "Q8_0", "F16"):
            models[f"{shape}-{q.lower()}"] = (name, q, lambda shape=shape, q=q: text_models.quantized_model(
                a.models, shape, q, bin_dir))
    wanted = a.only.split(",") if a.only else list(models)
    args = ["--device", "cpu", "-t", str(a.threads), "-p", str(a.n_prompt), "-n", str(a.n_gen),
            "-r", str(a.repetitions), "--compare", "llama.cpp"]
    if a.llama_bench:
        args += ["--llama-bench", a.llama_bench]
    results = []
    for key in wanted:
        name, fmt, make = models[key]
        results.append((name, fmt, common.akunu_bench(make(), *args)))
    rows = [r for _, _, rs in results for r in rs]
    print(common.header(rows, common.command_line("bench.text_cpu")))
    print()
    print(common.text_table(results, a.n_prompt, a.n_gen))
    print(f"\nrows: {common.save_json('text_cpu', a.json, rows)}")


if __name__ == "__main__":
    main()
