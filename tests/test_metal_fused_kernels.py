"""Metal's fused decode kernels (backend/metal/kernels/fused.metal:
gemv_multi, qk_norm_rope_kv, rmsnorm_residual) through the MSL emulation (or
a Mac's GPU with AKUNU_METAL_DEVICE=metal), against float64 numpy and the CPU
backend's twins (backend/cpu/kernels/fused.cpp, the unfused sequences), at
the widths of Qwen3-0.6B, Llama-3.2-1B, Llama-3-8B and Gemma 3 270M, and for
every weight format the Metal GEMV reads. Inputs are fresh random numbers
every run (AKUNU_TEST_SEED repeats one), outputs poisoned with NaN first.

Tolerances (relative L2):
- gemv_multi against float64 on the dequantized weights: 1e-5 (float sums
  over K <= 14336 in another order; x normalized in float).
- the CPU's twin against float64 on the activations the CPU multiplies (for
  the quantized formats rounded to 8 bits per block, as llama.cpp does;
  Metal does not round): 1e-3 (multi_reference.CPU_TOL).
- qk_norm_rope_kv: q and k 2e-5 (RoPE at ~1000 rad: an ulp of the angle),
  the V cache equal, the K cache within one F16 step, rows outside the
  token's untouched.
- rmsnorm_residual: 1e-6 against float64 and the CPU."""

import os

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

import akunu
from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures.backend_compare import rel_l2
from tests.fixtures.quant_samples import mlx_matrix, random_matrix
from tests.test_device_kernels import FORMATS, build_metal_emulation, rng_for
from tests.fixtures.multi_reference import CPU_TOL, multi_reference as reference

METAL = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu")
FLOAT_FORMATS = {int(T.F32), int(T.F16), int(T.BF16)}


@pytest.fixture(scope="module", autouse=True)
def emulation_library():
    if METAL == "metal-emu":
        build_metal_emulation()


# -- gemv_multi -----------------------------------------------------------------------------------


def run_multi(device, mode, raws, codes, Ns, K, x, nw, norm, residual, offset):
    """One gemv_multi launch; returns the used outputs."""
    m = x.shape[0]
    if mode == kp.MULTI_ACCUMULATE:
        ys = [residual.astype(np.float32).copy()]
    else:
        n_out = len(Ns) if mode == kp.MULTI_SEPARATE else 1
        ys = [np.full((m, Ns[i]), np.nan, np.float32) for i in range(n_out)]
    ws = list(raws) + [raws[0]] * (3 - len(raws))
    ys_all = ys + [np.zeros(1, np.float32) for _ in range(3 - len(ys))]
    params = kp.multi_gemv(K, m, mode, Ns, codes, norm=norm, eps=1e-6, weight_offset=offset)
    _testing.run_kernel("gemv_multi", [x.copy(), nw, *ws, *ys_all], params, device=device)
    return ys


def check_multi(key, mode, formats, Ns, K, m, norm, offset=0.0):
    """formats: GGUF types, or ("mlx", bits, group); offset: the norm weight's
    (Gemma stores w - 1)."""
    rng = rng_for(("metal-multi", key))
    raws, codes, ws = [], [], []
    for f, N in zip(formats, Ns):
        if isinstance(f, tuple):
            raw, code, w = mlx_matrix(f[1], f[2], N, K, rng)
        else:
            (raw, w), code = random_matrix(f, N, K, rng), int(f)
        raws.append(np.ascontiguousarray(raw))
        codes.append(code)
        ws.append(w)
    x = rng.standard_normal((m, K)).astype(np.float32)
    nw = (rng.standard_normal(K) * 0.5 + 1).astype(np.float32)
    residual = rng.standard_normal((m, Ns[0])).astype(np.float32)
    if offset:
        nw -= offset
    if mode in (kp.MULTI_SILU, kp.MULTI_GELU):
        # Gate values of O(1), where the activation bends: at random weights'
        # own scale (hundreds) the CPU's 8-bit activations move a gate by a few
        # units, and a gate near 0 beside a large up value is off by its whole
        # output (AKUNU_TEST_SEED=104, Q5_K: 12x), a comparison without meaning.
        g = reference(kp.MULTI_SEPARATE, ws[:1], x, nw, norm, 1e-6, residual, offset)[0]
        c = 2.0 / float(np.sqrt((g ** 2).mean()))
        if norm:
            nw = ((nw + offset) * c - offset).astype(np.float32)
        else:
            x = (x * c).astype(np.float32)
    ref = reference(mode, ws, x, nw, norm, 1e-6, residual, offset)
    ref_cpu = reference(mode, ws, x, nw, norm, 1e-6, residual, offset, codes)
    got = run_multi(METAL, mode, raws, codes, Ns, K, x, nw, norm, residual, offset)
    cpu = run_multi("cpu", mode, raws, codes, Ns, K, x, nw, norm, residual, offset)
    for i, (g, r, c, rc) in enumerate(zip(got, ref, cpu, ref_cpu)):
        assert not np.isnan(g).any(), f"output {i}: unwritten elements"
        assert rel_l2(g, r) < 1e-5, f"output {i} against float64: {rel_l2(g, r)}"
        assert rel_l2(c, rc) < CPU_TOL, f"output {i}, the CPU against float64 on its 8-bit activations: {rel_l2(c, rc)}"


