"""gpt-oss's FFN kernels: `swiglu_oai` (GatedActParams; g = min(gate, 7),
u = clamp(up, -7, 7), out = g * sigmoid(1.702 g) * (u + 1)) and the expert
biases of `moe_matmul` (MoeMatmulParams::bias: expert e's N floats added to
its product before it is stored or weighted). The CPU against numpy
(float64), every other device (Metal emulated, CUDA) against the CPU, inputs
spanning the clamps and experts nobody selected poisoned."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.test_moe_kernels import expert_format_bound, make_experts, poison_unselected, rng_for, route_buffer
from tests.test_moe_kernels import routing_cases
from tests.test_paged_kernels import device  # noqa: F401  (Metal emulated, CUDA; skipped when absent)

ALPHA, LIMIT = 1.702, 7.0


def swiglu_oai_ref(g, u):
    g = np.minimum(g.astype(np.float64), LIMIT)
    u = np.clip(u.astype(np.float64), -LIMIT, LIMIT)
    return g / (1 + np.exp(-ALPHA * g)) * (u + 1)


def run_swiglu(g, u, n, dev="cpu"):
    n_tok = g.shape[0]
    out = np.full((n_tok, n + 5), np.nan, np.float32)
    _testing.run_kernel("swiglu_oai", [g.copy(), u.copy(), out],
                        kp.gated(n, n_tok, g.shape[1], u.shape[1], n + 5), device=dev)
    return out


def swiglu_inputs(key, n_tok=13, n=2880):
    rng = rng_for(key)
    g = (rng.standard_normal((n_tok, n + 3)) * 6).astype(np.float32)  # both sides of the limits
    u = (rng.standard_normal((n_tok, n + 7)) * 6).astype(np.float32)
    return g, u, n


def test_swiglu_oai_matches_numpy():
    g, u, n = swiglu_inputs("swiglu")
    out = run_swiglu(g, u, n)
    want = swiglu_oai_ref(g[:, :n], u[:, :n])
    np.testing.assert_allclose(out[:, :n], want, rtol=2e-6, atol=2e-6)
    assert np.isnan(out[:, n:]).all(), "wrote past the row"
    assert (g[:, :n] > LIMIT).any() and (np.abs(u[:, :n]) > LIMIT).any(), "the clamps must be reached"


def test_swiglu_oai_device(device):
    g, u, n = swiglu_inputs("swiglu-device")
    cpu, dev = run_swiglu(g, u, n), run_swiglu(g, u, n, device)
    np.testing.assert_allclose(dev[:, :n], cpu[:, :n], rtol=1e-5, atol=1e-5)
    assert np.isnan(dev[:, n:]).all()


BIAS_FORMATS = [T.MXFP4, T.Q8_0, T.F16, T.F32, T.Q4_K]


def bias_case(qtype, weighted, key):
    """Experts, routes, inputs and biases of one case (gpt-oss's widths scaled down)."""
    rng = rng_for((key, int(qtype), weighted))
    n_exp, n_used, N, K = 16, 4, 512, 768
    raw, ref = make_experts(qtype, n_exp, N, K, rng)
    bias = rng.standard_normal((n_exp, N)).astype(np.float32)
    return rng, n_exp, n_used, N, K, raw, ref, bias


def run_biased(qtype, weighted, ids, x, weights, raw, bias, n_exp, n_used, N, K, dev="cpu"):
    n_tok = ids.shape[0]
    rs = 2 * n_used + 1
    route = route_buffer(ids, weights, rs)
    w, _ = poison_unselected(raw, ids, qtype)
    b = bias.copy()
    for e in sorted(set(range(n_exp)) - set(ids.ravel().tolist())):
        b[e] = np.nan  # an unselected expert's bias read shows
    if weighted:
        y = np.full((n_tok, N + 4), np.nan, np.float32)
        params = kp.moe_matmul(N, K, n_tok, int(qtype), n_exp, n_used, x.shape[1], K, N + 4, 0, rs, 1, bias=1)
    else:
        y = np.full((n_tok, n_used * N + 8), np.nan, np.float32)
        params = kp.moe_matmul(N, K, n_tok, int(qtype), n_exp, n_used, x.shape[1], 0, n_used * N + 8, N, rs, 0,
                               bias=1)
    _testing.run_kernel("moe_matmul", [w, x.copy(), y, route, b], params, device=dev)
    return y


@pytest.mark.parametrize("weighted", [0, 1], ids=["slots", "sum"])
@pytest.mark.parametrize("qtype", BIAS_FORMATS, ids=lambda t: t.name)
def test_moe_matmul_bias_matches_numpy(qtype, weighted):
    rng, n_exp, n_used, N, K, raw, ref, bias = bias_case(qtype, weighted, "bias")
    for name, ids in routing_cases(17, n_exp, n_used, rng).items():
        n_tok = ids.shape[0]
        xs = n_used * K + 16 if weighted else K + 16
        x = rng.standard_normal((n_tok, xs)).astype(np.float32)
        weights = rng.uniform(0.05, 1, ids.shape).astype(np.float32)
        y = run_biased(qtype, weighted, ids, x, weights, raw, bias, n_exp, n_used, N, K)
        if weighted:
            xr = x[:, : n_used * K].reshape(n_tok, n_used, K).astype(np.float64)
            r = np.einsum("tjnk,tjk->tjn", ref[ids], xr) + bias[ids]
            want, got = np.einsum("tj,tjn->tn", weights.astype(np.float64), r), y[:, :N]
            assert np.isnan(y[:, N:]).all()
        else:
            want = np.einsum("tjnk,tk->tjn", ref[ids], x[:, :K].astype(np.float64)) + bias[ids]
            got = y[:, : n_used * N].reshape(n_tok, n_used, N)
            assert np.isnan(y[:, n_used * N:]).all()
        err = np.abs(got - want).max()
        assert err <= expert_format_bound(qtype, np.abs(want).max()), (name, err)


@pytest.mark.parametrize("n_tok", [1, 9], ids=["decode", "prefill"])
@pytest.mark.parametrize("weighted", [0, 1], ids=["slots", "sum"])
@pytest.mark.parametrize("qtype", BIAS_FORMATS, ids=lambda t: t.name)
def test_moe_matmul_bias_device(device, qtype, weighted, n_tok):
    rng, n_exp, n_used, N, K, raw, ref, bias = bias_case(qtype, weighted, "bias-device")
    ids = routing_cases(n_tok, n_exp, n_used, rng)["random"]
    xs = n_used * K if weighted else K
    x = rng.standard_normal((n_tok, xs)).astype(np.float32)
    weights = rng.uniform(0.05, 1, ids.shape).astype(np.float32)
    cpu = run_biased(qtype, weighted, ids, x, weights, raw, bias, n_exp, n_used, N, K)
    dev = run_biased(qtype, weighted, ids, x, weights, raw, bias, n_exp, n_used, N, K, device)
    assert not np.isnan(dev[:, : (N if weighted else n_used * N)]).any()
    scale = np.abs(cpu[:, : (N if weighted else n_used * N)]).max()
    np.testing.assert_allclose(dev, cpu, rtol=0, atol=expert_format_bound(qtype, scale))
