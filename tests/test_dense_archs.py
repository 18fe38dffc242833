"""Dense families beyond the first five: Granite (embedding, residual,
attention and logit multipliers), OLMo 2 (post-norm blocks without pre-norms,
whole-projection Q / K norms), SmolLM3 (every fourth layer without RoPE) and
Phi-3 (Q, K, V in one tensor, gate and up in another; the sliding window its
converter writes, which llama.cpp does not apply, is shorter than the tests'
sequences),
with random weights written as llama.cpp's converter writes them, against
llama.cpp's logits and greedy tokens (tests/golden/dense-*.json, from python
-m tools.make_golden); then the other tables on the same families: the fused
decode tables and the fused batch tables must give the plain tables' tokens
(or decline, for OLMo 2, whose blocks the fused kernels do not express)."""

import glob
import json
import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf
from tests.fixtures.golden_models import GOLDEN, MODELS
from tests.test_fused_batch_tables import batch_run

DENSE = random_gguf.DENSE_ARCHS + random_gguf.FUSED_TENSOR_ARCHS
DENSE_MODELS = os.path.join(MODELS, "dense")  # llama.cpp's quantized files (tools/make_golden.py)

RECORDS = []
for _p in sorted(glob.glob(os.path.join(GOLDEN, "dense-*.json"))):
    with open(_p) as _f:
        RECORDS.append(json.load(_f))

