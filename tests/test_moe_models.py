"""Mixture-of-experts models (qwen3moe, qwen2moe with its shared expert,
Mixtral as llama with experts, OLMoE, gpt-oss with its sinks, biases and
clamped SwiGLU) with random weights, written as
llama.cpp's converter writes them, against llama.cpp's logits and greedy
tokens (tests/golden/moe-*.json, from python -m tools.make_golden); then the
other tables on the same models: the fused decode tables and the batch
tables of continuous batching must give the plain tables' tokens (batch
invariance: a row's result never depends on the other rows)."""

import glob
import json
import os

import numpy as np
import pytest

import akunu
from tests.fixtures import moe_reference, random_gguf
from tests.fixtures.golden_models import GOLDEN, MODELS

MOE_MODELS = os.path.join(MODELS, "moe")  # llama.cpp's quantized files (tools/make_golden.py)

RECORDS = []
for _p in sorted(glob.glob(os.path.join(GOLDEN, "moe-*.json"))):
    with open(_p) as _f:
        RECORDS.append(json.load(_f))

SEED = int(os.environ.get("AKUNU_TEST_SEED", "0"))
# near-tie margin and logit tolerance (as tests/test_random_models.py): float
# weights, and quantized ones (llama.cpp rounds activations to 8 bits)
FLOAT_TIE, QUANT_TIE = 0.02, 0.15
FLOAT_LOGIT_TOL, QUANT_LOGIT_TOL = 0.02, 0.25
FLOAT_NUMPY_TOL = 0.01


# A token whose router choice is this close (the gap between the router
# logits of the last expert chosen and the first left out, in the float64
# reference, any layer) may be routed either way by two correct
# implementations: its own logits are excused (at most a fraction MAX_EXCUSED
# of the tokens; the rest must match). Quantized matmuls round activations
# to 8 bits, which moves router logits by up to about 0.07 (MXFP4 models:
# experts swapped at gaps of 0.05 and 0.063).
FLOAT_ROUTER_GAP, QUANT_ROUTER_GAP = 0.02, 0.1
MAX_EXCUSED = 0.2
# gpt-oss's random experts reach swiglu_oai's clamps, so its values are wide
# (activations up to 56): a softmax weight the engine rounds to the other F16
# neighbour than the reference does (their roundings of e^(s - max) / sum
# differ in the last bits) moves its logits by up to 0.03 over 300 tokens,
# and 8-bit activation blocks move them by up to 3.7 (llama.cpp's as much:
# its MXFP4 and Q8_0 records are compared with llama.cpp instead).
LONG_FLOAT_NUMPY_TOL = {"gpt-oss": 0.05}
QUANT_NUMPY_CHECKED = set(random_gguf.MOE_ARCHS) - {"gpt-oss"}


def float_weights(rec):
    """Whether the record's matrices are float (the writer's MXFP4 files are not)."""
    return rec["made_by"][0] == "float" and rec["made_by"][1] in ("F32", "F16", "BF16")


def tolerances(rec):
    return (FLOAT_TIE, FLOAT_LOGIT_TOL) if float_weights(rec) else (QUANT_TIE, QUANT_LOGIT_TOL)


def model_path(rec, cache_dir):
    """The record's model: committed (quantized by llama.cpp) or rebuilt from its seed; bytes checked."""
    kind, what = rec["made_by"]
    if kind == "quant":
        path = os.path.join(MOE_MODELS, rec["name"] + ".gguf")
    else:
        path = os.path.join(cache_dir, "moe-" + rec["name"] + ".gguf")
        if not os.path.exists(path) or random_gguf.sha256_of(path) != rec["sha256"]:
            random_gguf.write_model(path, rec["arch"], what, seed=rec["seed"])
    assert random_gguf.sha256_of(path) == rec["sha256"], (
        f"{rec['name']}: the model's bytes are not the ones llama.cpp ran; python -m tools.make_golden --only ...")
    return path


@pytest.fixture(scope="module", params=RECORDS, ids=[r["name"] for r in RECORDS])
def case(request, cache_dir):
    rec = request.param
    path = model_path(rec, cache_dir)
    m = akunu.load(path, n_ctx=256)
    seq = rec["prompt_tokens"] + rec["greedy_tokens"][:-1]
    ref, gaps = moe_reference.forward(path, seq)
    gap = FLOAT_ROUTER_GAP if float_weights(rec) else QUANT_ROUTER_GAP
    excused = gaps.min(0) < gap
    assert excused.mean() <= MAX_EXCUSED, f"{excused.sum()} of {len(seq)} tokens are router near-ties"
    return rec, m, ref, excused


