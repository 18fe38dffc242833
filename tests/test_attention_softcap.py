"""Soft-capped attention scores and logits (Gemma 2): a score s = scale * q.k
becomes cap * tanh(s / cap) before the softmax (AttentionParams::softcap,
PagedAttentionParams::softcap), and the `softcap` kernel maps the logits rows
the same way.

  (a) the CPU's contiguous attention against float64 numpy with the cap, over
      F16 and block-typed caches, decode and prompt rows, GQA, windows;
  (b) every device's contiguous attention against the CPU (5e-4 relative L2):
      the one-token split kernel, the grouped-query kernel of deep caches, the
      typed-cache decode kernel, the tensor-core prefill with and without key
      splits, the general kernel;
  (c) the paged kernel: on the CPU each sequence's rows the contiguous
      kernel's bits; on a device within 5e-4 of the CPU, generated rows beside
      prompt rows, and batch invariant;
  (d) the logits map (`softcap`): tests/test_device_kernels.py.

The cap is small (scores of a few units) so that it changes the result far
beyond the tolerances: each case first checks that the uncapped reference
misses the capped one."""

import numpy as np
import pytest

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.test_device_kernels import rel_l2, rng_for
from tests.test_kv_types import KV_TYPES, attention_case, attention_ref, decode_rows, seed_msg
from tests.test_paged_kernels import AttentionCase, check_batch_invariance
from tests.test_paged_kernels import device  # noqa: F401  (Metal emulated, CUDA; skipped when absent)

CAP = 1.5

# heads, KV heads, head_dim, cached positions, new tokens, window
CASES = {
    # Gemma 2 2B's shape: decode on a global layer, a prompt chunk on a local one
    "gemma2-decode": (8, 4, 256, 3000, 1, 0),
    "gemma2-prefill-window": (8, 4, 256, 450, 130, 512),
    "gqa8-hd128-prefill": (32, 4, 128, 300, 70, 0),
    "hd64-decode-window": (16, 4, 64, 1500, 1, 512),
}
# CUDA's kernels for deep caches (the emulated Metal kernel would take minutes)
CUDA_CASES = {
    "gqa-kernel-deep": (32, 8, 128, 20000, 1, 0),
    "prefill-key-splits": (32, 8, 128, 3000, 100, 0),
}
TYPES = [("f16", "f16"), ("q8_0", "q4_0")]


def capped_params(c, cap=CAP):
    return kp.attention(c["H"], c["KV"], c["hd"], c["n"], c["past"], c["window"], c["H"] * c["hd"],
                        c["H"] * c["hd"], c["scale"], c["kc"].shape[0], k_type=KV_TYPES[c["t_k"]],
                        v_type=KV_TYPES[c["t_v"]], softcap=cap)


def make(case, t_k, t_v):
    cases = {**CASES, **CUDA_CASES}
    return dict(attention_case(case, t_k, t_v, cases=cases), t_k=t_k, t_v=t_v)


def run(c, dev, cap=CAP):
    out = np.full((c["n"], c["H"] * c["hd"]), np.nan, np.float32)
    _testing.run_kernel("attention", [c["q"].copy(), c["kc"].copy(), c["vc"].copy(), out], capped_params(c, cap),
                        device=dev)
    return out


@pytest.mark.parametrize("t_k,t_v", TYPES)
@pytest.mark.parametrize("case", CASES)
def test_capped_attention_cpu_reference(case, t_k, t_v):
    c = make(case, t_k, t_v)
    msg = seed_msg(c["key"])
    total = c["past"] + c["n"]
    kf = decode_rows(t_k, c["kc"][:total], c["kv_dim"], as_read=True)
    vf = decode_rows(t_v, c["vc"][:total], c["kv_dim"], as_read=True)
    args = (c["q"], kf, vf, c["H"], c["KV"], c["hd"], c["past"], c["window"], c["scale"])
    ref, bound = attention_ref(*args, softcap=CAP)
    uncapped, _ = attention_ref(*args)
    assert rel_l2(uncapped, ref) > 1e-2, "the cap must matter at these scores"
    out = run(c, "cpu")
    err = np.abs(out - ref)
    assert (err <= bound).all(), f"max error {err.max()}, {(err > bound).sum()} past the bound: {msg}"
    # a cap of 0 is no cap: the uncapped kernel's bits
    plain = np.full_like(out, np.nan)
    _testing.run_kernel("attention", [c["q"].copy(), c["kc"], c["vc"], plain], c["params"])
    np.testing.assert_array_equal(run(c, "cpu", cap=0.0), plain, err_msg=msg)


