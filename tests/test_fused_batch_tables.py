"""The fused batch tables (continuous batching passes as GPUs replay them:
qk_norm_rope_kv_paged, add_rmsnorm, generated rows marked for the paged
attention) and their kernels.

- Tables: built on the CPU (AKUNU_CPU_FUSED_BATCH=1), whose twins of the fused
  kernels are the unfused sequences, a batch of mixed requests gives the
  same tokens and bit-identical logits as the CPU's plain batch tables, for
  every architecture (QK norm, QKV bias, Gemma 3's post-norms and local
  layers) and quantized formats: this checks the builder's wiring (buffers,
  the norm carried from one layer to the next) without a GPU.
- Kernels: each CPU twin against float64 numpy; on CUDA and Metal (the MSL
  emulation here) against the CPU, and Metal's fused batch tables against
  the CPU's plain ones.
Inputs are fresh every run (AKUNU_TEST_SEED repeats one)."""

import glob
import os
import zlib

import numpy as np
import pytest

import akunu
from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import rel_l2
from tests.test_paged_kernels import PagedCache, rope_ref

ROOT = os.path.dirname(os.path.abspath(__file__))
QUANTIZED = [p for p in sorted(glob.glob(os.path.join(ROOT, "models", "*.gguf")))
             if os.path.basename(p).startswith(("llama-q4_k_m", "gemma3-q4_k_m", "qwen3", "llama-q8_0"))]
