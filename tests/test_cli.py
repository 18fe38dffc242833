"""The console tools: --help and --version, their output, errors for people
(one line, exit code 1, no traceback), and akunu-chat driven through a
pseudo-terminal and through a pipe."""

import json
import os
import subprocess
import sys
import time

import pexpect
import pytest

from tests.fixtures import random_gguf

TOOLS = ["chat", "complete", "generate", "inspect", "bench", "profile"]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def cli(tool, *args, stdin=None, timeout=300):
    return subprocess.run([sys.executable, "-m", f"akunu.cli.{tool}", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "llama.gguf")
    random_gguf.write_model(path, "llama", "F16", seed=4)
    return path


@pytest.mark.parametrize("tool", TOOLS)
def test_help_and_version(tool):
    r = cli(tool, "--help")
    assert r.returncode == 0 and "usage:" in r.stdout and "model" in r.stdout
    r = cli(tool, "--version")
    assert r.returncode == 0 and "0.1.0" in r.stdout


@pytest.mark.parametrize("tool", ["chat", "complete", "inspect", "bench", "profile"])
def test_errors_for_people(tool, tmp_path):
    bad = tmp_path / "notamodel.gguf"
    bad.write_bytes(b"this is not a gguf file at all" * 10)
    extra = ["-p", "hi"] if tool == "complete" else []
    for path, match in [("/nonexistent/model.gguf", "does not exist"), (str(bad), "bad magic"),
                        (str(tmp_path), "directory" if tool != "inspect" else "")]:
        r = cli(tool, path, *extra, stdin="hello")
        assert r.returncode == 1, (tool, path, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"akunu-{tool}: error:") and match in lines[0], r.stderr
    r = cli(tool, "/nonexistent/model.gguf", *extra, "--verbose", stdin="hello")
    assert r.returncode == 1 and "Traceback" in r.stderr


def test_context_too_long_is_one_line(small):
    r = cli("complete", small, "-p", "word " * 400, "-c", "64")
    assert r.returncode == 1 and "does not fit the context of 64 tokens" in r.stderr and "Traceback" not in r.stderr
    r = cli("complete", small, "-p", "x", "--temperature", "-1")
    assert r.returncode == 1 and "temperature must be >= 0" in r.stderr


def test_complete_streams_and_is_deterministic(small):
    a = cli("complete", small, "-p", "hello", "-n", "12", "--stats")
    b = cli("complete", small, "-p", "hello", "-n", "12", "--temp", "0.8", "--seed", "5", "--top-k", "20")
    c = cli("complete", small, "-n", "12", "--temp", "0.8", "--seed", "5", "--top-k", "20", stdin="hello")
    assert a.returncode == b.returncode == c.returncode == 0, a.stderr + b.stderr + c.stderr
    assert "tok/s" in a.stderr and a.stdout.strip()
    assert b.stdout == c.stdout


def test_batch_size_splits_the_prompt_not_the_answer(small):
    prompt = "the quick brown fox jumps over the lazy dog " * 8
    a = cli("complete", small, "-p", prompt, "-n", "10")
    b = cli("complete", small, "-p", prompt, "-n", "10", "-b", "5")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout
    r = cli("complete", small, "-p", "x", "-b", "0")
    assert r.returncode == 1 and "--batch-size must be positive" in r.stderr and "Traceback" not in r.stderr


def test_inspect_lists_tensors_and_totals(small, gemma_path):
    r = cli("inspect", small)
    assert r.returncode == 0 and "token_embd.weight" in r.stdout and "totals:" in r.stdout
    r = cli("inspect", gemma_path, "--json")
    d = json.loads(r.stdout)
    assert d["model"]["architecture"] == "gemma3" and d["tokenizer"]["vocab_size"] == 262144
    assert d["totals"]["tensors"] == len(d["tensors"]) and "Q4_K" in d["totals"]["by_dtype"]
    assert sum(t["bytes"] for t in d["tensors"]) == d["totals"]["bytes"]


def test_bench_markdown_and_json(small):
    r = cli("bench", small, "-p", "32", "-n", "8", "-r", "2")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("|")]
    assert "t/s" in lines[0] and "pp32" in lines[2] and "tg8" in lines[3] and "CPU" in lines[2]
    r = cli("bench", small, "-p", "16,32", "-n", "4", "-r", "2", "-o", "json")
    rows = json.loads(r.stdout)
    assert [(x["n_prompt"], x["n_gen"]) for x in rows] == [(16, 0), (32, 0), (0, 4)]
    assert all(x["avg_ts"] > 0 and len(x["samples_ts"]) == 2 and x["backends"] == "CPU" for x in rows)


