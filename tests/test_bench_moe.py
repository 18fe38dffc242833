"""The mixture-of-experts benchmark's models and arithmetic (bench/moe.py), on
its tiny qwen3moe shape and the CPU: the Q8_0-blocks writer's files read in
gguf-py with weights of the intended spread and run in akunu, the layout
check, the active bytes per token against a count by hand, the writer's
older dtypes byte for byte as before, and the whole driver once."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import akunu
from bench import moe
from tests.fixtures import random_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = moe.SHAPES["tiny"]


def tiny_file(folder, dtype: str, **kw) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / f"tiny-{dtype}.gguf")
    random_gguf.write_model(path, "qwen3moe", dtype, seed=1, shape=random_gguf.Shape(**TINY), **kw)
    return path


def runs_on_cpu(path: str) -> None:
    m = akunu.load(path, device="cpu")
    assert len(m.generate([1, 5, 9], max_tokens=4).tokens) == 4
    assert np.isfinite(m._core().logits([1, 5, 9])).all()


def test_q8_0_blocks_read_with_the_intended_spread_and_run(tmp_path):
    import gguf

    path = tiny_file(tmp_path, "Q8_0-blocks")
    assert random_gguf.sha256_of(path) == random_gguf.sha256_of(tiny_file(tmp_path / "again", "Q8_0-blocks"))
    assert moe.layout_problems(path, TINY, "Q8_0") == []
    dim = TINY["dim"]
    for t in gguf.GGUFReader(path).tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.Q8_0:
            continue
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        assert np.isfinite(w).all(), t.name
        # the writer's spreads: unit embedding rows, output 2 / sqrt(dim), other matrices 1 / sqrt(columns)
        want = {"token_embd.weight": 1.0, "output.weight": 2.0 * dim ** -0.5}.get(t.name, w.shape[-1] ** -0.5)
        assert abs(w.std() / want - 1) < 0.05, t.name
        assert abs(w.mean()) < 0.05 * want, t.name
    runs_on_cpu(path)


def test_q8_0_blocks_same_bytes_on_any_number_of_threads(monkeypatch):
    many = random_gguf.q8_0_blocks(7, 70000, 256, 0.1)  # a few slabs of 8 MB
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    np.testing.assert_array_equal(random_gguf.q8_0_blocks(7, 70000, 256, 0.1), many)


def test_q4_k_m_blocks_placed_as_llama_cpp_places_them(tmp_path):
    path = tiny_file(tmp_path, "Q4_K_M-blocks", llama_cpp_experts=True)
    assert moe.layout_problems(path, TINY, "Q4_K_M") == []
    runs_on_cpu(path)
    # the default path (the tests' files) keeps every expert in Q4_K, unlike llama.cpp's down matrices
    plain = tiny_file(tmp_path / "plain", "Q4_K_M-blocks")
    assert moe.layout_problems(plain, TINY, "Q4_K_M") == ["blk.1.ffn_down_exps.weight: Q4_K, not Q6_K"]


def test_expected_sizes_match_the_files(tmp_path):
    import gguf

    for fmt, dtype in moe.FORMATS.values():
        tensors = gguf.GGUFReader(tiny_file(tmp_path, dtype, llama_cpp_experts=True)).tensors
        assert moe.expected_file_bytes(TINY, fmt) == sum(int(t.n_bytes) for t in tensors)


def test_active_bytes_per_token_by_hand(tmp_path):
    """The tiny Q8_0 file: 34 bytes per 32 weights, F32 norms and router; dim 256, q 256 and kv 128 wide,
    16 experts of 256 rows (4 used), vocabulary 1024, 2 layers."""
    def q8(rows, cols):
        return rows * cols // 32 * 34

    f32 = 4
    embedding_row = q8(1, 256)
    head = 256 * f32 + q8(1024, 256)  # output norm, output matrix
    layer = (256 * f32 + q8(256, 256) + 2 * q8(128, 256) + 2 * 64 * f32 + q8(256, 256) + 256 * f32
             + 16 * 256 * f32  # router
             + 3 * q8(4 * 256, 256))  # gate, up, down of the 4 experts used
    assert moe.active_bytes_per_token(tiny_file(tmp_path, "Q8_0-blocks")) == embedding_row + head + 2 * layer


def head_random_gguf():
    """tests/fixtures/random_gguf.py as committed, loaded as a module of its own."""
    out = subprocess.run(["git", "-C", ROOT, "show", "HEAD:tests/fixtures/random_gguf.py"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        pytest.skip("no git history here")
    return out.stdout


@pytest.mark.parametrize("arch,dtype,fast", [("llama", "F32", False), ("qwen3moe", "Q4_K_M-blocks", False),
                                             ("llama", "Q4_K_M-blocks", False), ("qwen3moe", "Q8_0", False),
                                             ("qwen3moe", "F16", True), ("gemma", "Q4_0", False)])
def test_older_dtypes_write_the_same_bytes(tmp_path, arch, dtype, fast):
    src = tmp_path / "committed_random_gguf.py"
    src.write_text(head_random_gguf())
    spec = importlib.util.spec_from_file_location("committed_random_gguf", src)
    committed = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = committed  # (dataclasses look their module up there)
    try:
        spec.loader.exec_module(committed)
        before = committed.write_model(str(tmp_path / "a.gguf"), arch, dtype, seed=3, fast_normals=fast)
    finally:
        del sys.modules[spec.name]
    assert random_gguf.write_model(str(tmp_path / "b.gguf"), arch, dtype, seed=3, fast_normals=fast) == before


def test_driver_on_the_cpu(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench.moe", "--shape", "tiny", "--device", "cpu", "--skip-llama",
                          "-r", "1", "-p", "16", "-n", "4", "--models-dir", str(tmp_path / "models"),
                          "--json", str(tmp_path / "moe.json"), "--delete-after"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    table = [line for line in out.stdout.splitlines() if line.startswith("| tiny ")]
    assert [line.split(" | ")[:2] for line in table] == [["| tiny Q4_K_M", "pp16"], ["| tiny Q4_K_M", "tg4"],
                                                          ["| tiny Q8_0", "pp16"], ["| tiny Q8_0", "tg4"]]
    rows = json.loads((tmp_path / "moe.json").read_text())
    assert {(r["format"], r["test"]) for r in rows} == {(f, t) for f in ("Q4_K_M", "Q8_0") for t in ("pp16", "tg4")}
    assert all(r["engine"] == "akunu" and r["avg_ts"] > 0 and r["active_bytes_per_token"] > 0 for r in rows)
    assert not [f for f in os.listdir(tmp_path / "models") if f.endswith(".gguf")]  # --delete-after
