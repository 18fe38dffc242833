"""Text on one NVIDIA GPU, akunu beside llama.cpp: pp512 and tg128 tok/s of
random-weight models at the shapes and vocabularies of Qwen3-0.6B,
Llama-3.2-1B and Llama-3.1-8B, in F16, Q4_0, Q8_0 and Q4_K_M (llama.cpp's
llama-quantize), both engines on the same files in one run. llama.cpp runs as
llama-bench with every layer on the GPU and flash attention (-ngl 99 -fa 1),
the better of its default and GGML_CUDA_GRAPH_OPT=1.

  pip install ".[test]"     # with nvcc on PATH, so that akunu builds its CUDA backend
  python -m bench.text_cuda --llama-cpp SRC [-r 3] [--shapes qwen3-0.6b,llama-3.2-1b,llama-3.1-8b]
  python -m bench.text_cuda --llama-bench BIN_DIR [-r 3]     # prebuilt llama-bench and llama-quantize

SRC is a llama.cpp source tree (git clone https://github.com/ggml-org/llama.cpp,
or the one the recorded table used: `python -m tools.prepare_offline DEST`
puts it at DEST/llama.cpp); it is built with CMake and -DGGML_CUDA=ON into
SRC/build-cuda (needs cmake and nvcc on PATH). With neither flag the sources
are fetched from PyPI (llama-cpp-python's sdist). Models are written once to
--models (default ~/.cache/akunu-bench/models; about 42 GB with the 8B
shape, whose F16 file alone is 16 GB). Prints a Markdown table (each line
also to stderr as it is measured) and writes every row as JSON (--json).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from . import common, text_models

FORMATS = ("F16", "Q4_0", "Q8_0", "Q4_K_M")


def check_akunu_cuda() -> None:
    """Fails early when akunu cannot run on the GPU."""
    common.check_akunu_device("cuda", "install it where nvcc is on PATH (pip install .), which builds its CUDA "
                                      "backend")


def gpu_arch() -> str:
    """The first GPU's compute capability as CMake names it ("9.0" -> "90"), else CMake's "native"."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                         text=True)
    cap = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else ""
    return cap.replace(".", "") if cap.replace(".", "").isdigit() else "native"


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.text_cuda", description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--shapes", default=",".join(text_models.SHAPES))
    ap.add_argument("--formats", default=",".join(FORMATS))
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-cpp", metavar="SRC", help="llama.cpp sources to build with -DGGML_CUDA=ON")
    src.add_argument("--llama-bench", metavar="BIN_DIR", help="folder of prebuilt llama-bench and llama-quantize")
    ap.add_argument("--cuda-arch", default=None,
                    help="CMAKE_CUDA_ARCHITECTURES for llama.cpp (default: the GPU's compute capability, e.g. 90)")
    ap.add_argument("--models", default=os.path.join(common.CACHE, "models"))
    ap.add_argument("--json", default=None, help="where to write every row (default ~/.cache/akunu-bench/)")
    a = ap.parse_args()
    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
        sys.exit("no NVIDIA GPU visible here (nvidia-smi -L)")
    check_akunu_cuda()
    if a.llama_bench:
        bins = a.llama_bench
    else:
        srcdir = a.llama_cpp or text_models.fetch_llama_cpp_sources(os.path.join(common.CACHE, "src"))
        bins = text_models.build_llama_cpp(srcdir, cuda=True, cuda_arch=a.cuda_arch or gpu_arch())
    args = ["--device", "cuda", "-p", str(a.n_prompt), "-n", str(a.n_gen), "-r", str(a.repetitions),
            "--compare", "llama.cpp", "--llama-bench", os.path.join(bins, "llama-bench")]
    results = []
    for shape in a.shapes.split(","):
        for fmt in a.formats.split(","):
            path = text_models.quantized_model(a.models, shape, fmt, bins)
            results.append((shape, fmt, common.akunu_bench(path, *args)))
            print(common.text_table(results[-1:], a.n_prompt, a.n_gen).splitlines()[-1], file=sys.stderr,
                  flush=True)
    rows = [r for _, _, rs in results for r in rs]
    print(common.header(rows, common.command_line("bench.text_cuda")))
    print()
    print(common.text_table(results, a.n_prompt, a.n_gen))
    print(f"\nrows: {common.save_json('text_cuda', a.json, rows)}")


if __name__ == "__main__":
    main()
