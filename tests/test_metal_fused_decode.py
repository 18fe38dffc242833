"""Whole models with Metal's fused decode tables (kernels/fused.metal) through
the MSL emulation (or a Mac's GPU with AKUNU_METAL_DEVICE=metal): greedy
tokens equal the CPU's (random-weight models of every architecture, float
formats; the quantized test models and the real Gemma 3 270M up to a
near-tie of the CPU's own logits, since the CPU rounds activations to 8 bits
and Metal does not), equal to Metal's own plain tables, and the dispatch
count of a decode step per architecture and format, fused and plain."""

import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import compare_with_cpu
from tests.test_device_kernels import build_metal_emulation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METAL = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu")
# A decode step's commands outside the layers: embedding, output norm, logits head, argmax.
HEAD_COMMANDS = 4
# Gemma 2 maps its logits through the soft cap: one command more a token.
HEAD_EXTRA = {"gemma2": 1}
# Dispatches a layer with the fused tables (the book: 4 to 6 for a plain
# pre-norm layer). Qwen2 keeps its Q / K / V biases as separate GEMVs behind
# one norm; Gemma 2's and Gemma 3's post-norms each add a norm + residual launch.
# OLMo 2 (no pre-norms) keeps the plain layer: the table builder's rule.
FUSED_PER_LAYER = {"llama": 6, "qwen3": 6, "gemma": 6, "qwen2": 9, "gemma3": 8, "granite": 6, "olmo2": 18,
                   "smollm3": 6, "gemma2": 8}
# SmolLM3's plain layers differ (those without RoPE have no rope commands).
PLAIN_PER_LAYER = {"llama": 16, "qwen3": 18, "gemma": 16, "qwen2": 16, "gemma3": 20, "granite": 16, "olmo2": 18,
                   "gemma2": 18}
ARCHS = random_gguf.ARCHS + random_gguf.DENSE_ARCHS


@pytest.fixture(scope="module", autouse=True)
def emulation_library():
    if METAL == "metal-emu":
        build_metal_emulation()


def load(path, fused=True, **kw):
    """A Metal model whose decode tables are fused or plain (AKUNU_METAL_FUSED_DECODE, read when the device is made)."""
    os.environ["AKUNU_METAL_FUSED_DECODE"] = "1" if fused else "0"
    try:
        return akunu.load(path, device=METAL, n_ctx=256, **kw)
    finally:
        del os.environ["AKUNU_METAL_FUSED_DECODE"]


def decode_labels(m):
    """The labels of one decode step's commands (the table the chain replays)."""
    return [label for label, _ in m._m.profile_decode(1)]


