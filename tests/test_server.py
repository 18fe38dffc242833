"""akunu-serve: OpenAI-compatible endpoints through FastAPI's test client,
and a real server process driven by the official openai client: streaming,
several models, queued concurrent requests, disconnects, limits and errors."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import akunu
from tests.fixtures import random_gguf
from akunu.server import ServerLimits, create_app

MSGS = [{"role": "user", "content": "Say something short."}]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("srv")
    out = {}
    for arch in ("llama", "qwen3"):
        out[arch] = str(d / f"{arch}.gguf")
        random_gguf.write_model(out[arch], arch, "F16", seed=31)
    from tests.fixtures.hf_models import make_bert

    out["bert"] = str(d / "bert")
    make_bert(out["bert"], seed=4)
    return out


@pytest.fixture(scope="module")
def models(paths):
    return {name: akunu.load(p, n_ctx=256) for name, p in paths.items()}


@pytest.fixture(scope="module")
def client(models):
    app = create_app(models, limits=ServerLimits(max_body_bytes=64 << 10, max_tokens=200))
    with TestClient(app) as c:
        yield c


def sse_events(text):
    events = [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_health_models_metrics(client):
    assert client.get("/health").json()["status"] == "ok"
    data = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in data] == ["llama", "qwen3", "bert"]
    client.post("/v1/chat/completions", json={"model": "llama", "messages": MSGS, "max_tokens": 4})
    text = client.get("/metrics").text
    assert 'akunu_requests_total{endpoint="/v1/chat/completions",status="200"}' in text
    assert 'akunu_queue_depth{model="llama"} 0' in text and "akunu_completion_tokens_total" in text


def test_chat_completion_matches_the_python_api(client, models):
    r = client.post("/v1/chat/completions", json={"model": "qwen3", "messages": MSGS, "max_tokens": 16,
                                                  "temperature": 0})
    assert r.status_code == 200
    body = r.json()
    ChatCompletion.model_validate(body)
    ref = models["qwen3"].create_chat_completion(MSGS, max_tokens=16, temperature=0)
    assert body["choices"][0]["message"] == ref["choices"][0]["message"] and body["usage"] == ref["usage"]
    assert body["model"] == "qwen3"


def test_streaming_chat_and_usage(client):
    req = {"model": "llama", "messages": MSGS, "max_tokens": 16, "temperature": 0}
    full = client.post("/v1/chat/completions", json=req).json()
    r = client.post("/v1/chat/completions", json={**req, "stream": True, "stream_options": {"include_usage": True}})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = sse_events(r.text)
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == full["choices"][0]["message"]["content"] and chunks[-1]["usage"] == full["usage"]


def test_completions_with_text_and_token_prompts(client, models):
    ids = models["llama"].tokenize("Once upon")
    a = client.post("/v1/completions", json={"model": "llama", "prompt": "Once upon", "max_tokens": 8,
                                            "temperature": 0}).json()
    b = client.post("/v1/completions", json={"model": "llama", "prompt": [ids], "max_tokens": 8,
                                            "temperature": 0}).json()
    Completion.model_validate(a)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    r = client.post("/v1/completions", json={"prompt": "Once upon", "max_tokens": 8, "stream": True,
                                            "temperature": 0})
    assert "".join(c["choices"][0]["text"] for c in sse_events(r.text)) == a["choices"][0]["text"]


def test_ignore_eos(client, models):
    """ignore_eos: true (as load generators send it) generates max_tokens even
    where an end-of-turn token is the likeliest; false or absent stops there."""
    eos = {str(i): 100.0 for i in models["llama"].stop_ids}  # end-of-turn first, whatever the model says
    for path, extra in (("/v1/completions", {"prompt": "Once upon"}),
                        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})):
        body = {"model": "llama", "max_tokens": 6, "temperature": 0, "logit_bias": eos, **extra}
        stopped = client.post(path, json=body).json()
        assert stopped["choices"][0]["finish_reason"] == "stop"
        assert stopped["usage"]["completion_tokens"] <= 1
        full = client.post(path, json={**body, "ignore_eos": True}).json()
        assert full["choices"][0]["finish_reason"] == "length"
        assert full["usage"]["completion_tokens"] == 6
    r = client.post("/v1/completions", json={"model": "llama", "prompt": "x", "ignore_eos": "yes"})
    assert r.status_code == 400 and "ignore_eos" in r.json()["error"]["message"]


def test_json_schema_response_format(client):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    r = client.post("/v1/chat/completions", json={
        "model": "qwen3", "messages": MSGS, "max_tokens": 30, "seed": 1,
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}})
    assert r.status_code == 200, r.text
    assert isinstance(json.loads(r.json()["choices"][0]["message"]["content"])["ok"], bool)


def error_of(r, status):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def test_errors_in_openai_shape(client):
    err = error_of(client.post("/v1/chat/completions", json={"model": "gpt-9", "messages": MSGS}), 404)
    assert err["code"] == "model_not_found" and "llama" in err["message"]
    error_of(client.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}),
             400)
    assert error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "temperature": "hot"}),
                    400)["param"] == "temperature"
    assert "n = 0" in error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "n": 0}), 400)["message"]
    assert "limit" in error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "max_tokens": 10**6}),
                               400)["message"]
    err = error_of(client.post("/v1/completions", json={"prompt": "word " * 400, "max_tokens": 4}), 400)
    assert "does not fit the context" in err["message"]
    error_of(client.post("/v1/chat/completions", json={"messages": []}), 400)
    error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "stop": [1, 2]}), 400)
    error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "top_p": 0}), 400)
    error_of(client.post("/v1/chat/completions", json=[1, 2]), 400)
    error_of(client.post("/v1/completions", json={"prompt": {"a": 1}}), 400)
    error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "response_format": {"type": "yaml"}}), 400)
    error_of(client.post("/v1/chat/completions", json={"messages": MSGS, "stream": True, "top_k": -1}), 400)
    big = {"messages": [{"role": "user", "content": "x" * (70 << 10)}]}
    error_of(client.post("/v1/chat/completions", json=big), 413)
    error_of(client.post("/v1/embeddings", json={"input": "hello"}), 400)  # the default model generates
    error_of(client.post("/v1/embeddings", json={"model": "bert"}), 400)
    error_of(client.post("/v1/embeddings", json={"model": "bert", "input": []}), 400)
    error_of(client.post("/v1/embeddings", json={"model": "bert", "input": [[]]}), 400)
    error_of(client.post("/v1/embeddings", json={"model": "bert", "input": ["a", [1]]}), 400)
    error_of(client.post("/v1/embeddings", json={"model": "bert", "input": "a", "encoding_format": "hex"}), 400)
    error_of(client.post("/v1/embeddings", json={"model": "bert", "input": "a", "dimensions": 3}), 400)
    error_of(client.post("/v1/chat/completions", json={"model": "bert", "messages": MSGS}), 400)
    error_of(client.get("/v1/nothing-here"), 404)


def test_embeddings_endpoint(client, models):
    from openai.types import CreateEmbeddingResponse

    texts = ["hello world", "quick brown fox"]
    r = client.post("/v1/embeddings", json={"model": "bert", "input": texts})
    assert r.status_code == 200, r.text
    body = r.json()
    CreateEmbeddingResponse.model_validate(body)
    import numpy as np

    ref = models["bert"].embed(texts)
    np.testing.assert_allclose(np.array([d["embedding"] for d in body["data"]]), ref, atol=1e-6)
    ids = [models["bert"].tokenize(t) for t in texts]
    by_ids = client.post("/v1/embeddings", json={"model": "bert", "input": ids}).json()
    np.testing.assert_allclose(np.array([d["embedding"] for d in by_ids["data"]]), ref, atol=1e-6)
    assert body["usage"]["prompt_tokens"] == sum(len(i) for i in ids)


def test_tokenize_detokenize(client, models):
    toks = client.post("/tokenize", json={"content": "hello world"}).json()["tokens"]
    assert toks == models["llama"].tokenize("hello world")
    assert client.post("/detokenize", json={"tokens": toks}).json()["content"] == "hello world"
    error_of(client.post("/detokenize", json={"tokens": [10**8]}), 400)
    error_of(client.post("/tokenize", json={"content": 5}), 400)


def test_api_key(models):
    app = create_app({"llama": models["llama"]}, api_key="sekret")
    with TestClient(app) as c:
        assert error_of(c.get("/v1/models"), 401)["type"] == "authentication_error"
        assert c.get("/v1/models", headers={"Authorization": "Bearer sekret"}).status_code == 200
        assert c.get("/health").status_code == 200


def test_n_stop_seed_echo_and_logprobs(client):
    req = {"model": "llama", "messages": MSGS, "max_tokens": 10, "temperature": 0.9, "seed": 5}
    two = client.post("/v1/chat/completions", json={**req, "n": 2})
    assert two.status_code == 200, two.text
    body = two.json()
    ChatCompletion.model_validate(body)
    assert [c["index"] for c in body["choices"]] == [0, 1]
    # choice 0 is the request without n; the seed is passed through (the same seed, the same text)
    one = client.post("/v1/chat/completions", json=req).json()
    assert body["choices"][0]["message"] == one["choices"][0]["message"]
    assert body["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]
    # choice i samples with seed + i: choice 1 is the request with seed 6
    other = client.post("/v1/chat/completions", json={**req, "seed": 6}).json()
    assert body["choices"][1]["message"] == other["choices"][0]["message"]
    assert body["usage"]["completion_tokens"] == one["usage"]["completion_tokens"] + other["usage"]["completion_tokens"]
    chunks = sse_events(client.post("/v1/chat/completions", json={**req, "n": 2, "stream": True}).text)
    for i in (0, 1):
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                       if c["choices"] and c["choices"][0]["index"] == i)
        assert text == body["choices"][i]["message"]["content"]
    assert "at most 4" in error_of(client.post("/v1/chat/completions", json={
        **req, "stop": ["a", "b", "c", "d", "e"]}), 400)["message"]
    assert client.post("/v1/chat/completions", json={**req, "stop": ["a", "b", "c", "d"]}).status_code == 200
    for field in ({"logprobs": True}, {"logprobs": True, "top_logprobs": 3}):
        got = client.post("/v1/chat/completions", json={**req, **field})
        assert got.status_code == 200, got.text
        entries = got.json()["choices"][0]["logprobs"]["content"]
        assert entries and all(len(e["top_logprobs"]) == field.get("top_logprobs", 0) for e in entries)
    assert client.post("/v1/completions", json={"prompt": "hi", "logprobs": 2}).json()["choices"][0]["logprobs"]
    for body, param in [({**req, "top_logprobs": 3}, "top_logprobs"), ({**req, "logprobs": 1}, "logprobs"),
                        ({**req, "logprobs": True, "top_logprobs": 21}, "top_logprobs")]:
        assert error_of(client.post("/v1/chat/completions", json=body), 400)["param"] == param
    for bad in ({"logprobs": True}, {"logprobs": 21}, {"logprobs": 2, "top_logprobs": 2}):
        assert error_of(client.post("/v1/completions", json={"prompt": "hi", **bad}), 400)["param"] in \
            ("logprobs", "top_logprobs")
    assert client.post("/v1/chat/completions", json={**req, "logprobs": False}).json()["choices"][0]["logprobs"] \
        is None
    plain = client.post("/v1/completions", json={"prompt": "Once upon", "max_tokens": 6, "temperature": 0}).json()
    echoed = client.post("/v1/completions", json={"prompt": "Once upon", "max_tokens": 6, "temperature": 0,
                                                  "echo": True}).json()
    assert echoed["choices"][0]["text"] == "Once upon" + plain["choices"][0]["text"]
    streamed = sse_events(client.post("/v1/completions", json={"prompt": "Once upon", "max_tokens": 6,
                                                              "temperature": 0, "echo": True, "stream": True}).text)
    assert "".join(c["choices"][0]["text"] for c in streamed) == echoed["choices"][0]["text"]
    error_of(client.post("/v1/completions", json={"prompt": "hi", "echo": "yes"}), 400)


# -- a real server process ------------------------------------------------------
class _Url(str):
    """The server's base URL, carrying its process id."""

    pid = 0


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(paths):
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "akunu.cli.serve", f"a={paths['llama']}", f"b={paths['qwen3']}",
                             f"e={paths['bert']}", "--port", str(port), "-c", "2048", "--api-key", "k"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = _Url(f"http://127.0.0.1:{port}")
    for _ in range(300):
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
        if proc.poll() is not None:
            pytest.fail("server exited: " + proc.stdout.read())
    base.pid = proc.pid
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:  # never leave a server behind
        proc.kill()
        proc.wait()
        pytest.fail("the server did not shut down within 15 s of SIGTERM")


