"""Anthropic's Messages API on akunu-serve, driven by the official anthropic
client against a real server: whole and streamed messages equal the chat
completion they translate to, tool_use / tool_result round trips, token
counting, x-api-key, and errors in Anthropic's shape. Sampling fields go in
extra_body: newer clients no longer take temperature as an argument."""

import json
import socket
import threading
import time

import httpx
import pytest

anthropic = pytest.importorskip("anthropic")
uvicorn = pytest.importorskip("uvicorn")

import akunu  # noqa: E402
from akunu.server import ServerLimits, create_app  # noqa: E402
from tests.fixtures import random_gguf  # noqa: E402

KEY = "sk-test-anthropic"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
                            "required": ["city"]}}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("anth") / "qwen.gguf")
    random_gguf.write_model(path, "qwen2", "F16", seed=5, shape=random_gguf.Shape(ctx=2048))
    return akunu.load(path, n_ctx=2048)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base(model):
    app = create_app({"qwen": model}, api_key=KEY, limits=ServerLimits(max_tokens=256))  # /v1/messages included
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{server.config.port}"
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)  # waiting for uvicorn to listen
    yield url
    server.should_exit = True
    t.join(10)


@pytest.fixture(scope="module")
def client(base):
    return anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)


def test_message_equals_the_chat_completion(client, model):
    msg = client.messages.create(model="qwen", max_tokens=12, extra_body={"temperature": 0}, system="Be brief.",
                                 messages=ASK)
    ref = model.create_chat_completion([{"role": "system", "content": "Be brief."}] + ASK, max_tokens=12,
                                       temperature=0)
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert msg.content[0].type == "text" and msg.content[0].text == ref["choices"][0]["message"]["content"]
    assert msg.usage.input_tokens == ref["usage"]["prompt_tokens"]
    assert msg.usage.output_tokens == ref["usage"]["completion_tokens"]
    assert msg.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[ref["choices"][0]["finish_reason"]]


def test_stream_events_rebuild_the_whole_message(client):
    kw = dict(model="qwen", max_tokens=16, extra_body={"temperature": 0}, messages=ASK)
    whole = client.messages.create(**kw)
    kinds = []
    with client.messages.stream(**kw) as s:
        for ev in s:
            kinds.append(ev.type)
        final = s.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "content_block_delta" in kinds and "message_delta" in kinds
    assert final.content[0].text == whole.content[0].text
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens and final.stop_reason == whole.stop_reason


def test_forced_tool_use_and_tool_result_round_trip(client):
    msg = client.messages.create(model="qwen", max_tokens=60, extra_body={"temperature": 0.8}, messages=ASK,
                                 tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather"})
    uses = [b for b in msg.content if b.type == "tool_use"]
    assert msg.stop_reason == "tool_use" and len(uses) >= 1
    assert uses[0].name == "get_weather" and uses[0].input["city"] in ("Paris", "Rome")
    # streamed: the tool call arrives as input_json_delta fragments that parse to the input
    with client.messages.stream(model="qwen", max_tokens=60, extra_body={"temperature": 0.8}, messages=ASK,
                                tools=[WEATHER], tool_choice={"type": "any"}) as s:
        deltas = [ev.delta.type for ev in s if ev.type == "content_block_delta"]
        final = s.get_final_message()
    assert "input_json_delta" in deltas and final.stop_reason == "tool_use"
    assert any(b.type == "tool_use" and b.name == "get_weather" for b in final.content)
    # the result goes back as a tool_result block; the reply is text again
    history = ASK + [{"role": "assistant", "content": [b.model_dump() for b in msg.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                   "content": "Sunny, 21 C"}]}]
    follow = client.messages.create(model="qwen", max_tokens=8, messages=history, tools=[WEATHER],
                                    tool_choice={"type": "none"})
    assert follow.stop_reason in ("end_turn", "max_tokens") and all(b.type == "text" for b in follow.content)
    n = client.messages.count_tokens(model="qwen", messages=history, tools=[WEATHER]).input_tokens
    assert n > client.messages.count_tokens(model="qwen", messages=ASK).input_tokens > 0


def test_count_tokens_matches_the_prompt(client):
    n = client.messages.count_tokens(model="qwen", messages=ASK).input_tokens
    msg = client.messages.create(model="qwen", max_tokens=1, messages=ASK)
    assert n == msg.usage.input_tokens


