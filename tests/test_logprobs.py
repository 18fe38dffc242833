"""logprobs / top_logprobs of chat and legacy completions: every value is
log_softmax of Model.logits at the token's position (random weights and the
real Gemma 3 270M), streamed chunks carry the same values as the whole
reply, both ways of running the pass agree, and the KV cache stays right
for the next generation."""

import numpy as np
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import akunu
from akunu import logprobs as lp_mod
from tests.fixtures import random_gguf

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("lp") / "qwen2.gguf")
    random_gguf.write_model(p, "qwen2", "F16", seed=9)
    return p


@pytest.fixture(scope="module")
def model(path):
    return akunu.load(path, n_ctx=512)


def reference(m, prompt_ids, tokens):
    """log_softmax (float64) of Model.logits over prompt + tokens: row j predicts token j + 1."""
    logits = m.logits(list(prompt_ids) + list(tokens)).astype(np.float64)
    mx = logits.max(axis=1, keepdims=True)
    lp = logits - (mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True)))
    return lp[len(prompt_ids) - 1: len(prompt_ids) - 1 + len(tokens)]


def chat_prompt(m, msgs=MSGS):
    return m.tokenize(m.apply_chat_template(msgs), add_bos=False)


def check_chat_entries(m, entries, prompt_ids, tokens, top_n):
    ref = reference(m, prompt_ids, tokens)
    assert len(entries) == len(tokens) > 0
    for j, (e, tok) in enumerate(zip(entries, tokens)):
        assert e["bytes"] == list(m.tokenizer.token_bytes(tok))
        np.testing.assert_allclose(e["logprob"], ref[j, tok], rtol=0, atol=1e-9)
        want = np.argsort(-ref[j], kind="stable")[:top_n]
        assert len(e["top_logprobs"]) == top_n
        np.testing.assert_allclose([t["logprob"] for t in e["top_logprobs"]], ref[j, want], rtol=0, atol=1e-9)
        if top_n:
            assert e["top_logprobs"][0]["logprob"] >= e["logprob"] - 1e-12


def streamed_entries(chunks):
    return [e for c in chunks for ch in c["choices"] for e in ((ch.get("logprobs") or {}).get("content") or [])]


@pytest.mark.parametrize("top_n", [0, 3])
def test_chat_logprobs_equal_log_softmax_of_logits(model, top_n):
    r = model.create_chat_completion(MSGS, max_tokens=12, temperature=0, logprobs=True, top_logprobs=top_n)
    ChatCompletion.model_validate(r)
    prompt = chat_prompt(model)
    tokens = model.generate(prompt, max_tokens=12).tokens
    check_chat_entries(model, r["choices"][0]["logprobs"]["content"], prompt, tokens, top_n)
    chunks = list(model.create_chat_completion(MSGS, max_tokens=12, temperature=0, logprobs=True,
                                               top_logprobs=top_n, stream=True))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    assert streamed_entries(chunks) == r["choices"][0]["logprobs"]["content"]
    # every chunk with text carries the logprobs of its own tokens, not all at the end
    assert sum(1 for c in chunks if (c["choices"][0]["logprobs"] or {}).get("content")) > 1
    # without logprobs: null, as before
    assert model.create_chat_completion(MSGS, max_tokens=4, temperature=0)["choices"][0]["logprobs"] is None


def test_sampled_tokens_and_n_choices(model):
    r = model.create_chat_completion(MSGS, max_tokens=10, temperature=0.9, seed=4, n=2, logprobs=True,
                                     top_logprobs=2)
    prompt = chat_prompt(model)
    for i, choice in enumerate(r["choices"]):
        toks = model.generate(prompt, max_tokens=10, temperature=0.9, seed=4 + i, top_p=0.95, top_k=40,
                              min_p=0.05).tokens
        if toks[-1] in model.stop_ids:
            toks = toks[:-1]
        check_chat_entries(model, choice["logprobs"]["content"], prompt, toks, 2)


def test_completion_logprobs_legacy_shape(model):
    r = model.create_completion("The weather today", max_tokens=10, temperature=0, logprobs=4)
    Completion.model_validate(r)
    lp = r["choices"][0]["logprobs"]
    prompt = model.tokenize("The weather today")
    tokens = model.generate(prompt, max_tokens=10).tokens
    ref = reference(model, prompt, tokens)
    assert lp["tokens"] == [model.tokenizer.token_bytes(t).decode("utf-8", "replace") for t in tokens]
    np.testing.assert_allclose(lp["token_logprobs"], [ref[j, t] for j, t in enumerate(tokens)], rtol=0, atol=1e-9)
    for j, top in enumerate(lp["top_logprobs"]):
        assert len(top) <= 4 and max(top.values()) == pytest.approx(ref[j].max(), abs=1e-9)
    # text_offset: where each token's text starts in the choice's text
    text = r["choices"][0]["text"]
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    assert all(o <= len(text) for o in lp["text_offset"])
    echoed = model.create_completion("The weather today", max_tokens=10, temperature=0, logprobs=0, echo=True)
    assert echoed["choices"][0]["logprobs"]["text_offset"][0] == len("The weather today")
    assert echoed["choices"][0]["logprobs"]["token_logprobs"] == lp["token_logprobs"]
    chunks = list(model.create_completion("The weather today", max_tokens=10, temperature=0, logprobs=4,
                                          stream=True))
    joined = {k: [x for c in chunks if c["choices"][0]["logprobs"] for x in c["choices"][0]["logprobs"][k]]
              for k in lp}
    assert joined == lp


