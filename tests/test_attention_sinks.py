"""Attention sinks (gpt-oss): each query head's softmax also spans one learned
logit sink[h] whose value vector is zeros (AttentionParams::sinks with the
logits in buffer 7, PagedAttentionParams::sinks with them in buffer 6):
out = sum_j e^(s_j) v_j / (sum_j e^(s_j) + e^(sink[h])).

  (a) the CPU's contiguous attention against float64 numpy with the sinks,
      over F16 and block-typed caches, decode and prompt rows, GQA, windows,
      with a soft cap too; sinks off gives the plain kernel's bits;
  (b) every device's contiguous attention against the CPU (5e-4 relative L2):
      the one-token split kernel, the grouped-query kernel of deep caches, the
      typed-cache decode kernel, the tensor-core prefill with and without key
      splits, the general kernel;
  (c) the paged kernel: on the CPU each sequence's rows the contiguous
      kernel's bits; on a device within 5e-4 of the CPU, generated rows beside
      prompt rows, and batch invariant.

The sinks are drawn around the rows' largest scores (some above, some below)
so that they take a large share of some heads' weight and little of others':
each case first checks that the reference without them misses."""

import numpy as np
import pytest

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.test_device_kernels import rel_l2, rng_for
from tests.test_kv_types import KV_TYPES, attention_case, attention_ref, decode_rows, seed_msg
from tests.test_attention_softcap import CAP, CUDA_CASES, PAGED, TYPES, check_paged_device
from tests.test_attention_softcap import check_paged_equals_contiguous
from tests.test_paged_kernels import AttentionCase
from tests.test_paged_kernels import device  # noqa: F401  (Metal emulated, CUDA; skipped when absent)

# heads, KV heads, head_dim, cached positions, new tokens, window
CASES = {
    # gpt-oss-20b's attention: 64 heads of 64 over 8 KV heads, local layers of 128
    "gptoss-decode": (64, 8, 64, 3000, 1, 0),
    "gptoss-decode-window": (64, 8, 64, 1500, 1, 128),
    "gptoss-prefill-window": (64, 8, 64, 450, 130, 128),
    "gqa8-hd128-prefill": (32, 4, 128, 300, 70, 0),
}
# CUDA_CASES (deep caches), TYPES and CAP as the soft-capped attention's
# tests (a cap some cases add: the scores' map and the sinks are independent)


def sinks_near(case, lse):
    """Sink logits within 3 of each head's log-sum-exp of scores (lse,
    n_heads): some heads' sink takes most of the weight, some little."""
    return (lse + rng_for(("sinks", case)).uniform(-3.0, 3.0, lse.shape)).astype(np.float32)


