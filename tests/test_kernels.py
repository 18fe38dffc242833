"""Every CPU kernel against a numpy reference on random inputs at real shapes."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from tests.fixtures import kernel_params as kp
from akunu import _core, _testing
from gguf.quants import dequantize

from tests.fixtures.quant_samples import FORMATS, mlx_matrix, random_matrix

QUANT = [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_K, T.Q6_K, T.Q4_1, T.Q5_1, T.Q2_K, T.Q3_K, T.Q5_K, T.IQ4_NL, T.IQ4_XS,
         T.MXFP4]
ALL = [T.F32, T.F16, T.BF16] + QUANT
KERNEL = {T.F32: "f32", T.F16: "f16", T.BF16: "bf16", T.Q8_0: "q8_0", T.Q4_0: "q4_0", T.Q5_0: "q5_0",
          T.Q4_K: "q4_k", T.Q6_K: "q6_k", T.Q4_1: "q4_1", T.Q5_1: "q5_1", T.Q2_K: "q2_k", T.Q3_K: "q3_k",
          T.Q5_K: "q5_k", T.IQ4_NL: "iq4_nl", T.IQ4_XS: "iq4_xs", T.MXFP4: "mxfp4"}


@pytest.mark.parametrize("qtype", ALL, ids=lambda t: t.name)
def test_dequantize_matches_gguf_py(qtype):
    """Exact: both decode the same block arithmetic in float32."""
    rng = np.random.default_rng(int(qtype))
    raw, ref = random_matrix(qtype, 64, 1024, rng)
    got = _core.dequantize(raw.tobytes(), int(qtype), raw.shape[0] * 1024).reshape(64, 1024)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


def test_mxfp4_every_scale_and_code_matches_gguf_py():
    """Every E8M0 byte (0 and 1: subnormal half scales; 254 and 255: the
    largest codes overflow to inf; 255 is no NaN) with every code pair, and
    the dequantization of random blocks at those extremes: equal to gguf-py's."""
    codes = np.arange(256, dtype=np.uint8)  # all 16 x 16 (low, high) nibble pairs
    raw = np.zeros((256, 16, 17), np.uint8)
    raw[:, :, 0] = np.arange(256, dtype=np.uint8)[:, None]
    raw[:, :, 1:] = codes.reshape(16, 16)[None]
    raw = raw.reshape(256, 16 * 17)
    with np.errstate(over="ignore"):  # gguf-py's own inf, the same as ours
        ref = dequantize(raw, T.MXFP4).reshape(-1)
    got = _core.dequantize(raw.tobytes(), int(T.MXFP4), 256 * 16 * 32).reshape(-1)
    np.testing.assert_array_equal(got, ref)
    assert np.isinf(got).any() and not np.isnan(got).any() and (got[(got != 0) & np.isfinite(got)] != 0).all()
    rng = np.random.default_rng(39)
    for lo, hi in ((0, 3), (252, 256), (0, 256)):
        raw = rng.integers(0, 256, size=(64, 32 * 17), dtype=np.uint8)
        raw.reshape(64, 32, 17)[:, :, 0] = rng.integers(lo, hi, size=(64, 32))
        got = _core.dequantize(raw.tobytes(), int(T.MXFP4), 64 * 1024).reshape(-1)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, dequantize(raw, T.MXFP4).reshape(-1))


def test_mxfp4_is_the_ocp_value():
    """The meaning in the OCP spec's terms: 2^(e - 127) times the E2M1 value
    (0, 0.5, 1, 1.5, 2, 3, 4, 6, sign in bit 3), for normal scales."""
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
    raw = np.zeros((120, 17), np.uint8)
    raw[:, 0] = np.arange(70, 190)
    raw[:, 1:9] = np.array([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE], np.uint8)  # codes 0..15
    got = _core.dequantize(raw.tobytes(), int(T.MXFP4), 120 * 32).reshape(120, 32)
    want = 2.0 ** (raw[:, :1].astype(np.float64) - 127) * e2m1[np.array([0, 2, 4, 6, 8, 10, 12, 14] + [0] * 8)]
    np.testing.assert_array_equal(got[:, :16], want)
    np.testing.assert_array_equal(got[:, 16:24], 2.0 ** (raw[:, :1].astype(np.float64) - 127) * e2m1[1::2])


