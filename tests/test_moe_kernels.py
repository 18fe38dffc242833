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
                  T.IQ4_NL, T.IQ4_XS]
FMT = {T.F32: "f32", T.F16: "f16", T.BF16: "bf16", T.Q8_0: "q8_0", T.Q4_0: "q4_0", T.Q5_0: "q5_0",
       T.Q4_1: "q4_1", T.Q4_K: "q4_k", T.Q5_K: "q5_k", T.Q6_K: "q6_k", T.Q2_K: "q2_k", T.Q3_K: "q3_k",
       T.IQ4_NL: "iq4_nl", T.IQ4_XS: "iq4_xs"}


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
