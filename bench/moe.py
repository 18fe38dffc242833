"""Mixture of experts on one NVIDIA GPU, akunu beside llama.cpp: pp512 and
tg128 tok/s of random-weight models at the real shape of Qwen3-30B-A3B
(qwen3moe: 48 layers, 128 experts of which 8 run per token, expert FFN 768,
vocabulary 151936), in Q4_K_M and Q8_0, and of gpt-oss-20b (24 layers, 32
experts of which 4 run per token, expert FFN 2880, vocabulary 201088,
sliding-window layers of 128 alternating with global ones, attention sinks)
in MXFP4 (its experts; Q8_0 elsewhere, as llama.cpp's gpt-oss files), both
engines on the same files in one run. llama.cpp runs as llama-bench with every layer on the GPU and flash
attention (-ngl 99 -fa 1), the better of its default and GGML_CUDA_GRAPH_OPT=1.

  pip install ".[test]"     # with nvcc on PATH, so that akunu builds its CUDA backend
  python -m bench.moe --llama-cpp SRC [-r 3] [--models q4_k_m,q8_0] [--delete-after]
  python -m bench.moe --llama-cpp SRC --shape gpt-oss-20b --models mxfp4

Beside each tg row, the active-weight bytes one decode step reads (every
tensor but the token embedding table, of which it reads one row, and of each
expert tensor the share n_experts_used / n_experts) and that times tok/s as a
fraction of the GPU's measured copy bandwidth, for both engines. The bars:
tg128 at least 1.5x llama.cpp, pp512 at least 1.2x.

The models are written directly as random blocks (no float source, no
llama.cpp quantizer): Q4_K / Q6_K placed as llama.cpp's Q4_K_M places them,
and Q8_0 everywhere but the norms and the expert router (llama.cpp's Q8_0),
once each into --models-dir (default ~/.cache/akunu-bench/models): about 18
and 32 GB, in a minute or so each. On a disk that cannot hold both, pass
--delete-after, which removes each file once its rows are measured. SRC and
--llama-bench are as in bench.text_cuda (only llama-bench is built).
--shape tiny (with --device cpu --skip-llama) runs the whole driver on a
small qwen3moe in seconds, on any machine.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import sys
from typing import Dict, List, Optional, Tuple

from . import common, text_models
from .serving import copy_bandwidth
from .text_cuda import check_akunu_cuda, gpu_arch

SHAPES = {
    # Qwen3-30B-A3B's config.json: intermediate_size 6144 (no dense layer uses it), moe_intermediate_size 768
    "qwen3-30b-a3b": dict(dim=2048, n_layers=48, n_heads=32, n_kv_heads=4, head_dim=128, ffn_dim=6144,
                          vocab=151936, ctx=40960, n_experts=128, n_experts_used=8, expert_ffn_dim=768),
    # gpt-oss-20b's config.json (intermediate_size is the experts' width; no dense FFN)
    "gpt-oss-20b": dict(dim=2880, n_layers=24, n_heads=64, n_kv_heads=8, head_dim=64, ffn_dim=2880, vocab=201088,
                        ctx=131072, n_experts=32, n_experts_used=4, expert_ffn_dim=2880, sliding_window=128),
    # every matrix's rows a multiple of 256 wide (the experts' too), as Q4_K / Q6_K blocks need
    "tiny": dict(dim=256, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=64, ffn_dim=512, vocab=1024, ctx=4096,
                 n_experts=16, n_experts_used=4, expert_ffn_dim=256),
}
ARCH = {"qwen3-30b-a3b": "qwen3moe", "gpt-oss-20b": "gpt-oss", "tiny": "qwen3moe"}
# --models name: (the format's name in the table, random_gguf's dtype)
FORMATS = {"q4_k_m": ("Q4_K_M", "Q4_K_M-blocks"), "q8_0": ("Q8_0", "Q8_0-blocks"), "mxfp4": ("MXFP4", "MXFP4-blocks")}
# the formats each family's files come in
ARCH_FORMATS = {"qwen3moe": ("q4_k_m", "q8_0"), "gpt-oss": ("mxfp4",)}
BARS = {"pp": 1.2, "tg": 1.5}  # akunu / llama.cpp each kind of test must reach


def expected_tensors(d: Dict, arch: str = "qwen3moe") -> Dict[str, Tuple[int, ...]]:
    """The tensors llama.cpp's loader of arch (qwen3moe, gpt-oss) asks for, with their GGUF shapes (ne0 first)."""
    qd, kvd, e, f = d["n_heads"] * d["head_dim"], d["n_kv_heads"] * d["head_dim"], d["n_experts"], d["expert_ffn_dim"]
    dim = d["dim"]
    out = {"token_embd.weight": (dim, d["vocab"]), "output_norm.weight": (dim,), "output.weight": (dim, d["vocab"])}
    for layer in range(d["n_layers"]):
        p = f"blk.{layer}."
        out.update({p + "attn_norm.weight": (dim,), p + "attn_q.weight": (dim, qd),
                    p + "attn_k.weight": (dim, kvd), p + "attn_v.weight": (dim, kvd),
                    p + "attn_output.weight": (qd, dim),
                    p + "ffn_gate_inp.weight": (dim, e), p + "ffn_gate_exps.weight": (dim, f, e),
                    p + "ffn_up_exps.weight": (dim, f, e), p + "ffn_down_exps.weight": (f, dim, e)})
        if arch == "gpt-oss":  # biases everywhere, sinks, and the FFN norm under its own name
            out.update({p + "attn_q.bias": (qd,), p + "attn_k.bias": (kvd,), p + "attn_v.bias": (kvd,),
                        p + "attn_output.bias": (dim,), p + "attn_sinks.weight": (d["n_heads"],),
                        p + "post_attention_norm.weight": (dim,), p + "ffn_gate_inp.bias": (e,),
                        p + "ffn_gate_exps.bias": (f, e), p + "ffn_up_exps.bias": (f, e),
                        p + "ffn_down_exps.bias": (dim, e)})
        else:
            out.update({p + "attn_q_norm.weight": (d["head_dim"],), p + "attn_k_norm.weight": (d["head_dim"],),
                        p + "ffn_norm.weight": (dim,)})
    return out


