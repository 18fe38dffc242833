"""Request bodies and per-key rates bounded on akunu-serve: deeply nested,
oversized and malformed JSON answers 4xx (never 500) in OpenAI's error
shape, and keys over their requests or tokens per minute get 429 with
Retry-After, through the official openai client too."""

import json

import pytest
from fastapi.testclient import TestClient

import akunu
from akunu.server import ServerLimits, create_app
from akunu.server.body_limits import install as install_body_limits
from akunu.server.body_limits import json_depth
from akunu.server.rate_limits import install as install_rate_limits
from tests.fixtures import random_gguf

MSGS = [{"role": "user", "content": "hi"}]
ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("limits") / "llama.gguf")
    random_gguf.write_model(path, "llama", "F16", seed=7)
    return akunu.load(path, n_ctx=256)


def openai_error(r, status):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def test_json_depth_ignores_brackets_in_strings():
    assert json_depth(b'{"a": [1, {"b": []}]}') == 4
    assert json_depth(b'["[[[[", "\\"[[[", {"k": "]]]"}]') == 2
    assert json_depth(b"[" * 1000 + b"]" * 1000) == 1000
    assert json_depth(b'["unterminated [[[[') == 1


def test_malformed_bodies_are_4xx_never_500(model):
    app = create_app({"m": model}, limits=ServerLimits(max_body_bytes=1 << 20, max_tokens=16), max_json_depth=64)
    with TestClient(app) as c:
        bodies = [b"[" * 100000, b"{\"a\":" * 100000, b'{"model": "m", "messages": ' + b"[" * 65 + b"]" * 65 + b"}",
                  b'{"prompt": ' + b"1" * 5000 + b"}", b"{not json", b"\xff\xfe{}", b'{"a": "\\ud800"',
                  b'{"messages": [' * 40000]
        for route in ROUTES:
            for body in bodies:
                r = c.post(route, content=body, headers={"content-type": "application/json"})
                err = openai_error(r, 400)
                assert err["type"] == "invalid_request_error"
        # nesting within the limit reaches the route as before
        ok = {"model": "m", "messages": MSGS, "max_tokens": 2, "response_format": {"type": "json_schema",
              "json_schema": {"name": "n", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}}
        assert c.post("/v1/chat/completions", json=ok).status_code == 200
        assert c.post("/tokenize", content=json.dumps({"content": "[" * 5000})).status_code == 200


def test_oversized_bodies_are_413_with_or_without_a_length(model):
    app = create_app({"m": model}, limits=ServerLimits(max_body_bytes=64 << 10, max_tokens=16))
    big = json.dumps({"model": "m", "prompt": "x" * (70 << 10)}).encode()
    with TestClient(app) as c:
        err = openai_error(c.post("/v1/completions", content=big), 413)
        assert "65536" in err["message"]

        def chunks():  # no content-length: sent chunked
            for i in range(0, len(big), 8192):
                yield big[i:i + 8192]

        openai_error(c.post("/v1/completions", content=chunks()), 413)
        r = c.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 2, "user": "u" * (60 << 10)})
        assert r.status_code == 200


@pytest.fixture
def clock():
    class Clock:
        t = 1000.0

        def __call__(self):
            return self.t

    return Clock()


def test_requests_per_minute_per_key(model, clock):
    app = create_app({"m": model}, limits=ServerLimits(max_tokens=16))
    install_rate_limits(app, requests_per_minute=3, clock=clock)
    with TestClient(app) as c:
        a, b = {"authorization": "Bearer key-a"}, {"authorization": "Bearer key-b"}
        for i in range(3):
            r = c.post("/tokenize", headers=a, json={"content": "hi"})
            assert r.status_code == 200 and r.headers["x-ratelimit-remaining-requests"] == str(2 - i)
            clock.t += 10
        r = c.post("/tokenize", headers=a, json={"content": "hi"})
        err = openai_error(r, 429)
        assert err["type"] == "requests" and err["code"] == "rate_limit_exceeded"
        assert r.headers["retry-after"] == "30"  # the first request leaves the window 60 s after it came
        assert c.post("/tokenize", headers=b, json={"content": "hi"}).status_code == 200  # another key
        assert c.get("/health", headers=a).status_code == 200  # never limited
        clock.t += 30
        assert c.post("/tokenize", headers=a, json={"content": "hi"}).status_code == 200


