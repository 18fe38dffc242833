"""The device sampler against its numpy definition: processed logits
(bias, penalties, mask), the distribution of draws (chi-square) and seeds."""

import struct

import numpy as np
import pytest

import akunu
from tests.fixtures import kernel_params as kp
from tests.fixtures import random_gguf
from akunu import _testing
from tests.fixtures.sampling_reference import chi_square_ok, probabilities, processed_logits

VOCAB = 64


def run_sample(logits, history, pos0, bias=None, mask=None, **kw):
    vocab = logits.size
    out = np.full(1, -1, np.int32)
    bias = bias or {}
    bias_buf = np.zeros(max(1, 2 * len(bias)), np.int32)
    for i, (t, v) in enumerate(bias.items()):
        bias_buf[2 * i] = t
        bias_buf[2 * i + 1] = struct.unpack("i", struct.pack("f", v))[0]
    words = np.zeros((vocab + 31) // 32, np.uint32)
    if mask is not None:
        for i in np.flatnonzero(mask):
            words[i >> 5] |= np.uint32(1 << (i & 31))
    work = np.full(2 * vocab, np.nan, np.float32)  # poisoned: every processed logit must be written
    hist = np.array(history, np.int32).copy()
    _testing.run_kernel("sample", [logits, out, hist, bias_buf, words, work],
                          kp.sample(vocab, n_bias=len(bias), pos0=pos0, use_mask=int(mask is not None), **kw))
    return int(out[0]), work[:vocab], hist


@pytest.mark.parametrize("repeat,presence,frequency,window", [(1.3, 0.0, 0.0, 64), (0.8, 0.5, 0.25, 16),
                                                               (1.1, -0.3, 0.7, 200), (1.0, 0.0, 0.0, 0)])
def test_penalties_bias_and_mask_match_the_definition(repeat, presence, frequency, window):
    rng = np.random.default_rng(int(repeat * 100 + window))
    vocab = 151936
    logits = (rng.standard_normal(vocab) * 4).astype(np.float32)
    history = rng.integers(0, 400, size=300).astype(np.int32)  # many repeats
    bias = {int(t): float(v) for t, v in zip(rng.integers(0, vocab, 20), rng.standard_normal(20) * 3)}
    bias[7] = -np.inf
    mask = rng.random(vocab) < 0.7
    pos0 = 250
    tok, got, hist = run_sample(logits, history, pos0, bias=bias, mask=mask, temperature=0.0,
                                repeat_penalty=repeat, presence=presence, frequency=frequency, window=window)
    ref = processed_logits(logits, history, pos0, window, repeat, presence, frequency, bias, mask)
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-6, atol=1e-6)
    assert tok == int(np.argmax(ref)), "temperature 0 is the argmax of the processed logits"
    assert hist[pos0 + 1] == tok, "the chosen token is recorded as the next context token"


@pytest.mark.parametrize("temperature,top_k,top_p,min_p,vocab", [
    (1.0, 0, 1.0, 0.0, VOCAB), (0.7, 0, 1.0, 0.0, VOCAB), (1.5, 5, 1.0, 0.0, VOCAB), (1.0, 0, 0.8, 0.0, VOCAB),
    (1.0, 0, 1.0, 0.1, VOCAB), (0.9, 20, 0.9, 0.05, VOCAB),
    (1.0, 12, 1.0, 0.0, 50000), (0.8, 40, 0.95, 0.05, 50000),  # small k over a large vocabulary: one-pass top-k
])
def test_draws_follow_the_distribution(temperature, top_k, top_p, min_p, vocab):
    rng = np.random.default_rng(int(temperature * 10 + top_k))
    logits = (rng.standard_normal(vocab) * 2).astype(np.float32)
    logits[rng.integers(0, vocab, 30)] = logits.max()  # ties at the top: order by id decides the cut
    p = probabilities(logits, temperature, top_k, top_p, min_p)
    n = 12000
    counts = np.zeros(vocab)
    hist = np.zeros(n + 2, np.int32)
    seed = int(rng.integers(1 << 62))
    for pos in range(n):  # the RNG is keyed by position: each position is a fresh draw
        tok, _, _ = run_sample(logits, hist[: pos + 2], pos, temperature=temperature, top_k=top_k, top_p=top_p,
                               min_p=min_p, seed=seed, window=0)
        counts[tok] += 1
    assert counts[p == 0].sum() == 0, "a filtered-out token was drawn"
    ok, stat, limit = chi_square_ok(counts, p)
    assert ok, f"chi-square {stat:.1f} > {limit:.1f}"