def test_keys_and_errors_in_anthropic_shape(base):
    body = {"model": "qwen", "max_tokens": 4, "messages": ASK}
    r = httpx.post(base + "/v1/messages", json=body, headers={"x-api-key": KEY})
    assert r.status_code == 200 and r.json()["type"] == "message"
    r = httpx.post(base + "/v1/messages", json=body, headers={"x-api-key": "wrong"})
    assert r.status_code == 401
    assert r.json() == {"type": "error", "error": {"type": "authentication_error", "message": r.json()["error"]
                                                   ["message"]}}
    bad = anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model="qwen", max_tokens=4, messages=ASK)
    auth = {"x-api-key": KEY}
    cases = [({**body, "model": "nope"}, 404, "not_found_error"),
             ({k: v for k, v in body.items() if k != "max_tokens"}, 400, "invalid_request_error"),
             ({**body, "max_tokens": 100000}, 400, "invalid_request_error"),
             ({**body, "messages": [{"role": "system", "content": "x"}]}, 400, "invalid_request_error"),
             ({**body, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, 400,
              "invalid_request_error"),
             ({**body, "temperature": 3}, 400, "invalid_request_error"),
             ({**body, "tool_choice": {"type": "tool", "name": "missing"}, "tools": [WEATHER]}, 400,
              "invalid_request_error"),
             ({**body, "tool_choice": {"type": "sometimes"}}, 400, "invalid_request_error")]
    for req, status, kind in cases:
        r = httpx.post(base + "/v1/messages", json=req, headers=auth)
        assert r.status_code == status, (req, r.text)
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == kind, r.text
    r = httpx.post(base + "/v1/messages", content=b"{not json", headers=auth)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0).messages.create(
            model="nope", max_tokens=4, messages=ASK)
    # the OpenAI routes keep OpenAI's shape
    r = httpx.post(base + "/v1/chat/completions", json={"model": "nope", "messages": ASK},
                   headers={"authorization": f"Bearer {KEY}"})
    assert r.status_code == 404 and "type" in r.json()["error"] and "message" in r.json()["error"]
    assert json.loads(r.text).get("type") is None


def test_stop_sequences_end_with_stop_reason_stop_sequence(client):
    kw = dict(model="qwen", max_tokens=24, extra_body={"temperature": 0}, messages=ASK)
    text = client.messages.create(**kw).content[0].text
    k = next(i for i in range(4, len(text) - 3) if text.find(text[i:i + 3]) == i
             and text[i:i + 3].isascii() and text[i:i + 3].strip())
    stop = text[k:k + 3]
    msg = client.messages.create(stop_sequences=["never-generated-zzz", stop], **kw)
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == stop
    assert msg.content[0].text == text[:k]
    with client.messages.stream(stop_sequences=[stop], **kw) as s:
        final = s.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop and final.content[0].text == text[:k]
    # a sequence never met: the reply runs to max_tokens as before
    msg = client.messages.create(stop_sequences=["never-generated-zzz"], **kw)
    assert msg.stop_reason == "max_tokens" and msg.stop_sequence is None and msg.content[0].text == text