@pytest.mark.parametrize("t_k,t_v", TYPES)
@pytest.mark.parametrize("case", list(CASES) + list(CUDA_CASES))
def test_capped_attention_device(device, case, t_k, t_v):
    if case in CUDA_CASES and device != "cuda":
        pytest.skip("a CUDA kernel's case (the emulated Metal kernel takes minutes at this depth)")
    c = make(case, t_k, t_v)
    cpu, dev = run(c, "cpu"), run(c, device)
    assert not np.isnan(dev).any(), seed_msg(c["key"])
    assert rel_l2(dev, cpu) < 5e-4, seed_msg(c["key"])


def test_capped_attention_general_kernel(device):
    """Cross-attention over a fixed key set takes the general kernel on CUDA."""
    rng = rng_for("softcap-cross")
    H, hd, n, n_keys = 6, 64, 3, 700
    q = rng.standard_normal((n, H * hd)).astype(np.float32)
    kc = (rng.standard_normal((n_keys + 8, H * hd)) * 2).astype(np.float16).view(np.uint16)
    vc = rng.standard_normal((n_keys + 8, H * hd)).astype(np.float16).view(np.uint16)
    params = kp.attention(H, H, hd, n, 7, 0, H * hd, H * hd, 1 / np.sqrt(hd), n_keys + 8, 1, 0, n_keys,
                          softcap=CAP)
    outs = []
    for dev in ("cpu", device):
        out = np.full((n, H * hd), np.nan, np.float32)
        _testing.run_kernel("attention", [q, kc, vc, out, np.zeros(2, np.int32)], params, device=dev)
        outs.append(out)
    assert rel_l2(outs[1], outs[0]) < 5e-4


class CappedPagedCase(AttentionCase):
    """test_paged_kernels' case with every score soft-capped."""

    def __init__(self, case):
        super().__init__(case)
        self.q *= 2.0  # scores of a few units, so the cap bites

    def params(self, n, out_stride=None, generated=0):
        return kp.attention_paged(self.H, self.KVH, self.D, n, self.window, self.q_stride,
                                  out_stride or self.H * self.D, self.scale, self.cache.block_size,
                                  self.cache.max_blocks, generated, softcap=CAP)


PAGED = ["hd256-gqa4-window", "hd128-gqa8-bs32", "hd64-gqa4-prefill-chunk"]


def check_paged_equals_contiguous(ac, extra_buffers, **attention_fields):
    """On the CPU, each sequence's rows of the paged pass are the contiguous
    kernel's bits over that sequence's keys (extra_buffers: buffers 4... of the
    contiguous command; attention_fields: its AttentionParams beyond the case's)."""
    paged = ac.run("cpu")
    for s, n in enumerate(ac.cache.lens):
        mine = np.flatnonzero(ac.rows[:, 0] == s)
        if not len(mine):
            continue
        kc, vc = ac.cache.contiguous(s)
        out = np.full((len(mine), ac.H * ac.D), np.nan, np.float32)
        _testing.run_kernel("attention", [ac.q[mine].copy(), kc, vc, out] + list(extra_buffers),
                            kp.attention(ac.H, ac.KVH, ac.D, len(mine), int(ac.rows[mine[0], 1]), ac.window,
                                         ac.q_stride, ac.H * ac.D, ac.scale, n, **attention_fields))
        np.testing.assert_array_equal(paged[mine], out, err_msg=f"sequence {s}: {ac.msg}")


def check_paged_device(ac, device, q_scale):
    """Generated rows (one a sequence, queries times q_scale) beside the prompt
    rows: the device within 5e-4 of the CPU, and batch invariant."""
    gen = np.array([[s, n - 1] for s, n in enumerate(ac.cache.lens)], np.int32)
    rows = np.concatenate([gen, ac.rows]).astype(np.int32)
    q = np.concatenate([ac.rng.standard_normal((len(gen), ac.q_stride)).astype(np.float32) * q_scale, ac.q])
    cpu = ac.run("cpu", rows, q)
    dev = ac.run(device, rows, q, generated=len(gen))
    assert not np.isnan(dev).any(), ac.msg
    assert rel_l2(dev, cpu) < 5e-4, ac.msg
    check_batch_invariance(ac, device)


@pytest.mark.parametrize("case", PAGED)
def test_capped_paged_equals_contiguous_cpu(case):
    check_paged_equals_contiguous(CappedPagedCase(case), [], softcap=CAP)


@pytest.mark.parametrize("case", PAGED)
def test_capped_paged_device(device, case):
    check_paged_device(CappedPagedCase(case), device, 2.0)  # (scores of a few units, as the prompt rows')
