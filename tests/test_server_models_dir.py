"""akunu-serve --models-dir / --idle-unload: models listed before they are
loaded, loaded by the first request naming them (once, however many wait),
names in any case, unloaded when idle (memory given back) and loaded again,
and POST /v1/models/load and /unload behind the API key."""

import gc
import os
import threading
import time

import pytest
from fastapi.testclient import TestClient

import akunu
from akunu.server import ServerLimits, create_app
from akunu.server.model_registry import scan
from tests.fixtures import random_gguf

KEY = "sk-models"
AUTH = {"authorization": f"Bearer {KEY}"}
MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("modelsdir")
    random_gguf.write_model(str(d / "Llama-Small.gguf"), "llama", "F16", seed=3)
    random_gguf.write_model(str(d / "qwen.gguf"), "qwen3", "F16", seed=4)
    # big enough that its weights show in the process's resident memory once used
    random_gguf.write_model(str(d / "big.gguf"), "llama", "F16", seed=5, shape=random_gguf.Shape(
        dim=1024, n_layers=4, n_heads=8, n_kv_heads=4, head_dim=128, ffn_dim=4096, vocab=512))
    (d / "broken.gguf").write_bytes(b"GGUF not really")
    (d / "notes.txt").write_text("not a model")
    (d / "empty-dir").mkdir()
    return str(d)


class CountingLoader:
    """akunu.load, slowed down so that requests pile up behind a load, counting its calls."""

    def __init__(self, delay=0.0):
        self.delay, self.calls, self.loaded = delay, [], []
        self.lock = threading.Lock()

    def __call__(self, path):
        with self.lock:
            self.calls.append(os.path.basename(path))
        time.sleep(self.delay)  # a load that takes a while, as a real model's does
        m = akunu.load(path, n_ctx=256)
        self.loaded.append(m)
        return m


def wait_closed(model, seconds=10.0):
    """Polls until `model` is closed (its close runs on a thread of its own)."""
    deadline = time.monotonic() + seconds
    while model._m is not None:
        assert time.monotonic() < deadline, "the model was never closed"
        time.sleep(0.02)


def make_client(models_dir, initial, loader, paths=None, **kw):
    app = create_app(initial, api_key=KEY, limits=ServerLimits(max_tokens=64), models_dir=models_dir, loader=loader,
                     model_paths=paths, **kw)
    return TestClient(app)


@pytest.fixture(scope="module")
def resident(tmp_path_factory):
    """A model given at start, from outside the models directory."""
    path = str(tmp_path_factory.mktemp("pinned") / "pinned.gguf")
    random_gguf.write_model(path, "qwen3", "F16", seed=6)
    return akunu.load(path, n_ctx=256)


def test_scan_names_models_without_extension(models_dir):
    assert sorted(scan(models_dir)) == ["Llama-Small", "big", "broken", "qwen"]


