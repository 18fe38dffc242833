"""The CPU's integer matmul on 8-row tiles (backend/cpu/kernels/int8_matmul.h)
for Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K:
against float64 numpy on the 8-bit activations it multiplies, at the shapes
of Gemma 3 270M and Qwen3-0.6B, with fresh random inputs and poisoned
outputs; one-token decode bit-identical to the same row of a many-token
pass, for any thread count; and every instruction set this CPU runs
(portable C++, AVX2, AVX-512 VNNI; forced with AKUNU_CPU_ISA in a child
process) bit-identical to the others."""

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures.quant_samples import random_matrix
from tests.test_kernels import KERNEL, q8_activations

FORMATS = [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1, T.IQ4_NL, T.MXFP4, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
SEED = int(os.environ["AKUNU_TEST_SEED"])
# (N, K): Gemma 3 270M's q / gate / down / head-like slices, Qwen3-0.6B's
# up and down, a K past one tile buffer (1024 columns), N not a multiple of 8.
SHAPES_32 = [(1024, 640), (640, 2048), (3072, 1024), (1001, 1280), (13, 96)]
SHAPES_256 = [(640, 1024), (640, 2048), (3072, 1024), (1001, 1280), (13, 256)]


SHAPES_K = (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K)


def shapes(qtype):
    return SHAPES_256 if qtype in SHAPES_K else SHAPES_32


def rng_for(*key):
    return np.random.default_rng([SEED] + [zlib.crc32(str(k).encode()) for k in key])


def run(qtype, raw, x, n, k, bias=None, n_threads=2, pad=3):
    """y with y_stride = n + pad, poisoned with NaN first; the pad columns must stay NaN."""
    m = x.shape[0]
    y = np.full((m, n + pad), np.nan, np.float32)
    bufs = [np.ascontiguousarray(raw), np.ascontiguousarray(x, np.float32), y]
    if bias is not None:
        bufs.append(bias.astype(np.float32))
    kind = "gemv" if m == 1 else "gemm"
    _testing.run_kernel(f"{kind}_{KERNEL[qtype]}", bufs, kp.matmul(n, k, m, int(qtype), k, n + pad,
                                                                   int(bias is not None)), n_threads=n_threads)
    assert np.isnan(y[:, n:]).all(), "wrote past the row's N outputs"
    assert np.isfinite(y[:, :n]).all(), "left outputs unwritten"
    return y[:, :n]


def check(y, w, x, bias, qtype):
    xq = q8_activations(qtype, x)
    ref = xq @ w.T + (bias if bias is not None else 0)
    # float32 accumulation over K / block terms, each exact up to one rounding of its scale
    bound = 4e-7 * (np.abs(xq) @ np.abs(w).T) * np.sqrt(w.shape[1] / 32) + 1e-5
    err = np.abs(y - ref)
    assert (err <= bound).all(), f"max err {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
@pytest.mark.parametrize("m", [1, 2, 4, 5, 8, 9, 64, 300])
def test_matches_numpy_at_real_shapes(qtype, m):
    for n, k in shapes(qtype):
        rng = rng_for("ref", qtype, m, n, k)
        raw, w = random_matrix(qtype, n, k, rng)
        x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 10)).astype(np.float32)
        bias = rng.standard_normal(n) if m == 5 else None
        check(run(qtype, raw, x, n, k, bias), w, x, bias, qtype)


@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_decode_equals_rows_of_prefill_any_threads(qtype):
    """Speculative verification and batch invariance rest on this: a token's
    row is the same bits whether it runs alone (GEMV), among 2-4 (the GEMV
    over a few tokens), among 5-8 (that GEMV for K-quants, the tiles for the
    others), among 13 or 64 (the tiles) or in a 300-token pass (a pass of 256
    and one of 44)."""
    n, k = shapes(qtype)[3]
    rng = rng_for("invariance", qtype)
    raw, _ = random_matrix(qtype, n, k, rng)
    x = rng.standard_normal((300, k)).astype(np.float32)
    bias = rng.standard_normal(n)
    full = run(qtype, raw, x, n, k, bias, n_threads=2)
    np.testing.assert_array_equal(run(qtype, raw, x[:13], n, k, bias, n_threads=3), full[:13])
    np.testing.assert_array_equal(run(qtype, raw, x[200:264], n, k, bias, n_threads=2), full[200:264])
    for t0, m in ((0, 2), (20, 3), (60, 4), (100, 5), (130, 8)):
        np.testing.assert_array_equal(run(qtype, raw, x[t0:t0 + m], n, k, bias, n_threads=2), full[t0:t0 + m])
    for t in (0, 12, 63, 255, 256, 299):
        np.testing.assert_array_equal(run(qtype, raw, x[t:t + 1], n, k, bias, n_threads=1)[0], full[t])