def last_query_lse(c, cap):
    """Per head, log sum_j e^(s_j) of the last query over the keys it sees."""
    total = c["past"] + c["n"]
    lo = total - c["window"] if c["window"] and total > c["window"] else 0
    kf = decode_rows(c["t_k"], c["kc"][lo:total], c["kv_dim"], as_read=True).reshape(total - lo, c["KV"], c["hd"])
    q = c["q"][-1].reshape(c["KV"], c["H"] // c["KV"], c["hd"]).astype(np.float64)
    sc = np.einsum("jkd,kgd->kgj", kf, q).reshape(c["H"], -1) * c["scale"]
    if cap:
        sc = cap * np.tanh(sc / cap)
    m = sc.max(-1)
    return m + np.log(np.exp(sc - m[:, None]).sum(-1))


def make(case, t_k, t_v):
    cases = {**CASES, **CUDA_CASES}
    c = dict(attention_case(case, t_k, t_v, cases=cases), t_k=t_k, t_v=t_v)
    c["sinks"] = sinks_near(case, last_query_lse(c, 0.0))
    c["sinks_capped"] = sinks_near(case, last_query_lse(c, CAP))  # capped scores sum to another total
    return c


def params(c, sinks=1, cap=0.0):
    return kp.attention(c["H"], c["KV"], c["hd"], c["n"], c["past"], c["window"], c["H"] * c["hd"],
                        c["H"] * c["hd"], c["scale"], c["kc"].shape[0], k_type=KV_TYPES[c["t_k"]],
                        v_type=KV_TYPES[c["t_v"]], softcap=cap, sinks=sinks)


def run(c, dev, sinks=1, cap=0.0):
    out = np.full((c["n"], c["H"] * c["hd"]), np.nan, np.float32)
    spare = np.zeros(2, np.int32)  # buffers 4 to 6, unread here
    logits = c["sinks_capped"] if cap else c["sinks"]
    _testing.run_kernel("attention", [c["q"].copy(), c["kc"].copy(), c["vc"].copy(), out, spare, spare, spare,
                                      logits.copy()], params(c, sinks, cap), device=dev)
    return out


@pytest.mark.parametrize("cap", [0.0, CAP])
@pytest.mark.parametrize("t_k,t_v", TYPES)
@pytest.mark.parametrize("case", CASES)
def test_sink_attention_cpu_reference(case, t_k, t_v, cap):
    c = make(case, t_k, t_v)
    msg = seed_msg(c["key"])
    total = c["past"] + c["n"]
    kf = decode_rows(t_k, c["kc"][:total], c["kv_dim"], as_read=True)
    vf = decode_rows(t_v, c["vc"][:total], c["kv_dim"], as_read=True)
    args = (c["q"], kf, vf, c["H"], c["KV"], c["hd"], c["past"], c["window"], c["scale"])
    ref, bound = attention_ref(*args, softcap=cap, sinks=c["sinks_capped"] if cap else c["sinks"])
    plain, _ = attention_ref(*args, softcap=cap)
    assert rel_l2(plain, ref) > 1e-2, "the sinks must matter at these scores"
    out = run(c, "cpu", cap=cap)
    err = np.abs(out - ref)
    assert (err <= bound).all(), f"max error {err.max()}, {(err > bound).sum()} past the bound: {msg}"
    # sinks off: the plain kernel's bits, whatever buffer 7 holds
    unsunk = np.full_like(out, np.nan)
    _testing.run_kernel("attention", [c["q"].copy(), c["kc"], c["vc"], unsunk], params(c, 0, cap))
    np.testing.assert_array_equal(run(c, "cpu", sinks=0, cap=cap), unsunk, err_msg=msg)


@pytest.mark.parametrize("t_k,t_v", TYPES)
@pytest.mark.parametrize("case", list(CASES) + list(CUDA_CASES))
def test_sink_attention_device(device, case, t_k, t_v):
    if case in CUDA_CASES and device != "cuda":
        pytest.skip("a CUDA kernel's case (the emulated Metal kernel takes minutes at this depth)")
    c = make(case, t_k, t_v)
    cpu, dev = run(c, "cpu"), run(c, device)
    assert not np.isnan(dev).any(), seed_msg(c["key"])
    assert rel_l2(dev, cpu) < 5e-4, seed_msg(c["key"])
    # with the soft cap as well (the scores' map and the sinks are independent);
    # over 20000 capped keys the CPU's F16 weights are subnormal (about 1e-5
    # each, steps of 6e-8): 5.1e-4 seen there
    tol = 1e-3 if c["past"] > 10000 else 5e-4
    assert rel_l2(run(c, device, cap=CAP), run(c, "cpu", cap=CAP)) < tol, seed_msg(c["key"])


def test_sink_attention_general_kernel(device):
    """Cross-attention over a fixed key set takes the general kernel on CUDA."""
    rng = rng_for("sinks-cross")
    H, hd, n, n_keys = 6, 64, 3, 700
    q = rng.standard_normal((n, H * hd)).astype(np.float32)
    kc = rng.standard_normal((n_keys + 8, H * hd)).astype(np.float16).view(np.uint16)
    vc = rng.standard_normal((n_keys + 8, H * hd)).astype(np.float16).view(np.uint16)
    sinks = rng.uniform(-1, 3, H).astype(np.float32)  # scores of a few units here
    params = kp.attention(H, H, hd, n, 7, 0, H * hd, H * hd, 1 / np.sqrt(hd), n_keys + 8, 1, 0, n_keys, sinks=1)
    outs = []
    for dev in ("cpu", device):
        out = np.full((n, H * hd), np.nan, np.float32)
        seg = np.zeros(2, np.int32)
        _testing.run_kernel("attention", [q, kc, vc, out, seg, seg, seg, sinks], params, device=dev)
        outs.append(out)
    assert rel_l2(outs[1], outs[0]) < 5e-4


class SinkPagedCase(AttentionCase):
    """test_paged_kernels' case with a sink logit a head."""

    def __init__(self, case):
        super().__init__(case)
        self.sinks = sinks_near(case, np.full(self.H, 4.0))  # unit queries and keys: totals of a few units

    def params(self, n, out_stride=None, generated=0):
        return kp.attention_paged(self.H, self.KVH, self.D, n, self.window, self.q_stride,
                                  out_stride or self.H * self.D, self.scale, self.cache.block_size,
                                  self.cache.max_blocks, generated, sinks=1)

    def run(self, dev, rows=None, q=None, generated=0):
        rows = self.rows if rows is None else rows
        q = self.q if q is None else q
        out = np.full((len(rows), self.H * self.D), np.nan, np.float32)
        _testing.run_kernel("attention_paged", [q.copy(), self.cache.k, self.cache.v, out, rows.copy(),
                                                self.cache.tables, self.sinks.copy()],
                            self.params(len(rows), generated=generated), device=dev)
        return out



@pytest.mark.parametrize("case", PAGED)
def test_sink_paged_equals_contiguous_cpu(case):
    ac = SinkPagedCase(case)
    spare = np.zeros(2, np.int32)  # buffers 4 to 6, unread here
    check_paged_equals_contiguous(ac, [spare, spare, spare, ac.sinks], sinks=1)


@pytest.mark.parametrize("case", PAGED)
def test_sink_paged_device(device, case):
    check_paged_device(SinkPagedCase(case), device, 1.0)