FAKE_LLAMA_BENCH = """#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
get = lambda flag: a[a.index(flag) + 1]
with open(sys.argv[0] + ".calls", "a") as f:
    f.write(" ".join(a) + "\\n")
p, n = int(get("-p")), int(get("-n"))
d = int(get("-d")) if "-d" in a else 0
print(json.dumps([{"n_prompt": p, "n_gen": n, "n_depth": d, "avg_ts": 50.0, "stddev_ts": 1.0, "avg_ns": 1,
                   "samples_ts": [50.0], "samples_ns": [1], "build_commit": "fake"}]))
"""


def test_bench_compare_with_llama_bench(small, tmp_path):
    """--compare llama.cpp runs llama-bench on the same file with the same tests and threads, and
    prints both engines and akunu's ratio (a stand-in llama-bench that records its arguments)."""
    fake = tmp_path / "llama-bench"
    fake.write_text(FAKE_LLAMA_BENCH)
    fake.chmod(0o755)
    r = cli("bench", small, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "--compare", "llama.cpp",
            "--llama-bench", str(tmp_path), "-o", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["engine"], x["test"]) for x in rows] == [("akunu", "pp16"), ("akunu", "tg4"),
                                                        ("llama.cpp", "pp16"), ("llama.cpp", "tg4")]
    ours = {x["test"]: x["avg_ts"] for x in rows if x["engine"] == "akunu"}
    for x in rows[2:]:
        assert x["avg_ts"] == 50.0 and abs(x["akunu_over_peer"] - ours[x["test"]] / 50.0) < 1e-9
    calls = (tmp_path / "llama-bench.calls").read_text().splitlines()
    assert len(calls) == 2 and all(f"-m {small}" in c and "-t 2" in c and "-r 1" in c and "-ngl 0" in c
                                   for c in calls)
    r = cli("bench", small, "-p", "16", "-n", "4", "-r", "1", "--compare", "llama.cpp", "--llama-bench", str(fake))
    assert r.returncode == 0, r.stderr
    table = [l for l in r.stdout.splitlines() if l.startswith("|")]
    assert "akunu t/s" in table[0] and "llama.cpp t/s" in table[0] and "ratio" in table[0]
    assert len(table) == 4 and all(l.rstrip(" |").endswith("x") for l in table[2:])