def test_truncated_mxfp4_rows_are_an_error():
    with pytest.raises(Exception, match="too short"):
        _core.dequantize(bytes(17 * 3), int(T.MXFP4), 128)  # 4 blocks asked, 3 given


def run_matmul(kind, qtype, raw, x, n_out, k, bias=None):
    m = x.shape[0]
    y = np.zeros((m, n_out), np.float32)
    bufs = [np.ascontiguousarray(raw), np.ascontiguousarray(x, np.float32), y]
    if bias is not None:
        bufs.append(bias.astype(np.float32))
    _testing.run_kernel(f"{kind}_{KERNEL[qtype]}", bufs,
                          kp.matmul(n_out, k, m, int(qtype), k, n_out, int(bias is not None)))
    return y


AVX2 = _core.cpu_features()["avx2"]
# Formats whose matmul rounds activations to 8 bits (the rest use them as floats): every
# int8-path format on any CPU (backend/cpu/kernels/int8_matmul.h), IQ4_XS where AVX2 is
Q8_0_ACTIVATIONS = {T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1, T.IQ4_NL, T.MXFP4}
Q8_K_ACTIVATIONS = {T.Q4_K, T.Q6_K, T.Q2_K, T.Q3_K, T.Q5_K} | ({T.IQ4_XS} if AVX2 else set())


def q8_activations(qtype, x):
    """The activations a quantized matmul actually multiplies: rounded to 8 bits
    per block as llama.cpp does (Q8_0 for 32-blocks with an f16 scale, Q8_K for
    K-quants). Float formats use x as is."""
    x = x.astype(np.float32)
    if qtype in Q8_0_ACTIVATIONS:
        b = x.reshape(x.shape[0], -1, 32)
        d = np.abs(b).max(-1, keepdims=True) / np.float32(127)
        inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
        q = np.rint(b * inv)
        return (q * d.astype(np.float16).astype(np.float32)).reshape(x.shape).astype(np.float64)
    if qtype in Q8_K_ACTIVATIONS:
        b = x.reshape(x.shape[0], -1, 256)
        idx = np.abs(b).argmax(-1)[..., None]
        maxv = np.take_along_axis(b, idx, -1)
        iscale = np.float32(-127) / maxv
        q = np.minimum(np.rint(iscale * b), 127)
        return (q * (np.float32(1) / iscale)).reshape(x.shape).astype(np.float64)
    return x.astype(np.float64)


def check_close(y, w, x, bias=None, qtype=None):
    if qtype is not None:
        # loosely against the exact activations (8-bit rounding costs ~1%)...
        exact = x.astype(np.float64) @ w.T + (bias if bias is not None else 0)
        scale = np.abs(exact).max()
        assert np.abs(y - exact).max() <= 0.03 * scale
        # ...and tightly against the 8-bit activations the kernel multiplies
        x = q8_activations(qtype, x)
    ref = x.astype(np.float64) @ w.T
    if bias is not None:
        ref += bias
    # float32 accumulation error bound, scaled by the magnitude of the terms
    bound = 2e-6 * (np.abs(x.astype(np.float64)) @ np.abs(w).T) * np.sqrt(w.shape[1]) / 8 + 1e-5
    err = np.abs(y - ref)
    assert (err <= bound).all(), f"max err {err.max()} vs bound {bound[err.argmax() // err.shape[1]].min()}"


