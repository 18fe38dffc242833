"""OpenAI's Responses API (POST /v1/responses) on akunu-serve, driven by the
official openai client against a real server on random weights: a text
response equals the chat completion it translates to, streamed events
rebuild the whole response, text.format output validates against its
schema, a forced function call goes round trip (function_call item, then
function_call_output fed back), reasoning comes back as a reasoning item,
and bad requests get 400 in OpenAI's error shape."""

import json
import threading
import time

import httpx
import jsonschema
import pytest

openai = pytest.importorskip("openai")
uvicorn = pytest.importorskip("uvicorn")

import akunu  # noqa: E402
from akunu.server import ServerLimits, create_app  # noqa: E402
from tests.fixtures import random_gguf  # noqa: E402
from tests.test_reasoning_grammar import ITEM, OPENS  # noqa: E402
from tests.test_server_anthropic import free_port  # noqa: E402
from tests.test_tool_calls import QWEN25, WEATHER  # noqa: E402

WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather forecast",
                "parameters": WEATHER}
ITEM_FORMAT = {"format": {"type": "json_schema", "name": "item", "schema": ITEM}}
LIMIT = 256


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("responses") / "qwen2.gguf")
    random_gguf.write_model(p, "qwen2", "F16", seed=8)
    return p


@pytest.fixture(scope="module")
def plain(gguf):
    """Qwen2.5's template: tools as <tool_call> blocks, no reasoning."""
    return akunu.load(gguf, n_ctx=2048, chat_template=QWEN25)


@pytest.fixture(scope="module")
def thinker(gguf):
    """The same weights under a template that opens <think> (as DeepSeek-R1's)."""
    return akunu.load(gguf, n_ctx=2048, chat_template=OPENS)


@pytest.fixture(scope="module")
def base(plain, thinker):
    app = create_app({"q": plain, "t": thinker}, limits=ServerLimits(max_tokens=LIMIT))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)  # waiting for uvicorn to listen
    yield f"http://127.0.0.1:{server.config.port}"
    server.should_exit = True
    t.join(10)


@pytest.fixture(scope="module")
def client(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)


def events_of(stream):
    evs = list(stream)
    assert [e.sequence_number for e in evs] == list(range(len(evs)))
    return evs


def test_text_response_equals_the_chat_completion(client, plain):
    r = client.responses.create(model="q", input="What is the weather in Paris?", instructions="Be brief.",
                                max_output_tokens=12, temperature=0)
    ref = plain.create_chat_completion([{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "What is the weather in Paris?"}],
                                       max_tokens=12, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "q"
    (item,) = r.output
    assert item.type == "message" and item.role == "assistant" and item.content[0].type == "output_text"
    assert r.output_text == ref["choices"][0]["message"]["content"]
    assert r.usage.input_tokens == ref["usage"]["prompt_tokens"]
    assert r.usage.output_tokens == ref["usage"]["completion_tokens"]
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0  # no reasoning under this template
    finish = ref["choices"][0]["finish_reason"]
    assert r.status == {"length": "incomplete", "stop": "completed"}[finish]
    if finish == "length":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert r.instructions == "Be brief." and r.max_output_tokens == 12 and r.store is False


def test_input_items_are_the_conversation(client, plain):
    """Messages with content parts, developer as system: the prompt the chat completion renders."""
    items = [{"role": "developer", "content": "Answer in French."},
             {"role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Bonjour"}]},
             {"role": "user", "content": "How are you?"}]
    r = client.responses.create(model="q", input=items, max_output_tokens=4, temperature=0)
    ref = plain.create_chat_completion([{"role": "system", "content": "Answer in French."},
                                        {"role": "user", "content": "Hello"},
                                        {"role": "assistant", "content": "Bonjour"},
                                        {"role": "user", "content": "How are you?"}], max_tokens=4, temperature=0)
    assert r.usage.input_tokens == ref["usage"]["prompt_tokens"]
    assert r.output_text == ref["choices"][0]["message"]["content"]


