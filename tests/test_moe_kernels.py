"""The mixture-of-experts kernels of the CPU backend (their reference
meaning, core/kernel_params.h) against numpy on random inputs: moe_route
(softmax / sigmoid gating, top-k with ties, the normalizations),
moe_matmul (the selected experts' matrices by the route's ids, tokens grouped
by expert: experts with no token, every token on one expert), moe_shared_add.
Outputs are poisoned (NaN) before each run; experts nobody selected are
poisoned too, so reading one shows."""

import os
import zlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures.quant_samples import FORMATS, random_matrix

SEED = int(os.environ.get("AKUNU_TEST_SEED", "0"))
KERNEL_FORMATS = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q4_K, T.Q5_K, T.Q6_K, T.Q2_K, T.Q3_K,
                  T.IQ4_NL, T.IQ4_XS, T.MXFP4]
FMT = {T.F32: "f32", T.F16: "f16", T.BF16: "bf16", T.Q8_0: "q8_0", T.Q4_0: "q4_0", T.Q5_0: "q5_0",
       T.Q4_1: "q4_1", T.Q4_K: "q4_k", T.Q5_K: "q5_k", T.Q6_K: "q6_k", T.Q2_K: "q2_k", T.Q3_K: "q3_k",
       T.IQ4_NL: "iq4_nl", T.IQ4_XS: "iq4_xs", T.MXFP4: "mxfp4"}


def rng_for(key):
    return np.random.default_rng([SEED, zlib.crc32(str(key).encode())])


def run_route(logits, n_used, gating, norm, scale=0.0, route_stride=None):
    n_tok, n_exp = logits.shape
    rs = route_stride or 2 * n_used + 3
    route = np.full((n_tok, rs), np.nan, np.float32)
    _testing.run_kernel("moe_route", [np.ascontiguousarray(logits, np.float32), route],
                        kp.moe_route(n_exp, n_used, n_tok, gating, int(norm), n_exp, rs, scale))
    ids = route[:, :n_used].copy().view(np.int32)
    return ids, route[:, n_used:2 * n_used], route[:, 2 * n_used:]


def route_reference(logits, n_used, gating, norm, scale):
    l = logits.astype(np.float64)
    if gating == kp.MOE_SIGMOID:
        p = 1 / (1 + np.exp(-l))
    else:
        p = np.exp(l - l.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :n_used]  # stable: the lower id first on ties
    w = np.take_along_axis(p, ids, 1)
    if norm:
        w = w / np.maximum(w.sum(1, keepdims=True), 6.103515625e-5)
    if scale not in (0.0, 1.0):
        w = w * scale
    return ids, w, p


@pytest.mark.parametrize("gating", [kp.MOE_SOFTMAX, kp.MOE_SIGMOID], ids=["softmax", "sigmoid"])
@pytest.mark.parametrize("norm", [0, 1])
@pytest.mark.parametrize("n_exp,n_used,scale", [(128, 8, 0.0), (64, 8, 2.5), (8, 2, 1.0), (60, 4, 0.0)])
def test_route_matches_numpy(gating, norm, n_exp, n_used, scale):
    rng = rng_for(("route", gating, norm, n_exp, n_used))
    logits = (rng.standard_normal((37, n_exp)) * 3).astype(np.float32)
    ids, w, tail = run_route(logits, n_used, gating, norm, scale)
    rids, rw, p = route_reference(logits, n_used, gating, norm, scale)
    # the same experts in the same order, but where the reference has a near-tie
    ps = -np.sort(-p, 1)
    clear = (np.abs(np.diff(ps[:, : n_used + 1], axis=1)) > 1e-6).all(1)
    assert clear.sum() > 30, SEED
    np.testing.assert_array_equal(ids[clear], rids[clear], err_msg=f"AKUNU_TEST_SEED={SEED}")
    np.testing.assert_allclose(w[clear], rw[clear], rtol=2e-6, atol=1e-7)
    assert np.isnan(tail).all(), "moe_route wrote past its route row"