SEED = int(os.environ.get("AKUNU_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)
F16_NAN = 0x7E00


def rng_for(key):
    return np.random.default_rng([SEED, zlib.crc32(str(key).encode())])


def seed_msg(key):
    return f"AKUNU_TEST_SEED={SEED} (test key {key!r})"


# -- whole tables on the CPU -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("fused-batch")
    out = []
    for arch in random_gguf.ARCHS:
        p = str(d / f"{arch}-F16.gguf")
        random_gguf.write_model(p, arch, "F16", seed=23)
        out.append(p)
    return out + QUANTIZED


def batch_run(path, fused, device="cpu", steps=40, n_gen=12):
    """Four requests of mixed lengths through one batch engine: the drawn
    tokens and the logits of every sampling row of every pass (fused or
    plain batch tables: the device's switch, read when it is made)."""
    switch = "AKUNU_CPU_FUSED_BATCH" if device == "cpu" else "AKUNU_METAL_FUSED_BATCH"
    os.environ[switch] = "1" if fused else "0"
    try:
        m = akunu.load(path, n_ctx=256, device=device)
    finally:
        del os.environ[switch]
    try:
        engine = m._core().enable_batching(4, 0, 16)
        rng = np.random.default_rng(7)
        vocab = m.config["vocab_size"]
        prompts = [rng.integers(0, vocab, n).tolist() for n in (1, 37, 90, 5)]
        seqs, cursor = [], []
        for p in prompts:
            seq, cached = engine.open(p)
            seqs.append(seq)
            cursor.append(cached)
        tokens, logits = [[] for _ in prompts], []
        last = [None] * len(prompts)
        for _ in range(steps):
            entries, who = [], []
            for i, seq in enumerate(seqs):
                if cursor[i] < len(prompts[i]):  # a prompt chunk of up to 15 tokens
                    chunk = prompts[i][cursor[i]:cursor[i] + 15]
                    cursor[i] += len(chunk)
                    entries.append((seq, chunk, cursor[i] == len(prompts[i]), False))
                    if cursor[i] == len(prompts[i]):
                        who.append(i)
                elif last[i] is not None and len(tokens[i]) < n_gen:
                    entries.append((seq, [last[i]], True, True))
                    who.append(i)
            if not entries:
                break
            # generated rows lead the pass, as the scheduler orders them
            order = sorted(range(len(entries)), key=lambda k: not entries[k][3])
            entries = [entries[k] for k in order]
            drawn = engine.step(entries)
            sampled = [e for e in entries if e[2]]
            logits.append(engine.last_logits(len(sampled)))
            for e, tok in zip(sampled, drawn):
                i = seqs.index(e[0])
                tokens[i].append(tok)
                last[i] = tok
        return tokens, logits
    finally:
        m.close()


def test_fused_batch_tables_equal_the_plain_ones(models):
    for path in models:
        plain_tokens, plain_logits = batch_run(path, False)
        fused_tokens, fused_logits = batch_run(path, True)
        name = os.path.basename(path)
        assert fused_tokens == plain_tokens, name
        assert all(len(t) == 12 for t in plain_tokens), name
        for a, b in zip(fused_logits, plain_logits):
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # (Qwen3's QK norm: the prologue kernel's test)
def test_metal_fused_batch_tables_match_the_cpu(tmp_path, arch):
    """Metal's fused batch tables (through the MSL emulation): the same
    tokens as the CPU's plain batch tables, or parting at a near-tie, and
    logits close (the kernels' float sums run in other orders)."""
    from tests.test_device_kernels import build_metal_emulation
    build_metal_emulation()
    path = str(tmp_path / f"{arch}-F16.gguf")
    random_gguf.write_model(path, arch, "F16", seed=23)
    cpu_tokens, cpu_logits = batch_run(path, False, steps=12, n_gen=4)
    try:
        metal_tokens, metal_logits = batch_run(path, True, device="metal-emu", steps=12, n_gen=4)
    except akunu.AkunuError as e:
        if "not available" in str(e) or "unavailable" in str(e):
            pytest.skip(f"emulated Metal unavailable: {e}")
        raise
    for a, b in zip(metal_logits, cpu_logits):
        assert a.shape == b.shape
        assert rel_l2(a, b) < 1e-3, arch
    if metal_tokens != cpu_tokens:  # a near-tie in the CPU's logits of the pass that parted
        flat_cpu = np.concatenate(cpu_logits)
        gaps = np.sort(flat_cpu, axis=1)[:, -1] - np.sort(flat_cpu, axis=1)[:, -2]
        assert gaps.min() < 1e-2, f"{arch}: tokens {metal_tokens} vs the CPU's {cpu_tokens}"


# -- kernels ---------------------------------------------------------------------------------------

# `device`: Metal (emulated unless AKUNU_METAL_DEVICE=metal) and CUDA, each skipped when absent
from tests.test_paged_kernels import device  # noqa: E402,F401


PROLOGUE_CASES = {
    "llama3-hd64-factors": dict(heads=32, kv_heads=8, hd=64, qk_norm=0, neox=0, factors=True, base=500000.0,
                                block_size=16, lens=[300, 1, 57]),
    "qwen3-hd128-qknorm": dict(heads=16, kv_heads=8, hd=128, qk_norm=1, neox=1, factors=False, base=1e6,
                               block_size=32, lens=[2000, 40]),
    "gemma3-hd256-offset": dict(heads=4, kv_heads=1, hd=256, qk_norm=1, neox=1, factors=False, base=10000.0,
                                block_size=16, lens=[700, 3, 90, 12]),
}


def prologue_case(case):
    c = PROLOGUE_CASES[case]
    key = ("qk_norm_rope_kv_paged", case)
    rng = rng_for(key)
    H, KVH, D = c["heads"], c["kv_heads"], c["hd"]
    cache = PagedCache(rng, c["lens"], KVH * D, c["block_size"])
    # rows: each sequence's last 1..6 positions, overwritten by this pass
    rows = np.concatenate([np.stack([np.full(k, s), np.arange(n - k, n)], 1)
                           for s, n in enumerate(c["lens"]) for k in [int(rng.integers(1, min(6, n) + 1))]])
    rows = rows[rng.permutation(len(rows))].astype(np.int32)
    n = len(rows)
    q = rng.standard_normal((n, H * D)).astype(np.float32)
    k = rng.standard_normal((n, KVH * D)).astype(np.float32)
    v = rng.standard_normal((n, KVH * D)).astype(np.float32)
    qn = rng.uniform(0.5, 1.5, D).astype(np.float32)
    kn = rng.uniform(0.5, 1.5, D).astype(np.float32)
    f = rng.uniform(1, 8, D // 2).astype(np.float32) if c["factors"] else np.zeros(1, np.float32)
    offset = 1.0 if case.startswith("gemma") else 0.0
    params = kp.qk_norm_rope_kv_paged(H, KVH, D, n, c["qk_norm"], 1e-6, offset, c["neox"], int(c["factors"]),
                                      c["base"], 1.0, 1.0, cache.block_size, cache.max_blocks)
    return c, cache, rows, (q, k, v, qn, kn, f), params, offset, seed_msg(key)


def run_prologue(dev, cache, rows, inputs, params):
    q, k, v, qn, kn, f = (a.copy() for a in inputs)
    kc, vc = cache.k.copy(), cache.v.copy()
    _testing.run_kernel("qk_norm_rope_kv_paged", [q, k, v, qn, kn, f, kc, vc, rows.copy(), cache.tables.copy()],
                        params, device=dev)
    return q, k, kc, vc


@pytest.mark.parametrize("case", PROLOGUE_CASES)
def test_qk_norm_rope_kv_paged_cpu(case):
    """Per head RMSNorm (QK norm), RoPE at each row's position, K / V rows at
    their pool rows (F16), every other pool row untouched: float64 numpy."""
    c, cache, rows, inputs, params, offset, msg = prologue_case(case)
    q, k, kc, vc = run_prologue("cpu", cache, rows, inputs, params)
    q0, k0, v0, qn, kn, f = inputs
    H, KVH, D = c["heads"], c["kv_heads"], c["hd"]

    def expect(x, heads, w):
        x = x.reshape(len(rows), heads, D).astype(np.float64)
        if c["qk_norm"]:
            x = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * (w.astype(np.float64) + offset)
        return rope_ref(x, rows[:, 1], c["base"], c["neox"], f if c["factors"] else None)

    for got, x, heads, w in ((q, q0, H, qn), (k, k0, KVH, kn)):
        ref, bound = expect(x, heads, w)
        err = np.abs(got.reshape(ref.shape) - ref)
        assert (err <= bound + 1e-5 * np.abs(ref)).all(), f"max error {err.max()}: {msg}"
    at = cache.pool_rows(rows[:, 0], rows[:, 1])
    np.testing.assert_array_equal(kc[at], k.astype(np.float16).view(np.uint16), err_msg=msg)
    np.testing.assert_array_equal(vc[at], v0.astype(np.float16).view(np.uint16), err_msg=msg)
    rest = np.setdiff1d(np.arange(cache.n_pool_rows), at)
    np.testing.assert_array_equal(kc[rest], cache.k[rest], err_msg=msg)
    np.testing.assert_array_equal(vc[rest], cache.v[rest], err_msg=msg)


@pytest.mark.parametrize("case", PROLOGUE_CASES)
def test_qk_norm_rope_kv_paged_device(device, case):
    dev = device
    c, cache, rows, inputs, params, offset, msg = prologue_case(case)
    cpu = run_prologue("cpu", cache, rows, inputs, params)
    gpu = run_prologue(dev, cache, rows, inputs, params)
    assert rel_l2(gpu[0], cpu[0]) < 2e-5 and rel_l2(gpu[1], cpu[1]) < 2e-5, msg
    for a, b in zip(gpu[2:], cpu[2:]):
        fa, fb = a.view(np.float16).astype(np.float32), b.view(np.float16).astype(np.float32)
        assert np.array_equal(np.isnan(fa), np.isnan(fb)), f"pool rows written differently: {msg}"
        ok = ~np.isnan(fa)
        assert rel_l2(fa[ok], fb[ok]) < 2e-5, msg


def add_rmsnorm_case():
    key = "add_rmsnorm"
    rng = rng_for(key)
    n, dim, stride = 13, 2048, 2048 + 64
    h = rng.standard_normal((n, stride)).astype(np.float32)
    y = rng.standard_normal((n, stride)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, dim).astype(np.float32)
    params = kp.norm(dim, n, 1, stride, 1e-6, 1.0, 0, dim)
    return h, y, w, params, seed_msg(key)


def run_add_rmsnorm(dev, h, y, w, params):
    h, xn = h.copy(), np.full((len(h), len(w)), np.nan, np.float32)
    _testing.run_kernel("add_rmsnorm", [h, y.copy(), w.copy(), xn], params, device=dev)
    return h, xn


def test_add_rmsnorm_cpu():
    h0, y, w, params, msg = add_rmsnorm_case()
    h, xn = run_add_rmsnorm("cpu", h0, y, w, params)
    dim = len(w)
    np.testing.assert_array_equal(h[:, :dim], h0[:, :dim] + y[:, :dim], err_msg=msg)
    np.testing.assert_array_equal(h[:, dim:], h0[:, dim:], err_msg=msg)  # the stride's tail untouched
    s = h[:, :dim].astype(np.float64)
    ref = s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6) * (w + 1.0)
    np.testing.assert_allclose(xn, ref, rtol=1e-5, atol=1e-6, err_msg=msg)
    with pytest.raises(akunu.AkunuError, match="one row a token"):
        _testing.run_kernel("add_rmsnorm", [h0.copy(), y.copy(), w.copy(), np.zeros_like(h0)],
                            kp.norm(dim // 2, len(h0), 2, h0.shape[1], 1e-6), device="cpu")


def test_add_rmsnorm_device(device):
    dev = device
    h0, y, w, params, msg = add_rmsnorm_case()
    cpu = run_add_rmsnorm("cpu", h0, y, w, params)
    gpu = run_add_rmsnorm(dev, h0, y, w, params)
    np.testing.assert_array_equal(gpu[0], cpu[0], err_msg=msg)
    assert rel_l2(gpu[1], cpu[1]) < 1e-6, msg


MULTI_CASES = {  # (format, K, Ns): Llama-3.2-1B's q / k / v and gate / up, Qwen3-0.6B's q / k / v
    "f16-qkv-1b": ("F16", 2048, (2048, 512, 512)),
    "q8_0-gate-up-1b": ("Q8_0", 2048, (8192, 8192)),
    "q4_k-qkv-qwen3": ("Q4_K", 1024, (2048, 1024, 1024)),
    "q4_0-small": ("Q4_0", 256, (72, 40)),  # partial tiles; the kernel coverage run's case
}


def multi_case(case):
    from gguf import GGMLQuantizationType as T
    from tests.fixtures.quant_samples import random_matrix
    fmt, K, Ns = MULTI_CASES[case]
    key = ("matmul_multi", case)
    rng = rng_for(key)
    qtype = getattr(T, fmt)
    W = [random_matrix(qtype, n, K, rng)[0] for n in Ns]
    bias = [rng.standard_normal(n).astype(np.float32) for n in Ns]
    n_rows, gen = 11, 5  # 5 generated rows, then 6 prompt rows
    x = rng.standard_normal((n_rows, K)).astype(np.float32)
    return int(qtype), K, Ns, W, bias, x, gen, seed_msg(key)


def run_multi(dev, qtype, K, Ns, W, bias, x, gen, has_bias=1):
    ys = [np.full((len(x), n), np.nan, np.float32) for n in Ns]
    pad = 3 - len(Ns)
    # unused slots get buffers of their own (a device copies each back)
    bufs = [x.copy()] + [w.copy() for w in W] + [W[0].copy() for _ in range(pad)]
    bufs += ys + [ys[0].copy() for _ in range(pad)]
    bufs += [b.copy() for b in bias] + [bias[0].copy() for _ in range(pad)]
    _testing.run_kernel("matmul_multi", bufs, kp.matmul_multi(K, len(x), qtype, K, list(Ns), list(Ns), has_bias, gen),
                        device=dev)
    return ys


@pytest.mark.parametrize("case", MULTI_CASES)
def test_matmul_multi_cpu_is_each_matmul(case):
    """The CPU twin: each matrix's gemm with the pass's generated rows, bit for bit."""
    qtype, K, Ns, W, bias, x, gen, msg = multi_case(case)
    ys = run_multi("cpu", qtype, K, Ns, W, bias, x, gen)
    from gguf import GGMLQuantizationType as T
    for w, b, y, n in zip(W, bias, ys, Ns):
        want = np.full((len(x), n), np.nan, np.float32)
        _testing.run_kernel("gemm_" + T(qtype).name.lower(), [w.copy(), x.copy(), want, b.copy()],
                            kp.matmul(n, K, len(x), qtype, K, n, 1, 0, 1, gen), device="cpu")
        np.testing.assert_array_equal(y, want, err_msg=msg)


def test_matmul_multi_bad_count_is_a_clear_error():
    x = np.ones((1, 64), np.float32)
    w = np.ones((8, 64), np.float16).view(np.uint8)
    y = np.zeros((1, 8), np.float32)
    b = np.zeros(8, np.float32)
    with pytest.raises(akunu.AkunuError, match="1 to 3 matrices"):
        _testing.run_kernel("matmul_multi", [x, w, w, w, y, y, y, b, b, b],
                            kp.pack("MultiMatmulParams", K=64, n_tokens=1, dtype=1, x_stride=64, n_mats=4, has_bias=0,
                                    generated_rows=0, N=[8, 8, 8], y_stride=[8, 8, 8]), device="cpu")


@pytest.mark.parametrize("case", MULTI_CASES)
def test_matmul_multi_device(device, case):
    """Against the CPU (3e-2 relative L2 quantized, 2e-3 float: F16 operands on
    CUDA's tensor cores), and each generated row the same bits alone as in the pass."""
    dev = device
    if dev != "cuda" and max(MULTI_CASES[case][2]) > 4096:
        pytest.skip("the emulated Metal gemm takes minutes at this width (the other cases check the kernel)")
    qtype, K, Ns, W, bias, x, gen, msg = multi_case(case)
    cpu = run_multi("cpu", qtype, K, Ns, W, bias, x, gen)
    gpu = run_multi(dev, qtype, K, Ns, W, bias, x, gen)
    tol = 2e-3 if MULTI_CASES[case][0] == "F16" else 3e-2
    for c, g in zip(cpu, gpu):
        assert not np.isnan(g).any(), msg
        assert rel_l2(g, c) < tol, msg
    for t in range(gen if dev == "cuda" else 2):  # (the emulation is slow: two rows show it there)
        alone = run_multi(dev, qtype, K, Ns, W, bias, x[t:t + 1], 1)
        for a, g in zip(alone, gpu):
            np.testing.assert_array_equal(a[0], g[t], err_msg=f"generated row {t} alone: {msg}")
