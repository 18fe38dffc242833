"""Batch invariance of CUDA's matmul in continuous batching's tables
(MatmulParams::invariant = 1): rows [0, generated_rows) are decode rows, the
rest prompt rows, and a row's output must be bitwise the same whether it runs
alone (n_tokens = 1, the same kind) or inside a ragged pass of any size and
mix, with either kernel of the decode rows (the row-side GEMM of engines of
up to 16 sequences, the split-K 64-row tiles of larger ones; Q4_K and
Q6_K_X8 in the small engines the integer row-side GEMM, in the large ones
gemm_rows_kq.cuh, F16 decoded in registers). Formats with
the integer decode GEMV and the tensor-core GEMM (Q8_0, Q4_0, Q4_K, Q6_K, Q6_K_X8),
the float GEMV and tensor cores (F16, BF16: decode rows in small engines on
gemm_rows_half.cuh), and one without either (Q5_K: the
row kernels). Every output is also checked against float64
on the dequantized weights within the bound of the path its kind takes, and
the pass against the CPU backend within test_device_kernels.py's tolerances.
Outputs are NaN-poisoned; inputs are fresh random numbers every run
(AKUNU_TEST_SEED repeats a run). Runs only where a CUDA device is visible."""

import os
import zlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures.backend_compare import rel_l2
from tests.fixtures.quant_samples import X8_CODES, random_matrix, regroup_x8
from tests.test_device_kernels import (Q8_ACTIVATION_FORMATS, QUANT_VS_CPU_TOL, TENSOR_CORE_FORMATS, float32_bound,
                                       q8_rounding_bound)

SEED = int(os.environ.get("AKUNU_TEST_SEED", "0"))
MAX_ROWS = 80


def rng_for(key):
    return np.random.default_rng([SEED, zlib.crc32(str(key).encode())])


@pytest.fixture(scope="module")
def cuda():
    try:
        x = np.zeros(4, np.float32)
        _testing.run_kernel("add_inplace", [x, x.copy()], kp.add(4, 1), device="cuda")
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"device cuda unavailable: {e}")
    return "cuda"


def run_matmul(device, qtype, raw, x, bias, N, K, generated, engine_rows=16, x8=False):
    """y for the rows of x in one pass, rows [0, generated) decode rows, on a
    device set up for a batch engine of `engine_rows` sequences (under the
    default batch_decode=auto, 16: the row-side GEMM, the integer one for Q4_K
    and Q6_K_X8; 64: the split-K 64-row tiles, gemm_rows_kq.cuh for Q4_K and
    Q6_K_X8). x8: raw
    is the format's regrouped layout (regroup_x8)."""
    m = x.shape[0]
    y = np.full((m, N), np.nan, np.float32)
    code, name = (X8_CODES[qtype], qtype.name.lower() + "_x8") if x8 else (int(qtype), qtype.name.lower())
    params = kp.matmul(N, K, m, code, K, N, has_bias=1, invariant=1, generated_rows=generated)
    _testing.run_kernel(f"gemm_{name}", [raw, np.ascontiguousarray(x), y, bias.copy()], params,
                        device=device, batch_rows=engine_rows)
    return y


def row_bound(qtype, x, w, decode):
    """Worst-case error of one kind's rows: float32 sums, plus the 8-bit
    activations of the integer decode GEMV (decode rows), plus F16 operands
    on the tensor cores (prompt rows)."""
    bound = float32_bound(x, w)
    if decode and qtype in Q8_ACTIVATION_FORMATS:
        bound = bound + q8_rounding_bound(x, w)
    if qtype in TENSOR_CORE_FORMATS:  # (decode rows take the tensor cores too under batch_decode=rows / tc)
        bound = bound + 1.2 * 2.0 ** -10 * (np.abs(x.astype(np.float64)) @ np.abs(w).T)
    return bound


# (Q6_K_X8: Q6_K regrouped, as CUDA loads Q6_K matrices whose K is a multiple of 2048)
FORMATS = [T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_K, T.Q6_K, T.Q5_K, "Q6_K_X8"]
# (34816 x 512: enough 64-row tiles that the decode-row GEMMs split no k loop)
SHAPES = [(1024, 4096), (4096, 1024), (2048, 3072), (34816, 512)]