def test_openai_client_against_the_server(server, models):
    from openai import OpenAI

    c = OpenAI(base_url=server + "/v1", api_key="k")
    assert sorted(m.id for m in c.models.list()) == ["a", "b", "e"]
    emb = c.embeddings.create(model="e", input=["hello world", "the cat sat"])  # the client asks for base64
    import numpy as np

    got = np.array([d.embedding for d in emb.data], dtype=np.float32)
    np.testing.assert_allclose(got, models["bert"].embed(["hello world", "the cat sat"]), atol=1e-6)
    assert emb.usage.prompt_tokens == sum(len(models["bert"].tokenize(t)) for t in ["hello world", "the cat sat"])
    r = c.chat.completions.create(model="a", messages=MSGS, max_tokens=12, temperature=0)
    ref = models["llama"].create_chat_completion(MSGS, max_tokens=12, temperature=0)
    assert r.choices[0].message.content == ref["choices"][0]["message"]["content"]
    assert r.usage.completion_tokens == ref["usage"]["completion_tokens"]
    parts = [ch.choices[0].delta.content or "" for ch in
             c.chat.completions.create(model="a", messages=MSGS, max_tokens=12, temperature=0, stream=True)
             if ch.choices]
    assert "".join(parts) == r.choices[0].message.content
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "pop": {"type": "integer", "minimum": 0, "maximum": 10**7}},
              "required": ["city", "pop"], "additionalProperties": False}
    for seed in range(5):
        r = c.chat.completions.create(model="b", messages=MSGS, max_tokens=80, seed=seed, temperature=0.9,
                                      response_format={"type": "json_schema",
                                                       "json_schema": {"name": "city", "schema": schema}})
        import jsonschema

        jsonschema.validate(json.loads(r.choices[0].message.content), schema)
    comp = c.completions.create(model="b", prompt="hello", max_tokens=5, temperature=0)
    assert comp.choices[0].text == models["qwen3"].create_completion("hello", max_tokens=5,
                                                                     temperature=0)["choices"][0]["text"]
    import openai

    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="nope", messages=MSGS)
    with pytest.raises(openai.BadRequestError, match="not an embedding model"):
        c.embeddings.create(model="a", input="hello")
    with pytest.raises(openai.BadRequestError, match="temperature"):
        c.chat.completions.create(model="a", messages=MSGS, temperature=-1)
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=server + "/v1", api_key="wrong").models.list()