def test_top_p_beyond_the_first_thousand_candidates():
    """A flat distribution over a large vocabulary: the nucleus needs the full sort."""
    vocab = 5000
    logits = np.zeros(vocab, np.float32)
    logits[:3] = 0.5
    p = probabilities(logits, 1.0, 0, 0.9)
    assert (p > 0).sum() > 1024
    seen = set()
    hist = np.zeros(600, np.int32)
    for pos in range(500):
        tok, _, _ = run_sample(logits, hist, pos, temperature=1.0, top_p=0.9, seed=3, window=0)
        assert p[tok] > 0
        seen.add(tok)
    assert len(seen) > 300


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("s") / "llama.gguf")
    random_gguf.write_model(path, "llama", "F32", seed=11)
    return akunu.load(path, n_ctx=256)


def test_model_sampler_distribution_and_penalties(model):
    """Through the model: draws after a prefill follow softmax of its logits,
    and the processed logits apply the penalties over the real context."""
    core = model._core()
    prompt = model.tokenize("the cat sat on the mat and the cat sat")
    core.truncate(0)
    core.prefill(prompt)
    model._cached = []
    logits = core.last_logits()[0]
    p = probabilities(logits, 1.3, 0, 0.95)
    counts = np.zeros(logits.size)
    for seed in range(3000):
        core.set_sampling(temperature=1.3, top_p=0.95, seed=seed)
        counts[core.sample_next()] += 1
    ok, stat, limit = chi_square_ok(counts, p)
    assert ok, f"chi-square {stat:.1f} > {limit:.1f}"
    core.set_sampling(temperature=0.0, repeat_penalty=1.5, presence_penalty=0.3, frequency_penalty=0.2,
                      penalty_window=8)
    tok = core.sample_next()
    ref = processed_logits(logits, np.array(prompt), len(prompt) - 1, 8, 1.5, 0.3, 0.2)
    np.testing.assert_allclose(core.processed_logits()[0], ref, rtol=1e-6, atol=1e-6)
    assert tok == int(np.argmax(ref))


def test_same_seed_same_tokens_however_chunked(model):
    kw = dict(max_tokens=40, temperature=0.9, top_k=50, top_p=0.9, min_p=0.02, repeat_penalty=1.1, seed=1234)
    a = model.generate("once upon a time", **kw)
    s = model.generate("once upon a time", stream=True, **kw)  # chunks of 4 instead of 16
    "".join(s)
    b = s.result
    model.reset()
    c = model.generate("once upon a time", **kw)
    assert a.tokens == b.tokens == c.tokens
    d = model.generate("once upon a time", **{**kw, "seed": 4321})
    assert d.tokens != a.tokens


def test_logit_bias_bans_and_forces_tokens(model):
    greedy = model.generate("hello", max_tokens=8)
    banned = model.generate("hello", max_tokens=8, logit_bias={greedy.tokens[0]: -np.inf})
    assert banned.tokens[0] != greedy.tokens[0]
    forced = model.generate("hello", max_tokens=5, logit_bias={42: 100.0})
    assert forced.tokens == [42] * 5


@pytest.mark.parametrize("kwargs,match", [
    (dict(temperature=-0.5), "temperature"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"),
    (dict(top_k=-1), "top_k"), (dict(min_p=2.0), "min_p"), (dict(repeat_penalty=0.0), "repeat_penalty"),
    (dict(temperature=float("nan")), "temperature"), (dict(penalty_last_n=-1), "penalty_last_n"),
    (dict(logit_bias={10**6: 1.0}), "outside the vocabulary"), (dict(logit_bias={1: float("nan")}), "logit_bias"),
    (dict(seed="x"), "seed"), (dict(stop=[3]), "stop"),
])
def test_invalid_settings_fail_before_any_work(model, kwargs, match):
    model.reset()
    with pytest.raises(akunu.AkunuError, match=match):
        model.generate("hello", max_tokens=4, **kwargs)
    assert model._core().n_past == 0, "nothing ran"


def test_core_validates_too(model):
    with pytest.raises(akunu.AkunuError, match="top_p"):
        model._core().set_sampling(top_p=-1.0)
    with pytest.raises(akunu.AkunuError, match="mask"):
        model._core().set_mask(np.zeros(3, np.uint32))