def test_stream_events_rebuild_the_whole_response(client):
    kw = dict(model="q", input="Tell me a story.", max_output_tokens=16, temperature=0)
    whole = client.responses.create(**kw)
    evs = events_of(client.responses.create(stream=True, **kw))
    kinds = [e.type for e in evs]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete" if whole.status == "incomplete" else "response.completed"]
    deltas = "".join(e.delta for e in evs if e.type == "response.output_text.delta")
    assert deltas == whole.output_text
    assert next(e for e in evs if e.type == "response.output_text.done").text == whole.output_text
    final = evs[-1].response
    assert final.output_text == whole.output_text and final.status == whole.status
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert evs[0].response.status == "in_progress" and evs[0].response.output == []


def test_json_schema_format_validates(client):
    for seed in range(2):
        r = client.responses.create(model="q", input="Describe an item.", text=ITEM_FORMAT, max_output_tokens=80,
                                    temperature=1.0, extra_body={"seed": seed})
        assert r.status == "completed"
        jsonschema.validate(json.loads(r.output_text), ITEM)
    r = client.responses.create(model="q", input="Any object.", text={"format": {"type": "json_object"}},
                                max_output_tokens=120, temperature=0.5, extra_body={"seed": 3})
    if r.status == "completed":
        assert isinstance(json.loads(r.output_text), dict)
    evs = events_of(client.responses.create(model="q", input="Describe an item.", text=ITEM_FORMAT,
                                            max_output_tokens=80, temperature=1.0, stream=True,
                                            extra_body={"seed": 0}))
    jsonschema.validate(json.loads(evs[-1].response.output_text), ITEM)


def test_function_call_round_trip(client, plain):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.responses.create(model="q", input=ask, tools=[WEATHER_TOOL], max_output_tokens=160,
                                tool_choice={"type": "function", "name": "get_weather"}, temperature=0.8,
                                extra_body={"seed": 4})
    assert r.status == "completed"
    calls = [it for it in r.output if it.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].id.startswith("fc_")
    args = json.loads(calls[0].arguments)
    jsonschema.validate(args, WEATHER)
    assert r.tools[0].name == "get_weather" and r.tool_choice.name == "get_weather"
    # the call and its result go back as items; the model answers in text
    result = {"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temperature": 21}'}
    history = ask + [c.model_dump(exclude_none=True) for c in r.output] + [result]
    again = client.responses.create(model="q", input=history, tools=[WEATHER_TOOL], max_output_tokens=8,
                                    temperature=0)
    assert again.output[0].type in ("message", "function_call")
    ref = plain.create_chat_completion(
        ask + [{"role": "assistant", "content": None,
                "tool_calls": [{"id": calls[0].call_id, "type": "function",
                                "function": {"name": "get_weather", "arguments": calls[0].arguments}}]},
               {"role": "tool", "tool_call_id": calls[0].call_id, "content": '{"temperature": 21}'}],
        tools=[{"type": "function", "function": {k: WEATHER_TOOL[k] for k in ("name", "description",
                                                                                "parameters")}}],
        max_tokens=8, temperature=0)
    assert again.usage.input_tokens == ref["usage"]["prompt_tokens"] > r.usage.input_tokens


def test_streamed_function_call(client):
    evs = events_of(client.responses.create(model="q", input="Weather in Rome?", tools=[WEATHER_TOOL],
                                            tool_choice="required", parallel_tool_calls=False, max_output_tokens=160,
                                            temperature=0.8,
                                            stream=True, extra_body={"seed": 5}))
    kinds = [e.type for e in evs]
    assert "response.output_text.delta" not in kinds  # no <tool_call> text leaks
    added = next(e for e in evs if e.type == "response.output_item.added")
    assert added.item.type == "function_call" and added.item.arguments == ""
    deltas = "".join(e.delta for e in evs if e.type == "response.function_call_arguments.delta")
    done = next(e for e in evs if e.type == "response.function_call_arguments.done")
    assert done.arguments == deltas and done.item_id == added.item.id
    jsonschema.validate(json.loads(deltas), WEATHER)
    assert kinds[-1] == "response.completed"
    (call,) = evs[-1].response.output
    assert call.type == "function_call" and call.arguments == deltas and call.status == "completed"