@pytest.mark.parametrize("engine_rows", [16, 64], ids=["rows-gemm", "tc-gemm"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda t: t if isinstance(t, str) else t.name)
def test_matmul_row_alone_equals_row_in_pass(cuda, fmt, shape, engine_rows):
    N, K = shape
    x8 = fmt == "Q6_K_X8"
    qtype = T.Q6_K if x8 else fmt
    if x8 and K % 2048:
        pytest.skip("Q6_K_X8 regroups rows of whole 2048-value groups")
    rng = rng_for((str(fmt), N, K))
    raw, w = random_matrix(qtype, N, K, rng)
    raw_gguf = np.ascontiguousarray(raw)
    raw = np.ascontiguousarray(regroup_x8(raw, qtype)) if x8 else raw_gguf
    bias = rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((MAX_ROWS, K)).astype(np.float32)
    ref = x.astype(np.float64) @ w.T + bias

    # every row alone, as a decode row and as a prompt row
    alone = {}
    for decode in (True, False):
        ys = np.stack([run_matmul(cuda, qtype, raw, x[i:i + 1], bias, N, K, 1 if decode else 0, engine_rows, x8)[0]
                       for i in range(MAX_ROWS)])
        assert not np.isnan(ys).any(), f"decode={decode}: unwritten outputs"
        err = np.abs(ys - ref)
        bound = row_bound(qtype, x, w, decode)
        assert (err <= bound).all(), f"decode={decode} alone: max err {err.max()} (bound {bound.max()})"
        alone[decode] = ys

    # passes of 1 to 80 rows, generated_rows from 0 to n_tokens (slices of 8
    # decode rows, with and without a partial last one; 1 and many prompt rows)
    cases = [(1, 0), (1, 1), (8, 8), (9, 1), (MAX_ROWS, 0), (MAX_ROWS, MAX_ROWS), (MAX_ROWS, 9), (17, 16)]
    for _ in range(4):
        n = int(rng.integers(2, MAX_ROWS + 1))
        cases.append((n, int(rng.integers(0, n + 1))))
    for n, g in cases:
        y = run_matmul(cuda, qtype, raw, x[:n], bias, N, K, g, engine_rows, x8)
        assert not np.isnan(y).any(), f"n_tokens={n} generated_rows={g}: unwritten outputs"
        expect = np.concatenate([alone[True][:g], alone[False][g:n]])
        diff = np.nonzero((y.view(np.uint32) != expect.view(np.uint32)).any(axis=1))[0]
        assert diff.size == 0, (f"n_tokens={n} generated_rows={g}: rows {diff[:10].tolist()} differ from the "
                                f"same rows alone (max |diff| {np.abs(y - expect).max()})")

    # the CPU backend on the largest mixed pass (tolerances of test_device_kernels.py)
    n, g = MAX_ROWS, 9
    yc = run_matmul("cpu", qtype, raw_gguf, x[:n], bias, N, K, g)
    yg = run_matmul(cuda, qtype, raw, x[:n], bias, N, K, g, engine_rows, x8)
    if qtype in (T.F16, T.BF16):
        # (decode rows take the tensor cores too under the default batch_decode=auto)
        tol = 2e-3 if qtype in TENSOR_CORE_FORMATS else 1e-5
        assert rel_l2(yg, yc) < tol
    else:
        assert rel_l2(yg, yc) < QUANT_VS_CPU_TOL


def prompt_pass_and_rows_alone(cuda, qtype, key, N, K, n, part, alone_rows):
    """n prompt rows of a random N x K matrix in one pass (within the F16-operand bound of float64),
    then rows [part[0], part[1]) as a pass of their own and `alone_rows` one at a time: bit for bit."""
    rng = rng_for((key, int(qtype)))
    raw, w = random_matrix(qtype, N, K, rng)
    raw = np.ascontiguousarray(raw)
    bias = rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((n, K)).astype(np.float32)
    big = run_matmul(cuda, qtype, raw, x, bias, N, K, 0)
    assert not np.isnan(big).any(), "unwritten outputs"
    ref = x.astype(np.float64) @ w.T + bias
    assert (np.abs(big - ref) <= row_bound(qtype, x, w, False)).all(), f"max err {np.abs(big - ref).max()}"
    a, b = part
    small = run_matmul(cuda, qtype, raw, x[a:b], bias, N, K, 0)
    diff = np.nonzero((small.view(np.uint32) != big[a:b].view(np.uint32)).any(axis=1))[0]
    assert diff.size == 0, f"rows {(a + diff[:10]).tolist()} of a {b - a}-row pass differ from the {n}-row pass"
    for t in alone_rows:
        alone = run_matmul(cuda, qtype, raw, x[t:t + 1], bias, N, K, 0)[0]
        assert np.array_equal(alone.view(np.uint32), big[t].view(np.uint32)), f"row {t} differs alone"


@pytest.mark.parametrize("qtype", [T.F16, T.Q4_K], ids=lambda t: t.name)
def test_prompt_rows_of_wide_tiles_equal_rows_alone(cuda, qtype):
    """A 512-row prompt pass on a 4096-row matrix: two fixed-shape cuBLAS calls of 256 rows (or,
    without cuBLAS, the GEMM's 128 x 128 tiles, a wave of which fills an H100); a 48-row pass of
    the same rows one padded call (the 64 x 64 tiles); one row alone its own: every row the same
    bits in all three, whatever its place in its call, and within the F16-operand bound of float64."""
    rng = rng_for(("wide tiles rows", int(qtype)))
    first = int(rng.integers(0, 512 - 48))
    prompt_pass_and_rows_alone(cuda, qtype, "wide tiles", 4096, 1024, 512, (first, first + 48),
                               rng.choice(512, 16, replace=False))


@pytest.mark.parametrize("qtype", [T.F16, T.Q8_0], ids=lambda t: t.name)
def test_prompt_rows_of_output_head_equal_rows_alone(cuda, qtype):
    """An output head's shape (more than 32768 rows: cuBLAS calls of 32 rows): 70 prompt rows in
    one pass (three calls, the last padded), 5 of them in another, and rows alone, bit for bit."""
    prompt_pass_and_rows_alone(cuda, qtype, "head", 33024, 256, 70, (33, 38), (0, 31, 32, 69))


@pytest.mark.parametrize("qtype,N,K", [(T.F16, 14336, 4096), (T.Q4_K, 4096, 14336), (T.Q4_K, 4096, 4096),
                                       (T.F16, 2048, 8192)], ids=lambda v: getattr(v, "name", v))
def test_prompt_rows_at_real_shapes_keep_their_bits_at_any_place(cuda, qtype, N, K):
    """Llama-3.1-8B / 3.2-1B projection shapes, where a GEMM library may split the k loop per tile
    (split-K, stream-K schedules): rows at the first, last and middle places of a call and of its
    second call equal the same rows alone and inside a 200-row pass."""
    places = (0, 127, 128, 255, 256, 383, 511)
    prompt_pass_and_rows_alone(cuda, qtype, ("real", N, K), N, K, 512, (200, 400), places)