# name: mode, formats, rows of each, K, tokens, input norm (, norm weight offset)
REAL_SHAPES = {
    # Qwen3-0.6B (dim 1024, 16 x 128 query heads, 8 KV heads, FFN 3072)
    "qwen3-0.6b-qkv-q8_0": (kp.MULTI_SEPARATE, [T.Q8_0] * 3, [2048, 1024, 1024], 1024, 1, 1),
    "qwen3-0.6b-gate-up-silu-f16": (kp.MULTI_SILU, [T.F16] * 2, [3072, 3072], 1024, 1, 1),
    "qwen3-0.6b-down-residual-bf16": (kp.MULTI_ACCUMULATE, [T.BF16], [1024], 3072, 1, 0),
    "qwen3-0.6b-o-residual-f32": (kp.MULTI_ACCUMULATE, [T.F32], [1024], 2048, 1, 0),
    # Llama-3.2-1B (dim 2048, 32 x 64 query heads, 8 KV heads, FFN 8192); Q4_K_M's mixed V
    "llama-1b-qkv-q4_k_m": (kp.MULTI_SEPARATE, [T.Q4_K, T.Q4_K, T.Q6_K], [2048, 512, 512], 2048, 1, 1),
    "llama-1b-gate-up-silu-q4_0": (kp.MULTI_SILU, [T.Q4_0] * 2, [8192, 8192], 2048, 1, 1),
    "llama-1b-down-residual-q6_k": (kp.MULTI_ACCUMULATE, [T.Q6_K], [2048], 8192, 1, 0),
    # Llama-3-8B (dim 4096, 32 x 128, 8 KV heads, FFN 14336)
    "llama-8b-qkv-q4_k-q6_k": (kp.MULTI_SEPARATE, [T.Q4_K, T.Q4_K, T.Q6_K], [4096, 1024, 1024], 4096, 1, 1),
    "llama-8b-gate-up-silu-q4_k": (kp.MULTI_SILU, [T.Q4_K] * 2, [14336, 14336], 4096, 1, 1),
    "llama-8b-down-residual-q4_k": (kp.MULTI_ACCUMULATE, [T.Q4_K], [4096], 14336, 1, 0),
    # Gemma 3 270M's Q4_K_M layers (dim 640, FFN 2048, Q5_0 beside Q8_0), GELU gate
    "gemma3-270m-qkv-q5_0-q8_0": (kp.MULTI_SEPARATE, [T.Q5_0, T.Q5_0, T.Q8_0], [1024, 256, 256], 640, 1, 1, 1.0),
    "gemma3-270m-gate-up-gelu-q5_0": (kp.MULTI_GELU, [T.Q5_0] * 2, [2048, 2048], 640, 1, 1, 1.0),
    # float rows one value at a time (K % 4 != 0; others take four in one vector load)
    "qkv-float-formats-odd-k": (kp.MULTI_SEPARATE, [T.F16, T.BF16, T.F32], [64, 32, 48], 1022, 2, 1),
    # speculative verification: several tokens, and more than one pass's 8
    "qwen3-0.6b-qkv-f16-3tok": (kp.MULTI_SEPARATE, [T.F16] * 3, [2048, 1024, 1024], 1024, 3, 1),
    "llama-1b-gate-up-silu-q6_k-q4_k-10tok": (kp.MULTI_SILU, [T.Q6_K, T.Q4_K], [1024, 1024], 2048, 10, 1),
}