def expected_type(fmt: str, name: str, n_layers: int) -> str:
    """The type llama.cpp's quantizer gives the tensor `name` in the file type fmt (Q4_K_M or Q8_0), for
    models of other than 8 experts (8-expert models get Q8_0 attn_k / attn_v and Q5_K attn_output); MXFP4:
    gpt-oss's files (MXFP4 experts, Q8_0 elsewhere)."""
    from tests.fixtures.random_gguf import use_more_bits

    if name.endswith(("norm.weight", "ffn_gate_inp.weight", ".bias", "attn_sinks.weight")):  # never quantized
        return "F32"
    if fmt == "MXFP4":
        return "MXFP4" if "_exps." in name else "Q8_0"
    if fmt == "Q8_0":
        return "Q8_0"
    if name == "output.weight":
        return "Q6_K"
    # its ffn_down rule matches ffn_down_exps too, by name
    if name.endswith(("attn_v.weight", "ffn_down_exps.weight")) and use_more_bits(int(name.split(".")[1]), n_layers):
        return "Q6_K"
    return "Q4_K"


def tensor_bytes(shape: Tuple[int, ...], type_name: str) -> int:
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    n = 1
    for x in shape:
        n *= x
    return n // block * size


def expected_file_bytes(d: Dict, fmt: str, arch: str = "qwen3moe") -> int:
    """The tensor data of the file (its metadata, the vocabulary mostly, adds a few MB)."""
    return sum(tensor_bytes(s, expected_type(fmt, name, d["n_layers"]))
               for name, s in expected_tensors(d, arch).items())


def layout_problems(path: str, d: Dict, fmt: str, arch: str = "qwen3moe") -> List[str]:
    """What differs between the file (read by gguf-py) and llama.cpp's arch at shape d in format fmt:
    the hyperparameters, the tensors' names, shapes and types. Empty when it is as expected."""
    import gguf

    r = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in r.fields.items()}
    a = arch + "."
    keys = {"general.architecture": arch, a + "block_count": d["n_layers"],
            a + "embedding_length": d["dim"], a + "attention.head_count": d["n_heads"],
            a + "attention.head_count_kv": d["n_kv_heads"], a + "attention.key_length": d["head_dim"],
            a + "attention.value_length": d["head_dim"], a + "expert_count": d["n_experts"],
            a + "expert_used_count": d["n_experts_used"],
            a + "expert_feed_forward_length": d["expert_ffn_dim"]}
    if arch == "gpt-oss":  # its YaRN and its local layers' window
        keys.update({a + "rope.freq_base": 150000.0, a + "rope.scaling.type": "yarn", a + "rope.scaling.factor": 32.0,
                     a + "rope.scaling.original_context_length": 4096, a + "attention.sliding_window": 128})
    else:
        keys[a + "rope.freq_base"] = 1e6
    problems = [f"{k} = {meta.get(k)!r}, not {v!r}" for k, v in keys.items() if meta.get(k) != v]
    eps = meta.get(a + "attention.layer_norm_rms_epsilon")
    if eps is None or abs(eps - 1e-6) > 1e-9:
        problems.append(f"rms eps {eps!r}, not 1e-6")
    if a + "expert_shared_feed_forward_length" in meta:
        problems.append("a shared expert, which this model has not")
    got = {t.name: t for t in r.tensors}
    want = expected_tensors(d, arch)
    problems += [f"missing {n}" for n in want if n not in got]
    problems += [f"unexpected {n}" for n in got if n not in want]
    for name, shape in want.items():
        t = got.get(name)
        if t is None:
            continue
        if tuple(int(x) for x in t.shape) != shape:
            problems.append(f"{name}: shape {[int(x) for x in t.shape]}, not {list(shape)}")
        if t.tensor_type.name != expected_type(fmt, name, d["n_layers"]):
            problems.append(f"{name}: {t.tensor_type.name}, not {expected_type(fmt, name, d['n_layers'])}")
    return problems


