"""The kernels of batched passes over a paged KV cache (continuous batching):
rope_rows, kv_write_paged, attention_paged and gather_rows, at real shapes
(head_dim 64/128/256, GQA 4:1 and 8:1, up to 32 heads, blocks of 16 and 32
positions scattered over the pool, sequences of 1 to ~3000 positions, windows
0 and 512). Each kernel is checked
  (a) on the CPU against a float64 numpy reference (attention: the sequence's
      K/V gathered through its block table, Q and the softmax weights rounded
      to F16 as the CPU rounds them; tolerance as tests/test_kernels.py),
  (b) attention_paged against the contiguous `attention` kernel on the same
      keys, one sequence at a time: equal bit for bit on the CPU,
  (c) batch invariance: a row's output is bitwise the same alone, with its own
      sequence only, or in a pass with other sequences' rows before and after,
  (d) on every other backend present (Metal through the MSL emulation, CUDA)
      against the CPU: kv_write_paged and gather_rows equal, rope_rows 2e-5 and
      attention 5e-4 relative L2 (tests/test_device_kernels.py says why).
Outputs and unwritten cache rows are NaN before each run so a stray read or a
missing write shows. Inputs are fresh every run (AKUNU_TEST_SEED, set by
conftest.py, repeats one); every failure message carries the seed."""

import os
import zlib

import numpy as np
import pytest

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures.backend_compare import rel_l2