@pytest.mark.parametrize("m", [1, 3, 16, 64, 100, 300])
@pytest.mark.parametrize("n", [2880, 5760])
def test_mxfp4_at_gpt_oss_width(n, m):
    """gpt-oss's experts: MXFP4 rows of 2880 (90 blocks: a tile buffer of 32
    and a partial one), gate / up (2880 rows) and both as one (5760);
    decode and prefill token counts, 300 as a 256-token pass and a 44-token one."""
    k = 2880
    rng = rng_for("gpt-oss", n, m)
    raw, w = random_matrix(T.MXFP4, n, k, rng)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 10)).astype(np.float32)
    bias = rng.standard_normal(n) if m == 3 else None
    check(run(T.MXFP4, raw, x, n, k, bias), w, x, bias, T.MXFP4)


def test_zero_activations_give_the_bias():
    rng = rng_for("zeros")
    for qtype in FORMATS:
        n, k = shapes(qtype)[0]
        raw, _ = random_matrix(qtype, n, k, rng)
        bias = rng.standard_normal(n).astype(np.float32)
        y = run(qtype, raw, np.zeros((3, k), np.float32), n, k, bias)
        np.testing.assert_array_equal(y, np.broadcast_to(bias, y.shape))


def cpu_isas():
    """The instruction sets this CPU runs, by /proc/cpuinfo (Linux x86-64)."""
    try:
        flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
    except (OSError, StopIteration):
        return ["portable"]
    isas = ["portable"]
    if {"avx2", "fma"} <= set(flags):
        isas.append("avx2")
        if {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= set(flags):
            isas.append("avx512vnni")
    return isas


CHILD = r"""
import sys, numpy as np
from akunu import _testing
from tests.fixtures import kernel_params as kp
d = np.load(sys.argv[1])
out = {}
for key in d.files:
    if not key.startswith("raw_"):
        continue
    name = key[4:]
    qtype, n, k, m = (int(v) for v in name.split("_"))
    kernel = d["kernel_" + name].item()
    y = np.full((m, n), np.nan, np.float32)
    _testing.run_kernel(f"{'gemv' if m == 1 else 'gemm'}_{kernel}", [d[key], d["x_" + name], y],
                        kp.matmul(n, k, m, qtype, k, n, 0))
    out[name] = y
np.savez(sys.argv[2], **out)
"""


def test_every_instruction_set_gives_the_same_bits(tmp_path):
    isas = cpu_isas()
    if len(isas) == 1:
        pytest.skip("only the portable path runs here")
    inputs = {}
    for qtype in FORMATS:
        # and one token over 69 32-blocks (a 64-block chunk, then an odd 5) or 9 super-blocks
        odd = (37, 2304 if qtype in SHAPES_K else 2208)
        for (n, k), m in list(zip(shapes(qtype)[1:], (3, 1, 9, 64))) + [(odd, 1)]:
            rng = rng_for("isa", qtype, n, k, m)
            raw, _ = random_matrix(qtype, n, k, rng)
            name = f"{int(qtype)}_{n}_{k}_{m}"
            inputs["raw_" + name] = raw
            x = rng.standard_normal((m, k)).astype(np.float32)
            if m > 1:  # ties for the largest magnitude (+v and -v), and blocks of zeros
                x[1] = rng.integers(-3, 4, k)
                x[2, : k // 2] = 0
            inputs["x_" + name] = x
            inputs["kernel_" + name] = np.array(KERNEL[qtype])
    np.savez(tmp_path / "in.npz", **inputs)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = {}
    for isa in isas:
        env = dict(os.environ, AKUNU_CPU_ISA=isa, PYTHONPATH=os.pathsep.join(
            [p for p in [os.environ.get("PYTHONPATH"), root] if p]))
        out = tmp_path / f"{isa}.npz"
        subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "in.npz"), str(out)], env=env, check=True,
                       cwd=root, timeout=600)
        results[isa] = np.load(out)
    base = results["portable"]
    for isa in isas[1:]:
        for name in base.files:
            assert np.isfinite(results[isa][name]).all(), (isa, name)
            np.testing.assert_array_equal(results[isa][name], base[name], err_msg=f"{isa} vs portable, {name}")