def test_route_ties_pick_the_lower_ids():
    logits = np.zeros((3, 16), np.float32)
    logits[1, [3, 7, 11, 12]] = 1.0  # four equal maxima for three places
    logits[2] = np.repeat(np.arange(8, dtype=np.float32), 2)  # pairs of equal values
    ids, w, _ = run_route(logits, 3, kp.MOE_SOFTMAX, 1)
    assert ids.tolist() == [[0, 1, 2], [3, 7, 11], [14, 15, 12]]
    np.testing.assert_allclose(w[0], [1 / 3] * 3, rtol=1e-6)
    np.testing.assert_allclose(w[1], [1 / 3] * 3, rtol=1e-6)


def test_route_nan_logits_still_give_distinct_ids():
    logits = np.full((2, 8), np.nan, np.float32)
    logits[1, 5] = 1.0
    ids, _, _ = run_route(logits, 4, kp.MOE_SIGMOID, 0)
    for row in ids:
        assert len(set(row.tolist())) == 4 and all(0 <= i < 8 for i in row)


def make_experts(qtype, n_exp, rows, cols, rng):
    raws, refs = zip(*(random_matrix(qtype, rows, cols, rng) for _ in range(n_exp)))
    return np.stack(raws), np.stack(refs)


def route_buffer(ids, weights, stride):
    n_tok, n_used = ids.shape
    r = np.full((n_tok, stride), np.nan, np.float32)
    r[:, :n_used] = ids.astype(np.int32).view(np.float32)
    r[:, n_used:2 * n_used] = weights
    return r


def poison_unselected(raw, ids, qtype):
    """NaN bytes over every expert no token selected (a read of one shows in the output)."""
    raw = raw.copy()
    unused = sorted(set(range(raw.shape[0])) - set(ids.ravel().tolist()))
    for e in unused:
        raw[e] = 0xFF  # F32 / F16 / BF16 NaN; 0xFFFF scales are F16 NaN in every block format
    return raw, unused


def routing_cases(n_tok, n_exp, n_used, rng):
    """Random routes with experts left out, every token on expert 3 (and
    distinct other slots), and a single token."""
    rand = np.stack([rng.choice(n_exp - 2, n_used, replace=False) for _ in range(n_tok)])  # the last 2: no token
    one = np.stack([np.concatenate([[3], rng.choice([e for e in range(n_exp) if e != 3], n_used - 1, replace=False)])
                    for _ in range(n_tok)])
    return {"random": rand, "all_on_one": one, "single": rand[:1]}


def expert_format_bound(qtype, scale):
    # quantized formats multiply 8-bit activations (about 1% of the result); float ones float32 sums
    return (3e-2 if FORMATS[qtype][0] > 1 else 1e-5) * scale


@pytest.mark.parametrize("qtype", KERNEL_FORMATS, ids=lambda t: t.name)
def test_moe_matmul_per_slot_matches_numpy(qtype):
    """gate / up: every slot reads its token's one row (x_slot_stride 0)."""
    rng = rng_for(("slot", int(qtype)))
    n_exp, n_used, N, K = 16, 4, 384, 1024
    raw, ref = make_experts(qtype, n_exp, N, K, rng)
    for name, ids in routing_cases(21, n_exp, n_used, rng).items():
        n_tok = ids.shape[0]
        x = rng.standard_normal((n_tok, K + 8)).astype(np.float32)  # stride past the row
        rs = 2 * n_used + 5
        route = route_buffer(ids, rng.uniform(0.1, 1, ids.shape).astype(np.float32), rs)
        w, unused = poison_unselected(raw, ids, qtype)
        ys = n_used * N + 16
        y = np.full((n_tok, ys), np.nan, np.float32)
        _testing.run_kernel("moe_matmul", [w, x, y, route],
                            kp.moe_matmul(N, K, n_tok, int(qtype), n_exp, n_used, K + 8, 0, ys, N, rs, 0))
        want = np.einsum("tjnk,tk->tjn", ref[ids], x[:, :K].astype(np.float64))
        got = y[:, : n_used * N].reshape(n_tok, n_used, N)
        err = np.abs(got - want).max()
        assert err <= expert_format_bound(qtype, np.abs(want).max()), (name, err, SEED)
        assert np.isnan(y[:, n_used * N:]).all(), "wrote past the slots"
        # the format's own matmul on the expert's rows: the same numbers
        for t, j in [(0, 0), (n_tok - 1, n_used - 1)]:
            one = np.zeros((1, N), np.float32)
            _testing.run_kernel(f"gemm_{FMT[qtype]}", [np.ascontiguousarray(raw[ids[t, j]]), x[t:t + 1, :K].copy(), one],
                                kp.matmul(N, K, 1, int(qtype), K, N))
            np.testing.assert_array_equal(got[t, j], one[0], err_msg=f"{name} token {t} slot {j}")