def test_tokens_per_minute_count_answers_and_streams(model, clock):
    app = create_app({"m": model}, api_key="sk-1", limits=ServerLimits(max_tokens=16))
    limiter = install_rate_limits(app, tokens_per_minute=30, api_key="sk-1", clock=clock)
    auth = {"authorization": "Bearer sk-1"}
    with TestClient(app) as c:
        r = c.post("/v1/completions", headers=auth, json={"prompt": "hello there", "max_tokens": 8})
        used = r.json()["usage"]["total_tokens"]
        assert r.status_code == 200 and int(r.headers["x-ratelimit-limit-tokens"]) == 30
        window = next(iter(limiter._windows.values()))
        assert window.token_sum == used
        # a stream's usage chunk counts the same way
        r = c.post("/v1/completions", headers=auth, json={"prompt": "hello there", "max_tokens": 8, "stream": True,
                                                          "stream_options": {"include_usage": True}})
        assert r.status_code == 200
        streamed = [json.loads(line[6:]) for line in r.text.split("\n\n") if line.startswith("data: {")][-1]
        assert window.token_sum == used + streamed["usage"]["total_tokens"]
        clock.t += 1
        if window.token_sum < 30:  # fill the window to the limit
            limiter.record(next(iter(limiter._windows)), 30 - window.token_sum)
        r = c.post("/v1/completions", headers=auth, json={"prompt": "hi", "max_tokens": 2})
        err = openai_error(r, 429)
        assert err["type"] == "tokens" and 1 <= int(r.headers["retry-after"]) <= 60
        # a wrong key is the app's 401, not counted against anyone
        assert c.post("/v1/completions", headers={"authorization": "Bearer nope"},
                      json={"prompt": "hi"}).status_code == 401
        assert len(limiter._windows) == 1
        clock.t += 61
        assert c.post("/v1/completions", headers=auth, json={"prompt": "hi", "max_tokens": 2}).status_code == 200


def test_openai_client_sees_rate_limit_error(model, clock):
    openai = pytest.importorskip("openai")
    app = create_app({"m": model}, limits=ServerLimits(max_tokens=16))
    install_rate_limits(app, requests_per_minute=1, clock=clock)
    with TestClient(app) as c:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="k", max_retries=0, http_client=c)
        client.chat.completions.create(model="m", messages=MSGS, max_tokens=2)
        with pytest.raises(openai.RateLimitError) as e:
            client.chat.completions.create(model="m", messages=MSGS, max_tokens=2)
        assert e.value.response.headers["retry-after"] == "60"


def test_all_installed_together(model, clock, tmp_path):
    """The modules in their documented order: registry, rate limits, body limits, Anthropic API."""
    from akunu.server.anthropic_api import install as install_anthropic
    from akunu.server.model_registry import install as install_registry

    random_gguf.write_model(str(tmp_path / "Chat.gguf"), "qwen2", "F16", seed=8)
    key = "sk-all"
    app = create_app({"m": model}, api_key=key, limits=ServerLimits(max_tokens=16))
    registry = install_registry(app, models_dir=str(tmp_path), loader=lambda p: akunu.load(p, n_ctx=256),
                                api_key=key)
    limiter = install_rate_limits(app, requests_per_minute=3, tokens_per_minute=10_000, api_key=key, clock=clock)
    install_body_limits(app, max_bytes=64 << 10, max_depth=64)
    install_anthropic(app, max_tokens=16)
    auth = {"x-api-key": key}
    ask = {"model": "chat", "max_tokens": 3, "messages": MSGS}

    def anthropic_error(r, status, kind):
        assert r.status_code == status, r.text
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == kind, r.text

    with TestClient(app) as c:
        # refused before anything is loaded or counted
        anthropic_error(c.post("/v1/messages", headers={"x-api-key": "nope"}, json=ask), 401, "authentication_error")
        assert "Chat" not in registry.slots and not limiter._windows
        anthropic_error(c.post("/v1/messages", headers=auth, content=b"[" * 60000), 400, "invalid_request_error")
        anthropic_error(c.post("/v1/messages", headers=auth, content=b"x" * (65 << 10)), 413, "request_too_large")
        r = c.post("/v1/messages", headers=auth, json=ask)  # loads "Chat", named in any case
        assert r.status_code == 200 and r.json()["model"] == "Chat" and "Chat" in registry.slots
        used = r.json()["usage"]["input_tokens"] + r.json()["usage"]["output_tokens"]
        assert next(iter(limiter._windows.values())).token_sum == used
        assert c.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                      json={"model": "CHAT", "messages": MSGS, "max_tokens": 2}).json()["model"] == "Chat"
        # the refused bodies were not counted: this is the third request of the minute, the next is over
        assert c.post("/v1/messages", headers=auth, json=ask).status_code == 200
        r = c.post("/v1/messages", headers=auth, json=ask)
        anthropic_error(r, 429, "rate_limit_error")
        assert int(r.headers["retry-after"]) >= 1
        r = c.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, json={"messages": MSGS})
        assert openai_error(r, 429)["code"] == "rate_limit_exceeded"