def check_logits(ours, ref, excused, tol, what):
    """tol: one bound, or one a position."""
    err = np.abs(ours - ref).max(1)
    tol = np.broadcast_to(np.asarray(tol, np.float64), err.shape)
    worst = int(np.where(excused, -np.inf, err - tol).argmax())
    assert err[worst] < tol[worst], (
        f"max |logit - {what}| = {err[worst]:.4f} at position {worst} (tolerance {tol[worst]:.4f}; "
        f"positions excused as router near-ties: {np.flatnonzero(excused).tolist()})")


def llama_cpp_logits(rec):
    return np.load(os.path.join(GOLDEN, f"moe-{rec['name']}-logits.npy")).astype(np.float32)


def test_records_cover_every_moe_family():
    assert {r["arch"] for r in RECORDS} == set(random_gguf.MOE_ARCHS)
    assert {r["made_by"][0] for r in RECORDS} == {"float", "quant"}


def test_logits_match_llama_cpp(case):
    """Within the family's tolerance of llama.cpp, or of llama.cpp's own
    distance from the float64 result where that is larger (gpt-oss's wide
    logits: llama.cpp's F16 activations move them by up to 0.04)."""
    rec, m, exact, excused = case
    seq = rec["prompt_tokens"] + rec["greedy_tokens"][:-1]
    ref = llama_cpp_logits(rec)
    tol = tolerances(rec)[1]
    if float_weights(rec):
        tol = max(tol, 1.2 * float(np.where(excused[:, None], 0, np.abs(ref - exact)).max()))
    check_logits(m.logits(seq), ref, excused, tol, "llama.cpp")


def test_logits_match_the_float64_reference(case):
    """Float weights: float32 sums against float64 (FLOAT_NUMPY_TOL); quantized
    ones: the 8-bit activations of the quantized matmuls (QUANT_LOGIT_TOL).
    Where llama.cpp's own logits are farther from float64 than that (over the
    positions compared), a quarter more than llama.cpp's distance: gpt-oss's
    experts give activations of heavy tails (its clamped SwiGLU reaches 56)
    whose F16 or 8-bit rounding moves both engines' logits (llama.cpp's by up
    to 0.05 with F16 weights, 1.6 with Q8_0)."""
    rec, m, ref, excused = case
    seq = rec["prompt_tokens"] + rec["greedy_tokens"][:-1]
    tol = FLOAT_NUMPY_TOL if float_weights(rec) else QUANT_LOGIT_TOL
    llama_err = np.where(excused, 0, np.abs(llama_cpp_logits(rec) - ref).max(1)).max()
    check_logits(m.logits(seq), ref, excused, max(tol, 1.25 * float(llama_err)), "numpy float64")


def test_greedy_tokens_match_llama_cpp(case):
    rec, m, _, _ = case
    ours = m.generate(rec["prompt_tokens"], max_tokens=32).tokens
    ref = rec["greedy_tokens"]
    if ours == ref:
        return
    # Where they part, llama.cpp's token must be a near-tie of ours (teacher forcing).
    tie, _ = tolerances(rec)
    seq = rec["prompt_tokens"] + ref[:-1]
    logits = m.logits(seq)
    n_prompt = len(rec["prompt_tokens"])
    for j, want in enumerate(ref):
        row = logits[n_prompt - 1 + j]
        got = int(row.argmax())
        gap = float(row[got] - row[want])
        assert got == want or gap <= tie, f"step {j}: akunu {got}, llama.cpp {want}, logit gap {gap:.4f}"


@pytest.fixture(scope="module")
def moe_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("moe")
    out = {}
    for arch in random_gguf.MOE_ARCHS:
        for dtype in ("F16", "Q8_0"):
            p = str(d / f"{arch}-{dtype}.gguf")
            random_gguf.write_model(p, arch, dtype, seed=31)
            out[(arch, dtype)] = p
    return out


def generate(path, fused, prompt, **kw):
    os.environ["AKUNU_CPU_FUSED_DECODE"] = "1" if fused else "0"
    try:
        m = akunu.load(path, n_ctx=128)
    finally:
        del os.environ["AKUNU_CPU_FUSED_DECODE"]
    return m.generate(prompt, max_tokens=16, **kw).tokens