@pytest.mark.parametrize("qtype", KERNEL_FORMATS, ids=lambda t: t.name)
def test_moe_matmul_weighted_sum_matches_numpy(qtype):
    """down: slot j of token t reads its own row; the output is the routing
    weights' sum over the slots."""
    rng = rng_for(("sum", int(qtype)))
    n_exp, n_used, N, K = 12, 3, 256, 512
    raw, ref = make_experts(qtype, n_exp, N, K, rng)
    for name, ids in routing_cases(19, n_exp, n_used, rng).items():
        n_tok = ids.shape[0]
        xs = n_used * K + 32
        x = rng.standard_normal((n_tok, xs)).astype(np.float32)
        weights = rng.uniform(0.05, 1, ids.shape).astype(np.float32)
        rs = 2 * n_used + 1
        route = route_buffer(ids, weights, rs)
        w, _ = poison_unselected(raw, ids, qtype)
        y = np.full((n_tok, N + 4), np.nan, np.float32)
        _testing.run_kernel("moe_matmul", [w, x, y, route],
                            kp.moe_matmul(N, K, n_tok, int(qtype), n_exp, n_used, xs, K, N + 4, 0, rs, 1))
        xr = x[:, : n_used * K].reshape(n_tok, n_used, K).astype(np.float64)
        want = np.einsum("tj,tjnk,tjk->tn", weights.astype(np.float64), ref[ids], xr)
        err = np.abs(y[:, :N] - want).max()
        assert err <= expert_format_bound(qtype, np.abs(want).max()), (name, err, SEED)
        assert np.isnan(y[:, N:]).all()


def test_moe_matmul_rows_do_not_depend_on_the_batch():
    """A token's output is the same alone as in a batch grouped with others (batch invariance)."""
    rng = rng_for("invariance")
    n_exp, n_used, N, K = 8, 2, 256, 512
    for qtype in (T.Q8_0, T.Q4_K, T.F16):
        raw, _ = make_experts(qtype, n_exp, N, K, rng)
        ids = np.stack([rng.choice(n_exp, n_used, replace=False) for _ in range(9)])
        ids[:, 0] = 5  # every token shares one expert
        weights = rng.uniform(0.1, 1, ids.shape).astype(np.float32)
        route = route_buffer(ids, weights, 2 * n_used)
        x = rng.standard_normal((9, n_used * K)).astype(np.float32)
        y = np.full((9, N), np.nan, np.float32)
        params = lambda n, g: kp.moe_matmul(N, K, n, int(qtype), n_exp, n_used, n_used * K, K, N, 0, 2 * n_used, 1,
                                            1, g)
        _testing.run_kernel("moe_matmul", [raw, x, y, route], params(9, 3))
        for t in range(9):
            one = np.full((1, N), np.nan, np.float32)
            _testing.run_kernel("moe_matmul", [raw, x[t:t + 1].copy(), one, route[t:t + 1].copy()],
                                params(1, int(t < 3)))
            np.testing.assert_array_equal(one[0], y[t], err_msg=f"{qtype.name} token {t}")


def test_moe_matmul_unknown_format_is_a_clear_error():
    import akunu
    x = np.ones((1, 32), np.float32)
    with pytest.raises(akunu.AkunuError, match="moe_matmul"):
        _testing.run_kernel("moe_matmul", [np.zeros(64, np.uint8), x, np.zeros((1, 8), np.float32),
                                           np.zeros(2, np.int32)], kp.moe_matmul(8, 32, 1, 77, 2, 1, 32, 0, 8, 8, 2, 0))