SEED = int(os.environ.get("AKUNU_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)
F16_NAN = 0x7E00


def rng_for(key):
    """A generator for one test, fresh each run; `SEED` and the key repeat it."""
    return np.random.default_rng([SEED, zlib.crc32(str(key).encode())])


def seed_msg(key):
    return f"AKUNU_TEST_SEED={SEED} (test key {key!r})"


# -- parameter packing (tests/fixtures/kernel_params.py) ---------------------------------------

paged_kv_write_params = kp.kv_write_paged
paged_attention_params = kp.attention_paged
gather_rows_params = kp.gather_rows


# -- devices ---------------------------------------------------------------------------------------

def _available(name):
    """None when `name` runs kernels here, else why not."""
    if name == "metal-emu":
        from tests.test_device_kernels import build_metal_emulation  # skips without clang++
        build_metal_emulation()
    try:
        x = np.zeros(4, np.float32)
        _testing.run_kernel("add_inplace", [x, x.copy()], kp.add(4, 1), device=name)
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        return str(e)
    return None


@pytest.fixture(scope="module", params=["metal", "cuda"])
def device(request):
    """Each backend other than the CPU: Metal (the MSL emulation unless
    AKUNU_METAL_DEVICE=metal) or CUDA; skipped, saying why, when absent."""
    name = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu") if request.param == "metal" else "cuda"
    why = _available(name)
    if why:
        pytest.skip(f"device {name} unavailable: {why}")
    return name


def run(name, inputs, outputs, params, dev="cpu"):
    """Runs kernel `name` on `dev`: inputs copied, outputs copied (the caller
    poisons them). Returns the outputs."""
    outs = [np.array(o, copy=True) for o in outputs]
    _testing.run_kernel(name, [np.array(a, copy=True) for a in inputs] + outs, params, device=dev)
    return outs


def nan_like(shape, dtype=np.float32):
    return np.full(shape, F16_NAN if dtype == np.uint16 else np.nan, dtype)


# -- a paged cache ---------------------------------------------------------------------------------

class PagedCache:
    """Sequences of the given lengths in a pool of `block_size`-position
    blocks, in random order, with spare blocks between them. Table slots past a
    sequence's blocks name a spare block; spare blocks and positions past a
    sequence's length hold F16 NaN, so a kernel that reads them shows it."""

    def __init__(self, rng, lens, kv_dim, block_size, spare=3):
        self.lens, self.kv_dim, self.block_size = list(lens), kv_dim, block_size
        need = [-(-n // block_size) for n in self.lens]
        self.max_blocks = max(need) + 1
        n_pool = sum(need) + spare
        ids = rng.permutation(n_pool)
        self.spares = ids[sum(need):]
        self.tables = np.empty((len(self.lens), self.max_blocks), np.int32)
        at = 0
        for s, n in enumerate(need):
            self.tables[s, :n] = ids[at:at + n]
            self.tables[s, n:] = rng.choice(self.spares, self.max_blocks - n)
            at += n
        self.n_pool_rows = n_pool * block_size
        self.k = nan_like((self.n_pool_rows, kv_dim), np.uint16)
        self.v = nan_like((self.n_pool_rows, kv_dim), np.uint16)
        for s, n in enumerate(self.lens):
            rows = self.pool_rows(s, np.arange(n))
            self.k[rows] = (rng.standard_normal((n, kv_dim)) * 2).astype(np.float16).view(np.uint16)
            self.v[rows] = rng.standard_normal((n, kv_dim)).astype(np.float16).view(np.uint16)

    def pool_rows(self, seq, positions):
        """Pool rows of `positions` of sequence `seq` (kernel_params.h's layout)."""
        positions = np.asarray(positions)
        return self.tables[seq, positions // self.block_size] * self.block_size + positions % self.block_size

    def contiguous(self, seq):
        """The sequence's K and V caches laid out contiguously (F16 bits)."""
        rows = self.pool_rows(seq, np.arange(self.lens[seq]))
        return self.k[rows].copy(), self.v[rows].copy()


def chunk_rows(rng, lens, max_chunk):
    """(sequence, position) rows of one pass: each sequence's last 1..max_chunk
    positions (decode steps and prefill chunks), the sequences' runs in random
    order."""
    runs = []
    for s in rng.permutation(len(lens)):
        n = int(rng.integers(1, min(max_chunk, lens[s]) + 1))
        runs.append(np.stack([np.full(n, s), np.arange(lens[s] - n, lens[s])], 1))
    return np.concatenate(runs).astype(np.int32)


# -- rope_rows -------------------------------------------------------------------------------------

def rope_ref(x, positions, base, neox, factors=None, scale=1.0):
    """float64 rotation of each row [n, heads, d] at its own position, and each
    element's error bound: the kernels form the angle in float32, so at
    thousands of radians it is off by a few float32 ulps of itself; an angle
    error e moves both elements of a pair by up to e * |pair|."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2) / d)
    if factors is not None:
        inv = inv / factors
    th = np.asarray(positions, np.float64)[:, None, None] * scale * inv
    c, s = np.cos(th), np.sin(th)
    x = x.astype(np.float64)
    out = x.copy()
    if neox:
        a, b = x[..., : d // 2], x[..., d // 2:]
        out[..., : d // 2], out[..., d // 2:] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    pair_bound = 4 * np.finfo(np.float32).eps * np.maximum(th, 1.0) * np.hypot(a, b) + 1e-5
    bound = np.empty_like(out)
    if neox:
        bound[..., : d // 2], bound[..., d // 2:] = pair_bound, pair_bound
    else:
        bound[..., 0::2], bound[..., 1::2] = pair_bound, pair_bound
    return out, bound


ROPE_CASES = {
    "llama-hd64": dict(heads=32, hd=64, neox=0, factors=False, base=500000.0, scale=1.0),
    "qwen-hd128-neox": dict(heads=16, hd=128, neox=1, factors=False, base=1000000.0, scale=1.0),
    "llama3-factors": dict(heads=8, hd=128, neox=0, factors=True, base=500000.0, scale=1.0),
    "gemma-hd256-linear": dict(heads=4, hd=256, neox=1, factors=False, base=10000.0, scale=0.125),
}


def rope_case(case):
    c = ROPE_CASES[case]
    rng = rng_for(("rope_rows", case))
    n, stride = 23, c["heads"] * c["hd"] + 8  # row stride past the heads: the tail stays as it was
    x = rng.standard_normal((n, stride)).astype(np.float32)
    rows = np.stack([rng.integers(0, 6, n), rng.integers(0, 4000, n)], 1).astype(np.int32)
    f = rng.uniform(1, 8, c["hd"] // 2).astype(np.float32) if c["factors"] else np.zeros(1, np.float32)
    params = kp.rope(c["heads"], c["hd"], n, 0, stride, c["neox"], int(c["factors"]), c["base"], c["scale"])
    return c, x, rows, f, params


@pytest.mark.parametrize("case", ROPE_CASES)
def test_rope_rows_cpu(case):
    """(a) against float64 numpy at each row's position, and equal to `rope` run
    on the row alone at pos0 = its position."""
    c, x, rows, f, params = rope_case(case)
    msg = seed_msg(("rope_rows", case))
    y = x.copy()
    _testing.run_kernel("rope_rows", [y, f.copy(), rows.copy()], params)
    H, D = c["heads"], c["hd"]
    ref, bound = rope_ref(x[:, : H * D].reshape(-1, H, D), rows[:, 1], c["base"], c["neox"],
                          f if c["factors"] else None, c["scale"])
    err = np.abs(y[:, : H * D].reshape(-1, H, D) - ref)
    assert (err <= bound).all(), f"max error {err.max()}, {(err > bound).sum()} elements past the bound: {msg}"
    np.testing.assert_array_equal(y[:, H * D:], x[:, H * D:], err_msg=msg)
    for t in range(0, len(x), 5):
        alone = x[t:t + 1].copy()
        _testing.run_kernel("rope", [alone, f.copy()], kp.rope(H, D, 1, int(rows[t, 1]), x.shape[1], c["neox"],
                                                              int(c["factors"]), c["base"], c["scale"]))
        np.testing.assert_array_equal(y[t], alone[0], err_msg=f"row {t}: {msg}")


@pytest.mark.parametrize("case", ROPE_CASES)
def test_rope_rows_device(device, case):
    """(d) against the CPU: 4e-5 relative L2 (angles of thousands of radians,
    formed in float32 by both, in different orders: 2e-5 is reached at times)."""
    c, x, rows, f, params = rope_case(case)
    out = []
    for dev in ("cpu", device):
        y = x.copy()
        _testing.run_kernel("rope_rows", [y, f.copy(), rows.copy()], params, device=dev)
        out.append(y)
    assert rel_l2(out[1], out[0]) < 4e-5, seed_msg(("rope_rows", case))
    H, D = c["heads"], c["hd"]
    np.testing.assert_array_equal(out[1][:, H * D:], x[:, H * D:], err_msg=seed_msg(("rope_rows", case)))


# -- kv_write_paged --------------------------------------------------------------------------------

KV_WRITE_CASES = {
    "kv512-bs16": dict(kv_dim=512, block_size=16, lens=[40, 1, 300, 17]),
    "kv1024-bs32": dict(kv_dim=1024, block_size=32, lens=[2000, 65, 3]),
    "kv256-bs16": dict(kv_dim=256, block_size=16, lens=[1, 1, 1, 1, 1, 1, 1, 900]),
}


def kv_write_case(case):
    """A pool with every sequence's cache but its newest positions, and the
    pass that writes those (rows in random order, K/V sources with padding
    between tokens)."""
    c = KV_WRITE_CASES[case]
    rng = rng_for(("kv_write_paged", case))
    cache = PagedCache(rng, c["lens"], c["kv_dim"], c["block_size"])
    rows = chunk_rows(rng, c["lens"], 24)
    rows = rows[rng.permutation(len(rows))]
    n, kv = len(rows), c["kv_dim"]
    k = rng.standard_normal((n, kv + 16)).astype(np.float32)
    v = rng.standard_normal((n, kv + 48)).astype(np.float32)
    before_k, before_v = cache.k.copy(), cache.v.copy()
    dest = cache.pool_rows(rows[:, 0], rows[:, 1])
    before_k[dest], before_v[dest] = F16_NAN, F16_NAN  # the rows the pass must write
    params = paged_kv_write_params(kv, n, kv + 16, kv + 48, c["block_size"], cache.max_blocks)
    return cache, rows, k, v, before_k, before_v, dest, params


def run_kv_write(dev, cache, rows, k, v, before_k, before_v, params):
    kc, vc = before_k.copy(), before_v.copy()
    _testing.run_kernel("kv_write_paged", [k, v, kc, vc, rows.copy(), cache.tables.copy()], params, device=dev)
    return kc, vc


@pytest.mark.parametrize("case", KV_WRITE_CASES)
def test_kv_write_paged_cpu(case):
    """(a) each row's K/V, rounded to F16, lands at its pool row; nothing else changes."""
    cache, rows, k, v, bk, bv, dest, params = kv_write_case(case)
    kc, vc = run_kv_write("cpu", cache, rows, k, v, bk, bv, params)
    kv = cache.kv_dim
    ek, ev = bk.copy(), bv.copy()
    ek[dest] = k[:, :kv].astype(np.float16).view(np.uint16)
    ev[dest] = v[:, :kv].astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(kc, ek, err_msg=seed_msg(("kv_write_paged", case)))
    np.testing.assert_array_equal(vc, ev, err_msg=seed_msg(("kv_write_paged", case)))


@pytest.mark.parametrize("case", KV_WRITE_CASES)
def test_kv_write_paged_device(device, case):
    """(d) the same pool as the CPU's, bit for bit."""
    cache, rows, k, v, bk, bv, dest, params = kv_write_case(case)
    ck, cv = run_kv_write("cpu", cache, rows, k, v, bk, bv, params)
    dk, dv = run_kv_write(device, cache, rows, k, v, bk, bv, params)
    np.testing.assert_array_equal(dk, ck, err_msg=seed_msg(("kv_write_paged", case)))
    np.testing.assert_array_equal(dv, cv, err_msg=seed_msg(("kv_write_paged", case)))


# -- attention_paged -------------------------------------------------------------------------------

# max_chunk: the most rows a sequence has in the pass (1: decode steps only)
ATTENTION_CASES = {
    "hd64-gqa4-bs16": dict(heads=32, kv_heads=8, hd=64, block_size=16, window=0, lens=[2100, 37, 700, 1, 260],
                           max_chunk=12),
    "hd128-gqa8-bs32": dict(heads=32, kv_heads=4, hd=128, block_size=32, window=0, lens=[1500, 3000, 9],
                            max_chunk=6),
    "hd256-gqa4-window": dict(heads=8, kv_heads=2, hd=256, block_size=16, window=512, lens=[2000, 513, 600, 40],
                              max_chunk=10),
    "hd128-gqa8-window-bs32": dict(heads=16, kv_heads=2, hd=128, block_size=32, window=512,
                                   lens=[2900, 511, 1030, 2], max_chunk=4),
    "hd64-gqa4-prefill-chunk": dict(heads=16, kv_heads=4, hd=64, block_size=32, window=0, lens=[200, 90, 33],
                                    max_chunk=40),
    # blocks of a size not a power of two (the CPU kernel's division path)
    "hd128-gqa2-bs12": dict(heads=16, kv_heads=8, hd=128, block_size=12, window=0, lens=[300, 25, 1], max_chunk=3),
}


class AttentionCase:
    def __init__(self, case):
        c = ATTENTION_CASES[case]
        self.key = ("attention_paged", case)
        self.msg = seed_msg(self.key)
        rng = rng_for(self.key)
        self.H, self.KVH, self.D, self.window = c["heads"], c["kv_heads"], c["hd"], c["window"]
        self.cache = PagedCache(rng, c["lens"], self.KVH * self.D, c["block_size"])
        self.rows = chunk_rows(rng, c["lens"], c["max_chunk"])
        self.q_stride = self.H * self.D + 32  # padding between query rows
        self.q = rng.standard_normal((len(self.rows), self.q_stride)).astype(np.float32)
        self.scale = 1 / np.sqrt(self.D)
        self.rng = rng

    def params(self, n, out_stride=None, generated=0):
        return paged_attention_params(self.H, self.KVH, self.D, n, self.window, self.q_stride,
                                      out_stride or self.H * self.D, self.scale, self.cache.block_size,
                                      self.cache.max_blocks, generated)

    def run(self, dev, rows=None, q=None, generated=0):
        """attention_paged over `rows` (default: the whole pass) on `dev`;
        the first `generated` rows marked as generated (one query a sequence)."""
        rows = self.rows if rows is None else rows
        q = self.q if q is None else q
        out = np.full((len(rows), self.H * self.D), np.nan, np.float32)
        _testing.run_kernel("attention_paged", [q.copy(), self.cache.k, self.cache.v, out, rows.copy(),
                                                self.cache.tables], self.params(len(rows), generated=generated),
                            device=dev)
        return out


def attention_ref(ac):
    """float64 attention of each row over its sequence's keys [lo, pos],
    gathered through the block table, Q and softmax weights rounded to F16;
    and each element's error bound. The bound is the existing attention tests'
    (1e-4 relative + 1e-5) plus, for each weight within 2^-12 of its size from
    an F16 rounding midpoint (where the kernel's float32 score may round it
    to the neighbouring F16 value), one F16 step of that weight times |v|."""
    H, KVH, D = ac.H, ac.KVH, ac.D
    g = H // KVH
    out = np.zeros((len(ac.rows), H, D))
    flips = np.zeros((len(ac.rows), H, D))
    for t, (s, pos) in enumerate(ac.rows):
        lo = max(0, pos + 1 - ac.window) if ac.window else 0
        rows = ac.cache.pool_rows(s, np.arange(lo, pos + 1))
        k = ac.cache.k[rows].view(np.float16).astype(np.float64).reshape(-1, KVH, D)
        v = ac.cache.v[rows].view(np.float16).astype(np.float64).reshape(-1, KVH, D)
        q = ac.q[t, : H * D].astype(np.float16).astype(np.float64).reshape(KVH, g, D)
        sc = np.einsum("jkd,kgd->kgj", k, q) * np.float64(np.float32(ac.scale))
        e = np.exp(sc - sc.max(-1, keepdims=True))
        w64 = e / e.sum(-1, keepdims=True)
        w = w64.astype(np.float16).astype(np.float64)
        step = np.spacing(w64.astype(np.float16)).astype(np.float64)
        near = np.abs(np.abs(w64 - w) - step / 2) <= w64 * 2.0 ** -12
        out[t] = np.einsum("kgj,jkd->kgd", w, v).reshape(H, D)
        flips[t] = np.einsum("kgj,jkd->kgd", near * step, np.abs(v)).reshape(H, D)
    out = out.reshape(len(ac.rows), H * D)
    return out, 1e-4 * np.abs(out) + 1e-5 + flips.reshape(out.shape)


@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_paged_cpu_reference(case):
    """(a) against float64 numpy through the block tables."""
    ac = AttentionCase(case)
    out = ac.run("cpu")
    ref, bound = attention_ref(ac)
    err = np.abs(out - ref)
    assert (err <= bound).all(), f"max error {err.max()}, {(err > bound).sum()} elements past the bound: {ac.msg}"


@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_paged_equals_contiguous(case):
    """(b) each sequence's rows equal the contiguous `attention` kernel over
    the same keys laid out contiguously, bit for bit."""
    ac = AttentionCase(case)
    paged = ac.run("cpu")
    for s, n in enumerate(ac.cache.lens):
        mine = np.flatnonzero(ac.rows[:, 0] == s)
        if not len(mine):
            continue
        positions = ac.rows[mine, 1]
        kc, vc = ac.cache.contiguous(s)
        out = np.full((len(mine), ac.H * ac.D), np.nan, np.float32)
        _testing.run_kernel("attention", [ac.q[mine].copy(), kc, vc, out],
                            kp.attention(ac.H, ac.KVH, ac.D, len(mine), int(positions[0]), ac.window, ac.q_stride,
                                         ac.H * ac.D, ac.scale, n))
        np.testing.assert_array_equal(paged[mine], out, err_msg=f"sequence {s}: {ac.msg}")


def check_batch_invariance(ac, dev):
    """(c) rows alone, their sequence's rows alone, and the pass with other
    sequences' rows around them in another order, all equal the full pass."""
    full = ac.run(dev)
    rng = ac.rng
    for t in rng.choice(len(ac.rows), min(4, len(ac.rows)), replace=False):
        alone = ac.run(dev, ac.rows[t:t + 1], ac.q[t:t + 1])
        np.testing.assert_array_equal(alone[0], full[t], err_msg=f"{dev}: row {t} alone: {ac.msg}")
    s = int(ac.rows[rng.integers(len(ac.rows)), 0])
    mine = np.flatnonzero(ac.rows[:, 0] == s)
    own = ac.run(dev, ac.rows[mine], ac.q[mine])
    np.testing.assert_array_equal(own, full[mine], err_msg=f"{dev}: sequence {s} alone: {ac.msg}")
    # the runs of sequences in reverse order, a decode row of another sequence
    # between each pair: every row sees other rows before and after it
    order = np.concatenate([np.flatnonzero(ac.rows[:, 0] == s) for s in np.unique(ac.rows[:, 0])[::-1]])
    order = np.insert(order, np.arange(1, len(order), 3), rng.integers(0, len(ac.rows), (len(order) - 1 + 2) // 3))
    mixed = ac.run(dev, ac.rows[order], ac.q[order])
    np.testing.assert_array_equal(mixed, full[order], err_msg=f"{dev}: rows reordered and mixed: {ac.msg}")


@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_paged_batch_invariant_cpu(case):
    check_batch_invariance(AttentionCase(case), "cpu")


@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_paged_device(device, case):
    """(d) against the CPU (5e-4 relative L2), and (c) on the device."""
    ac = AttentionCase(case)
    dev = ac.run(device)
    assert not np.isnan(dev).any(), f"{device}: rows left unwritten or NaN read: {ac.msg}"
    assert rel_l2(dev, ac.run("cpu")) < 5e-4, ac.msg
    check_batch_invariance(ac, device)


@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_paged_generated_rows_device(device, case):
    """Generated rows (the pass's leading rows, one query a sequence at its
    last position, which a GPU serves with its split kernel) beside prompt
    rows: against the CPU (5e-4 relative L2), and each generated row the same
    bits alone, in reverse order, and with the prompt rows after it."""
    ac = AttentionCase(case)
    gen = np.array([[s, n - 1] for s, n in enumerate(ac.cache.lens)], np.int32)
    rows = np.concatenate([gen, ac.rows]).astype(np.int32)
    q = ac.rng.standard_normal((len(rows), ac.q_stride)).astype(np.float32)
    g = len(gen)
    full = ac.run(device, rows, q, generated=g)
    assert not np.isnan(full).any(), f"{device}: rows left unwritten or NaN read: {ac.msg}"
    assert rel_l2(full, ac.run("cpu", rows, q)) < 5e-4, ac.msg
    for t in range(g):
        alone = ac.run(device, rows[t:t + 1], q[t:t + 1], generated=1)
        np.testing.assert_array_equal(alone[0], full[t], err_msg=f"{device}: generated row {t} alone: {ac.msg}")
    rev = ac.run(device, gen[::-1].copy(), q[:g][::-1].copy(), generated=g)
    np.testing.assert_array_equal(rev, full[:g][::-1], err_msg=f"{device}: generated rows reversed: {ac.msg}")


# -- gather_rows -----------------------------------------------------------------------------------

GATHER_CASES = {
    "logits-151936": dict(dim=151936, n_src=12, n_rows=5, pad=0),
    "hidden-2048-strided": dict(dim=2048, n_src=70, n_rows=33, pad=24),
    "one-row": dict(dim=1000, n_src=1, n_rows=1, pad=3),
}


def gather_case(case):
    c = GATHER_CASES[case]
    rng = rng_for(("gather_rows", case))
    src_stride, dst_stride = c["dim"] + c["pad"], c["dim"] + 2 * c["pad"]
    src = rng.standard_normal((c["n_src"], src_stride)).astype(np.float32)
    idx = rng.integers(0, c["n_src"], c["n_rows"]).astype(np.int32)  # repeats allowed
    dst = np.full((c["n_rows"] + 2, dst_stride), np.nan, np.float32)  # rows past n_rows stay unwritten
    return c, src, idx, dst, gather_rows_params(c["dim"], c["n_rows"], src_stride, dst_stride)


@pytest.mark.parametrize("case", GATHER_CASES)
def test_gather_rows_cpu(case):
    c, src, idx, dst, params = gather_case(case)
    (out,) = run("gather_rows", [src, idx], [dst], params)
    expect = dst.copy()
    expect[: c["n_rows"], : c["dim"]] = src[idx, : c["dim"]]
    np.testing.assert_array_equal(out, expect, err_msg=seed_msg(("gather_rows", case)))


@pytest.mark.parametrize("case", GATHER_CASES)
def test_gather_rows_device(device, case):
    c, src, idx, dst, params = gather_case(case)
    (cpu,) = run("gather_rows", [src, idx], [dst], params)
    (got,) = run("gather_rows", [src, idx], [dst], params, device)
    np.testing.assert_array_equal(got, cpu, err_msg=seed_msg(("gather_rows", case)))


# -- the matmul of batch tables (MatmulParams::invariant) ---------------------------------------------

@pytest.mark.parametrize("n_tokens,generated", [(1, 0), (1, 1), (5, 2), (9, 0), (40, 7)])
def test_invariant_matmul_row_alone_equals_row_in_pass(device, n_tokens, generated):
    """F16 weights: each row of a batch-table matmul equals the same row run alone (as the same
    kind of row), bit for bit; a pass of n_tokens crosses the backends' GEMV / tile thresholds."""
    key = ("matmul", n_tokens, generated)
    rng = rng_for(key)
    N, K = 96, 256
    w = rng.standard_normal((N, K)).astype(np.float16)
    x = rng.standard_normal((n_tokens, K)).astype(np.float32)
    f16 = 1  # GGML_TYPE_F16

    def matmul(rows, g):
        params = kp.matmul(N, K, len(rows), f16, K, N, invariant=1, generated_rows=g)
        (y,) = run("gemm_f16", [w.view(np.uint8).reshape(-1), rows], [nan_like((len(rows), N))], params, device)
        return y

    together = matmul(x, generated)
    for t in range(n_tokens):
        alone = matmul(x[t:t + 1], 1 if t < generated else 0)[0]
        assert np.array_equal(alone, together[t]), f"row {t} differs alone ({seed_msg(key)})"