def test_concurrent_streams_on_a_batched_model(tmp_path):
    """A continuously batched model takes Anthropic requests at once; each stream
    equals the same request answered alone."""
    path = str(tmp_path / "b.gguf")
    random_gguf.write_model(path, "qwen2", "F16", seed=9)
    m = akunu.load(path, n_ctx=256)
    m.enable_batching(3, max_queue=8)
    from fastapi.testclient import TestClient

    app = create_app({"b": m}, limits=ServerLimits(max_tokens=16))
    prompts = [f"Tell me about the number {i}." for i in range(3)]

    def body(p, stream):
        return {"model": "b", "max_tokens": 10, "temperature": 0, "stream": stream,
                "messages": [{"role": "user", "content": p}]}

    with TestClient(app) as c:
        alone = [c.post("/v1/messages", json=body(p, False)).json()["content"][0]["text"] for p in prompts]
        out = [None] * 3

        def run(i):
            r = c.post("/v1/messages", json=body(prompts[i], True))
            events = [json.loads(line[6:]) for line in r.text.split("\n") if line.startswith("data: ")]
            out[i] = "".join(e["delta"]["text"] for e in events
                             if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    m.close()
    assert all(alone) and out == alone


def test_a_final_assistant_turn_is_continued(client, model):
    """Anthropic's prefill: the reply continues the last assistant text and leaves it out."""
    history = ASK + [{"role": "assistant", "content": "The weather is"}]
    kw = dict(model="qwen", max_tokens=10, extra_body={"temperature": 0}, messages=history)
    msg = client.messages.create(**kw)
    t = model.chat_template
    ids = model.tokenize(t.render(ASK, add_generation_prompt=True) + "The weather is", add_bos=False)
    ref = model.create_completion(ids, max_tokens=10, temperature=0)
    assert msg.content[0].text == ref["choices"][0]["text"]
    counted = client.messages.count_tokens(model="qwen", messages=history).input_tokens
    assert msg.usage.input_tokens == len(ids) == counted
    with client.messages.stream(**kw) as s:
        assert s.get_final_message().content[0].text == msg.content[0].text
    r = httpx.post(str(client.base_url.join("/v1/messages")), headers={"x-api-key": KEY},
                   json={"model": "qwen", "max_tokens": 2, "messages": ASK + [{"role": "assistant", "content": "x "}]})
    assert r.status_code == 400 and "whitespace" in r.json()["error"]["message"]


@pytest.fixture(scope="module")
def thinker(tmp_path_factory):
    """A template that opens <think> (as DeepSeek-R1's): the reply's reasoning
    comes back as a thinking block."""
    from tests.test_reasoning_grammar import OPENS
    path = str(tmp_path_factory.mktemp("anth-think") / "qwen.gguf")
    random_gguf.write_model(path, "qwen2", "F16", seed=5, shape=random_gguf.Shape(ctx=2048))
    return akunu.load(path, n_ctx=2048, chat_template=OPENS)


@pytest.fixture(scope="module")
def thinker_client(thinker):
    app = create_app({"t": thinker}, limits=ServerLimits(max_tokens=1200))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)  # waiting for uvicorn to listen
    yield anthropic.Anthropic(base_url=f"http://127.0.0.1:{server.config.port}", api_key="none", max_retries=0)
    server.should_exit = True
    t.join(10)


def test_thinking_comes_back_as_a_thinking_block(thinker_client, thinker):
    """thinking {"type": "enabled", "budget_tokens": N}: the reasoning (at most N
    tokens) as a thinking block before the text, equal to the chat
    completion's reasoning_content; streamed as thinking_delta events."""
    kw = dict(model="t", max_tokens=1100, extra_body={"temperature": 0}, messages=ASK,
              thinking={"type": "enabled", "budget_tokens": 1024})
    msg = thinker_client.messages.create(**kw)
    ref = thinker.create_chat_completion(ASK, max_tokens=1100, temperature=0, enable_thinking=True,
                                         max_reasoning_tokens=1024)["choices"][0]["message"]
    assert ref.get("reasoning_content"), "the template opens a reasoning block"
    assert [b.type for b in msg.content][:1] == ["thinking"]
    assert msg.content[0].thinking == ref["reasoning_content"]
    assert "".join(b.text for b in msg.content if b.type == "text") == (ref["content"] or "")
    kinds, thought = [], []
    with thinker_client.messages.stream(**kw) as s:
        for ev in s:
            kinds.append(ev.type)
            if ev.type == "content_block_delta" and ev.delta.type == "thinking_delta":
                thought.append(ev.delta.thinking)
        final = s.get_final_message()
    assert "".join(thought) == ref["reasoning_content"]
    assert final.content[0].type == "thinking" and final.content[0].thinking == ref["reasoning_content"]


@pytest.mark.parametrize("thinking,param", [
    ({"type": "enabled", "budget_tokens": 100}, "thinking.budget_tokens"),
    ({"type": "enabled", "budget_tokens": 1100}, "thinking.budget_tokens"),
    ({"type": "enabled"}, "thinking.budget_tokens"),
    ({"type": "sometimes"}, "thinking"),
    ({"type": "disabled", "budget_tokens": 2000}, "thinking"),
])
def test_bad_thinking_is_a_400(thinker_client, thinking, param):
    with pytest.raises(anthropic.BadRequestError, match=param.replace(".", r"\.")):
        thinker_client.messages.create(model="t", max_tokens=1100, messages=ASK, thinking=thinking)
