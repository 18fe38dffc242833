"""Whole models through the Metal kernels against the CPU backend: random
models of every architecture and float format, the quantized GGUF test models,
Hugging Face / MLX directories, BERT embeddings, a random Whisper, one full
greedy generation (the CPU's tokens) and seeded sampled generation. The
kernels run in the MSL emulation on the CPU (tests/test_device_kernels.py
tests each one and builds the emulation), or on the GPU of a Mac with
AKUNU_METAL_DEVICE=metal (.github/workflows/macos.yml).
Tolerances (relative L2 of logits against the CPU): 2e-3 float, 3e-2
quantized (the CPU rounds activations to 8 bits as llama.cpp; Metal does
not); greedy tokens equal, or parting only at a near-tie of the CPU's logits."""

import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import compare_with_cpu, hf_dir, rel_l2
from tests.test_device_kernels import build_metal_emulation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUANTIZED = sorted(f for f in os.listdir(os.path.join(ROOT, "tests", "models")) if f.endswith(".gguf"))
METAL = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu")


@pytest.fixture(scope="module", autouse=True)
def emulation_library():
    if METAL == "metal-emu":
        build_metal_emulation()


# -- whole models ---------------------------------------------------------------------------------

def metal(path, **kw):
    return akunu.load(path, device=METAL, n_ctx=256, **kw)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma", "gemma3"])
@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_float_models_match_cpu(tmp_path, arch, dtype):
    path = str(tmp_path / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(path, arch, dtype, seed=13)
    compare_with_cpu(metal(path), path, 2e-3)


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_models_match_cpu(name):
    path = os.path.join(ROOT, "tests", "models", name)
    compare_with_cpu(metal(path), path, 3e-2)


def test_greedy_generation_equals_cpu_tokens(tmp_path):
    """One full greedy generation through the Metal kernels: the CPU's tokens."""
    path = str(tmp_path / "qwen3-f32.gguf")
    random_gguf.write_model(path, "qwen3", "F32", seed=21)
    prompt = "the cat sat on the mat"
    cpu = akunu.load(path, n_ctx=256).generate(prompt, max_tokens=40)
    m = metal(path)
    assert m.device == METAL
    got = m.generate(prompt, max_tokens=40)
    assert got.tokens == cpu.tokens


def test_sampled_generation_and_seeds(tmp_path):
    path = str(tmp_path / "llama-f16.gguf")
    random_gguf.write_model(path, "llama", "F16", seed=4)
    m = metal(path)
    kw = dict(max_tokens=24, temperature=0.9, top_k=50, top_p=0.9, min_p=0.02, repeat_penalty=1.1, seed=7)
    a = m.generate("once upon a time", **kw)
    m.reset()
    assert m.generate("once upon a time", **kw).tokens == a.tokens
    assert all(0 <= t < m.config["vocab_size"] for t in a.tokens)


@pytest.mark.parametrize("name", ["llama", "qwen3-mlx4g64"])
def test_hf_directories_match_cpu(name):
    path = hf_dir(name)
    compare_with_cpu(metal(path), path, 2e-3)


def test_bert_embeddings_match_cpu():
    path = hf_dir("bert")
    texts = ["hello world", "the quick brown fox jumps over the lazy dog", "cat " * 80]
    em, ec = metal(path).embed(texts), akunu.load(path).embed(texts)
    assert rel_l2(em, ec) < 1e-4


def test_whisper_random_matches_cpu(tmp_path):
    """A small random Whisper: conv front end (im2col + gemm + erf-GELU), learned
    positions, encoder, cross-attention over fixed keys, decoder steps."""
    from tests.fixtures import hf_models

    tok = os.path.join(ROOT, "tests", ".cache", "whisper-cuda", "tokenizer.json")
    if not os.path.exists(tok):
        pytest.skip(f"{tok} is missing: run python -m tools.prepare_offline DEST --whisper "
                    "where the models can be fetched")
    d = str(tmp_path / "whisper")
    hf_models.make_whisper(d, tok, seed=3, dim=128, layers=2, heads=4)
    cpu, mtl = akunu.load(d), akunu.load(d, device=METAL)
    mel = np.random.default_rng(0).standard_normal((80, 3000)).astype(np.float32)
    assert rel_l2(mtl.encode(mel), cpu.encode(mel)) < 1e-4
    prompt = [50258, 50259, 50359, 50363]  # start of transcript, en, transcribe, no timestamps
    lc, lm = cpu._m.decode(0, prompt, 0), mtl._m.decode(0, prompt, 0)
    assert rel_l2(lm, lc) < 5e-4
    step_c, step_m = cpu._m.decode(0, [int(lc[-1].argmax())], 4), mtl._m.decode(0, [int(lc[-1].argmax())], 4)
    assert rel_l2(step_m, step_c) < 5e-4
