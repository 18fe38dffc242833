"""akunu-serve --parallel: many clients at once through the continuous-batching
scheduler. Answers equal those of a one-at-a-time model, clients that leave
free their KV blocks, /health stays quick under full load, and a full queue
answers 429 in OpenAI's error shape."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

import akunu
from tests.fixtures import random_gguf

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("srvb")
    small = str(d / "llama.gguf")
    random_gguf.write_model(small, "llama", "F16", seed=31)
    # a long context, so that generations outlast the checks made while they run
    long = str(d / "long.gguf")
    random_gguf.write_model(long, "llama", "F16", seed=32, shape=random_gguf.Shape(ctx=8192))
    return {"small": small, "long": long}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *args):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "akunu.cli.serve", *args, "--port", str(self.port)],
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                pytest.fail("server exited: " + self.proc.stdout.read())
            try:
                if httpx.get(self.base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail("the server did not start within 60 s")
            time.sleep(0.05)  # polling the port until it listens

    def metrics(self):
        text = httpx.get(self.base + "/metrics", timeout=10).text
        out = {}
        for line in text.splitlines():
            if line.startswith("akunu_") and 'model="m"' in line:
                out[line.split("{")[0][len("akunu_"):]] = float(line.split()[-1])
        return out

    def wait_metrics(self, cond, seconds=30.0):
        """Polls /metrics until `cond(metrics)` holds; fails after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            m = self.metrics()
            if cond(m):
                return m
            if time.monotonic() > deadline:
                pytest.fail(f"/metrics never reached the expected state: {m}")
            time.sleep(0.02)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("the server did not shut down within 15 s of SIGTERM")


def settings(i):
    """Each client's own sampling: greedy, seeded sampling, seeded top-k/top-p."""
    if i % 3 == 0:
        return {"temperature": 0.0}
    if i % 3 == 1:
        return {"temperature": 0.9, "seed": 1000 + i}
    return {"temperature": 0.7, "top_k": 40, "top_p": 0.9, "seed": i}


def run_threads(threads, seconds):
    for t in threads:
        t.daemon = True
        t.start()
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"clients still running after {seconds} s"


def test_64_streaming_clients_match_the_one_at_a_time_answers(paths):
    from openai import OpenAI

    ref = akunu.load(paths["small"], n_ctx=512)  # parallel=1: the single-stream path
    # a shared beginning (prefix-cache hits) and a distinct end per client
    jobs = []
    for i in range(64):
        kind = "chat" if i % 2 else "completion"
        prompt = f"The shared opening of every request, then client {i} asks about topic {i * 7 % 13}:"
        jobs.append((i, kind, prompt, settings(i), i % 8 == 5))  # every 8th client leaves mid-stream
    want = {}
    for i, kind, prompt, st, leaves in jobs:
        if leaves:
            continue
        if kind == "chat":
            want[i] = ref.create_chat_completion([{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS,
                                                 **st)["choices"][0]["message"]["content"]
        else:
            want[i] = ref.create_completion(prompt, max_tokens=MAX_TOKENS, **st)["choices"][0]["text"]
    ref.close()

    # -b 32: passes of 32 tokens (the CPU's own are 64), so prompts split differently from the reference's
    srv = Server(f"m={paths['small']}", "-c", "512", "--parallel", "8", "--kv-budget", "256", "-b", "32")
    try:
        client = OpenAI(base_url=srv.base + "/v1", api_key="none", timeout=60, max_retries=0)
        got, errors = {}, []

        def work(i, kind, prompt, st, leaves):
            st = dict(st)
            if "top_k" in st:  # not in OpenAI's API: sent as an extra field
                st["extra_body"] = {"top_k": st.pop("top_k")}
            try:
                if kind == "chat":
                    s = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}],
                                                       max_tokens=MAX_TOKENS, stream=True, **st)
                    pieces = (ch.choices[0].delta.content or "" for ch in s if ch.choices)
                else:
                    s = client.completions.create(model="m", prompt=prompt, max_tokens=MAX_TOKENS, stream=True,
                                                  **st)
                    pieces = (ch.choices[0].text for ch in s if ch.choices)
                text = []
                for n, p in enumerate(pieces):
                    text.append(p)
                    if leaves and n >= 2:
                        s.close()  # the client leaves mid-stream
                        return
                got[i] = "".join(text)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(f"client {i}: {e!r}")

        run_threads([threading.Thread(target=work, args=job) for job in jobs], 120)
        assert not errors, errors[:3]
        assert got.keys() == want.keys()
        for i in want:
            assert got[i] == want[i], f"client {i} ({jobs[i][1]}, {jobs[i][3]}): {got[i]!r} != {want[i]!r}"
        # every request ended or was cancelled: nothing running, waiting or holding KV blocks
        m = srv.wait_metrics(lambda m: m["requests_running"] == 0 and m["queue_depth"] == 0
                             and m["kv_blocks_used"] == 0)
        assert m["parallel"] == 8 and m["kv_block_size_tokens"] > 0
        assert m["kv_blocks_free"] * m["kv_block_size_tokens"] >= 256 - m["kv_block_size_tokens"]
        assert m["preemptions_total"] > 0, "the small KV budget should have preempted some requests"
        assert 0 < m["prefix_cache_hit_ratio"] <= 1
    finally:
        srv.stop()


