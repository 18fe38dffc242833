"""Text on an Apple GPU, akunu's Metal backend beside llama.cpp's: pp512 and
tg128 tok/s of the real Gemma 3 270M (Q4_K_M) and of random-weight models at
the shapes and vocabularies of Qwen3-0.6B and Llama-3.2-1B in F16, Q4_0,
Q8_0 and Q4_K_M (llama.cpp's llama-quantize), both engines on the same files
in one run. llama.cpp runs as llama-bench with every layer on the GPU and
flash attention (-ngl 99 -fa 1).

  pip install ".[test,models]"     # on an Apple Silicon Mac: the Metal backend is on by default
  python -m bench.text_metal [-r 3] [--shapes qwen3-0.6b,llama-3.2-1b] [--formats F16,Q4_0,Q8_0,Q4_K_M]
  python -m bench.text_metal --llama-cpp SRC      # llama.cpp sources to build with -DGGML_METAL=ON
  python -m bench.text_metal --llama-bench BIN_DIR    # prebuilt llama-bench and llama-quantize

With neither flag llama.cpp's sources are fetched from PyPI (the sdist of
the llama-cpp-python the other tables use) and built into SRC/build-metal.
Models are written once to --models (default ~/.cache/akunu-bench/models).
Prints a Markdown table (each line also to stderr as it is measured) and
writes every row as JSON (--json). The macOS workflow runs it and shows the
table in its summary: the book's claim (decode 1.83x llama.cpp on an M4 Pro)
measured on the runner's chip.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import common, text_models

SHAPES = ("qwen3-0.6b", "llama-3.2-1b")
FORMATS = ("F16", "Q4_0", "Q8_0", "Q4_K_M")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.text_metal", description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="random-weight shapes (of bench/text_models.py)")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--no-gemma", action="store_true", help="leave out the real Gemma 3 270M")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-cpp", metavar="SRC", help="llama.cpp sources to build with -DGGML_METAL=ON")
    src.add_argument("--llama-bench", metavar="BIN_DIR", help="folder of prebuilt llama-bench and llama-quantize")
    ap.add_argument("--models", default=os.path.join(common.CACHE, "models"))
    ap.add_argument("--json", default=None, help="where to write every row (default ~/.cache/akunu-bench/)")
    a = ap.parse_args(argv)
    shapes = [s for s in a.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in text_models.SHAPES]
    if unknown:
        sys.exit(f"unknown shapes {unknown}; known: {', '.join(text_models.SHAPES)}")
    if sys.platform != "darwin":
        sys.exit("bench.text_metal measures Apple GPUs: run it on an Apple Silicon Mac")
    common.check_akunu_device("metal", "on an Apple Silicon Mac, pip install . builds the Metal backend")
    if a.llama_bench:
        bins = a.llama_bench
    else:
        srcdir = a.llama_cpp or text_models.fetch_llama_cpp_sources(os.path.join(common.CACHE, "src"))
        bins = text_models.build_llama_cpp(srcdir, cuda=False, metal=True)
    args = ["--device", "metal", "-p", str(a.n_prompt), "-n", str(a.n_gen), "-r", str(a.repetitions),
            "--compare", "llama.cpp", "--llama-bench", os.path.join(bins, "llama-bench")]
    models = [] if a.no_gemma else [("Gemma 3 270M", "Q4_K_M", "gemma3-270m")]
    models += [(shape, fmt, None) for shape in shapes for fmt in a.formats.split(",") if fmt]
    results = []
    for name, fmt, path in models:
        path = path or text_models.quantized_model(a.models, name, fmt, bins)
        results.append((name, fmt, common.akunu_bench(path, *args)))
        print(common.text_table(results[-1:], a.n_prompt, a.n_gen).splitlines()[-1], file=sys.stderr, flush=True)
    rows = [r for _, _, rs in results for r in rs]
    print(common.header(rows, common.command_line("bench.text_metal")))
    print()
    print(common.text_table(results, a.n_prompt, a.n_gen))
    print(f"\nrows: {common.save_json('text_metal', a.json, rows)}")


if __name__ == "__main__":
    main()