def test_openai_client_logprobs(server, models):
    """logprobs through the official client, chat and completions, whole and streamed: the
    log_softmax of the model's logits at each generated token's position."""
    import numpy as np
    from openai import OpenAI

    c = OpenAI(base_url=server + "/v1", api_key="k")
    m = models["llama"]

    def reference(prompt_ids, tokens):
        x = m.logits(list(prompt_ids) + list(tokens)).astype(np.float64)
        x -= x.max(axis=1, keepdims=True)
        lp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
        return [lp[len(prompt_ids) - 1 + j, t] for j, t in enumerate(tokens)]

    r = c.chat.completions.create(model="a", messages=MSGS, max_tokens=8, temperature=0, logprobs=True,
                                  top_logprobs=3)
    prompt = m.tokenize(m.apply_chat_template(MSGS), add_bos=False)
    toks = [t for t in m.generate(prompt, max_tokens=8).tokens if t not in m.stop_ids]
    got = r.choices[0].logprobs.content
    np.testing.assert_allclose([e.logprob for e in got], reference(prompt, toks), rtol=0, atol=1e-9)
    assert all(len(e.top_logprobs) == 3 and e.top_logprobs[0].logprob >= e.logprob - 1e-12 for e in got)
    streamed = [e for ch in c.chat.completions.create(model="a", messages=MSGS, max_tokens=8, temperature=0,
                                                       logprobs=True, top_logprobs=3, stream=True)
                if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content or []]
    assert [e.model_dump() for e in streamed] == [e.model_dump() for e in got]
    comp = c.completions.create(model="a", prompt="Once upon a time", max_tokens=6, temperature=0, logprobs=2)
    ids = m.tokenize("Once upon a time")
    toks = [t for t in m.generate(ids, max_tokens=6).tokens if t not in m.stop_ids]
    np.testing.assert_allclose(comp.choices[0].logprobs.token_logprobs, reference(ids, toks), rtol=0, atol=1e-9)
    vals = [v for ch in c.completions.create(model="a", prompt="Once upon a time", max_tokens=6, temperature=0,
                                             logprobs=2, stream=True) if ch.choices[0].logprobs
            for v in ch.choices[0].logprobs.token_logprobs]
    assert vals == comp.choices[0].logprobs.token_logprobs