@pytest.mark.parametrize("qtype", ALL, ids=lambda t: t.name)
@pytest.mark.parametrize("kind,m", [("gemv", 1), ("gemm", 7)])
def test_matmul_4096(qtype, kind, m):
    rng = np.random.default_rng(7)
    raw, w = random_matrix(qtype, 4096, 4096, rng)
    x = rng.standard_normal((m, 4096)).astype(np.float32)
    check_close(run_matmul(kind, qtype, raw, x, 4096, 4096), w, x, qtype=qtype)


@pytest.mark.parametrize("qtype", QUANT, ids=lambda t: t.name)
def test_gemv_4096x14336(qtype):
    """The FFN down projection of an 8B model: 4096 rows of 14336 columns."""
    rng = np.random.default_rng(11)
    raw, w = random_matrix(qtype, 4096, 14336, rng)
    x = rng.standard_normal((1, 14336)).astype(np.float32)
    check_close(run_matmul("gemv", qtype, raw, x, 4096, 14336), w, x, qtype=qtype)


@pytest.mark.parametrize("qtype", [T.Q6_K, T.Q8_0], ids=lambda t: t.name)
def test_gemv_vocab_151936(qtype):
    """A Qwen-sized output head: 151936 rows."""
    rng = np.random.default_rng(5)
    raw, w = random_matrix(qtype, 151936, 256, rng)
    x = rng.standard_normal((1, 256)).astype(np.float32)
    check_close(run_matmul("gemv", qtype, raw, x, 151936, 256), w, x, qtype=qtype)


@pytest.mark.parametrize("qtype", [T.F32, T.F16, T.BF16], ids=lambda t: t.name)
@pytest.mark.parametrize("k", [4095, 333, 1])
def test_float_matmul_odd_columns(qtype, k):
    rng = np.random.default_rng(k)
    raw, w = random_matrix(qtype, 300, k, rng)
    x = rng.standard_normal((3, k)).astype(np.float32)
    bias = rng.standard_normal(300)
    check_close(run_matmul("gemm", qtype, raw, x, 300, k, bias), w, x, bias)


@pytest.mark.parametrize("qtype", ALL, ids=lambda t: t.name)
def test_embedding_lookup(qtype):
    rng = np.random.default_rng(3)
    raw, w = random_matrix(qtype, 1000, 512, rng)
    ids = np.array([5, 999, 0, 5, 17], np.int32)
    out = np.zeros((5, 512), np.float32)
    _testing.run_kernel(f"embedding_{KERNEL[qtype]}", [raw, ids, out], kp.embedding(512, 5, int(qtype), 1.5))
    np.testing.assert_allclose(out, (w[ids] * 1.5).astype(np.float32), rtol=1e-6, atol=1e-6)