@pytest.mark.parametrize("arch", random_gguf.MOE_ARCHS)
def test_fused_decode_tables_give_the_plain_tokens(moe_paths, arch):
    prompt = np.random.default_rng([SEED, 3]).integers(3, 512, 9).tolist()
    for dtype in ("F16", "Q8_0"):
        path = moe_paths[(arch, dtype)]
        for kw in ({}, {"temperature": 0.9, "top_k": 20, "seed": 3}):
            assert generate(path, True, prompt, **kw) == generate(path, False, prompt, **kw), (dtype, kw)


def test_prefill_logits_equal_decode_logits(moe_paths):
    """The last row of a prefill and the same position reached by decoding
    agree: the grouped expert matmul (many tokens) and the one-token path."""
    for arch in random_gguf.MOE_ARCHS:
        m = akunu.load(moe_paths[(arch, "F16")], n_ctx=128)
        prompt = np.random.default_rng([SEED, 4]).integers(3, 512, 12).tolist()
        full = m.logits(prompt)
        toks = m.generate(prompt, max_tokens=6).tokens
        seq = prompt + toks[:-1]
        again = m.logits(seq)
        np.testing.assert_allclose(again[: len(prompt)], full, rtol=0, atol=1e-4, err_msg=arch)
        for j, t in enumerate(toks):
            assert int(again[len(prompt) - 1 + j].argmax()) == t or np.sort(again[len(prompt) - 1 + j])[-2] > (
                again[len(prompt) - 1 + j].max() - 1e-3), (arch, j)


@pytest.mark.parametrize("arch", random_gguf.MOE_ARCHS)
def test_batch_invariance(moe_paths, arch):
    """Requests in one continuous batch get the tokens each gets alone (the
    batch table's expert matmuls group rows of different sequences)."""
    path = moe_paths[(arch, "Q8_0")]
    rng = np.random.default_rng([SEED, 5, len(arch)])
    reqs = [(rng.integers(3, 512, int(n)).tolist(), kw) for n, kw in zip(
        (1, 40, 7, 90, 3, 25), ({}, {"temperature": 0.8, "seed": 11}, {}, {"temperature": 1.0, "top_k": 20, "seed": 3},
                               {}, {"temperature": 0.7, "seed": 5}))]
    solo = akunu.load(path, n_ctx=256)
    want = []
    for p, kw in reqs:
        solo.reset()
        want.append(solo.generate(p, max_tokens=10, **kw).tokens)
    m = akunu.load(path, n_ctx=256, parallel=6, kv_tokens=6 * 256)
    try:
        streams = [m.generate(p, max_tokens=10, stream=True, **kw) for p, kw in reqs]
        got = []
        for s in streams:
            for _ in s:
                pass
            got.append(s.result.tokens)
        assert got == want
    finally:
        m.close()


@pytest.mark.parametrize("arch", random_gguf.MOE_ARCHS)
def test_mxfp4_models_match_the_float64_reference(tmp_path, arch):
    """Every matrix MXFP4 (gpt-oss's expert format; embeddings and the
    dense projections too): prefill logits against numpy float64 on gguf-py's
    dequantization of the same file, rows a router near-tie may change
    excused (the near-tie's position, and every later one where the tie is
    before the last layer; the quantized matmuls round activations to 8 bits);
    the one-token path (the last decoded row) equal to the prefill's."""
    from tests.test_moe_cuda import tainted  # a near-tie's reach through the K / V of later positions

    path = str(tmp_path / f"{arch}-mxfp4.gguf")
    random_gguf.write_model(path, arch, "MXFP4", seed=39)
    m = akunu.load(path, n_ctx=128)
    rng = np.random.default_rng([SEED, 39, len(arch)])
    for _ in range(30):  # random tokens (fresh each AKUNU_TEST_SEED) mostly clear of router near-ties
        seq = rng.integers(3, 512, 24).tolist()
        ref, gaps = moe_reference.forward(path, seq)
        excused = tainted(gaps, QUANT_ROUTER_GAP)
        if excused.mean() <= MAX_EXCUSED:
            break
    else:  # (as the float models' test: nothing left to compare, not a wrong number)
        pytest.skip(f"router near-ties in every draw (AKUNU_TEST_SEED={SEED})")
    full = m.logits(seq)
    if arch in QUANT_NUMPY_CHECKED:
        check_logits(full, ref, excused, QUANT_LOGIT_TOL, "numpy float64")
    m.reset()
    m._core().prefill(seq[:-1])
    np.testing.assert_allclose(np.ravel(m._core().decode_logits(seq[-1])), full[-1], rtol=0, atol=1e-4)