def test_concurrent_requests_are_queued_not_mixed(server, models):
    from openai import OpenAI

    c = OpenAI(base_url=server + "/v1", api_key="k")
    prompts = [f"Topic number {i}:" for i in range(4)]
    want = {("a", p): models["llama"].create_completion(p, max_tokens=24, temperature=0)["choices"][0]["text"]
            for p in prompts}
    want.update({("b", p): models["qwen3"].create_completion(p, max_tokens=24, temperature=0)["choices"][0]["text"]
                 for p in prompts})
    got, errors = {}, []

    def work(model, p):
        try:
            got[(model, p)] = c.completions.create(model=model, prompt=p, max_tokens=24,
                                                   temperature=0).choices[0].text
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(m, p)) for m in ("a", "b") for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == want


def test_disconnect_mid_stream_frees_the_model(server, models):
    headers = {"Authorization": "Bearer k"}
    stops = {str(i): -100.0 for i in models["llama"].stop_ids}
    body = {"model": "a", "prompt": "go", "max_tokens": 2000, "stream": True, "logit_bias": stops}
    with httpx.stream("POST", server + "/v1/completions", json=body, headers=headers, timeout=60) as r:
        assert r.status_code == 200
        for i, _ in enumerate(r.iter_lines()):
            if i > 6:
                break  # leave mid-stream
    t0 = time.time()
    r = httpx.post(server + "/v1/completions", json={"model": "a", "prompt": "hi", "max_tokens": 4},
                   headers=headers, timeout=60)
    assert r.status_code == 200
    assert time.time() - t0 < 5, "the abandoned generation kept the model busy"
    time.sleep(0.5)
    m = httpx.get(server + "/metrics", headers=headers).text
    assert 'akunu_queue_depth{model="a"} 0' in m and 'akunu_requests_running{model="a"} 0' in m
    done = [l for l in m.splitlines() if l.startswith('akunu_completion_tokens_total{model="a"}')]
    assert int(float(done[0].split()[-1])) < 2000, "generation stopped when the client left"