@pytest.mark.parametrize("parallel,max_queue", [(2, 2), (1, 1)])
def test_full_queue_gets_429_and_health_stays_quick(paths, parallel, max_queue):
    """Batched (parallel 2) and one-at-a-time (parallel 1) models alike."""
    srv = Server(f"m={paths['long']}", "-c", "8192", "--max-tokens", "8000", "--parallel", str(parallel),
                 "--max-queue", str(max_queue))
    n_hold = parallel + max_queue
    headers = {"content-type": "application/json"}
    ref = akunu.load(paths["long"], n_ctx=64)
    stops = {str(t): -100.0 for t in ref.stop_ids}
    ref.close()
    # generations far longer than the checks below: they keep the model saturated
    body = {"model": "m", "prompt": "go on", "max_tokens": 8000, "stream": True, "logit_bias": stops}
    release = threading.Event()
    statuses, errors = [], []

    def hold(i):
        try:
            with httpx.stream("POST", srv.base + "/v1/completions", json={**body, "seed": i}, timeout=60) as r:
                statuses.append(r.status_code)
                release.wait(timeout=60)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=hold, args=(i,)) for i in range(n_hold)]
    try:
        # the running requests first, then the waiting ones (a burst could find
        # the queue full before the scheduler admits its first requests)
        for i, t in enumerate(threads):
            t.daemon = True
            t.start()
            srv.wait_metrics(lambda m: min(i + 1, parallel) == m["requests_running"]
                             and max(0, i + 1 - parallel) == m["queue_depth"])
        # the model is saturated and its queue full: /health answers at once
        for _ in range(5):
            t0 = time.monotonic()
            r = httpx.get(srv.base + "/health", timeout=5)
            assert r.status_code == 200 and time.monotonic() - t0 < 1.0
        for stream in (True, False):
            r = httpx.post(srv.base + "/v1/completions", headers=headers, timeout=10,
                           content=json.dumps({**body, "stream": stream, "max_tokens": 4}))
            assert r.status_code == 429, r.text
            err = r.json()["error"]
            assert set(err) == {"message", "type", "param", "code"}
            assert err["type"] == "rate_limit_error" and "max_queue" in err["message"]
            assert int(r.headers["retry-after"]) >= 1
        r = httpx.post(srv.base + "/v1/chat/completions", timeout=10,
                       json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert r.status_code == 429
    finally:
        release.set()
        deadline = time.monotonic() + 60
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
    try:
        assert not any(t.is_alive() for t in threads)
        assert not errors and statuses == [200] * n_hold, (statuses, errors)
        # the clients left: their requests were cancelled and their blocks freed
        srv.wait_metrics(lambda m: m["requests_running"] == 0 and m["queue_depth"] == 0
                         and m.get("kv_blocks_used", 0) == 0)
        m = srv.metrics()
        assert ("kv_blocks_used" in m) == (parallel > 1)
        assert m["completion_tokens_total"] < n_hold * 8000, "generation stopped when the clients left"
        r = httpx.post(srv.base + "/v1/completions", timeout=30,
                       json={"model": "m", "prompt": "hi", "max_tokens": 4})
        assert r.status_code == 200
    finally:
        srv.stop()


def test_help_names_the_batching_options():
    out = subprocess.run([sys.executable, "-m", "akunu.cli.serve", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    for flag in ("--parallel", "--kv-budget", "--max-queue", "--batch-size"):
        assert flag in out.stdout


@pytest.mark.parametrize("flag,value,message", [("--parallel", "0", "--parallel must be >= 1"),
                                                ("--kv-budget", "-5", "--kv-budget must be >= 1"),
                                                ("--max-queue", "-1", "--max-queue must be >= 0"),
                                                ("--batch-size", "0", "--batch-size must be positive")])
def test_bad_batching_options_are_clear_errors(paths, flag, value, message):
    out = subprocess.run([sys.executable, "-m", "akunu.cli.serve", paths["small"], flag, value], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0
    assert message in out.stderr + out.stdout
    assert "Traceback" not in out.stderr
