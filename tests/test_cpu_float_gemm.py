"""The CPU's float-weight matmul (F32, F16, BF16; backend/cpu/kernels/matmul.cpp,
register tiles of 4 rows x several tokens, token blocks of 64): against
float64 numpy at encoder and decoder shapes (K with and without a tail past
a multiple of 8, N not a multiple of 4, passes past one token block), with
fresh random inputs and poisoned outputs; and every token's row bit-identical
whatever the pass around it: alone (one-token decode), among a few, in a
2048-token encoder pass, on any thread count (speculative verification and
batch invariance rest on it)."""

import os
import zlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from tests.test_cpu_gemm import run  # NaN-poisoned outputs, y_stride past N, any thread count

SEED = int(os.environ["AKUNU_TEST_SEED"])
FLOAT_FORMATS = [T.F32, T.F16, T.BF16]


def rng_for(*key):
    return np.random.default_rng([SEED] + [zlib.crc32(str(k).encode()) for k in key])


def weights(qtype, n, k, rng):
    """(raw bytes as the file holds them, the float64 values they stand for)."""
    w = rng.standard_normal((n, k)).astype(np.float32)
    if qtype == T.F16:
        h = w.astype(np.float16)
        return h.view(np.uint8), h.astype(np.float64)
    if qtype == T.BF16:
        top = (w.view(np.uint32) >> 16).astype(np.uint16)
        return top.view(np.uint8), (top.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return w.view(np.uint8), w.astype(np.float64)


# (N, K, tokens): MiniLM's q and up / down at a packed pass, a decoder
# projection, K with a tail of 5, N of 4k + 3 rows, K shorter than one
# 8-column step, token counts around the 6-token tiles and past a 256-token block
CASES = [(384, 384, 130), (1536, 384, 70), (384, 1536, 64), (1027, 1000, 77), (13, 96, 1), (771, 517, 9),
         (17, 5, 7), (130, 200, 300)]


@pytest.mark.parametrize("qtype", FLOAT_FORMATS, ids=lambda t: t.name)
@pytest.mark.parametrize("n,k,m", CASES)
def test_matches_numpy(qtype, n, k, m):
    rng = rng_for("ref", qtype, n, k, m)
    raw, w = weights(qtype, n, k, rng)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 10)).astype(np.float32)
    bias = rng.standard_normal(n) if m % 2 else None
    y = run(qtype, raw, x, n, k, bias)
    ref = x.astype(np.float64) @ w.T + (bias.astype(np.float32) if bias is not None else 0)
    # float32 sums over K of products each exact up to one rounding
    bound = 1e-6 * k * (np.abs(x.astype(np.float64)) @ np.abs(w).T) / np.sqrt(k) + 1e-5
    err = np.abs(y - ref)
    assert (err <= bound).all(), f"max err {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


@pytest.mark.parametrize("qtype", FLOAT_FORMATS, ids=lambda t: t.name)
def test_a_row_is_the_same_bits_in_any_pass(qtype):
    n, k = 387, 392  # 96 tiles of 4 rows and one of 3; K past 8 x 48 with no tail
    rng = rng_for("invariance", qtype)
    raw, _ = weights(qtype, n, k, rng)
    x = rng.standard_normal((2048, k)).astype(np.float32)
    bias = rng.standard_normal(n)
    full = run(qtype, raw, x, n, k, bias, n_threads=2)
    for t0, count, threads in ((0, 13, 3), (100, 64, 1), (1000, 65, 4), (2040, 8, 2)):
        np.testing.assert_array_equal(run(qtype, raw, x[t0:t0 + count], n, k, bias, n_threads=threads),
                                      full[t0:t0 + count])
    for t in (0, 5, 6, 63, 64, 2047):
        np.testing.assert_array_equal(run(qtype, raw, x[t:t + 1], n, k, bias, n_threads=1)[0], full[t])