def test_reasoning_item_then_answer(client):
    kw = dict(model="t", input="Describe an item.", text=ITEM_FORMAT, max_output_tokens=100, temperature=1.0,
              reasoning={"effort": "low"}, extra_body={"seed": 1, "max_reasoning_tokens": 6})
    r = client.responses.create(**kw)
    assert [it.type for it in r.output] == ["reasoning", "message"] and r.status == "completed"
    assert r.output[0].content[0].type == "reasoning_text" and r.output[0].content[0].text
    jsonschema.validate(json.loads(r.output_text), ITEM)
    assert 1 <= r.usage.output_tokens_details.reasoning_tokens < r.usage.output_tokens
    evs = events_of(client.responses.create(stream=True, **kw))
    assert evs[-1].response.usage.output_tokens_details.reasoning_tokens == \
        r.usage.output_tokens_details.reasoning_tokens
    kinds = [e.type for e in evs]
    first_text = kinds.index("response.output_text.delta")
    assert "response.reasoning_text.delta" in kinds[:first_text]
    assert "response.reasoning_text.delta" not in kinds[first_text:]
    reasoning = "".join(e.delta for e in evs if e.type == "response.reasoning_text.delta")
    assert reasoning == r.output[0].content[0].text
    assert evs[-1].response.output_text == r.output_text
    # effort "none" is thinking off: the format applies from the reply's first token, all of it content
    off = client.responses.create(model="t", input="Describe an item.", text=ITEM_FORMAT, max_output_tokens=100,
                                  temperature=1.0, reasoning={"effort": "none"}, extra_body={"seed": 1})
    assert [it.type for it in off.output] == ["message"] and off.status == "completed"
    jsonschema.validate(json.loads(off.output_text), ITEM)


@pytest.mark.parametrize("kw,param,match", [
    ({"store": True}, "store", "not stored"),
    ({"previous_response_id": "resp_123"}, "previous_response_id", "not stored"),
    ({"extra_body": {"frequency_boost": 1}}, "frequency_boost", "unknown"),
    ({"input": 42}, "input", "string or a non-empty list"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0]", "not supported"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "stored"),
    ({"tools": [{"type": "web_search"}]}, "tools[0]", "only function tools"),
    ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "name": "nope"}}, None, "not among the tools"),
    ({"tool_choice": "required"}, "tool_choice", "tools"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema", "schema"),
    ({"text": {"format": {"type": "xml"}}}, "text.format", "json_schema"),
    ({"max_output_tokens": LIMIT + 1}, "max_output_tokens", "limit"),
    ({"temperature": 3}, "temperature", "from 0 to 2"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort", "minimal"),
    ({"stream": "yes"}, "stream", "true or false"),
])
def test_bad_requests_are_400_in_openai_shape(client, kw, param, match):
    kw = {"model": "q", "input": "Hi", **kw}
    with pytest.raises(openai.BadRequestError, match=match) as e:
        client.responses.create(**kw)
    err = e.value.body
    assert e.value.status_code == 400 and err["type"] == "invalid_request_error"
    if param is not None:
        assert err["param"] == param


def test_unknown_model_and_malformed_body(base, client):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.responses.create(model="nope", input="Hi")
    r = httpx.post(base + "/v1/responses", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(base + "/v1/responses", json=["a list"])
    assert r.status_code == 400 and "JSON object" in r.json()["error"]["message"]


def test_rate_limits_and_body_limits_cover_the_route(plain):
    """Tokens of whole and streamed responses count against the key's window; a body nested
    too deep is 400 before the route parses it."""
    from fastapi.testclient import TestClient

    from akunu.server.rate_limits import install as install_rate_limits

    app = create_app({"q": plain}, limits=ServerLimits(max_tokens=LIMIT), max_json_depth=16)
    limiter = install_rate_limits(app, tokens_per_minute=100_000)
    ask = {"model": "q", "input": "Hi", "max_output_tokens": 4, "temperature": 0}
    with TestClient(app) as c:
        r = c.post("/v1/responses", json=ask)
        assert r.status_code == 200 and "x-ratelimit-remaining-tokens" in r.headers
        window = next(iter(limiter._windows.values()))
        assert window.token_sum == r.json()["usage"]["total_tokens"]
        r = c.post("/v1/responses", json={**ask, "stream": True})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(block.split("data: ", 1)[1]) for block in r.text.split("\n\n") if "data: " in block]
        assert events[-1]["type"] in ("response.completed", "response.incomplete")
        assert window.token_sum == 2 * events[-1]["response"]["usage"]["total_tokens"]  # the same reply twice
        r = c.post("/v1/responses", content=b'{"input": ' + b"[" * 40 + b"]" * 40 + b"}",
                   headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