def test_both_passes_agree_and_the_cache_stays_right(model, monkeypatch):
    whole = model.create_chat_completion(MSGS, max_tokens=12, temperature=0, logprobs=True, top_logprobs=5)
    monkeypatch.setattr(lp_mod, "MAX_PASS_BYTES", 0)  # the walk: one token per prefill pass
    walked = model.create_chat_completion(MSGS, max_tokens=12, temperature=0, logprobs=True, top_logprobs=5)
    assert walked["choices"][0]["logprobs"] == whole["choices"][0]["logprobs"]
    # a stream whose logprobs are computed between its chunks (the pass replaces the cache the
    # generation continues from) gives the tokens of a plain stream
    plain = model.create_chat_completion(MSGS, max_tokens=24, temperature=0)
    streamed = list(model.create_chat_completion(MSGS, max_tokens=24, temperature=0, logprobs=True, stream=True))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in streamed)
    assert text == plain["choices"][0]["message"]["content"]
    monkeypatch.undo()
    # the next turn reuses the cache the pass left and still generates what a fresh model does
    conv = MSGS + [{"role": "assistant", "content": plain["choices"][0]["message"]["content"]},
                   {"role": "user", "content": "More."}]
    model.create_chat_completion(MSGS, max_tokens=12, temperature=0, logprobs=True)
    again = model.chat(conv, max_tokens=10)
    assert again.stats.cached_tokens > 0
    model.reset()
    assert model.chat(conv, max_tokens=10).tokens == again.tokens


def test_batched_model_gives_the_same_logprobs(model, path):
    want = model.create_chat_completion(MSGS, max_tokens=10, temperature=0, logprobs=True, top_logprobs=2)
    batched = akunu.load(path, n_ctx=512, parallel=2)
    try:
        got = batched.create_chat_completion(MSGS, max_tokens=10, temperature=0, logprobs=True, top_logprobs=2)
        assert got["choices"][0]["logprobs"] == want["choices"][0]["logprobs"]
        chunks = list(batched.create_chat_completion(MSGS, max_tokens=10, temperature=0, logprobs=True,
                                                     top_logprobs=2, stream=True))
        assert streamed_entries(chunks) == want["choices"][0]["logprobs"]["content"]
    finally:
        batched.close()


def test_bad_logprob_fields_are_clear_errors(model):
    for bad, match in [({"logprobs": True, "top_logprobs": 21}, "0 to 20"),
                       ({"top_logprobs": 2}, "needs logprobs"), ({"logprobs": 1}, "true or false")]:
        with pytest.raises(akunu.AkunuError, match=match):
            model.create_chat_completion(MSGS, **bad)
    for bad, match in [({"logprobs": True}, "integer"), ({"logprobs": -1}, "0 to 20"),
                       ({"top_logprobs": 2}, "chat completion field")]:
        with pytest.raises(akunu.AkunuError, match=match):
            model.create_completion("hi", **bad)


def test_gemma_chat_and_completion_logprobs(gemma):
    msgs = [{"role": "user", "content": "Name a colour."}]
    r = gemma.create_chat_completion(msgs, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2)
    prompt = chat_prompt(gemma, msgs)
    toks = gemma.generate(prompt, max_tokens=8).tokens
    if toks[-1] in gemma.stop_ids:
        toks = toks[:-1]
    check_chat_entries(gemma, r["choices"][0]["logprobs"]["content"], prompt, toks, 2)
    c = gemma.create_completion("The capital of France is", max_tokens=4, temperature=0, logprobs=1)
    ids = gemma.tokenize("The capital of France is")
    toks = gemma.generate(ids, max_tokens=4).tokens
    ref = reference(gemma, ids, toks)
    np.testing.assert_allclose(c["choices"][0]["logprobs"]["token_logprobs"],
                               [ref[j, t] for j, t in enumerate(toks)], rtol=0, atol=1e-9)
    streamed = list(gemma.create_completion("The capital of France is", max_tokens=4, temperature=0, logprobs=1,
                                            stream=True))
    vals = [v for ch in streamed if ch["choices"][0]["logprobs"] for v in ch["choices"][0]["logprobs"]["token_logprobs"]]
    assert vals == c["choices"][0]["logprobs"]["token_logprobs"]