def prompt_ids(m, seed):
    return np.random.default_rng(seed).integers(0, m.config["vocab_size"], 9).tolist()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_random_models_greedy_equals_cpu(tmp_path, arch, dtype):
    path = str(tmp_path / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(path, arch, dtype, seed=31)
    m = load(path)
    assert ("gate_up_act" in decode_labels(m)) == (arch != "olmo2"), "fused tables where the builder fuses"
    ids = prompt_ids(m, 8)
    want = akunu.load(path, n_ctx=256).generate(ids, max_tokens=24).tokens
    assert m.generate(ids, max_tokens=24).tokens == want
    assert load(path, fused=False).generate(ids, max_tokens=24).tokens == want


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_quantized_random_models_match_cpu(tmp_path, arch):
    """Q4_K_M's mixed blocks (Q4_K beside Q6_K) and Q8_0 through the fused GEMV."""
    for dtype in ("Q4_K_M-blocks", "Q8_0"):
        path = str(tmp_path / f"{arch}-{dtype}.gguf")
        random_gguf.write_model(path, arch, dtype, seed=5)
        compare_with_cpu(load(path), path, 3e-2)


@pytest.mark.parametrize("name", ["llama-q4_k_m.gguf", "qwen3-q8_0.gguf", "gemma3-q4_k_m.gguf", "llama-iq4_xs.gguf"])
def test_quantized_test_models_match_cpu(name):
    path = os.path.join(ROOT, "tests", "models", name)
    compare_with_cpu(load(path), path, 3e-2)


def test_sampled_generation_equals_plain_tables(tmp_path):
    """Seeded sampling through the fused tables gives the plain tables' tokens."""
    path = str(tmp_path / "qwen3-f32.gguf")
    random_gguf.write_model(path, "qwen3", "F32", seed=12)
    kw = dict(max_tokens=20, temperature=0.9, top_k=40, top_p=0.9, seed=11)
    fused, plain = load(path), load(path, fused=False)
    ids = prompt_ids(fused, 3)
    assert fused.generate(ids, **kw).tokens == plain.generate(ids, **kw).tokens


def test_real_gemma3_270m_greedy_matches_cpu(gemma_path):
    """The real Gemma 3 270M (Q4_K_M): fused Metal decode against the CPU,
    equal or parting only at a near-tie of the CPU's logits."""
    m = load(gemma_path)
    assert "post_attn_norm_residual" in decode_labels(m)
    cpu = akunu.load(gemma_path, n_ctx=256)
    prompt = "The capital of France is"
    want = cpu.generate(prompt, max_tokens=8).tokens
    got = m.generate(prompt, max_tokens=8).tokens
    if got != want:
        k = next(i for i in range(min(len(got), len(want))) if got[i] != want[i])
        row = cpu.logits(cpu.tokenize(prompt) + want[:k])[-1]
        gap = float(row[want[k]] - row[got[k]])
        assert gap < 0.25, f"step {k}: {got[k]} vs the CPU's {want[k]}, logit gap {gap:.3f}"


def dispatch_counts(tmp_path, arch, dtype):
    path = str(tmp_path / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(path, arch, dtype, seed=2)
    fused, plain = load(path), load(path, fused=False)
    n_layers = fused.config["n_layers"]
    return n_layers, len(decode_labels(fused)), len(decode_labels(plain))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["F16", "Q8_0", "Q4_K_M-blocks"])
def test_dispatches_per_layer(tmp_path, arch, dtype):
    """Commands a decode step replays, per layer: the fused tables' count for
    every format (the fused GEMV reads them all), against the plain tables'."""
    n_layers, fused, plain = dispatch_counts(tmp_path, arch, dtype)
    head = HEAD_COMMANDS + HEAD_EXTRA.get(arch, 0)
    print(f"{arch} {dtype}: {n_layers} layers, {fused} dispatches a token fused, {plain} plain "
          f"({(fused - head) / n_layers:g} / {(plain - head) / n_layers:g} a layer)")
    assert fused == head + n_layers * FUSED_PER_LAYER[arch]
    if arch in PLAIN_PER_LAYER:
        assert plain == head + n_layers * PLAIN_PER_LAYER[arch]
    assert plain >= fused


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["F16", "Q4_K_M-blocks"])
def test_each_weight_read_once_a_token(tmp_path, arch, dtype):
    """A decode step, fused or plain, reads every weight of the model once (the embedding table one row):
    counted from the tables' bindings. The only bytes read twice are Llama 3's RoPE factor table (a
    vector every layer's RoPE reads)."""
    path = str(tmp_path / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(path, arch, dtype, seed=2)
    for fused in (True, False):
        r = load(path, fused=fused)._m.decode_weight_reads()
        assert r["unread"] == 0, (fused, r)
        assert r["once_bytes"] <= r["read_bytes"] <= r["once_bytes"] * 1.001, (fused, r)
        assert r["once_bytes"] <= r["weight_bytes"], (fused, r)


def test_mlx_weights_keep_the_plain_tables():
    """MLX-packed matrices: the table builder keeps the plain ops (its rule), on Metal too."""
    from tests.fixtures.backend_compare import hf_dir

    path = hf_dir("qwen3-mlx4g64")
    labels = decode_labels(load(path))
    assert "gemv_multi" not in labels and "qkv_proj" not in labels and "q_proj" in labels
