"""The text models of the benchmark tables: random weights at real shapes and
vocabularies (tests.fixtures.random_gguf, F16), quantized by llama.cpp's
quantizer (llama-quantize, or llama-cpp-python's binding of it), so both
engines read the same files with llama.cpp's quantization mixes; and
llama.cpp itself, built from its sources when no binaries are given."""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import List, Optional

from tests.fixtures import random_gguf

SHAPES = {
    "qwen3-0.6b": ("qwen3", dict(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, ffn_dim=3072,
                                 vocab=151936, ctx=40960)),
    "llama-3.2-1b": ("llama", dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64, ffn_dim=8192,
                                   vocab=128256, ctx=131072)),
    "llama-3.1-8b": ("llama", dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, ffn_dim=14336,
                                   vocab=128256, ctx=131072)),
}
# llama-cpp-python's release whose vendored llama.cpp the recorded tables used
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"


def f16_model(folder: str, shape: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{shape}-F16.gguf")
    if not os.path.exists(path):
        arch, dims = SHAPES[shape]
        print(f"writing {path}", file=sys.stderr, flush=True)
        random_gguf.write_model(path + ".part", arch, "F16", seed=1, shape=random_gguf.Shape(**dims),
                                fast_normals=True)
        os.replace(path + ".part", path)
    return path


def quantized_model(folder: str, shape: str, ftype: str, bin_dir: Optional[str] = None) -> str:
    """`shape` in llama.cpp's file type `ftype` (F16, Q4_0, Q8_0, Q4_K_M, ...), made once."""
    dst = os.path.join(folder, f"{shape}-{ftype}.gguf")
    if ftype != "F16" and os.path.exists(dst):
        return dst  # (without making the F16 source again: 16 GB at 8B)
    src = f16_model(folder, shape)
    if ftype == "F16":
        return src
    print(f"quantizing {dst}", file=sys.stderr, flush=True)
    tool = os.path.join(bin_dir, "llama-quantize") if bin_dir else shutil.which("llama-quantize")
    if tool and os.path.exists(tool):
        subprocess.run([tool, src, dst + ".part", ftype, str(os.cpu_count() or 1)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        try:
            import llama_cpp
        except ImportError:
            sys.exit(f"{dst} needs llama.cpp's quantizer: llama-quantize (--llama-bench DIR holding it, or on "
                     "PATH) or llama-cpp-python")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
        params.nthread = os.cpu_count() or 1
        if llama_cpp.llama_model_quantize(src.encode(), (dst + ".part").encode(), ctypes.byref(params)) != 0:
            sys.exit(f"llama.cpp's quantizer failed on {src}")
    os.replace(dst + ".part", dst)
    return dst


def fetch_llama_cpp_sources(dest: str) -> str:
    """llama.cpp's sources as vendored by LLAMA_CPP_PYTHON (its sdist from PyPI), unpacked at dest/llama.cpp."""
    out = os.path.join(dest, "llama.cpp")
    if os.path.exists(os.path.join(out, "CMakeLists.txt")):
        return out
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", "-d", tmp, LLAMA_CPP_PYTHON], check=True)
        (sdist,) = glob.glob(os.path.join(tmp, "*.tar.gz"))
        with tarfile.open(sdist) as t:
            t.extractall(tmp)
        (vendored,) = glob.glob(os.path.join(tmp, "llama_cpp_python-*", "vendor", "llama.cpp"))
        # the top level's models/ (test vocabularies, hundreds of MB), docs/ and media/ are not needed
        top = os.path.abspath(vendored)
        shutil.copytree(vendored, out, ignore=lambda d, names: [n for n in names if os.path.abspath(d) == top
                                                                and n in ("models", "docs", "media")])
    return out


def avx512_options() -> List[str]:
    """llama.cpp's switches for the AVX-512 features this CPU reports (Linux /proc/cpuinfo; none elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []
    if "avx512f" not in flags:
        return []
    wanted = {"avx512_vbmi": "GGML_AVX512_VBMI", "avx512vbmi": "GGML_AVX512_VBMI", "avx512_vnni": "GGML_AVX512_VNNI",
              "avx512_bf16": "GGML_AVX512_BF16"}
    return ["GGML_AVX512"] + sorted({opt for flag, opt in wanted.items() if flag in flags})


def llama_cpp_cmake_flags(backend: str, targets, cuda_arch: str = "native") -> List[str]:
    """CMake switches for llama.cpp's `backend` ("cpu", "cuda" or "metal") and `targets`."""
    server = "ON" if "llama-server" in targets else "OFF"
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
             f"-DLLAMA_BUILD_SERVER={server}", "-DLLAMA_BUILD_EXAMPLES=OFF"]
    if backend == "cuda":
        flags += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}"]
    elif backend == "metal":  # Apple Silicon: Metal with its shaders embedded in the library, native CPU code
        flags += ["-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON"]
    else:  # llama.cpp's native CPU build crashes on some AMX machines: the CPU's features named one by one
        flags += ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
        flags += [f"-D{opt}=ON" for opt in avx512_options()]
    return flags


def build_llama_cpp(src: str, cuda: bool, cuda_arch: str = "native",
                    targets=("llama-bench", "llama-quantize"), metal: bool = False) -> str:
    """`targets` (llama-bench, llama-quantize, llama-server) built from llama.cpp's sources at src (CUDA
    on, Metal on with `metal`, or a CPU build that does not assume this machine's instruction set);
    returns their folder."""
    backend = "cuda" if cuda else "metal" if metal else "cpu"
    build = os.path.join(src, f"build-{backend}")
    bins = os.path.join(build, "bin")
    if all(os.path.exists(os.path.join(bins, b)) for b in targets):
        return bins
    flags = llama_cpp_cmake_flags(backend, targets, cuda_arch)
    print(f"building llama.cpp in {build}", file=sys.stderr, flush=True)
    subprocess.run(["cmake", "-S", src, "-B", build, *flags], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", *targets], check=True,
                   stdout=subprocess.DEVNULL)
    return bins