def test_rmsnorm_per_token_and_per_head():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8 * 128)).astype(np.float32) * 3
    w = rng.standard_normal(128).astype(np.float32)
    y = np.zeros_like(x)
    _testing.run_kernel("rmsnorm", [x, w, y], kp.norm(128, 5, 8, 1024, 1e-6))
    xr = x.reshape(5, 8, 128).astype(np.float64)
    ref = xr / np.sqrt((xr ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y.reshape(5, 8, 128), ref, rtol=1e-5, atol=1e-5)


def rope_ref(x, pos0, base, neox, factors=None, scale=1.0):
    n, h, d = x.shape
    inv = base ** (-np.arange(0, d, 2) / d)
    if factors is not None:
        inv = inv / factors
    out = x.astype(np.float64).copy()
    for t in range(n):
        th = (pos0 + t) * scale * inv
        c, s = np.cos(th), np.sin(th)
        if neox:
            a, b = x[t, :, : d // 2], x[t, :, d // 2 :]
            out[t, :, : d // 2] = a * c - b * s
            out[t, :, d // 2 :] = a * s + b * c
        else:
            a, b = x[t, :, 0::2], x[t, :, 1::2]
            out[t, :, 0::2] = a * c - b * s
            out[t, :, 1::2] = a * s + b * c
    return out


@pytest.mark.parametrize("neox", [0, 1])
@pytest.mark.parametrize("factors", [False, True])
def test_rope(neox, factors):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4, 128)).astype(np.float32)
    f = rng.uniform(1, 8, 64).astype(np.float32) if factors else np.zeros(1, np.float32)
    y = x.copy()
    _testing.run_kernel("rope", [y, f], kp.rope(4, 128, 6, 1000, 512, neox, int(factors), 500000.0, 0.5))
    ref = rope_ref(x, 1000, 500000.0, neox, f if factors else None, 0.5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("window,causal", [(0, 1), (5, 1), (0, 0)])
def test_attention_gqa_causal_window(window, causal):
    """Prefill of 9 tokens after 4 cached ones, 8 query heads over 2 KV heads;
    causal 0 (encoders): every query sees every key of the cache and the pass."""
    rng = np.random.default_rng(2)
    H, KVH, D, ctx, pos0, n = 8, 2, 64, 32, 4, 9
    k_all = rng.standard_normal((pos0 + n, KVH * D)).astype(np.float32)
    v_all = rng.standard_normal((pos0 + n, KVH * D)).astype(np.float32)
    kc = np.zeros((ctx, KVH * D), np.uint16)
    vc = np.zeros((ctx, KVH * D), np.uint16)
    # write all positions through the kernel (first the "cached" ones, then the new)
    _testing.run_kernel("kv_write", [k_all[:pos0].copy(), v_all[:pos0].copy(), kc, vc],
                          kp.kv_write(KVH * D, pos0, 0, KVH * D, KVH * D, ctx))
    _testing.run_kernel("kv_write", [k_all[pos0:].copy(), v_all[pos0:].copy(), kc, vc],
                          kp.kv_write(KVH * D, n, pos0, KVH * D, KVH * D, ctx))
    kf = k_all.astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(kc[: pos0 + n].view(np.float16).astype(np.float64), kf)
    vf = v_all.astype(np.float16).astype(np.float64)
    q = rng.standard_normal((n, H * D)).astype(np.float32)
    out = np.zeros((n, H * D), np.float32)
    scale = D ** -0.5
    _testing.run_kernel("attention", [q, kc, vc, out],
                          kp.attention(H, KVH, D, n, pos0, window, H * D, H * D, scale, ctx, causal))
    # llama.cpp's precision against an F16 cache: Q and the softmax weights
    # are rounded to F16 before their products
    qf = q.astype(np.float16).astype(np.float64)
    ref = np.zeros((n, H, D))
    for t in range(n):
        p = pos0 + t if causal else pos0 + n - 1
        lo = max(0, p + 1 - window) if window else 0
        for h in range(H):
            g = h // (H // KVH)
            kk = kf[lo : p + 1, g * D : (g + 1) * D]
            vv = vf[lo : p + 1, g * D : (g + 1) * D]
            s = kk @ qf[t, h * D : (h + 1) * D] * scale
            e = np.exp(s - s.max())
            w = (e / e.sum()).astype(np.float16).astype(np.float64)
            ref[t, h] = w @ vv
    np.testing.assert_allclose(out.reshape(n, H, D), ref, rtol=1e-4, atol=1e-5)


def test_attention_and_positions_of_packed_sequences():
    """Encoders pack sequences in one pass: each token attends to its own sequence only and takes
    its position from the sequence's start."""
    rng = np.random.default_rng(12)
    H, D, lens = 4, 32, [5, 1, 9, 3]
    n = sum(lens)
    bounds = np.zeros((n, 2), np.int32)
    s = 0
    for ln in lens:
        bounds[s:s + ln] = (s, s + ln)
        s += ln
    k = rng.standard_normal((n, H * D)).astype(np.float32)
    v = rng.standard_normal((n, H * D)).astype(np.float32)
    kc = np.zeros((32, H * D), np.uint16)
    vc = np.zeros((32, H * D), np.uint16)
    _testing.run_kernel("kv_write", [k, v, kc, vc], kp.kv_write(H * D, n, 0, H * D, H * D, 32))
    q = rng.standard_normal((n, H * D)).astype(np.float32)
    out = np.full((n, H * D), np.nan, np.float32)
    _testing.run_kernel("attention", [q, kc, vc, out, bounds],
                          kp.attention(H, H, D, n, 0, 0, H * D, H * D, D ** -0.5, 32, 0, 1))
    for t in range(n):  # each token equals a separate bidirectional pass over its own sequence
        a, b = bounds[t]
        alone = np.full((1, H * D), np.nan, np.float32)
        _testing.run_kernel("attention", [q[t:t + 1].copy(), kc[a:].copy(), vc[a:].copy(), alone],
                              kp.attention(H, H, D, 1, b - a - 1, 0, H * D, H * D, D ** -0.5, 32 - a, 0, 0))
        np.testing.assert_array_equal(out[t], alone[0])
    h = rng.standard_normal((n, 16)).astype(np.float32)
    table = rng.standard_normal((64, 16)).astype(np.float32)
    ref = h + table[np.arange(n) - bounds[:, 0]]
    _testing.run_kernel("add_rows", [h, table, bounds], kp.add_rows(16, n, 0, 1))
    np.testing.assert_array_equal(h, ref)


@pytest.mark.parametrize("act", ["silu_gate", "gelu_gate"])
def test_gated_activation(act):
    rng = np.random.default_rng(4)
    g = rng.standard_normal((3, 14336)).astype(np.float32) * 3
    # the ends of exp's range, zero and tiny values, and a NaN, in every row
    g[:, :11] = [-1000, -100, -88, -20, -1e-30, 0, 1e-30, 20, 88, 1000, np.nan]
    u = rng.standard_normal((3, 14336)).astype(np.float32)
    o = np.zeros_like(g)
    _testing.run_kernel(act, [g, u, o], kp.gated(14336, 3))
    gd = g.astype(np.float64)
    if act == "silu_gate":
        a = gd / (1 + np.exp(np.minimum(-gd, 700)))
    else:
        a = 0.5 * gd * (1 + np.tanh(np.sqrt(2 / np.pi) * (gd + 0.044715 * gd ** 3)))
    np.testing.assert_allclose(o, a * u, rtol=1e-5, atol=1e-5)  # (NaN where the reference has NaN)
    assert np.isnan(o[:, 10]).all() and np.isfinite(np.delete(o, 10, axis=1)).all()


def test_add_and_argmax():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 4096)).astype(np.float32)
    b = rng.standard_normal((4, 4096)).astype(np.float32)
    ref = a + b
    _testing.run_kernel("add_inplace", [a, b], kp.add(4096, 4))
    np.testing.assert_array_equal(a, ref)
    logits = rng.standard_normal((3, 151936)).astype(np.float32)
    out = np.zeros(1, np.int32)
    _testing.run_kernel("argmax", [logits, out], kp.argmax(151936, 2, 1))
    assert out[0] == logits[2].argmax()


def argmax_first_greater(row):
    """The reference: the first index whose value is strictly greater than
    the best so far (NaNs never win; a NaN first value does)."""
    best = 0
    for i in range(1, len(row)):
        if row[i] > row[best]:
            best = i
    return best


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_argmax_ties_nans_and_splits(threads):
    """The vectorized argmax, split across threads for a vocabulary, gives
    the scalar scan's index: ties to the first, NaNs skipped (also where a
    thread's part starts with one), all -inf, a NaN first value, tails."""
    rng = np.random.default_rng(11)
    V = 151936
    rows = []
    def row(fill=None):
        r = rng.standard_normal(V).astype(np.float32) if fill is None else np.full(V, fill, np.float32)
        rows.append(r)
        return r
    r = row(); r[[70000, 90000, 5]] = 9.0                       # a tie: the first index
    r = row(); r[[V // 2, V // 3, V // 8]] = np.nan; r[V // 2 + 9] = 20.0  # NaNs starting parts, max just after
    r = row(); r[0] = np.nan                                    # a NaN first value wins
    row(-np.inf)                                                # all -inf: index 0
    r = row(-np.inf); r[V - 1] = -1.0                           # the max in the scalar tail
    r = row(); r[:] = np.nan; r[V - 3] = 0.5                    # NaN everywhere but one
    r = row(); r[V // 2:] = 7.0                                 # a tie across a part boundary
    r = row(-np.inf); r[1:] = np.nan                            # -inf then NaNs
    r = row(); r[V // 8:V // 4 + 5] = np.nan                    # a thread's whole part NaN
    logits = np.stack(rows)
    out = np.zeros(len(rows), np.int32)
    _testing.run_kernel("argmax", [logits, out], kp.argmax(V, 0, len(rows)), n_threads=threads)
    np.testing.assert_array_equal(out, [argmax_first_greater(x) for x in logits])
    short = logits[:, :77].copy()  # rows under one vector loop's worth
    _testing.run_kernel("argmax", [short, out], kp.argmax(77, 0, len(rows)), n_threads=threads)
    np.testing.assert_array_equal(out, [argmax_first_greater(x) for x in short])


def test_layernorm_gelu_erf_add_rows():
    """The encoder's ops at MiniLM / BERT-base widths against numpy in float64."""
    from math import erf

    rng = np.random.default_rng(8)
    for dim in (384, 768):
        x = (rng.standard_normal((7, dim)) * 3 + 1.5).astype(np.float32)
        w = rng.standard_normal(dim).astype(np.float32)
        b = rng.standard_normal(dim).astype(np.float32)
        y = np.zeros_like(x)
        _testing.run_kernel("layernorm", [x, w, y, b], kp.norm(dim, 7, 1, dim, 1e-12))
        xd = x.astype(np.float64)
        ref = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-12) * w + b
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
        _testing.run_kernel("layernorm", [x, w, x, b], kp.norm(dim, 7, 1, dim, 1e-12))  # in place
        np.testing.assert_allclose(x, ref, rtol=1e-5, atol=1e-5)
    g = (rng.standard_normal((5, 1536)) * 3).astype(np.float32)
    ref = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))(g.astype(np.float64))
    _testing.run_kernel("gelu_erf", [g], kp.add(1536, 5))
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6)
    # far tails and specials as torch's gelu gives them: +inf, large x itself, -0 / tiny below, NaN kept
    s = np.array([[np.inf, 1e30, 40.0, -40.0, -1e30, 0.0, np.nan, -1.0]], np.float32)
    _testing.run_kernel("gelu_erf", [s], kp.add(8, 1))
    assert s[0, 0] == np.inf and s[0, 1] == np.float32(1e30) and s[0, 2] == 40.0
    assert abs(s[0, 3]) < 1e-30 and abs(s[0, 4]) < 1e-30 and s[0, 5] == 0.0 and np.isnan(s[0, 6])
    assert abs(s[0, 7] - 0.5 * -1.0 * (1 + erf(-1 / np.sqrt(2)))) < 1e-7
    h = rng.standard_normal((6, 384)).astype(np.float32)
    table = rng.standard_normal((512, 384)).astype(np.float32)
    ref = h + table[100:106]
    _testing.run_kernel("add_rows", [h, table], kp.add_rows(384, 6, 100))
    np.testing.assert_array_equal(h, ref)


@pytest.mark.parametrize("bits,group", [(4, 64), (8, 32), (3, 128), (6, 64), (2, 32), (5, 128)])
def test_mlx_matmul_and_embedding(bits, group):
    """MLX-quantized GEMV / GEMM (also past 64 tokens, in slices) and embedding
    lookup against numpy on the dequantized weights."""
    rng = np.random.default_rng(bits * 7 + group)
    N, K = 96, 512
    blocks, code, wd = mlx_matrix(bits, group, N, K, rng)
    bias = rng.standard_normal(N).astype(np.float32)
    for m, kernel in ((1, "gemv_mlx"), (5, "gemm_mlx"), (150, "gemm_mlx")):
        x = rng.standard_normal((m, K)).astype(np.float32)
        y = np.full((m, N), np.nan, np.float32)
        _testing.run_kernel(kernel, [blocks, x, y, bias], kp.matmul(N, K, m, code, K, N, has_bias=1))
        np.testing.assert_allclose(y, x.astype(np.float64) @ wd.T + bias, rtol=1e-4, atol=1e-3)
    ids = np.array([0, 95, 17], np.int32)
    out = np.zeros((3, K), np.float32)
    _testing.run_kernel("embedding_mlx", [blocks, ids, out], kp.embedding(K, 3, code, 1.0))
    np.testing.assert_array_equal(out, wd[ids].astype(np.float32))


def test_unknown_kernel_is_an_error():
    import akunu

    with pytest.raises(akunu.AkunuError, match="no kernel named"):
        _testing.run_kernel("gemv_q9_9", [], b"")


@pytest.mark.parametrize("channels,n_in,stride", [(80, 3000, 1), (384, 3000, 2), (7, 5, 2)])
def test_im2col_1d_matches_numpy_convolution(channels, n_in, stride):
    """Whisper's conv front end: im2col + matmul equals a direct 1-D convolution (kernel 3, pad 1)."""
    rng = np.random.default_rng(channels + stride)
    x = rng.standard_normal((n_in, channels)).astype(np.float32)
    n_out = (n_in + 2 - 3) // stride + 1
    col = np.full((n_out, channels * 3), np.nan, np.float32)
    _testing.run_kernel("im2col_1d", [x, col], kp.im2col(channels, n_out, n_in, 3, stride, 1))
    padded = np.pad(x, ((1, 1), (0, 0)))
    ref = np.stack([padded[t * stride:t * stride + 3].T.reshape(-1) for t in range(n_out)])
    np.testing.assert_array_equal(col, ref)
    out_ch = 16
    w = rng.standard_normal((out_ch, channels, 3)).astype(np.float32)  # PyTorch Conv1d layout
    conv = np.einsum("ock,tck->to", w.astype(np.float64), np.stack(
        [padded[t * stride:t * stride + 3].T for t in range(n_out)]).astype(np.float64))
    np.testing.assert_allclose(col.astype(np.float64) @ w.reshape(out_ch, -1).T, conv, rtol=1e-9, atol=1e-9)


def test_cross_attention_sees_every_encoder_key():
    """n_keys: each decoder query attends to the whole fixed cache, whatever its position."""
    rng = np.random.default_rng(5)
    H, D, n_keys, n = 6, 64, 1500, 3
    k = rng.standard_normal((n_keys, H * D)).astype(np.float32)
    v = rng.standard_normal((n_keys, H * D)).astype(np.float32)
    kc = np.zeros((n_keys, H * D), np.uint16)
    vc = np.zeros((n_keys, H * D), np.uint16)
    _testing.run_kernel("kv_write", [k, v, kc, vc], kp.kv_write(H * D, n_keys, 0, H * D, H * D, n_keys))
    q = rng.standard_normal((n, H * D)).astype(np.float32)
    out = np.full((n, H * D), np.nan, np.float32)
    _testing.run_kernel("attention", [q, kc, vc, out],
                          kp.attention(H, H, D, n, 7, 0, H * D, H * D, D ** -0.5, n_keys, 0, 0, n_keys))
    kf = k.astype(np.float16).astype(np.float64)
    vf = v.astype(np.float16).astype(np.float64)
    qf = q.astype(np.float16).astype(np.float64)
    for t in range(n):
        for h in range(H):
            s = kf[:, h * D:(h + 1) * D] @ qf[t, h * D:(h + 1) * D] * D ** -0.5
            e = np.exp(s - s.max())
            w = (e / e.sum()).astype(np.float16).astype(np.float64)
            np.testing.assert_allclose(out[t, h * D:(h + 1) * D], w @ vf[:, h * D:(h + 1) * D], rtol=1e-4, atol=1e-5)
