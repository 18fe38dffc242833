"""Sliding-window layers keep a ring of rows instead of n_ctx (core/kv_layout.h
kv_ring_row: position p at row p % rows).

  (a) kernels, on every device: kv_write and qk_norm_rope_kv past the ring's
      end land each position at its ring row (the other rows untouched);
      attention over a ring whose window wraps (decode and prefill chunks,
      Gemma 3 and Llama shapes, F16 and quantized K/V) equals, within the
      attention tolerance of tests/test_device_kernels.py, the CPU over a
      cache with a row per position; on the CPU bit for bit. Ring rows the
      window has left are poisoned (NaN), so a read of one shows;
  (b) the model: a random-weight Gemma 3 (window 16) whose prompts run far
      past its ring gives the same greedy tokens and logits as the same model
      with a row per position (AKUNU_KV_RING=0), in one pass, in small
      prefill chunks, through chat turns that reuse the cache and through
      speculative decoding; going back further than the ring holds is a
      clear error, and the generation API re-feeds instead; the cache takes
      the ring's bytes, not n_ctx's.
Inputs are fresh every run (AKUNU_TEST_SEED repeats one)."""

import os
import zlib

import numpy as np
import pytest

import akunu
from akunu import _testing
from akunu.errors import AkunuError
from tests.fixtures import kernel_params as kp
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import rel_l2
from tests.test_kv_types import KV_TYPES, kv_rows, row_bytes
from tests.test_paged_kernels import _available

