"""OpenAI-shaped results (validated with the openai package's own types),
streaming equal to non-streaming under greedy, multi-turn KV reuse."""

import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import akunu
from tests.fixtures import random_gguf


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("o") / "qwen2.gguf")
    random_gguf.write_model(path, "qwen2", "F16", seed=9)
    return akunu.load(path, n_ctx=512)


MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say something."}]


@pytest.mark.parametrize("which", ["random", "gemma"])
def test_chat_completion_shape_and_stream(which, model, request):
    m = model if which == "random" else request.getfixturevalue("gemma")
    full = m.create_chat_completion(MESSAGES, max_tokens=24, temperature=0.0)
    ChatCompletion.model_validate(full)
    assert full["object"] == "chat.completion" and full["choices"][0]["message"]["role"] == "assistant"
    u = full["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["completion_tokens"] > 0
    chunks = list(m.create_chat_completion(MESSAGES, max_tokens=24, temperature=0.0, stream=True,
                                           stream_options={"include_usage": True}))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == full["choices"][0]["message"]["content"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == full["choices"][0]["finish_reason"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == full["usage"]


def test_completion_shape_and_stream(model):
    full = model.create_completion("The weather today", max_tokens=16, temperature=0.0, stop=["zzz"])
    Completion.model_validate(full)
    assert full["object"] == "text_completion"
    chunks = list(model.create_completion("The weather today", max_tokens=16, temperature=0.0, stream=True))
    # OpenAI streams finish_reason null until the last chunk; its SDK type only admits the final values
    for c in chunks[:-1]:
        assert c["choices"][0]["finish_reason"] is None
        Completion.model_validate({**c, "choices": [{**c["choices"][0], "finish_reason": "length"}]})
    Completion.model_validate(chunks[-1])
    assert "".join(c["choices"][0]["text"] for c in chunks) == full["choices"][0]["text"]


def test_json_response_format(model):
    import json

    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    r = model.create_chat_completion(MESSAGES, max_tokens=40, temperature=0.7, seed=3,
                                     response_format={"type": "json_schema", "json_schema": {"name": "n",
                                                                                           "schema": schema}})
    assert set(json.loads(r["choices"][0]["message"]["content"])) == {"n"}
    with pytest.raises(akunu.AkunuError, match="response_format"):
        model.create_chat_completion(MESSAGES, response_format={"type": "yaml"})
    with pytest.raises(akunu.AkunuError, match="n = 0"):
        model.create_chat_completion(MESSAGES, n=0)
    with pytest.raises(akunu.AkunuError, match="unsupported argument"):
        model.create_chat_completion(MESSAGES, best_of=3)


def test_multi_turn_chat_prefills_only_the_new_turn(gemma):
    gemma.reset()
    conv = [{"role": "user", "content": "Tell me about the sea."}]
    first = gemma.chat(conv, max_tokens=16)
    conv += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "And the sky?"}]
    second = gemma.chat(conv, max_tokens=8)
    new_turn = len(gemma.tokenize("<end_of_turn>\n<start_of_turn>user\nAnd the sky?<end_of_turn>\n"
                                  "<start_of_turn>model\n", add_bos=False))
    assert second.stats.cached_tokens >= second.stats.prompt_tokens - new_turn - 2
    assert second.stats.cached_tokens > first.stats.prompt_tokens


def test_api_basics(model):
    ids = model.tokenize("hello world")
    assert model.detokenize(ids) == "hello world"
    with pytest.raises(akunu.AkunuError, match="outside the vocabulary"):
        model.detokenize([10**7])
    with pytest.raises(akunu.AkunuError, match="takes a string"):
        model.tokenize(b"bytes")
    assert model.memory_bytes > 0 and model.config["n_ctx"] == 512 and model.name


def test_n_choices_one_after_another_and_batched(model, tmp_path):
    kw = dict(max_tokens=12, temperature=0.8, seed=21)
    r = model.create_chat_completion(MESSAGES, n=3, **kw)
    ChatCompletion.model_validate(r)
    # choice i samples with seed + i
    want = [model.create_chat_completion(MESSAGES, **{**kw, "seed": 21 + i})["choices"][0]["message"]
            for i in range(3)]
    assert [c["message"] for c in r["choices"]] == want and [c["index"] for c in r["choices"]] == [0, 1, 2]
    # on a batching model the choices run together, with the same results
    path = str(tmp_path / "q.gguf")
    random_gguf.write_model(path, "qwen2", "F16", seed=9)
    batched = akunu.load(path, n_ctx=512, parallel=3)
    try:
        rb = batched.create_chat_completion(MESSAGES, n=3, **kw)
        assert [c["message"] for c in rb["choices"]] == want
        assert rb["usage"] == r["usage"]
        comp = batched.create_completion("The weather", n=2, max_tokens=6, temperature=0)
        assert comp["choices"][0]["text"] == comp["choices"][1]["text"]
    finally:
        batched.close()
    chunks = list(model.create_completion("The weather", n=2, max_tokens=6, temperature=0.7, seed=1, stream=True,
                                          stream_options={"include_usage": True}))
    whole = model.create_completion("The weather", n=2, max_tokens=6, temperature=0.7, seed=1)
    for i in (0, 1):
        assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"] and c["choices"][0]["index"] == i) \
            == whole["choices"][i]["text"]
    assert chunks[-1]["usage"] == whole["usage"]


def test_echo_stop_limit_and_logprobs(model):
    plain = model.create_completion("The weather today", max_tokens=8, temperature=0)
    echoed = model.create_completion("The weather today", max_tokens=8, temperature=0, echo=True)
    assert echoed["choices"][0]["text"] == "The weather today" + plain["choices"][0]["text"]
    ids = model.tokenize("The weather today")
    assert model.create_completion(ids, max_tokens=8, temperature=0, echo=True)["choices"][0]["text"] == \
        echoed["choices"][0]["text"]
    with pytest.raises(akunu.AkunuError, match="at most 4"):
        model.create_chat_completion(MESSAGES, stop=["a", "b", "c", "d", "e"])
    # logprobs are computed (tests/test_logprobs.py checks their values); bad ones are errors
    r = model.create_chat_completion(MESSAGES, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
    content = r["choices"][0]["logprobs"]["content"]
    assert 0 < len(content) <= 4 and all(len(e["top_logprobs"]) == 2 for e in content)
    with pytest.raises(akunu.AkunuError, match="needs logprobs"):
        model.create_chat_completion(MESSAGES, top_logprobs=2)
    assert 0 < len(model.create_completion("hi", logprobs=1, max_tokens=3)["choices"][0]["logprobs"]["tokens"]) <= 3
    with pytest.raises(akunu.AkunuError, match="unsupported argument"):
        model.create_completion("hi", tools=[])  # tools belong to chat completions