@pytest.mark.parametrize("gated", [0, 1])
def test_moe_shared_add_matches_numpy(gated):
    rng = rng_for(("shared", gated))
    n_tok, dim = 11, 640
    x = rng.standard_normal((n_tok, dim + 3)).astype(np.float32)
    gate = rng.standard_normal((n_tok, 5)).astype(np.float32) * 3
    y0 = rng.standard_normal((n_tok, dim + 7)).astype(np.float32)
    y = y0.copy()
    _testing.run_kernel("moe_shared_add", [x, gate, y], kp.moe_shared_add(dim, n_tok, dim + 3, dim + 7, 5, gated))
    g = 1 / (1 + np.exp(-gate[:, :1].astype(np.float64))) if gated else 1.0
    np.testing.assert_allclose(y[:, :dim], y0[:, :dim] + g * x[:, :dim], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(y[:, dim:], y0[:, dim:])


# ---- Metal against the CPU ------------------------------------------------------------------
# The same kernels through the MSL emulation on the CPU (or a Mac's GPU with
# AKUNU_METAL_DEVICE=metal): routes equal to the CPU's (ties and NaN logits
# included), expert matmuls at real shapes (Qwen3-30B-A3B: 128 experts, top-8,
# hidden 2048, expert width 768; OLMoE: 64, top-8, 2048, 1024; Mixtral's 8,
# top-2 at a smaller width) and in every format Metal serves, few tokens (the
# GEMV kernels) and many (tokens grouped by expert), against float64 numpy
# within a float32 accumulation bound (Metal does not round activations to
# 8 bits; the CPU does for the quantized formats, so against the CPU those
# keep expert_format_bound). Experts no token chose are poisoned.

METAL = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu")
# every weight format of the Metal matmul but MLX (no MoE kernel takes MLX blocks, the CPU's neither)
METAL_FORMATS = KERNEL_FORMATS + [T.Q5_1]


@pytest.fixture(scope="module")
def metal():
    if METAL == "metal-emu":
        from tests.test_device_kernels import build_metal_emulation
        build_metal_emulation()
    try:
        x = np.zeros(4, np.float32)
        _testing.run_kernel("add_inplace", [x, x.copy()], kp.add(4, 1), device=METAL)
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"device {METAL} unavailable: {e}")
    return METAL


def on_cpu_and(device, name, bufs, out_index, params):
    """The kernel on the CPU and on `device`, buffer out_index poisoned (NaN) first for each."""
    results = []
    for dev in ("cpu", device):
        b = list(bufs)  # the inputs are read only: shared (expert tensors of real models are large)
        b[out_index] = np.full_like(bufs[out_index], np.nan)
        _testing.run_kernel(name, b, params, device=dev)
        results.append(b[out_index])
    return results


def metal_route_case(metal, logits, n_used, gating, norm, scale, rs):
    n_tok, n_exp = logits.shape
    cpu, gpu = on_cpu_and(metal, "moe_route", [logits, np.zeros((n_tok, rs), np.float32)], 1,
                          kp.moe_route(n_exp, n_used, n_tok, gating, norm, n_exp, rs, scale))
    return (cpu[:, :n_used].copy().view(np.int32), cpu[:, n_used:2 * n_used], cpu[:, 2 * n_used:],
            gpu[:, :n_used].copy().view(np.int32), gpu[:, n_used:2 * n_used], gpu[:, 2 * n_used:])