def stream_text(base, body, headers):
    with httpx.stream("POST", base + "/v1/completions", json=body, headers=headers, timeout=120) as r:
        assert r.status_code == 200, r.read()
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    for c in chunks:
        assert c["object"] == "text_completion" and len(c["choices"]) == 1
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    return "".join(c["choices"][0]["text"] for c in chunks)


def test_load_16_streaming_clients(server, models):
    """16 concurrent streaming clients x 5 requests: every stream complete and
    identical to the same request alone; the server healthy after."""
    headers = {"Authorization": "Bearer k"}
    jobs = [(("a", "b")[c % 2], f"Client {c} request {r}:") for c in range(16) for r in range(5)]
    want = {}
    for model, prompt in set(jobs):
        m = models["llama" if model == "a" else "qwen3"]
        want[(model, prompt)] = m.create_completion(prompt, max_tokens=20, temperature=0)["choices"][0]["text"]
    got, errors = {}, []

    def client(i):
        try:
            for model, prompt in jobs[i * 5:(i + 1) * 5]:
                got[(model, prompt)] = stream_text(server, {"model": model, "prompt": prompt, "max_tokens": 20,
                                                            "temperature": 0, "stream": True}, headers)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]
    assert time.time() - t0 < 300
    assert got == want
    assert httpx.get(server + "/health", timeout=5).json()["status"] == "ok"


