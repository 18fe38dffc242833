"""The CUDA backend under each choice its tuning leaves open (CudaTuning,
backend/cuda/cuda_tuning.h), set through AKUNU_CUDA_TUNING before the model
is loaded, against the CPU backend: prefill logits and greedy tokens (decode
through CUDA graphs), then one-token decode steps (the decode GEMVs and the
Q8Links between them). The defaults run in tests/test_cuda.py. Skips with the
reason when this build has no CUDA backend or no GPU is visible."""

import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import compare_with_cpu, rel_l2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "models")

# Every setting other than a default, and a few together (one line each: what it reaches).
SETTINGS = [
    "pdl=0",                                   # plain launches, no programmatic dependents
    "graph_steps=1",                           # a graph a decode step
    "graph_steps=5",                           # chunks of 5 steps and a one-step remainder
    "prefetch_bytes=0,float_prefetch_bytes=0",  # no L2 prefetch before the wait
    "prefetch_bytes=65536,float_prefetch_bytes=65536",  # whole rows
    "sm_count=1,lean_min_bytes=0",             # the lean GEMV kernel wherever it can run, one attention split
    "sm_count=4096",                           # the general GEMV kernel on short rows, many attention splits
    "q8_link=none",                            # every reader rounds or normalizes its own input
    "q8_link=attention",
    "q8_link=gate",
    "q8_link=residual",
    "prefill_gemm=tc",                         # prefill GEMMs on akunu's tensor-core kernels alone
    "prefill_gemm=blas",                       # every prefill GEMM cuBLAS can take
    "repack=0",                                # Q4_0 / Q8_0 / Q6_K in GGUF's layout
    "batch_decode=tc",                         # batched decode rows on the split-K prompt GEMM (64-row tiles)
    "batch_decode=gemv",                       # batched decode rows through the GEMV (8 rows a weight read)
    "gqa_min_span=0",                          # grouped-query decode attention for every cache
    "fused_batch=0",                           # batch tables with the plain kernels (16 launches a layer)
    "moe_tensor_cores=0",                      # prefill's expert matmuls on the float kernels
    "moe_tile_rows=32",                        # prefill's expert tiles of 32 routed rows
    "moe_int8_decode=0",                       # a decode token's expert matmuls on float activations
    "moe_fuse_decode=0",                       # a decode token's expert gate, up and activation a kernel each
    "prefill_async=0",                         # prefill attention tiles through registers, one at a time
    "prefill_splits=3",                        # prefill attention's keys in 3 splits, most of them empty here
    "paged_prefill_tc=0",                      # paged prompt rows through the per-row attention kernel
    "blas_chunk_mb=1",                         # quantized prefill weights decoded 1 MiB of F16 rows a cuBLAS call
    "rows_half=0",                             # F16 / BF16 decode rows through gemm_rows.cuh's shared-memory tiles
    "rows_kq=2",                               # Q4_K / Q6_K_X8 decode rows decoded to F16 in every engine
    "rows_kq=0",                               # Q4_K / Q6_K_X8 decode rows of large engines on the 64-row tiles
    "paged_split_tiles=1",                     # batched decode attention's keys in splits of one 64-key tile
]