SEED = int(os.environ.get("AKUNU_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)


def rng_for(key):
    return np.random.default_rng([SEED, zlib.crc32(repr(key).encode())])


def seed_msg(key):
    return f"AKUNU_TEST_SEED={SEED} ({key})"


@pytest.fixture(scope="module", params=["cpu", "metal", "cuda"])
def device(request):
    """The CPU, Metal (the MSL emulation unless AKUNU_METAL_DEVICE=metal) and
    CUDA; skipped, saying why, when absent."""
    if request.param == "cpu":
        return "cpu"
    name = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu") if request.param == "metal" else "cuda"
    why = _available(name)
    if why:
        pytest.skip(f"device {name} unavailable: {why}")
    return name


def ring_of(flat, rows, total, first_kept):
    """The ring a cache of one row per position becomes after positions
    [0, total) were written in order: row r holds the last position p with
    p % rows == r; rows whose position is below first_kept are poisoned
    (0xFF bytes: NaN in F16, a NaN scale in the block types)."""
    ring = np.full((rows,) + flat.shape[1:], 0xFF, flat.dtype)
    for p in range(max(0, total - rows), total):
        if p >= first_kept:
            ring[p % rows] = flat[p]
    return ring


# -- kv_write and qk_norm_rope_kv past the ring's end ---------------------------------------------

@pytest.mark.parametrize("t", ["f16", "q8_0"])
def test_kv_write_wraps(device, t):
    rng = rng_for(("kv_write", t))
    kv_dim, rows, pos0, n = 256, 48, 1000, 20  # rows 1000 % 48 = 40: the pass wraps after 8 tokens
    k, v = kv_rows(rng, n, kv_dim), kv_rows(rng, n, kv_dim)
    flat = [np.zeros((pos0 + n, row_bytes(t, kv_dim)), np.uint8) for _ in range(2)]
    _testing.run_kernel("kv_write", [k, v, *flat], kp.kv_write(kv_dim, n, pos0, kv_dim, kv_dim, pos0 + n,
                                                                 KV_TYPES[t], KV_TYPES[t]))
    ring = [np.full((rows, row_bytes(t, kv_dim)), 0xA5, np.uint8) for _ in range(2)]
    _testing.run_kernel("kv_write", [k, v, *ring], kp.kv_write(kv_dim, n, pos0, kv_dim, kv_dim, rows,
                                                                 KV_TYPES[t], KV_TYPES[t]), device=device)
    at = (pos0 + np.arange(n)) % rows
    untouched = np.setdiff1d(np.arange(rows), at)
    for f, r in zip(flat, ring):
        np.testing.assert_array_equal(r[at], f[pos0:], err_msg=seed_msg(t))
        assert (r[untouched] == 0xA5).all()


def test_qk_norm_rope_kv_wraps(device):
    rng = rng_for("qk_norm_rope_kv")
    heads, kv_heads, hd, n, pos0, rows = 4, 1, 256, 3, 5000, 576  # 5000 % 576 = 392
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    k = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    v = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    qw, kw = (rng.standard_normal((2, hd)) * 0.3 + 1).astype(np.float32)
    fac = np.ones(hd // 2, np.float32)
    outs = []
    for dev, max_ctx in (("cpu", pos0 + n), (device, rows)):
        kc = np.full((max_ctx, kv_heads * hd), 0x7E00, np.uint16)
        vc = kc.copy()
        qq, kk = q.copy(), k.copy()
        params = kp.qk_norm_rope_kv(heads, kv_heads, hd, n, pos0, 1, 1e-6, 1.0, 1, 0, 1e6, 1.0, max_ctx)
        _testing.run_kernel("qk_norm_rope_kv", [qq, kk, v, qw, kw, fac, kc, vc], params, device=dev)
        outs.append((qq, kk, kc, vc))
    (qc, kc_, kflat, vflat), (qd, kd, kring, vring) = outs
    # RoPE at angles of ~5000 rad: an ulp of the angle (5e-4) moves sin / cos by as much
    assert rel_l2(qd, qc) < 1e-4 and rel_l2(kd, kc_) < 1e-4
    at = (pos0 + np.arange(n)) % rows
    np.testing.assert_array_equal(vring[at], vflat[pos0:])
    got, want = (x.view(np.float16).astype(np.float32) for x in (kring[at], kflat[pos0:]))
    assert rel_l2(got, want) < 1e-4  # the rotated k, rounded to F16: RoPE's bound
    others = np.setdiff1d(np.arange(rows), at)
    assert (kring[others] == 0x7E00).all() and (vring[others] == 0x7E00).all()


# -- attention over a wrapped window ----------------------------------------------------------------

# heads, kv heads, head_dim, tokens of the pass, its first position, window, ring rows
RING_CASES = {
    # Gemma 3 270M's attention (4 heads, 1 KV head, 256 wide, window 512)
    "gemma3-decode": (4, 1, 256, 1, 5000, 512, 576),
    "gemma3-prefill-chunk": (4, 1, 256, 64, 1000, 512, 575),  # the fewest rows a 64-token pass allows
    "first-wrap": (8, 2, 128, 100, 500, 512, 611),  # the pass itself runs past the ring's end
    # Llama-8B's grouped heads, a window of 4096 deep in the context: CUDA's split decode
    "gqa-decode-deep": (32, 8, 128, 1, 30000, 4096, 4864),
    # CUDA's tensor-core prefill: a 512-token pass, key tiles across the wrap
    "prefill-512": (8, 2, 128, 512, 3000, 1024, 1535),
}
SLOW_ON_EMULATION = {"gqa-decode-deep", "prefill-512"}


@pytest.mark.parametrize("t_k,t_v", [("f16", "f16"), ("q8_0", "q4_0")])
@pytest.mark.parametrize("case", RING_CASES)
def test_attention_over_ring(device, case, t_k, t_v):
    if device == "metal-emu" and case in SLOW_ON_EMULATION:
        pytest.skip("minutes on the emulated Metal kernel at this depth; the CPU and CUDA run it")
    H, KV, hd, n, pos0, window, rows = RING_CASES[case]
    key = ("attention", case, t_k, t_v)
    rng = rng_for(key)
    kv_dim, total = KV * hd, pos0 + n
    first = max(0, pos0 + 1 - window)  # the oldest key the pass reads
    # the flat cache: positions below `first` are never read, so only the window's rows hold numbers
    kf = np.full((total, row_bytes(t_k, kv_dim)), 0xFF, np.uint8)
    vf = np.full((total, row_bytes(t_v, kv_dim)), 0xFF, np.uint8)
    k, v = kv_rows(rng, total - first, kv_dim), kv_rows(rng, total - first, kv_dim) * 0.5
    kw, vw = kf[first:].copy(), vf[first:].copy()
    _testing.run_kernel("kv_write", [k, v, kw, vw], kp.kv_write(kv_dim, total - first, 0, kv_dim, kv_dim,
                                                                  total - first, KV_TYPES[t_k], KV_TYPES[t_v]))
    kf[first:], vf[first:] = kw, vw
    kr, vr = ring_of(kf, rows, total, first), ring_of(vf, rows, total, first)
    q = rng.standard_normal((n, H * hd)).astype(np.float32)
    seg = np.zeros((n, 2), np.int32)

    def attend(dev, kc, vc, max_ctx):
        out = np.full((n, H * hd), np.nan, np.float32)
        stage = [np.full((total, kv_dim), 0x7E00, np.uint16) for _ in range(2)]  # a typed cache's F16 rows (CUDA)
        params = kp.attention(H, KV, hd, n, pos0, window, H * hd, H * hd, 1 / np.sqrt(hd), max_ctx,
                              k_type=KV_TYPES[t_k], v_type=KV_TYPES[t_v])
        _testing.run_kernel("attention", [q, kc, vc, out, seg, *stage], params, device=dev)
        return out

    want = attend("cpu", kf, vf, total)
    got = attend(device, kr, vr, rows)
    assert not np.isnan(got).any(), f"a ring row outside the window was read: {seed_msg(key)}"
    if device == "cpu":
        np.testing.assert_array_equal(got, want, err_msg=seed_msg(key))
    else:
        assert rel_l2(got, want) < 5e-4, seed_msg(key)


def test_decode_kernels_share_the_workspace(device):
    """CUDA's split decode kernels keep their partials in one device
    workspace: a typed-cache decode, an F16 one and the F16 one again, each
    right, whatever ran before it (partials never land on another kernel's
    counters)."""
    if device != "cuda":
        pytest.skip("the CUDA decode workspace")
    for case, t_k, t_v in (("gemma3-decode", "q8_0", "q4_0"), ("gqa-decode-deep", "f16", "f16"),
                           ("gemma3-decode", "q8_0", "q8_0"), ("gemma3-decode", "f16", "f16")):
        test_attention_over_ring(device, case, t_k, t_v)


def test_ring_too_small_is_an_error(device):
    """A ring that cannot hold a pass's window and its own tokens: a clear error, not a wrong answer."""
    H, KV, hd, n, pos0, window = 4, 1, 64, 32, 1000, 128
    rows = window + n - 2  # one row short
    kc = np.zeros((rows, KV * hd), np.uint16)
    out = np.zeros((n, H * hd), np.float32)
    params = kp.attention(H, KV, hd, n, pos0, window, H * hd, H * hd, 0.125, rows)
    q = np.ones((n, H * hd), np.float32)
    with pytest.raises(Exception, match="ring"):
        _testing.run_kernel("attention", [q, kc, kc.copy(), out, np.zeros((n, 2), np.int32)], params, device=device)
    full = kp.attention(H, KV, hd, n, pos0, 0, H * hd, H * hd, 0.125, rows)  # no window: positions must fit
    with pytest.raises(Exception, match="past the end"):
        _testing.run_kernel("attention", [q, kc, kc.copy(), out, np.zeros((n, 2), np.int32)], full, device=device)


# -- the model ---------------------------------------------------------------------------------------

WINDOW, N_CTX = 16, 2048


@pytest.fixture(scope="module")
def gemma3_file(tmp_path_factory):
    """A random-weight Gemma 3 with a 16-token window (5 local layers of 6)
    and a 2048-token context: its rings (window + pass + slack rows) wrap
    several times."""
    path = str(tmp_path_factory.mktemp("ring") / "gemma3-ring.gguf")
    shape = random_gguf.default_shape("gemma3")
    shape.ctx = N_CTX
    assert shape.sliding_window == WINDOW and shape.n_layers == 6
    random_gguf.write_model(path, "gemma3", seed=SEED % 10000, shape=shape)
    return path


def load(path, ring=True, **kw):
    old = os.environ.get("AKUNU_KV_RING")
    os.environ["AKUNU_KV_RING"] = "1" if ring else "0"
    try:
        return akunu.load(path, n_ctx=N_CTX, **kw)
    finally:
        if old is None:
            del os.environ["AKUNU_KV_RING"]
        else:
            os.environ["AKUNU_KV_RING"] = old


def prompt(rng, n):
    return [int(t) for t in rng.integers(3, 200, n)]


@pytest.mark.parametrize("dev,n_batch", [("cpu", None), ("cpu", 7), ("cuda", None)])
def test_model_ring_matches_full_cache(gemma3_file, dev, n_batch):
    """Logits after every token of a prompt 60 windows long, and a greedy
    continuation: the ring equals the cache of a row per position (on the
    CPU bit for bit; on CUDA within float noise, the same tokens)."""
    if dev != "cpu" and _available(dev):
        pytest.skip(f"device {dev} unavailable: {_available(dev)}")
    ids = prompt(rng_for(("model", n_batch)), 960)
    out = []
    for ring in (True, False):
        m = load(gemma3_file, ring, n_batch=n_batch, device=dev)
        core = m._core()
        logits = core.logits(ids)
        core.truncate(0)
        first = core.prefill(ids)
        out.append((logits, [first] + core.decode_greedy(first, 40, [])))
    (l_ring, t_ring), (l_full, t_full) = out
    if dev == "cpu":
        np.testing.assert_array_equal(l_ring, l_full)
    else:
        assert rel_l2(l_ring, l_full) < 1e-5
    assert t_ring == t_full


def test_model_ring_rows_and_bytes(gemma3_file):
    ring, full = load(gemma3_file), load(gemma3_file, ring=False)
    rows = ring._core().kv_rows
    local = [r for r in rows if r < N_CTX]
    assert len(local) == 5 and rows.count(N_CTX) == 1, rows
    assert all(r >= WINDOW + 64 for r in local)  # the window and a whole prefill pass
    assert full._core().kv_rows == [N_CTX] * 6
    assert ring._core().memory_bytes < full._core().memory_bytes


def test_truncate_past_the_ring(gemma3_file):
    """Going back within the ring keeps the cache; further is a clear error,
    and reusable_prefix says how much can be kept."""
    m = load(gemma3_file)
    core = m._core()
    rows = min(core.kv_rows)
    ids = prompt(rng_for("truncate"), rows + 150)
    core.prefill(ids)
    n = len(ids)
    assert core.reusable_prefix(n - 100) == n - 100  # the ring still holds the window before it
    assert core.reusable_prefix(40) == 0
    with pytest.raises(AkunuError, match="sliding-window"):
        core.truncate(40)
    assert core.n_past == n  # unchanged by the refusal
    core.truncate(n - 100)
    a = core.prefill(ids[n - 100:])
    core.truncate(0)
    assert core.prefill(ids) == a


def test_generation_reuses_or_refeeds(gemma3_file):
    """Chat-style reuse: a second prompt that extends the first reuses the
    cache; one that shares only an early prefix is fed again from 0. Both give
    the tokens of a fresh model, with and without speculative decoding."""
    rng = rng_for("generate")
    base = prompt(rng, 800)
    longer = base + prompt(rng, 30)
    early = base[:40] + prompt(rng, 760)

    def run(m, ids, **kw):
        return m.generate(ids, max_tokens=24, temperature=0, **kw)

    m = load(gemma3_file)
    run(m, base)
    r_long = run(m, longer)
    assert r_long.stats.cached_tokens >= 800
    r_early = run(m, early)
    assert r_early.stats.cached_tokens == 0
    r_spec = run(m, longer + r_long.tokens[:5], speculative=True)
    for ids, got in ((longer, r_long), (early, r_early), (longer + r_long.tokens[:5], r_spec)):
        assert run(load(gemma3_file, ring=False), ids).tokens == got.tokens