def test_listed_then_loaded_once_by_concurrent_requests_in_any_case(models_dir, resident):
    loader = CountingLoader(delay=0.5)
    with make_client(models_dir, {"pinned": resident}, loader) as c:
        data = {m["id"]: m for m in c.get("/v1/models", headers=AUTH).json()["data"]}
        assert data["pinned"]["loaded"] is True and data["pinned"]["meta"]["n_ctx"] == 256
        assert data["qwen"]["loaded"] is False
        assert data["Llama-Small"]["loaded"] is False and data["big"]["loaded"] is False
        results = []

        def ask(name):
            r = c.post("/v1/chat/completions", headers=AUTH, json={"model": name, "messages": MSGS, "max_tokens": 3})
            results.append((r.status_code, r.json()))

        threads = [threading.Thread(target=ask, args=(n,)) for n in ("llama-small", "LLAMA-SMALL", "Llama-Small")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert loader.calls == ["Llama-Small.gguf"]  # one load served all three
        assert [s for s, _ in results] == [200, 200, 200], results
        assert {b["model"] for _, b in results} == {"Llama-Small"}
        assert {m["id"]: m["loaded"] for m in c.get("/v1/models", headers=AUTH).json()["data"]}["Llama-Small"]
        # unknown names still 404; a file that is no model fails its load with a message, and nothing breaks
        r = c.post("/v1/chat/completions", headers=AUTH, json={"model": "nope", "messages": MSGS})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        r = c.post("/v1/chat/completions", headers=AUTH, json={"model": "broken", "messages": MSGS})
        assert r.status_code == 500 and r.json()["error"]["code"] == "model_load_failed"
        assert "broken" in r.json()["error"]["message"]
        r = c.post("/v1/chat/completions", headers=AUTH, json={"model": "PINNED", "messages": MSGS, "max_tokens": 2})
        assert r.status_code == 200 and r.json()["model"] == "pinned"


def test_load_and_unload_endpoints_need_the_key(models_dir, resident):
    loader = CountingLoader()
    with make_client(models_dir, {"pinned": resident}, loader, paths={}) as c:
        assert c.post("/v1/models/load", json={"model": "Llama-Small"}).status_code == 401
        assert c.post("/v1/models/unload", json={"model": "pinned"}).status_code == 401
        r = c.post("/v1/models/load", headers=AUTH, json={"model": "llama-small"})
        assert r.status_code == 200 and r.json()["id"] == "Llama-Small" and r.json()["loaded"] is True
        model = loader.loaded[-1]
        r = c.post("/v1/models/unload", headers=AUTH, json={"model": "LLAMA-small"})
        assert r.status_code == 200 and r.json()["unloaded"] is True
        wait_closed(model)  # closed: its memory is freed
        assert c.post("/v1/models/unload", headers=AUTH, json={"model": "Llama-Small"}).json()["unloaded"] is False
        # a model given at start with no file to load it again from stays
        r = c.post("/v1/models/unload", headers=AUTH, json={"model": "pinned"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "model_pinned"
        for body, status in [({"model": "nope"}, 404), ({}, 400), ({"model": 3}, 400)]:
            assert c.post("/v1/models/load", headers=AUTH, json=body).status_code == status
        assert c.post("/v1/models/load", headers=AUTH, content=b"[[[").status_code == 400


def rss():
    """The process's resident memory, or None without psutil (then the model's
    being closed is what the test checks)."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil.Process().memory_info().rss


def test_idle_models_are_unloaded_and_memory_returns(models_dir, resident):
    loader = CountingLoader()
    with make_client(models_dir, {"pinned": resident}, loader, idle_unload=0.5) as c:
        assert not c.app.state.model_registry._reaper.done()  # the idle check runs from startup
        gc.collect()
        before = rss()
        r = c.post("/v1/completions", headers=AUTH, json={"model": "big", "prompt": "hello", "max_tokens": 2})
        assert r.status_code == 200
        used = rss()
        size = os.path.getsize(os.path.join(models_dir, "big.gguf"))
        if used is not None:
            assert used - before > size // 2  # the weights are resident while it serves
        deadline = time.monotonic() + 10
        while any(m["id"] == "big" and m["loaded"] for m in c.get("/v1/models", headers=AUTH).json()["data"]):
            assert time.monotonic() < deadline, "the idle model was never unloaded"
            time.sleep(0.1)  # waiting for the idle check
        wait_closed(loader.loaded[0])
        gc.collect()
        if used is not None:
            assert used - rss() > size // 2
        # the next request loads it again
        r = c.post("/v1/completions", headers=AUTH, json={"model": "big", "prompt": "hello", "max_tokens": 2})
        assert r.status_code == 200 and loader.calls == ["big.gguf", "big.gguf"]
        # a model in use is not unloaded under a stream that outlasts the idle time
        body = {"model": "Llama-Small", "prompt": "hi", "max_tokens": 8, "stream": True}
        with c.stream("POST", "/v1/completions", headers=AUTH, json=body) as r:
            lines = []
            for line in r.iter_lines():
                lines.append(line)
                if len(lines) == 1:
                    time.sleep(1.5)  # three idle periods with the stream open
                    listed = {m["id"]: m["loaded"] for m in c.get("/v1/models", headers=AUTH).json()["data"]}
                    assert listed["Llama-Small"] is True
        assert r.status_code == 200 and "data: [DONE]" in lines


@pytest.mark.parametrize("args,message", [
    ([], "name at least one MODEL, or --models-dir DIR"),
    (["--models-dir", "/nonexistent/models"], "is not a directory"),
    (["--models-dir", ".", "--idle-unload", "0"], "--idle-unload must be > 0"),
    (["--models-dir", ".", "--rate-limit-rpm", "0"], "--rate-limit-rpm must be >= 1"),
    (["--models-dir", ".", "--max-json-depth", "0"], "--max-json-depth must be >= 1"),
])
def test_serve_flags_are_clear_errors(args, message):
    """akunu-serve's model-management and limit flags: bad values end with a message, not a traceback."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "akunu.cli.serve", *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0 and message in out.stderr + out.stdout, out.stderr
    assert "Traceback" not in out.stderr


def test_a_hugging_face_repo_id_names_a_model(tmp_path, monkeypatch, models_dir, resident):
    """A request (or /v1/models/load) naming a repo id loads it through the Hugging Face cache, as
    akunu.load does; an id that is neither cached nor reachable is a clear error, not a 500."""
    from tests.test_hub import add_to_cache

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("AKUNU_CACHE", str(tmp_path / "akunu"))
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "llama.cpp"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    add_to_cache(tmp_path / "hub", "tiny/qwen-GGUF", {"qwen-Q8_0.gguf": os.path.join(models_dir, "qwen.gguf")})
    loader = CountingLoader()
    with make_client(models_dir, {"pinned": resident}, loader) as c:
        body = {"model": "tiny/qwen-GGUF", "messages": MSGS, "max_tokens": 4, "temperature": 0}
        r = c.post("/v1/chat/completions", json=body, headers=AUTH)
        assert r.status_code == 200, r.text
        direct = c.post("/v1/chat/completions", json={**body, "model": "qwen"}, headers=AUTH)
        assert r.json()["choices"][0]["message"] == direct.json()["choices"][0]["message"]
        listed = {m["id"]: m for m in c.get("/v1/models", headers=AUTH).json()["data"]}
        assert listed["tiny/qwen-GGUF"]["loaded"] is True
        r = c.post("/v1/chat/completions", json={**body, "model": "tiny/absent-GGUF"}, headers=AUTH)
        assert 400 <= r.status_code < 600 and r.status_code != 200
        assert "tiny/absent-GGUF" in r.json()["error"]["message"]