def write_with(path, arch, edit):
    """A small MoE model whose metadata / tensors go through edit(name, value) first."""
    random_gguf.write_model(path, arch, "F16", seed=2)
    import gguf
    r = gguf.GGUFReader(path)
    w = gguf.GGUFWriter(path + ".x", r.fields["general.architecture"].contents())
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        v = edit(name, field.contents())
        if v is None:
            continue
        w.add_key_value(name, v, field.types[0], sub_type=field.types[-1] if len(field.types) > 1 else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data))  # F16 / F32 tensors: numpy's dtype says it
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".x", path)


def test_bad_expert_metadata_is_a_clear_error(tmp_path):
    p = str(tmp_path / "bad.gguf")
    write_with(p, "qwen3moe", lambda n, v: 9 if n.endswith("expert_used_count") else v)
    with pytest.raises(akunu.AkunuError, match="expert_used_count"):
        akunu.load(p)
    write_with(p, "qwen3moe", lambda n, v: 512 if n.endswith("expert_feed_forward_length") else v)
    with pytest.raises(akunu.AkunuError, match="ffn_gate_exps"):
        akunu.load(p)


@pytest.mark.parametrize("arch", random_gguf.MOE_ARCHS)
def test_long_prefill_matches_the_float64_reference(tmp_path, arch):
    """300 tokens: prefill passes longer than the matmul kernels' token blocks,
    many tokens on each expert, against the numpy forward pass. A token the
    CPU routes apart at a router near-tie moves its own logits and, through
    its K / V, those of every position after it (by up to 0.18, far past the
    tolerance: AKUNU_TEST_SEED=38, qwen2moe): each near-tie excuses itself and
    the next 16 positions, and the positions from the first near-tie that did
    route apart (its own logits off by more than the tolerance) on are not
    compared. Of a few draws the one compared furthest is checked."""
    p = str(tmp_path / f"{arch}.gguf")
    random_gguf.write_model(p, arch, "F32", seed=41)
    model = akunu.load(p, n_ctx=512)
    rng = np.random.default_rng([SEED, 6])
    best = None
    for _ in range(6):
        seq = rng.integers(3, 512, 300).tolist()
        ref, gaps = moe_reference.forward(p, seq)
        ties = gaps.min(0) < FLOAT_ROUTER_GAP
        err = np.abs(model.logits(seq) - ref).max(1)
        apart = np.flatnonzero(ties & (err >= LONG_FLOAT_NUMPY_TOL.get(arch, FLOAT_NUMPY_TOL)))
        compared = np.ones(len(seq), bool)
        for t in np.flatnonzero(ties):
            compared[t:t + 17] = False
        if len(apart):
            compared[apart[0]:] = False
        if best is None or compared.sum() > best[0].sum():
            best = (compared, err, ties, apart)
        if not len(apart) and compared.mean() > 0.8:
            break
    compared, err, ties, apart = best
    if compared.sum() < 64:
        pytest.skip(f"router near-ties leave fewer than 64 positions to compare in every draw "
                    f"(AKUNU_TEST_SEED={SEED})")
    worst = int(np.where(compared, err, 0).argmax())
    tol = LONG_FLOAT_NUMPY_TOL.get(arch, FLOAT_NUMPY_TOL)
    assert err[worst] < tol, (
        f"max |logit - numpy float64| = {err[worst]:.4f} at position {worst} (tolerance {tol}; "
        f"{compared.sum()} positions compared; near-ties: {np.flatnonzero(ties).tolist()}; routed apart: "
        f"{apart.tolist()})")


def test_config_reports_the_experts(moe_paths, tmp_path):
    """Model.config: ffn_dim is the file's feed_forward_length (what llama.cpp
    and Hugging Face call it), the expert counts and widths their own keys;
    dense models have no experts."""
    import gguf
    for arch in random_gguf.MOE_ARCHS:
        path = moe_paths[(arch, "F16")]
        meta = {k: v.contents() for k, v in gguf.GGUFReader(path).fields.items()}
        a = meta["general.architecture"] + "."
        cfg = akunu.load(path, n_ctx=64).config
        assert cfg["ffn_dim"] == meta[a + "feed_forward_length"], arch
        assert (cfg["n_experts"], cfg["n_experts_used"]) == (meta[a + "expert_count"], meta[a + "expert_used_count"])
        want_ef = meta.get(a + "expert_feed_forward_length", meta[a + "feed_forward_length"])
        assert cfg["expert_ffn_dim"] == want_ef, arch
        want_sf = meta.get(a + "expert_shared_feed_forward_length", 0) if arch == "qwen2moe" else 0
        assert cfg["shared_expert_ffn_dim"] == want_sf and (arch != "qwen2moe" or want_sf > 0), arch
    dense = str(tmp_path / "dense.gguf")
    random_gguf.write_model(dense, "qwen3", "F16", seed=1)
    cfg = akunu.load(dense, n_ctx=64).config
    assert (cfg["n_experts"], cfg["n_experts_used"], cfg["expert_ffn_dim"]) == (0, 0, 0)