def test_bench_depth(small, tmp_path):
    """-d runs each test after that many tokens of context, named as llama-bench names them, and passes
    -d to llama-bench; a depth past --ctx is a clear error."""
    fake = tmp_path / "llama-bench"
    fake.write_text(FAKE_LLAMA_BENCH)
    fake.chmod(0o755)
    r = cli("bench", small, "-p", "8", "-n", "4", "-d", "0,40", "-r", "1", "--compare", "llama.cpp",
            "--llama-bench", str(fake), "-o", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    names = ["pp8", "tg4", "pp8 @ d40", "tg4 @ d40"]
    assert [x["test"] for x in rows] == names * 2 and [x["n_depth"] for x in rows] == [0, 0, 40, 40] * 2
    assert all(x["avg_ts"] > 0 for x in rows)
    calls = (tmp_path / "llama-bench.calls").read_text().splitlines()
    assert sorted(c.split("-d ")[1].split()[0] for c in calls) == ["0", "0", "40", "40"]
    r = cli("bench", small, "-p", "8", "-n", "4", "-d", "100", "--ctx", "64", "-r", "1")
    assert r.returncode == 1 and "context" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_bench_depth_past_a_sliding_window(tmp_path):
    """A depth past what a sliding-window ring keeps (Gemma 3's local layers): each run starts again
    from the same context, fed anew where the ring cannot go back to it."""
    path = str(tmp_path / "gemma3.gguf")
    random_gguf.write_model(path, "gemma3", "F16", seed=6)  # a window of 16 positions
    r = cli("bench", path, "-p", "400", "-n", "4", "-d", "1200", "--ctx", "1700", "-r", "2", "-o", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["test"] for x in rows] == ["pp400 @ d1200", "tg4 @ d1200"] and all(x["avg_ts"] > 0 for x in rows)


def test_bench_compare_errors(small, tmp_path):
    for args, words in ((["--compare", "faster-whisper"], "llama.cpp"),
                        (["--compare", "llama.cpp", "--llama-bench", str(tmp_path / "none")], "no llama-bench")):
        r = cli("bench", small, "-p", "8", "-n", "2", "-r", "1", *args)
        assert r.returncode == 1 and r.stderr.startswith("akunu-bench: error:") and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_profile_names_the_operations(small):
    r = cli("profile", small, "-r", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    ops = {o["op"]: o for o in d["ops"]}
    assert {"q_proj", "attention", "lm_head", "argmax"} <= set(ops) and ops["q_proj"]["count"] == 2
    assert abs(sum(o["share"] for o in d["ops"]) - 1) < 1e-6


def test_profile_of_a_prefill_pass(small):
    r = cli("profile", small, "--prompt", "24", "--position", "8", "-r", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    ops = {o["op"]: o for o in d["ops"]}
    assert d["prompt"] == 24 and {"q_proj", "attention", "lm_head"} <= set(ops) and ops["q_proj"]["count"] == 2
    assert abs(sum(o["share"] for o in d["ops"]) - 1) < 1e-6
    # more than one pass's tokens (256 on the CPU) is a clear error
    r = cli("profile", small, "--prompt", "300", "-r", "1")
    assert r.returncode == 1 and "one pass" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_chat_from_a_pipe(small):
    r = cli("chat", small, "-n", "8", "--temp", "0", stdin="What is up?\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() and "tok/s" in r.stderr
    r = cli("chat", small, stdin="")
    assert r.returncode == 1 and "nothing on stdin" in r.stderr


def test_chat_in_a_terminal(small):
    child = pexpect.spawn(sys.executable, ["-m", "akunu.cli.chat", small, "-n", "20", "--temp", "0", "-c", "2048"],
                          env=ENV, encoding="utf-8", timeout=120)
    try:
        child.expect("commands: /reset")
        child.expect("> ")
        child.sendline("first question")
        child.expect(r"\[(\d+) tokens, [\d.]+ tok/s; prompt (\d+) tokens, (\d+) cached\]")
        child.expect("> ")
        child.sendline("second question")
        child.expect(r"\[(\d+) tokens, [\d.]+ tok/s; prompt (\d+) tokens, (\d+) cached\]")
        assert int(child.match.group(3)) > 0, "the second turn reuses the first turn's KV cache"
        child.expect("> ")
        child.sendline("/reset")
        child.expect(r"\[conversation reset\]")
        child.expect("> ")
        child.sendline("/system You are a pirate.")
        child.expect("system prompt set")
        child.expect("> ")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_chat_ctrl_c_stops_the_answer_not_the_chat(gemma_path):
    child = pexpect.spawn(sys.executable, ["-m", "akunu.cli.chat", gemma_path, "-n", "3000", "-c", "4096",
                                           "--ignore-eos"], env=ENV, encoding="utf-8", timeout=120)
    try:
        child.expect("> ")
        child.sendline("Count from 1 to 1000.")
        # Ctrl-C once the answer streams (3000 tokens take far longer than this):
        # the echoed line, then the answer's first characters. A fixed sleep
        # sent it before the answer began on a loaded 2-core machine.
        child.expect(r"Count from 1 to 1000\.\r?\n")
        child.expect(r"\S")
        time.sleep(0.5)
        child.sendcontrol("c")
        child.expect(r"\[stopped\]")
        child.expect(r"\[(\d+) tokens")
        assert 0 < int(child.match.group(1)) < 3000
        child.expect("> ")
        child.sendline("/reset")
        child.expect(r"\[conversation reset\]")
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_llama_bench_on_a_gpu_takes_its_better_setting(tmp_path):
    """On a GPU llama-bench runs with every layer offloaded and flash attention, once as it comes and
    once with GGML_CUDA_GRAPH_OPT=1; each test keeps the faster of the two."""
    from akunu.bench.text import llama_bench_rows

    fake = tmp_path / "llama-bench"
    fake.write_text(FAKE_LLAMA_BENCH.replace('"avg_ts": 50.0', '"avg_ts": 50.0 + (40 if p else -40) * '
                                             '(__import__("os").environ.get("GGML_CUDA_GRAPH_OPT") == "1")'))
    fake.chmod(0o755)
    rows = llama_bench_rows(str(fake), "model.gguf", [("pp", 512, 0), ("tg", 128, 0)], 3, "cuda", 16)
    assert [(r["test"], r["avg_ts"]) for r in rows] == [("pp512", 90.0), ("tg128", 50.0)]
    assert "GGML_CUDA_GRAPH_OPT=1" in rows[0]["peer_settings"] and "GRAPH_OPT" not in rows[1]["peer_settings"]
    calls = (tmp_path / "llama-bench.calls").read_text().splitlines()
    assert len(calls) == 4 and all("-ngl 99 -fa 1" in c and "-t 16" in c and "-r 3" in c for c in calls)


def test_llama_bench_on_metal_offloads_every_layer(tmp_path):
    """Beside akunu's Metal backend llama-bench runs on the GPU too (-ngl 99 -fa 1; 2048-token
    micro-batches tried for long prompts), without CUDA's settings."""
    from akunu.bench.text import llama_bench_rows

    fake = tmp_path / "llama-bench"
    fake.write_text(FAKE_LLAMA_BENCH)
    fake.chmod(0o755)
    rows = llama_bench_rows(str(fake), "model.gguf", [("pp", 1024, 0), ("tg", 128, 0)], 3, "metal", 8)
    assert [r["test"] for r in rows] == ["pp1024", "tg128"]
    assert all("GRAPH_OPT" not in r["peer_settings"] and "-ngl 99 -fa 1" in r["peer_settings"] for r in rows)
    calls = (tmp_path / "llama-bench.calls").read_text().splitlines()
    assert len(calls) == 3 and all("-ngl 99 -fa 1" in c and "-t 8" in c for c in calls)
    assert sum("-ub 2048" in c for c in calls) == 1


def test_llama_cpp_build_switches_per_backend():
    from bench.text_models import llama_cpp_cmake_flags

    metal = llama_cpp_cmake_flags("metal", ("llama-bench", "llama-quantize"))
    assert "-DGGML_METAL=ON" in metal and not any("AVX" in f or "CUDA" in f for f in metal)
    cuda = llama_cpp_cmake_flags("cuda", ("llama-bench",), "90")
    assert "-DGGML_CUDA=ON" in cuda and "-DCMAKE_CUDA_ARCHITECTURES=90" in cuda and "-DGGML_METAL=ON" not in cuda
    cpu = llama_cpp_cmake_flags("cpu", ("llama-bench", "llama-server"))
    assert "-DGGML_NATIVE=OFF" in cpu and "-DLLAMA_BUILD_SERVER=ON" in cpu and "-DGGML_METAL=ON" not in cpu


def test_metal_text_bench_says_what_it_needs():
    from bench import text_metal

    with pytest.raises(SystemExit, match="unknown shapes"):
        text_metal.main(["--shapes", "qwen3-0.6b,no-such-shape"])
    if sys.platform != "darwin":
        with pytest.raises(SystemExit, match="Apple Silicon Mac"):
            text_metal.main(["--shapes", "qwen3-0.6b"])
