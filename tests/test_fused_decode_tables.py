"""The fused decode tables (gemv_multi, qk_norm_rope_kv: what GPUs replay)
built on the CPU, whose twins of those kernels are the unfused sequences:
greedy tokens must equal the CPU's unfused tables for every architecture, a
float and a quantized format, plain and sampled decode. This checks the table
builder's wiring of the fused commands (buffers, shapes, per-layer choices)
without a GPU; the CUDA kernels themselves are compared with the twins in
test_device_kernels.py."""

import glob
import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf

ROOT = os.path.dirname(os.path.abspath(__file__))
QUANTIZED = sorted(glob.glob(os.path.join(ROOT, "models", "*.gguf")))[:6]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("fused")
    out = []
    for arch in random_gguf.ARCHS:
        p = str(d / f"{arch}-F16.gguf")
        random_gguf.write_model(p, arch, "F16", seed=21)
        out.append(p)
    return out + QUANTIZED


def generate(path, fused, **kw):
    os.environ["AKUNU_CPU_FUSED_DECODE"] = "1" if fused else "0"
    try:
        m = akunu.load(path, n_ctx=128)
    finally:
        del os.environ["AKUNU_CPU_FUSED_DECODE"]
    ids = np.random.default_rng(5).integers(0, m.config["vocab_size"], 9).tolist()
    return m.generate(ids, max_tokens=20, **kw).tokens


def test_fused_tables_give_the_unfused_tokens(models):
    for path in models:
        for kw in ({}, {"temperature": 0.9, "top_k": 20, "seed": 3}):
            assert generate(path, True, **kw) == generate(path, False, **kw), (os.path.basename(path), kw)


def test_gemv_multi_bad_parameters_are_clear_errors():
    from tests.fixtures import kernel_params as kp
    from akunu import _testing
    x = np.ones((1, 64), np.float32)
    w = np.ones((8, 64), np.float32).view(np.uint8)
    bufs = [x, np.ones(64, np.float32), w, w, w] + [np.zeros((1, 8), np.float32) for _ in range(3)]
    with pytest.raises(akunu.AkunuError, match="bad matrix count or mode"):
        _testing.run_kernel("gemv_multi", bufs, kp.multi_gemv(64, 1, 9, [8], [0]), device="cpu")
    with pytest.raises(akunu.AkunuError, match="unsupported weight type"):
        _testing.run_kernel("gemv_multi", bufs, kp.multi_gemv(64, 1, 0, [8], [77]), device="cpu")


def test_rmsnorm_residual_bad_parameters_are_clear_errors():
    from tests.fixtures import kernel_params as kp
    from akunu import _testing
    y, h = np.ones((2, 64), np.float32), np.zeros((2, 64), np.float32)
    w = np.ones(64, np.float32)
    with pytest.raises(akunu.AkunuError, match="one row a token"):
        _testing.run_kernel("rmsnorm_residual", [y, w, h], kp.norm(32, 2, 2, 64, 1e-6), device="cpu")