# ---- the same models through the Metal kernels --------------------------------------------------
# The MSL emulation on the CPU (or a Mac's GPU with AKUNU_METAL_DEVICE=metal)
# against the CPU backend: prefill logits (80 tokens, more than one 64-token
# pass: the grouped expert kernels) and greedy generation (the decode tables'
# GEMV expert kernels, fused and plain), the random models of every MoE family
# and llama.cpp's quantized ones; a router near-tie (in the float64
# reference) may route a token apart on two correct backends, so the rows it
# can change are excused, as on CUDA (tests/test_moe_cuda.py).

METAL = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu")


@pytest.fixture(scope="module")
def metal_device():
    if METAL == "metal-emu":
        from tests.test_device_kernels import build_metal_emulation
        build_metal_emulation()
    from akunu import _testing
    from tests.fixtures import kernel_params as kp

    try:
        x = np.zeros(4, np.float32)
        _testing.run_kernel("add_inplace", [x, x.copy()], kp.add(4, 1), device=METAL)
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"device {METAL} unavailable: {e}")
    return METAL


METAL_REF_TOL = 2e-3  # Metal's float32 sums against float64 on the file's dequantized weights, any format


def metal_vs_cpu(path, fused=True):
    """Prefill logits of 80 tokens against the float64 reference (Metal
    multiplies the dequantized weights by float activations: METAL_REF_TOL in
    every format) and against the CPU's (2e-3 float weights, 3e-2 quantized:
    the CPU rounds activations to 8 bits there), rows a router near-tie may
    change excused; greedy tokens the CPU's, or parting where the CPU's logits
    are a near-tie or the float64 reference a router near-tie."""
    from tests.fixtures.backend_compare import rel_l2
    from tests.test_moe_cuda import tainted, untied_sequence

    quant = any(q in os.path.basename(path).lower() for q in ("q4", "q5", "q6", "q8"))
    tol, near = (3e-2, QUANT_ROUTER_GAP) if quant else (2e-3, FLOAT_ROUTER_GAP)
    if quant and os.path.basename(path).startswith("gpt-oss"):
        tol = 6e-2  # the CPU's 8-bit blocks of gpt-oss's clamped SwiGLU outputs (up to 56): 3.2e-2 seen
    os.environ["AKUNU_METAL_FUSED_DECODE"] = "1" if fused else "0"
    try:
        gpu = akunu.load(path, device=METAL, n_ctx=256)
    finally:
        del os.environ["AKUNU_METAL_FUSED_DECODE"]
    assert gpu.device == METAL
    cpu = akunu.load(path, n_ctx=256)
    ids, excused = untied_sequence(path, cpu.config["vocab_size"], near, 80, 0, "metal-prefill")
    lc, lg = cpu.logits(ids), gpu.logits(ids)
    ref, _ = moe_reference.forward(path, ids)
    rows = f"(AKUNU_TEST_SEED={SEED}; rows excused as router near-ties: {np.flatnonzero(excused).tolist()})"
    err = rel_l2(lg[~excused], ref[~excused])
    assert err < METAL_REF_TOL, f"{os.path.basename(path)}: relative L2 {err:.2e} against float64 {rows}"
    # A row the CPU itself moves far from float64 had a token routed apart by
    # the CPU's 8-bit activations (a router near-tie of its own, tens of
    # percent; its rounding noise stays near 2%): left out here, a few at most.
    cpu_apart = np.array([rel_l2(lc[i], ref[i]) for i in range(len(ids))]) > 0.1
    assert cpu_apart.sum() <= 4, f"{os.path.basename(path)}: the CPU parts from float64 at rows " \
                                 f"{np.flatnonzero(cpu_apart).tolist()} {rows}"
    keep = ~excused & ~cpu_apart
    err = rel_l2(lg[keep], lc[keep])
    assert err < tol, f"{os.path.basename(path)}: relative L2 {err:.2e} against the CPU {rows}; rows where " \
                      f"the CPU routed apart: {np.flatnonzero(cpu_apart).tolist()}"
    prompt = ids[:12]
    tc, tg = cpu.generate(prompt, max_tokens=24).tokens, gpu.generate(prompt, max_tokens=24).tokens
    if tc != tg:
        k = next(i for i in range(min(len(tc), len(tg))) if tc[i] != tg[i])
        seq = prompt + tc[:k]
        row = cpu.logits(seq)[-1]
        gap = abs(float(row[tc[k]]) - float(row[tg[k]]))
        routed_apart = tainted(moe_reference.forward(path, seq)[1], near)[-1]
        assert routed_apart or gap < 5 * tol * (row.max() - row.min()), (
            f"{os.path.basename(path)}: greedy differs at {k} with logit gap {gap} (AKUNU_TEST_SEED={SEED})")