def active_bytes_per_token(path: str) -> int:
    """Bytes of the weights one decode step reads: every tensor, but one row of the token embedding table
    (when the model has its own output matrix) and n_experts_used / n_experts of each expert tensor."""
    import gguf

    r = gguf.GGUFReader(path)
    arch = r.fields["general.architecture"].contents()
    n_experts = r.fields[f"{arch}.expert_count"].contents()
    used = r.fields[f"{arch}.expert_used_count"].contents()
    names = {t.name for t in r.tensors}
    total = 0
    for t in r.tensors:
        if t.name == "token_embd.weight" and "output.weight" in names:
            total += int(t.n_bytes) // int(t.shape[-1])  # one row of vocab rows
        elif "_exps." in t.name:
            total += int(t.n_bytes) * used // n_experts
        else:
            total += int(t.n_bytes)
    return total


def model_file(folder: str, shape: str, fmt: str) -> str:
    """The random-weight file of shape in fmt (a key of FORMATS), written once; exits when the disk has
    no room for it."""
    from tests.fixtures import random_gguf

    label, dtype = FORMATS[fmt]
    path = os.path.join(folder, f"{shape}-{dtype}.gguf")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    size = expected_file_bytes(SHAPES[shape], label, ARCH[shape])
    free = shutil.disk_usage(folder).free
    if size + (64 << 20) > free:  # (the metadata, mostly the vocabulary, takes a few MB more)
        sys.exit(f"{path} needs about {gigabytes(size)}, {folder} has {gigabytes(free)} free: free some "
                 "(--delete-after removes each file once measured) or pick one with --models")
    print(f"writing {path} ({gigabytes(size)})", file=sys.stderr, flush=True)
    try:
        # llama_cpp_experts: ffn_down_exps in Q6_K where llama.cpp's Q4_K_M puts them (ignored by Q8_0-blocks)
        random_gguf.write_model(path + ".part", ARCH[shape], dtype, seed=1, shape=random_gguf.Shape(**SHAPES[shape]),
                                llama_cpp_experts=True)
    except OSError as e:
        if os.path.exists(path + ".part"):
            os.remove(path + ".part")
        if e.errno == errno.ENOSPC:
            sys.exit(f"{folder} ran out of space writing {path}: free some or pass --delete-after")
        raise
    os.replace(path + ".part", path)
    return path


def gigabytes(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.2f} MB"


def ratio(a: Optional[Dict], p: Optional[Dict]) -> Optional[float]:
    return a["avg_ts"] / p["avg_ts"] if a and p and p["avg_ts"] > 0 else None


def fraction(active: int, r: Optional[Dict], bandwidth: Optional[float]) -> str:
    return f"{active * r['avg_ts'] / bandwidth:.0%}" if r and bandwidth else "-"


def moe_table(results: List[tuple], pp: int, tg: int, bandwidth: Optional[float]) -> str:
    """One line per (model, test): both engines' tok/s, their ratio against its bar, and on tg lines the
    active-weight bytes per token and each engine's share of the copy bandwidth."""
    lines = ["| model | test | llama.cpp t/s | akunu t/s | ratio | bar | active bytes/token "
             "| akunu / copy bandwidth | llama.cpp / copy bandwidth |", "|---|---|---|---|---|---|---|---|---|"]
    for name, active, rows in results:
        by = {(r["engine"], r["test"]): r for r in rows}
        for kind, n in (("pp", pp), ("tg", tg)):
            a, p = by.get(("akunu", f"{kind}{n}")), by.get(("llama.cpp", f"{kind}{n}"))
            x = ratio(a, p)
            bar = f">= {BARS[kind]}x: " + ("met" if x >= BARS[kind] else "not met") if x is not None else "-"
            parts = [name, f"{kind}{n}", common.cell(p), common.cell(a), f"{x:.2f}x" if x is not None else "-", bar]
            if kind == "tg":
                parts += [gigabytes(active), fraction(active, a, bandwidth), fraction(active, p, bandwidth)]
            else:  # a prompt's tokens share every weight read: no per-token bound
                parts += ["-", "-", "-"]
            lines.append("| " + " | ".join(parts) + " |")
    return "\n".join(lines)