@pytest.mark.parametrize("case", REAL_SHAPES, ids=list(REAL_SHAPES))
def test_gemv_multi_real_shapes(case):
    check_multi(case, *REAL_SHAPES[case])


ALL_FORMATS = [int(f) for f in FORMATS] + [("mlx", 4, 64), ("mlx", 3, 32), ("mlx", 8, 128)]


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f"mlx{f[1]}g{f[2]}" if isinstance(f, tuple)
                         else T(f).name)
def test_gemv_multi_every_format(fmt):
    """Each format the Metal GEMV reads, in each mode (K = 768: three K-quant
    blocks, six MLX groups of 128): QKV beside a Q8_0 V, gate + up, the residual add."""
    f = fmt if isinstance(fmt, tuple) else T(fmt)
    K = 768
    check_multi((fmt, "qkv"), kp.MULTI_SEPARATE, [f, f, T.Q8_0], [192, 64, 96], K, 2, 1)
    check_multi((fmt, "silu"), kp.MULTI_SILU, [f, f], [160, 160], K, 1, 1)
    check_multi((fmt, "gelu"), kp.MULTI_GELU, [f, T.F16], [96, 96], K, 3, 1, 1.0)
    check_multi((fmt, "acc"), kp.MULTI_ACCUMULATE, [f], [130], K, 1, 0)


# The large-K variant (gemv_multi_large: two SIMD groups a row), which the
# emulated M4 (q4_small_k_threshold 2048) takes for matrices of 32-value
# blocks at K >= 2048: name: mode, formats, rows, K, tokens, norm
LARGE_K = {
    "llama-1b-down-residual-q4_0": (kp.MULTI_ACCUMULATE, [T.Q4_0], [2048], 8192, 1, 0),
    "llama-8b-down-residual-q8_0": (kp.MULTI_ACCUMULATE, [T.Q8_0], [4096], 14336, 1, 0),
    "llama-1b-gate-up-silu-q4_0": (kp.MULTI_SILU, [T.Q4_0] * 2, [8192, 8192], 2048, 1, 1),
    "llama-1b-qkv-q8_0-3tok": (kp.MULTI_SEPARATE, [T.Q8_0] * 3, [2048, 512, 512], 2048, 3, 1),
    "gate-up-gelu-q5_0-q5_1-10tok": (kp.MULTI_GELU, [T.Q5_0, T.Q5_1], [301, 301], 2048, 10, 1),
    "qkv-q4_1-iq4_nl-ragged": (kp.MULTI_SEPARATE, [T.Q4_1, T.IQ4_NL, T.Q4_1], [129, 33, 65], 4096, 2, 1),
}


@pytest.mark.parametrize("case", LARGE_K, ids=list(LARGE_K))
def test_gemv_multi_large_k(case):
    mode, formats, Ns, K, m, norm = LARGE_K[case]
    params = kp.multi_gemv(K, m, mode, Ns, [int(f) for f in formats], norm=norm)
    assert _testing.metal_launch("gemv_multi", params, 10, 9)["function"] == "gemv_multi_large"
    if METAL != "metal-emu":
        check_multi(case, mode, formats, Ns, K, m, norm)
        return
    before = _testing.metal_emu_function_counts().get("gemv_multi_large", 0)
    check_multi(case, mode, formats, Ns, K, m, norm)
    assert _testing.metal_emu_function_counts()["gemv_multi_large"] == before + 1


@pytest.mark.parametrize("tier,cores,family,threshold", [("M1", 8, 7, 2048), ("M1 Pro", 16, 7, 1024),
                                                         ("M4", 10, 9, 2048), ("M4 Pro", 20, 9, 512)])