@pytest.mark.parametrize("arch", random_gguf.MOE_ARCHS)
@pytest.mark.parametrize("dtype", ["F32", "F16", "Q8_0"])
def test_metal_random_moe_models_match_cpu(metal_device, tmp_path, arch, dtype):
    path = str(tmp_path / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(path, arch, dtype, seed=17)
    metal_vs_cpu(path)


@pytest.mark.parametrize("name", sorted(os.listdir(MOE_MODELS)) if os.path.isdir(MOE_MODELS) else [])
def test_metal_quantized_moe_models_match_cpu(metal_device, name):
    """llama.cpp's quantizations (Q4_K_M: Q4_K / Q6_K experts, Q4_0, Q8_0)."""
    metal_vs_cpu(os.path.join(MOE_MODELS, name))


@pytest.mark.parametrize("arch", ["qwen3moe", "qwen2moe"])
def test_metal_plain_decode_tables(metal_device, tmp_path, arch):
    """AKUNU_METAL_FUSED_DECODE=0: the plain decode tables give the same."""
    path = str(tmp_path / f"{arch}-F32.gguf")
    random_gguf.write_model(path, arch, "F32", seed=19)
    metal_vs_cpu(path, fused=False)


def test_metal_greedy_tokens_equal_cpu(metal_device, tmp_path):
    """One whole greedy generation of 40 tokens, F32 weights, a prompt clear of router near-ties: the CPU's tokens."""
    from tests.test_moe_cuda import tainted

    path = str(tmp_path / "qwen3moe-F32.gguf")
    random_gguf.write_model(path, "qwen3moe", "F32", seed=23)
    cpu = akunu.load(path, n_ctx=256)
    rng = np.random.default_rng([SEED, 23])
    for _ in range(30):
        prompt = rng.integers(3, cpu.config["vocab_size"], 10).tolist()
        cpu.reset()
        want = cpu.generate(prompt, max_tokens=40).tokens
        if not tainted(moe_reference.forward(path, prompt + want[:-1])[1], FLOAT_ROUTER_GAP).any():
            break
    else:
        pytest.skip("router near-ties in every draw")
    assert akunu.load(path, device=METAL, n_ctx=256).generate(prompt, max_tokens=40).tokens == want


def test_metal_batch_invariance(metal_device, tmp_path):
    """Requests of one continuous batch on Metal get the tokens each gets alone."""
    path = str(tmp_path / "qwen3moe-Q8_0.gguf")
    random_gguf.write_model(path, "qwen3moe", "Q8_0", seed=31)
    rng = np.random.default_rng([SEED, 7])
    reqs = [(rng.integers(3, 512, int(n)).tolist(), kw) for n, kw in zip(
        (1, 30, 7, 12), ({}, {"temperature": 0.8, "seed": 11}, {}, {"temperature": 1.0, "top_k": 20, "seed": 3}))]
    solo = akunu.load(path, device=METAL, n_ctx=128)
    want = []
    for p, kw in reqs:
        solo.reset()
        want.append(solo.generate(p, max_tokens=8, **kw).tokens)
    m = akunu.load(path, device=METAL, n_ctx=128, parallel=4, kv_tokens=4 * 128)
    try:
        streams = [m.generate(p, max_tokens=8, stream=True, **kw) for p, kw in reqs]
        got = []
        for s in streams:
            for _ in s:
                pass
            got.append(s.result.tokens)
        assert got == want
    finally:
        m.close()