SEED = int(os.environ.get("AKUNU_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)
# near-tie margin and logit tolerance (as tests/test_random_models.py): float
# weights, and quantized ones (llama.cpp rounds activations to 8 bits)
FLOAT_TIE, QUANT_TIE = 0.02, 0.15
FLOAT_LOGIT_TOL, QUANT_LOGIT_TOL = 0.02, 0.25


def tolerances(rec):
    return (FLOAT_TIE, FLOAT_LOGIT_TOL) if rec["made_by"][0] == "float" else (QUANT_TIE, QUANT_LOGIT_TOL)


def model_path(rec, cache_dir):
    """The record's model: committed (quantized by llama.cpp) or rebuilt from its seed; bytes checked."""
    kind, what = rec["made_by"]
    if kind == "quant":
        path = os.path.join(DENSE_MODELS, rec["name"] + ".gguf")
    else:
        path = os.path.join(cache_dir, "dense-" + rec["name"] + ".gguf")
        if not os.path.exists(path) or random_gguf.sha256_of(path) != rec["sha256"]:
            random_gguf.write_model(path, rec["arch"], what, seed=rec["seed"])
    assert random_gguf.sha256_of(path) == rec["sha256"], (
        f"{rec['name']}: the model's bytes are not the ones llama.cpp ran; python -m tools.make_golden --only ...")
    return path


@pytest.fixture(scope="module", params=RECORDS, ids=[r["name"] for r in RECORDS])
def case(request, cache_dir):
    rec = request.param
    return rec, akunu.load(model_path(rec, cache_dir), n_ctx=256)


def test_records_cover_every_dense_family():
    assert {r["arch"] for r in RECORDS} == set(DENSE)
    for arch in DENSE:
        assert {r["made_by"][0] for r in RECORDS if r["arch"] == arch} == {"float", "quant"}, arch


def test_tokenizer_matches_llama_cpp(case):
    rec, m = case
    assert m.tokenize(rec["prompt_text"]) == rec["prompt_tokens"]


def test_logits_match_llama_cpp(case):
    rec, m = case
    seq = rec["prompt_tokens"] + rec["greedy_tokens"][:-1]
    ref = np.load(os.path.join(GOLDEN, f"dense-{rec['name']}-logits.npy")).astype(np.float32)
    err = np.abs(m.logits(seq) - ref).max()
    tol = tolerances(rec)[1]
    assert err < tol, f"max |logit - llama.cpp| = {err:.4f} (tolerance {tol})"


def test_greedy_tokens_match_llama_cpp(case):
    rec, m = case
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


def relabelled(src, dst, arch, values=None):
    """The GGUF file src with its architecture (and its keys' prefix) renamed
    to arch, and the keys of `values` (named after the renaming) set to them."""
    import gguf
    r = gguf.GGUFReader(src)
    old = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        key = arch + name[len(old):] if name.startswith(old + ".") else name
        value = (values or {}).get(key, field.contents())
        w.add_key_value(key, value, field.types[0],
                        sub_type=field.types[-1] if len(field.types) > 1 else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


@pytest.mark.parametrize("arch", ["granite", "smollm3"])
def test_the_family_features_change_the_logits(tmp_path, arch):
    """The golden comparisons see the features: the same weights run as
    Llama (no multipliers; RoPE on every layer) move the logits far past the
    tolerance (so a descriptor that dropped a feature would fail them)."""
    p = str(tmp_path / f"{arch}.gguf")
    random_gguf.write_model(p, arch, "F32", seed=7)
    seq = np.random.default_rng([SEED, 1]).integers(3, 512, 24).tolist()
    ours = akunu.load(p, n_ctx=64).logits(seq)
    as_llama = akunu.load(relabelled(p, str(tmp_path / "llama.gguf"), "llama"), n_ctx=64).logits(seq)
    assert np.abs(ours - as_llama).max() > 20 * FLOAT_LOGIT_TOL, f"AKUNU_TEST_SEED={SEED}"
    if arch == "smollm3":
        # the first position is RoPE's angle 0 on every layer: only the layers' differences there
        np.testing.assert_allclose(ours[0], as_llama[0], atol=1e-4)


@pytest.mark.parametrize("key", ["attn_logit_softcapping", "final_logit_softcapping"])
@pytest.mark.parametrize("value", [-1.0, float("nan"), 1e9])
def test_gemma2_bad_soft_caps_are_clear_errors(tmp_path, key, value):
    p = str(tmp_path / "gemma2.gguf")
    random_gguf.write_model(p, "gemma2", "F32", seed=7)
    bad = relabelled(p, str(tmp_path / "bad.gguf"), "gemma2", {f"gemma2.{key}": value})
    with pytest.raises(akunu.AkunuError, match=key):
        akunu.load(bad, n_ctx=64)


def test_gemma2_soft_caps_change_the_logits(tmp_path):
    """The file's caps are read: a cap of 0 (none) gives other logits."""
    p = str(tmp_path / "gemma2.gguf")
    random_gguf.write_model(p, "gemma2", "F32", seed=7)
    seq = np.random.default_rng([SEED, 2]).integers(3, 512, 24).tolist()
    capped = akunu.load(p, n_ctx=64).logits(seq)
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        free = relabelled(p, str(tmp_path / f"{key}.gguf"), "gemma2", {f"gemma2.{key}": 0.0})
        # the attention cap moves this model's logits by 0.37 or more on 40 prompts
        # (0.5 median); an ignored cap moves them by nothing
        assert np.abs(akunu.load(free, n_ctx=64).logits(seq) - capped).max() > 10 * FLOAT_LOGIT_TOL, key


@pytest.fixture(scope="module")
def dense_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("dense")
    out = {}
    for arch in DENSE:
        for dtype in ("F16", "Q8_0"):
            p = str(d / f"{arch}-{dtype}.gguf")
            random_gguf.write_model(p, arch, dtype, seed=33)
            out[(arch, dtype)] = p
    return out


def generate(path, fused, prompt, **kw):
    os.environ["AKUNU_CPU_FUSED_DECODE"] = "1" if fused else "0"
    try:
        m = akunu.load(path, n_ctx=128)
    finally:
        del os.environ["AKUNU_CPU_FUSED_DECODE"]
    return m.generate(prompt, max_tokens=16, **kw).tokens


@pytest.mark.parametrize("arch", DENSE)
def test_fused_decode_tables_give_the_plain_tokens(dense_paths, arch):
    """The fused decode tables (what GPUs replay; NoPE layers rotate by angle
    0 there) on the CPU twins of their kernels."""
    prompt = np.random.default_rng([SEED, 3]).integers(3, 512, 9).tolist()
    for dtype in ("F16", "Q8_0"):
        path = dense_paths[(arch, dtype)]
        for kw in ({}, {"temperature": 0.9, "top_k": 20, "seed": 3}):
            assert generate(path, True, prompt, **kw) == generate(path, False, prompt, **kw), (
                dtype, kw, f"AKUNU_TEST_SEED={SEED}")


@pytest.mark.parametrize("arch", DENSE)
def test_fused_batch_tables_equal_the_plain_ones(dense_paths, arch):
    """Continuous batching's fused batch tables (Granite, SmolLM3) or their
    decline (OLMo 2): the plain batch tables' tokens and logits exactly."""
    path = dense_paths[(arch, "Q8_0")]
    plain_tokens, plain_logits = batch_run(path, False)
    fused_tokens, fused_logits = batch_run(path, True)
    assert fused_tokens == plain_tokens
    assert all(len(t) == 12 for t in plain_tokens)
    for a, b in zip(fused_logits, plain_logits):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("arch", DENSE)
def test_batch_tables_give_each_request_its_solo_tokens(dense_paths, arch):
    """Requests in one continuous batch get the tokens each gets alone."""
    path = dense_paths[(arch, "F16")]
    rng = np.random.default_rng([SEED, 5, len(arch)])
    reqs = [(rng.integers(3, 512, int(n)).tolist(), kw) for n, kw in zip(
        (1, 40, 7, 90), ({}, {"temperature": 0.8, "seed": 11}, {}, {"temperature": 1.0, "top_k": 20, "seed": 3}))]
    solo = akunu.load(path, n_ctx=256)
    want = []
    for p, kw in reqs:
        solo.reset()
        want.append(solo.generate(p, max_tokens=10, **kw).tokens)
    m = akunu.load(path, n_ctx=256, parallel=4, kv_tokens=4 * 256)
    try:
        streams = [m.generate(p, max_tokens=10, stream=True, **kw) for p, kw in reqs]
        got = []
        for s in streams:
            for _ in s:
                pass
            got.append(s.result.tokens)
        assert got == want, f"AKUNU_TEST_SEED={SEED}"
    finally:
        m.close()


def test_prefill_logits_equal_decode_logits(dense_paths):
    """The prefill's rows and the same positions reached by decoding agree."""
    for arch in DENSE:
        m = akunu.load(dense_paths[(arch, "F16")], n_ctx=128)
        prompt = np.random.default_rng([SEED, 4]).integers(3, 512, 12).tolist()
        full = m.logits(prompt)
        toks = m.generate(prompt, max_tokens=6).tokens
        again = m.logits(prompt + toks[:-1])
        np.testing.assert_allclose(again[: len(prompt)], full, rtol=0, atol=1e-4, err_msg=arch)
        for j, t in enumerate(toks):
            row = again[len(prompt) - 1 + j]
            assert int(row.argmax()) == t or np.sort(row)[-2] > row.max() - 1e-3, (arch, j)


def rewritten(path, edit):
    """path's GGUF with its metadata through edit(name, value) (None drops a key)."""
    import gguf
    r = gguf.GGUFReader(path)
    w = gguf.GGUFWriter(path + ".x", r.fields["general.architecture"].contents())
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        v = edit(name, field.contents())
        if v is not None:
            w.add_key_value(name, v, field.types[0], sub_type=field.types[-1] if len(field.types) > 1 else None)
    extra = edit("+", None)
    for k, (v, t) in (extra or {}).items():
        w.add_key_value(k, v, t)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".x", path)
    return path


def test_bad_family_metadata_is_a_clear_error(tmp_path):
    import gguf
    p = str(tmp_path / "granite.gguf")
    random_gguf.write_model(p, "granite", "F16", seed=2)
    rewritten(p, lambda n, v: -1.0 if n == "granite.residual_scale" else v)
    with pytest.raises(akunu.AkunuError, match="residual_scale"):
        akunu.load(p)
    p = str(tmp_path / "olmo2.gguf")
    random_gguf.write_model(p, "olmo2", "F16", seed=2)
    rewritten(p, lambda n, v: {"olmo2.attention.sliding_window": (16, gguf.GGUFValueType.UINT32)}
              if n == "+" else v)
    with pytest.raises(akunu.AkunuError, match="sliding window"):
        akunu.load(p)
    p = str(tmp_path / "phi3.gguf")
    random_gguf.write_model(p, "phi3", "F16", seed=2)
    rewritten(p, lambda n, v: 48 if n == "phi3.rope.dimension_count" else v)
    with pytest.raises(akunu.AkunuError, match="rope.dimension_count"):
        akunu.load(p)