def test_gemv_multi_variant_follows_the_chip(tier, cores, family, threshold):
    """gemv_multi_large where every matrix has 32-value blocks and K >= the tier's q4_small_k_threshold."""
    for K in (768, 1024, 2048):
        for formats in ([T.Q8_0, T.Q8_0, T.Q4_0], [T.Q4_K, T.Q4_K, T.Q6_K], [T.Q8_0, T.Q8_0, T.Q6_K]):
            launch = _testing.metal_launch("gemv_multi", kp.multi_gemv(K, 1, kp.MULTI_SEPARATE, [256, 64, 64],
                                                                       [int(f) for f in formats], norm=1),
                                           cores, family)
            large = K >= threshold and T.Q6_K not in formats and T.Q4_K not in formats
            assert launch["function"] == ("gemv_multi_large" if large else "gemv_multi"), (tier, K, formats)
            assert launch["grid"] == ((384 + 1) // 2 if large else 384 // 4, 1, 1)
            assert launch["tg_memory"] <= 32768


def test_gemv_multi_bad_parameters_are_clear_errors():
    x = np.ones((1, 64), np.float32)
    w = np.ones((8, 64), np.float32).view(np.uint8)
    bufs = [x, np.ones(64, np.float32), w, w, w] + [np.zeros((1, 8), np.float32) for _ in range(3)]
    with pytest.raises(akunu.AkunuError, match="bad matrix count or mode"):
        _testing.run_kernel("gemv_multi", bufs, kp.multi_gemv(64, 1, 9, [8], [0]), device=METAL)
    with pytest.raises(akunu.AkunuError, match="unsupported weight type"):
        _testing.run_kernel("gemv_multi", bufs, kp.multi_gemv(64, 1, 0, [8], [77]), device=METAL)
    with pytest.raises(akunu.AkunuError, match="gated modes take two"):
        _testing.run_kernel("gemv_multi", bufs, kp.multi_gemv(64, 1, kp.MULTI_SILU, [8], [0]), device=METAL)
    with pytest.raises(akunu.AkunuError, match="multiple of the format's block"):
        _testing.run_kernel("gemv_multi", bufs, kp.multi_gemv(48, 1, 0, [8], [int(T.Q8_0)]), device=METAL)


# -- qk_norm_rope_kv ------------------------------------------------------------------------------

ROPE_SHAPES = {
    # name: heads, kv heads, head_dim, tokens, QK norm, NeoX, freq factors, base, norm weight offset
    "qwen3-0.6b": (16, 8, 128, 1, 1, 1, 0, 1e6, 0.0),
    "llama-1b-factors": (32, 8, 64, 1, 0, 0, 1, 5e5, 0.0),
    "llama-8b-2tok": (32, 8, 128, 2, 0, 0, 1, 5e5, 0.0),
    "gemma3-270m": (4, 1, 256, 1, 1, 1, 0, 1e6, 1.0),
    "qwen3-3tok": (16, 8, 128, 3, 1, 1, 0, 1e6, 0.0),
}


@pytest.mark.parametrize("case", ROPE_SHAPES, ids=list(ROPE_SHAPES))
def test_qk_norm_rope_kv(case):
    heads, kv_heads, hd, n, norm, neox, factors, base, offset = ROPE_SHAPES[case]
    rng = rng_for(("metal-qk-rope", case))
    pos0, max_ctx = int(rng.integers(0, 2000)), 2048 + 8
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    k = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    v = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    qw = (rng.standard_normal(hd) * 0.3 + 1).astype(np.float32)
    kw = (rng.standard_normal(hd) * 0.3 + 1).astype(np.float32)
    fac = rng.uniform(1, 8, hd // 2).astype(np.float32)
    params = kp.qk_norm_rope_kv(heads, kv_heads, hd, n, pos0, norm, 1e-6, offset, neox, factors, base, 1.0,
                                max_ctx)
    res = []
    for dev in ("cpu", METAL):
        kc = np.full((max_ctx, kv_heads * hd), 0x7E00, np.uint16)  # F16 NaN
        vc = kc.copy()
        qq, kk = q.copy(), k.copy()
        _testing.run_kernel("qk_norm_rope_kv", [qq, kk, v, qw, kw, fac, kc, vc], params, device=dev)
        res.append((qq, kk, kc, vc))
    (qc, kc_, kcc, vcc), (qg, kg, kcg, vcg) = res
    assert rel_l2(qg, qc) < 2e-5 and rel_l2(kg, kc_) < 2e-5
    np.testing.assert_array_equal(vcg, vcc)
    rows = slice(pos0, pos0 + n)
    assert (kcg[:pos0] == 0x7E00).all() and (kcg[pos0 + n:] == 0x7E00).all()
    assert (vcg[:pos0] == 0x7E00).all() and (vcg[pos0 + n:] == 0x7E00).all()
    got, want = (c[rows].view(np.float16).astype(np.float32) for c in (kcg, kcc))
    assert (np.abs(got - want) <= np.abs(want) * 2 ** -10 + 1e-7).all()


@pytest.mark.parametrize("n,rows", [(9, 8), (1, 0)])
def test_qk_norm_rope_kv_more_tokens_than_rows_is_a_clear_error(n, rows):
    """Positions may pass the cache's rows (a sliding-window ring); a pass of
    more tokens than rows (one row written twice at once) or a cache of no
    rows is a clear error."""
    hd = 64
    q, k = np.zeros((n, 2 * hd), np.float32), np.zeros((n, hd), np.float32)
    kc = np.zeros((max(rows, 1), hd), np.uint16)
    params = kp.qk_norm_rope_kv(2, 1, hd, n, 7, 0, 1e-6, 0.0, 0, 0, 1e4, 1.0, rows)
    for dev in ("cpu", METAL):
        with pytest.raises(akunu.AkunuError, match="rows"):
            _testing.run_kernel("qk_norm_rope_kv", [q, k, k.copy(), q, q, q, kc, kc.copy()], params, device=dev)


# -- rmsnorm_residual -----------------------------------------------------------------------------

@pytest.mark.parametrize("dim,n", [(640, 1), (1152, 3), (2560, 1)])
def test_rmsnorm_residual(dim, n):
    """Gemma 3's post-norm and residual add: h += rmsnorm(y) * (w + 1), y unchanged."""
    rng = rng_for(("metal-rmsnorm-residual", dim, n))
    y = (rng.standard_normal((n, dim)) * 3).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    h = rng.standard_normal((n, dim)).astype(np.float32)
    y64 = y.astype(np.float64)
    ref = h + y64 / np.sqrt((y64 ** 2).mean(-1, keepdims=True) + 1e-6) * (w + 1.0)
    out = {}
    for dev in ("cpu", METAL):
        yy, hh = y.copy(), h.copy()
        _testing.run_kernel("rmsnorm_residual", [yy, w, hh], kp.norm(dim, n, 1, dim, 1e-6, weight_offset=1.0),
                            device=dev)
        np.testing.assert_array_equal(yy, y)
        assert rel_l2(hh, ref) < 1e-6, dev
        out[dev] = hh
    assert rel_l2(out[METAL], out["cpu"]) < 1e-6


def test_the_emulation_ran_the_metal_functions():
    """The comparisons above ran fused.metal, not the CPU twins the emulated device extends."""
    if METAL != "metal-emu":
        pytest.skip("function counts are the emulation's")
    x = np.ones((1, 64), np.float32)
    w = np.ones((8, 64), np.float32).view(np.uint8)
    before = _testing.metal_emu_function_counts().get("gemv_multi", 0)
    _testing.run_kernel("gemv_multi", [x, x[0], w, w, w] + [np.zeros((1, 8), np.float32) for _ in range(3)],
                        kp.multi_gemv(64, 1, 0, [8], [0]), device=METAL)
    assert _testing.metal_emu_function_counts()["gemv_multi"] == before + 1


def test_rmsnorm_residual_bad_parameters_are_clear_errors():
    y, h = np.ones((2, 64), np.float32), np.zeros((2, 64), np.float32)
    with pytest.raises(akunu.AkunuError, match="one row a token"):
        _testing.run_kernel("rmsnorm_residual", [y, np.ones(64, np.float32), h], kp.norm(32, 2, 2, 64, 1e-6),
                            device=METAL)