QWEN3_06B_WIDTHS = dict(dim=1024, ffn_dim=3072, n_heads=16, n_kv_heads=8, head_dim=128)
LLAMA_1B_WIDTHS = dict(dim=2048, ffn_dim=8192, n_heads=32, n_kv_heads=8, head_dim=64)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Files that reach every kernel a setting changes: integer formats (Q4_0,
    Q8_0, Q4_K + Q6_K), float rows, Gemma 3's post-norms, and two layers at
    real widths, where the lean GEMV kernels and the Q8Link block writers run."""
    d = tmp_path_factory.mktemp("cuda-tuning")
    out = [os.path.join(MODELS, n) for n in ("llama-q4_0.gguf", "qwen3-q8_0.gguf", "gemma3-q4_k_m.gguf")]
    out = [p for p in out if os.path.exists(p)]
    p = str(d / "gemma3-BF16.gguf")
    random_gguf.write_model(p, "gemma3", "BF16", seed=13)
    out.append(p)
    for arch, dtype, widths in (("qwen3", "Q4_0", QWEN3_06B_WIDTHS), ("llama", "Q8_0", LLAMA_1B_WIDTHS),
                                ("llama", "F16", LLAMA_1B_WIDTHS)):
        p = str(d / f"{arch}-{dtype}-wide.gguf")
        shape = random_gguf.Shape(n_layers=2, vocab=512, ctx=512, **widths)
        random_gguf.write_model(p, arch, dtype, seed=3, shape=shape)
        out.append(p)
    return out


def load_cuda(path, tuning, monkeypatch):
    monkeypatch.setenv("AKUNU_CUDA_TUNING", tuning)
    try:
        return akunu.load(path, device="cuda", n_ctx=256)
    except akunu.AkunuError as e:
        if "not available" in str(e):
            pytest.skip(f"no CUDA: {e}")
        if "prefill_gemm=blas" in str(e):
            pytest.skip(f"cuBLAS does not load here: {e}")
        raise


def tolerance(path):
    return 2e-3 if "-F16" in path or "-BF16" in path else 3e-2


@pytest.mark.parametrize("tuning", SETTINGS)
def test_models_match_cpu(models, tuning, monkeypatch):
    for path in models:
        compare_with_cpu(load_cuda(path, tuning, monkeypatch), path, tolerance(path))


@pytest.mark.parametrize("tuning", SETTINGS)
def test_decode_steps_match_cpu(models, tuning, monkeypatch):
    for path in models:
        gpu = load_cuda(path, tuning, monkeypatch)
        cpu = akunu.load(path, n_ctx=256)
        ids = np.random.default_rng(7).integers(0, cpu.config["vocab_size"], 20).tolist()
        for m in (cpu, gpu):
            m._core().prefill(ids)
        for t in ids[:4]:
            err = rel_l2(gpu._core().decode_logits(t), cpu._core().decode_logits(t))
            assert err < tolerance(path), f"{os.path.basename(path)} ({tuning}): decode step relative L2 {err:.2e}"


@pytest.mark.parametrize("tuning,message", [
    ("graph_step=2", "unknown key 'graph_step'"),
    ("graph_steps=0", "bad value '0' for graph_steps"),
    ("pdl=maybe", "bad value 'maybe' for pdl"),
    ("fused_batch=2", "bad value '2' for fused_batch"),
    ("gqa_min_span=-1", "bad value '-1' for gqa_min_span"),
    ("prefill_async=yes", "bad value 'yes' for prefill_async"),
    ("prefill_splits=9", "bad value '9' for prefill_splits"),
    ("paged_prefill_tc=2", "bad value '2' for paged_prefill_tc"),
    ("rows_half=yes", "bad value 'yes' for rows_half"),
    ("rows_kq=3", "bad value '3' for rows_kq"),
    ("blas_chunk_mb=0", "bad value '0' for blas_chunk_mb"),
    ("paged_split_tiles=0", "bad value '0' for paged_split_tiles"),
    ("moe_tile_rows=48", "bad value '48' for moe_tile_rows"),
    ("moe_tile_rows=128", "bad value '128' for moe_tile_rows"),
    ("moe_fuse_decode=yes", "bad value 'yes' for moe_fuse_decode"),
    ("q8_link=attention+norm", "bad value 'attention+norm' for q8_link"),
    ("batch_decode=wide", "bad value 'wide' for batch_decode (auto, rows, tc or gemv)"),
    ("prefill_gemm", "is not key=value"),
])
def test_bad_tuning_is_a_clear_error(tuning, message, monkeypatch):
    path = os.path.join(MODELS, "llama-q4_0.gguf")
    monkeypatch.setenv("AKUNU_CUDA_TUNING", tuning)
    try:
        akunu.load(path, device="cuda", n_ctx=256)
    except akunu.AkunuError as e:
        if "not available" in str(e):
            pytest.skip(f"no CUDA: {e}")
        assert "AKUNU_CUDA_TUNING" in str(e) and message in str(e), str(e)
    else:
        pytest.fail(f"AKUNU_CUDA_TUNING={tuning} loaded without an error")