def with_ties(logits, rng):
    """Exact ties where top-k chooses: rows equal throughout, a run of equal
    maxima longer than the picks, pairs of equal values, a tie at the edge of
    the top-k."""
    n_tok, n_exp = logits.shape
    logits[0] = 0.25
    logits[1, rng.choice(n_exp, min(12, n_exp), replace=False)] = logits[1].max() + 1
    logits[2] = np.repeat(rng.standard_normal((n_exp + 1) // 2), 2)[:n_exp]
    order = np.argsort(-logits[3], kind="stable")
    logits[3, order[: n_exp // 2]] = logits[3, order[n_exp // 2]]  # the k-th and (k+1)-th equal
    return logits


@pytest.mark.parametrize("gating", [kp.MOE_SOFTMAX, kp.MOE_SIGMOID], ids=["softmax", "sigmoid"])
@pytest.mark.parametrize("norm", [0, 1])
@pytest.mark.parametrize("n_exp,n_used,scale,n_tok", [(128, 8, 0.0, 300), (64, 8, 2.5, 37), (8, 2, 1.0, 20),
                                                      (60, 4, 0.0, 1), (4096, 64, 0.0, 5), (3, 3, 0.0, 9)],
                         ids=["qwen3", "olmoe", "mixtral", "qwen2moe", "most", "all"])
def test_metal_route_equals_cpu(metal, gating, norm, n_exp, n_used, scale, n_tok):
    """The CPU's experts in the CPU's order, ties included (lower id first),
    and the CPU's weights; nothing written past the route row's ids and weights."""
    rng = rng_for(("metal-route", gating, norm, n_exp, n_used))
    logits = (rng.standard_normal((n_tok, n_exp)) * 3).astype(np.float32)
    if n_tok >= 4:
        logits = with_ties(logits, rng)
    ci, cw, _, gi, gw, gtail = metal_route_case(metal, logits, n_used, gating, norm, scale, 2 * n_used + 3)
    if METAL == "metal-emu":  # the CPU's exp: the same probabilities, so the same experts everywhere
        np.testing.assert_array_equal(gi, ci, err_msg=f"AKUNU_TEST_SEED={SEED}")
    else:  # a GPU's exp may move a near-tie by an ulp; exact ties stay ties
        _, _, p = route_reference(logits, n_used, gating, norm, scale)
        ps = -np.sort(-p, 1)
        gap = np.abs(np.diff(ps[:, : min(n_used + 1, n_exp)], axis=1))
        clear = ((gap == 0) | (gap > 1e-6)).all(1)
        np.testing.assert_array_equal(gi[clear], ci[clear], err_msg=f"AKUNU_TEST_SEED={SEED}")
    np.testing.assert_allclose(gw, cw, rtol=2e-6, atol=1e-7)
    assert np.isnan(gtail).all(), "moe_route wrote past its route row"


def test_metal_route_ties_and_nan_logits(metal):
    logits = np.zeros((6, 16), np.float32)
    logits[1, [3, 7, 11, 12]] = 1.0  # four equal maxima for three places
    logits[2] = np.repeat(np.arange(8, dtype=np.float32), 2)  # pairs of equal values
    logits[3] = np.nan  # every probability NaN: the CPU takes the lowest ids
    logits[4, [2, 9]] = np.nan  # NaNs among numbers: taken when first among those not taken (the CPU's scan)
    logits[5, 0] = np.nan  # a NaN first: the CPU's running max keeps it
    for gating in (kp.MOE_SOFTMAX, kp.MOE_SIGMOID):
        ci, cw, _, gi, gw, _ = metal_route_case(metal, logits, 3, gating, 1, 0.0, 6)
        np.testing.assert_array_equal(gi, ci)
        np.testing.assert_array_equal(np.isnan(gw), np.isnan(cw))
        np.testing.assert_allclose(gw, cw, rtol=2e-6)
        if gating == kp.MOE_SOFTMAX:
            assert gi[:3].tolist() == [[0, 1, 2], [3, 7, 11], [14, 15, 12]]
        for row in gi:
            assert len(set(row.tolist())) == 3 and all(0 <= i < 16 for i in row)


def sparse_experts(qtype, n_exp, rows, cols, used, rng):
    """An expert tensor whose experts in `used` are random (their float64
    matrices in the dict returned) and all others NaN bytes (0xFF)."""
    be, bb, _ = FORMATS[qtype]
    raw = np.full((n_exp, rows, cols // be * bb), 0xFF, np.uint8)
    ref = {}
    for e in sorted(set(int(u) for u in used)):
        raw[e], ref[e] = random_matrix(qtype, rows, cols, rng)
    return raw, ref


def float32_bound(ref_rows, xv, K):
    """|sum - exact| bound for a float32 dot of K terms (as tests/test_device_kernels.py)."""
    return 2e-6 * (np.abs(ref_rows) @ np.abs(xv)) * np.sqrt(K) / 8 + 1e-5


def metal_matmul_case(metal, qtype, n_exp, n_used, N, K, ids, weighted, rng, what):
    """moe_matmul on the CPU and Metal; Metal against float64 numpy within a
    float32 bound and against the CPU; returns Metal's output and the run's inputs."""
    n_tok = ids.shape[0]
    raw, ref = sparse_experts(qtype, n_exp, N, K, ids.ravel(), rng)
    weights = rng.uniform(0.05, 1, ids.shape).astype(np.float32)
    rs = 2 * n_used + 3
    route = route_buffer(ids, weights, rs)
    if weighted:  # down: slot j reads its own row of the activations
        xs = n_used * K + 16
        x = rng.standard_normal((n_tok, xs)).astype(np.float32)
        ys = N + 4
        params = kp.moe_matmul(N, K, n_tok, int(qtype), n_exp, n_used, xs, K, ys, 0, rs, 1)
    else:  # gate / up: every slot reads its token's one row
        xs = K + 8
        x = rng.standard_normal((n_tok, xs)).astype(np.float32)
        ys = n_used * N + 16
        params = kp.moe_matmul(N, K, n_tok, int(qtype), n_exp, n_used, xs, 0, ys, N, rs, 0)
    y = np.zeros((n_tok, ys), np.float32)
    cpu, gpu = on_cpu_and(metal, "moe_matmul", [raw, x, y, route], 2, params)
    want = np.zeros((n_tok, n_used, N))
    bound = np.zeros((n_tok, n_used, N))
    for t in range(n_tok):
        for j in range(n_used):
            xv = x[t, j * K:(j + 1) * K] if weighted else x[t, :K]
            want[t, j] = ref[int(ids[t, j])] @ xv.astype(np.float64)
            bound[t, j] = float32_bound(ref[int(ids[t, j])], xv, K)
    if weighted:
        want = np.einsum("tj,tjn->tn", weights.astype(np.float64), want)
        bound = np.einsum("tj,tjn->tn", weights.astype(np.float64), bound)
        got, got_cpu, tail = gpu[:, :N], cpu[:, :N], gpu[:, N:]
    else:
        got, got_cpu, tail = (gpu[:, : n_used * N].reshape(n_tok, n_used, N),
                              cpu[:, : n_used * N].reshape(n_tok, n_used, N), gpu[:, n_used * N:])
    msg = f"{what} {qtype.name} AKUNU_TEST_SEED={SEED}"
    assert np.isfinite(got).all(), f"{msg}: an unwritten output or a poisoned expert read"
    excess = np.abs(got - want) - bound
    assert excess.max() <= 0, (msg, float(np.abs(got - want).max()), float(bound.max()))
    cpu_bound = expert_format_bound(qtype, np.abs(want).max())
    assert np.abs(got - got_cpu).max() <= cpu_bound, (msg, float(np.abs(got - got_cpu).max()))
    assert np.isnan(tail).all(), f"{msg}: wrote past the output"
    return gpu, (raw, x, route, params, rs, ys)


def subset_routes(n_tok, n_exp, n_used, rng, n_distinct=12):
    """Routes over a few experts spread over the whole range (the first and
    last included; the rest of them no token): random, and every token on one
    expert (its slot varying)."""
    inner = rng.choice(np.arange(1, n_exp - 1), max(0, min(n_distinct, n_exp) - 2), replace=False)
    pool = np.unique(np.concatenate([[0, n_exp - 1], inner]))
    rand = np.stack([rng.choice(pool, n_used, replace=False) for _ in range(n_tok)])
    one = rand.copy()
    hub = pool[len(pool) // 2]
    for t in range(n_tok):
        others = [e for e in rand[t] if e != hub][: n_used - 1]
        if len(others) < n_used - 1:
            others += [e for e in pool if e != hub and e not in others][: n_used - 1 - len(others)]
        row = list(others)
        row.insert(t % n_used, hub)
        one[t] = row
    return {"random": rand, "all_on_one": one}


QWEN3_30B_A3B, OLMOE, MIXTRAL_LIKE = ("qwen3", 128, 8, 2048, 768), ("olmoe", 64, 8, 2048, 1024), ("mixtral", 8, 2, 1024,
                                                                                                3584)


@pytest.mark.parametrize("weighted", [0, 1], ids=["slots", "sum"])
@pytest.mark.parametrize("n_tok", [1, 5, 12], ids=["decode", "few", "prefill"])
@pytest.mark.parametrize("qtype,shape", [(T.Q4_K, QWEN3_30B_A3B), (T.Q6_K, QWEN3_30B_A3B), (T.Q8_0, QWEN3_30B_A3B),
                                         (T.Q4_K, OLMOE), (T.Q4_K, MIXTRAL_LIKE)],
                         ids=lambda v: v[0] if isinstance(v, tuple) else v.name)
def test_metal_moe_matmul_real_shapes(metal, qtype, shape, n_tok, weighted):
    """gate / up (slots: hidden -> expert width) and down (sum: expert width
    -> hidden) at the models' shapes (Mixtral's expert count and top-2, a
    quarter of its widths), in their usual expert formats (Q4_K_M: Q4_K and
    Q6_K; Q8_0)."""
    name, n_exp, n_used, hidden, width = shape
    N, K = (hidden, width) if weighted else (width, hidden)
    rng = rng_for(("metal-real", name, int(qtype), n_tok, weighted))
    for case, ids in subset_routes(n_tok, n_exp, n_used, rng).items():
        metal_matmul_case(metal, qtype, n_exp, n_used, N, K, ids, weighted, rng, f"{name} {case} m{n_tok}")


@pytest.mark.parametrize("qtype", METAL_FORMATS, ids=lambda t: t.name)
def test_metal_moe_matmul_every_format(metal, qtype):
    """Per slot and weighted, few tokens and many, routes with experts left
    out and every token on one expert; the rows of a batch equal to the same
    tokens alone (the GEMV kernels and the grouped ones compute a row alike)."""
    rng = rng_for(("metal-format", int(qtype)))
    n_exp, n_used, N, K = 16, 4, 96, 1024
    for weighted in (0, 1):
        for n_tok in (3, 21):
            for case, ids in routing_cases(n_tok, n_exp, n_used, rng).items():
                what = f"{'sum' if weighted else 'slots'} {case} m{ids.shape[0]}"
                gpu, (raw, x, route, _, rs, ys) = metal_matmul_case(metal, qtype, n_exp, n_used, N, K, ids, weighted,
                                                                    rng, what)
                for t in (0, ids.shape[0] - 1):
                    one = np.full((1, ys), np.nan, np.float32)
                    p1 = (kp.moe_matmul(N, K, 1, int(qtype), n_exp, n_used, x.shape[1], K, ys, 0, rs, 1) if weighted
                          else kp.moe_matmul(N, K, 1, int(qtype), n_exp, n_used, x.shape[1], 0, ys, N, rs, 0))
                    _testing.run_kernel("moe_matmul", [raw, x[t:t + 1].copy(), one, route[t:t + 1].copy()], p1,
                                        device=metal)
                    np.testing.assert_array_equal(one[0], gpu[t], err_msg=f"{what} token {t} alone")


@pytest.mark.parametrize("weighted", [0, 1], ids=["slots", "sum"])
def test_metal_moe_matmul_a_rank_of_experts(metal, weighted):
    """first_expert (a tensor-parallel rank holding experts 8..15 of 16): ids
    outside add nothing (a weighted row with none is zeros, a slot keeps its
    old contents); a token naming one expert twice counts it twice."""
    rng = rng_for(("metal-rank", weighted))
    n_held, first, n_used, N, K = 8, 8, 4, 64, 256
    for n_tok in (4, 30):
        ids = np.stack([rng.choice(16, n_used, replace=False) for _ in range(n_tok)]).astype(np.int32)
        ids[0] = [0, 1, 2, 3]  # nothing held
        ids[1] = [9, 9, 3, 12]  # a duplicate
        raw, ref = make_experts(T.F16, n_held, N, K, rng)
        rs = 2 * n_used
        weights = rng.uniform(0.1, 1, ids.shape).astype(np.float32)
        route = route_buffer(ids, weights, rs)
        xs = n_used * K
        x = rng.standard_normal((n_tok, xs)).astype(np.float32)
        if weighted:
            params = kp.moe_matmul(N, K, n_tok, int(T.F16), n_held, n_used, xs, K, N, 0, rs, 1, first_expert=first)
            y = np.zeros((n_tok, N), np.float32)
        else:
            params = kp.moe_matmul(N, K, n_tok, int(T.F16), n_held, n_used, xs, 0, n_used * N, N, rs, 0,
                                   first_expert=first)
            y = np.zeros((n_tok, n_used * N), np.float32)
        cpu, gpu = on_cpu_and(metal, "moe_matmul", [raw, x, y, route], 2, params)
        np.testing.assert_array_equal(np.isnan(gpu), np.isnan(cpu))
        # each side within a float32 bound of the exact sums (they add in different orders), so
        # within twice that of each other; outputs of no held expert are exact (zeros, old contents)
        bound = np.zeros(cpu.shape)
        for t in range(n_tok):
            for j in range(n_used):
                e = int(ids[t, j]) - first
                if not 0 <= e < n_held:
                    continue
                b = float32_bound(ref[e], x[t, j * K:(j + 1) * K] if weighted else x[t, :K], K)
                if weighted:
                    bound[t] += weights[t, j] * b
                else:
                    bound[t, j * N:(j + 1) * N] = b
        err = np.nan_to_num(np.abs(gpu.astype(np.float64) - cpu))  # (NaN on both sides: kept poison)
        assert (err <= 2 * bound).all(), f"m{n_tok}: max excess {(err - 2 * bound).max()} AKUNU_TEST_SEED={SEED}"
        if weighted:
            assert (gpu[0] == 0).all()


@pytest.mark.parametrize("weighted", [0, 1], ids=["slots", "sum"])
def test_metal_moe_matmul_long_pass(metal, weighted):
    """More routed rows than the kernels list at once (2048): 300 tokens x 8."""
    rng = rng_for(("metal-long", weighted))
    n_exp, n_used, N, K, n_tok = 32, 8, 40, 256, 300
    ids = np.stack([rng.choice(n_exp, n_used, replace=False) for _ in range(n_tok)])
    ids[::7, 0] = 5
    metal_matmul_case(metal, T.F16, n_exp, n_used, N, K, ids, weighted, rng, "long")


def test_metal_moe_bad_input_is_a_clear_error(metal):
    import akunu
    x = np.ones((1, 64), np.float32)
    y = np.zeros((1, 64), np.float32)
    route = np.zeros(4, np.int32)
    mlx4 = 1000 + 4 * 10 + 1  # MLX 4-bit, groups of 64: no MoE kernel reads MLX blocks
    for dtype in (77, mlx4):
        with pytest.raises(akunu.AkunuError, match="moe_matmul"):
            _testing.run_kernel("moe_matmul", [np.zeros(4096, np.uint8), x, y, route],
                                kp.moe_matmul(8, 64, 1, dtype, 2, 1, 64, 0, 8, 8, 2, 0), device=metal)
    with pytest.raises(akunu.AkunuError, match="moe_matmul"):  # K not a whole number of blocks
        _testing.run_kernel("moe_matmul", [np.zeros(4096, np.uint8), x, y, route],
                            kp.moe_matmul(8, 48, 1, int(T.Q8_0), 2, 1, 64, 0, 8, 8, 2, 0), device=metal)
    with pytest.raises(akunu.AkunuError, match="moe_route: at most"):
        _testing.run_kernel("moe_route", [np.zeros((1, 8192), np.float32), np.zeros(64, np.float32)],
                            kp.moe_route(8192, 8, 1, 0, 1, 8192, 16), device=metal)


@pytest.mark.parametrize("gated", [0, 1])
def test_metal_moe_shared_add_equals_cpu(metal, gated):
    rng = rng_for(("metal-shared", gated))
    for n_tok, dim in ((1, 2048), (11, 640), (70, 1000)):
        x = rng.standard_normal((n_tok, dim + 3)).astype(np.float32)
        gate = rng.standard_normal((n_tok, 5)).astype(np.float32) * 3
        y0 = rng.standard_normal((n_tok, dim + 7)).astype(np.float32)
        out = []
        for dev in ("cpu", metal):
            yy = y0.copy()
            _testing.run_kernel("moe_shared_add", [x, gate, yy], kp.moe_shared_add(dim, n_tok, dim + 3, dim + 7, 5, gated),
                                device=dev)
            out.append(yy)
        np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(out[1][:, dim:], y0[:, dim:])