def llama_bench_binary(a) -> str:
    if a.llama_bench:
        return os.path.join(a.llama_bench, "llama-bench")
    cuda = a.device == "cuda"
    srcdir = a.llama_cpp or text_models.fetch_llama_cpp_sources(os.path.join(common.CACHE, "src"))
    bins = text_models.build_llama_cpp(srcdir, cuda=cuda, cuda_arch=a.cuda_arch or (gpu_arch() if cuda else "native"),
                                       targets=("llama-bench",))
    return os.path.join(bins, "llama-bench")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.moe", description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--models", default=None,
                    help="formats to run (default: the shape's: q4_k_m,q8_0 for qwen3moe, mxfp4 for gpt-oss)")
    ap.add_argument("--shape", default="qwen3-30b-a3b", choices=list(SHAPES),
                    help="qwen3-30b-a3b (default), gpt-oss-20b, or tiny: a small qwen3moe for trying the driver out")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="akunu-bench's --device")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-cpp", metavar="SRC", help="llama.cpp sources to build llama-bench from (-DGGML_CUDA=ON)")
    src.add_argument("--llama-bench", metavar="BIN_DIR", help="folder of a prebuilt llama-bench")
    ap.add_argument("--cuda-arch", default=None,
                    help="CMAKE_CUDA_ARCHITECTURES for llama.cpp (default: the GPU's compute capability, e.g. 90)")
    ap.add_argument("--skip-llama", action="store_true", help="akunu alone")
    ap.add_argument("--models-dir", default=os.path.join(common.CACHE, "models"))
    ap.add_argument("--delete-after", action="store_true", help="remove each model file once its rows are measured")
    ap.add_argument("--json", default=None, help="where to write every row (default ~/.cache/akunu-bench/moe.json)")
    a = ap.parse_args()
    arch = ARCH[a.shape]
    fmts = [f for f in (a.models or ",".join(ARCH_FORMATS[arch])).split(",") if f]
    if not fmts or any(f not in ARCH_FORMATS[arch] for f in fmts):
        ap.error(f"--models takes a list of {', '.join(ARCH_FORMATS[arch])} for {a.shape}")
    if a.device == "cuda":
        check_akunu_cuda()
    args = ["--device", a.device, "-p", str(a.n_prompt), "-n", str(a.n_gen), "-r", str(a.repetitions)]
    if not a.skip_llama:
        args += ["--compare", "llama.cpp", "--llama-bench", llama_bench_binary(a)]
    bandwidth = copy_bandwidth(a.device)
    results: List[tuple] = []
    sizes: List[str] = []
    for fmt in fmts:
        path = model_file(a.models_dir, a.shape, fmt)
        problems = layout_problems(path, SHAPES[a.shape], FORMATS[fmt][0], arch)
        if problems:
            sys.exit(f"{path} is not laid out as llama.cpp's {arch} {FORMATS[fmt][0]}:\n  " + "\n  ".join(problems))
        active = active_bytes_per_token(path)
        name = f"{a.shape} {FORMATS[fmt][0]}"
        sizes.append(f"{name}: {gigabytes(os.path.getsize(path))} file, {gigabytes(active)} active per token")
        rows = common.akunu_bench(path, *args)
        for r in rows:
            r.update(shape=a.shape, format=FORMATS[fmt][0], active_bytes_per_token=active, copy_bandwidth=bandwidth)
        results.append((name, active, rows))
        print("\n".join(moe_table(results[-1:], a.n_prompt, a.n_gen, bandwidth).splitlines()[2:]), file=sys.stderr,
              flush=True)
        if a.delete_after:
            os.remove(path)
    rows = [r for *_, rs in results for r in rs]
    print(common.header(rows, common.command_line("bench.moe")))
    if bandwidth:
        print(f"- Device-to-device copy: {bandwidth / 1e9:.0f} GB/s")
    for line in sizes:
        print(f"- {line}")
    print()
    print(moe_table(results, a.n_prompt, a.n_gen, bandwidth))
    print(f"\nrows: {common.save_json('moe', a.json, rows)}")


if __name__ == "__main__":
    main()