def test_abuse_does_not_crash_or_leak(server):
    headers = {"Authorization": "Bearer k", "content-type": "application/json"}
    cases = [
        (b"{not json", 400), (b"[1, 2, 3]", 400), (b'{"messages": "hi"}', 400),
        (json.dumps({"messages": MSGS, "temperature": "hot"}).encode(), 400),
        (json.dumps({"messages": MSGS, "max_tokens": -5}).encode(), 400),
        (json.dumps({"messages": MSGS, "unknown_field": {"x": 1}, "max_tokens": 2}).encode(), 200),
        (json.dumps({"messages": [{"role": "user", "content": "word " * 3000}], "max_tokens": 2}).encode(), 400),
        (b"x" * (17 << 20), 413),  # past the default 16 MiB
        (rb'{"messages": [{"role": "user", "content": "lone surrogate \ud800"}], "max_tokens": 2}', 200),
    ]
    with httpx.Client(timeout=60) as c:
        def run_all():
            for body, status in cases:
                r = c.post(server + "/v1/chat/completions", content=body, headers=headers)
                assert r.status_code == status, (body[:60], r.status_code, r.text[:200])
                if status != 200:
                    assert "error" in r.json()
            with httpx.stream("POST", server + "/v1/chat/completions", headers=headers, timeout=60,
                              json={"model": "a", "messages": MSGS, "max_tokens": 200, "stream": True}) as r:
                next(r.iter_lines())  # leave after the first event
        for _ in range(3):
            run_all()  # warm-up: caches, allocator pools
        before = rss_bytes(server.pid)
        for _ in range(20):  # 200 requests
            run_all()
        after = rss_bytes(server.pid)
    assert httpx.get(server + "/health", timeout=5).status_code == 200
    assert after - before < 16 << 20, f"server memory grew by {(after - before) >> 20} MiB over 200 bad requests"


def test_tool_fields_are_checked_and_used(server):
    """The models' templates have no tools: they go into the system message and the call is
    the generic JSON object, constrained to the function's schema."""
    headers = {"Authorization": "Bearer k"}
    with httpx.Client(base_url=server, headers=headers, timeout=120) as client:
        check_tool_fields(client)


def check_tool_fields(client):
    tools = [{"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["n"], "additionalProperties": False}}}]
    req = {"model": "b", "messages": MSGS, "tools": tools, "max_tokens": 60, "seed": 3, "parallel_tool_calls": False}
    r = client.post("/v1/chat/completions", json={**req, "tool_choice": "required"})
    assert r.status_code == 200, r.text
    body = r.json()
    ChatCompletion.model_validate(body)
    call = body["choices"][0]["message"]["tool_calls"][0]
    assert body["choices"][0]["finish_reason"] == "tool_calls" and call["function"]["name"] == "pick"
    assert 0 <= json.loads(call["function"]["arguments"])["n"] <= 9
    chunks = sse_events(client.post("/v1/chat/completions", json={**req, "tool_choice": "required",
                                                                  "stream": True}).text)
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    parts = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    assert parts[0]["function"]["name"] == "pick"
    assert "".join(p["function"]["arguments"] for p in parts) == call["function"]["arguments"]
    for bad, param in [({"tools": "pick"}, "tools"), ({"tool_choice": 3}, "tool_choice"),
                       ({"parallel_tool_calls": "no"}, "parallel_tool_calls")]:
        assert error_of(client.post("/v1/chat/completions", json={**req, **bad}), 400)["param"] == param
    assert "not among the tools" in error_of(client.post("/v1/chat/completions", json={
        **req, "tool_choice": {"type": "function", "function": {"name": "other"}}}), 400)["message"]
