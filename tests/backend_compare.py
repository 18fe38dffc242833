"""Comparing a backend with the CPU backend (the reference meaning of every op)
on whole models: logits, then greedy tokens. Shared by the CUDA and Metal tests."""

import os

import numpy as np
import pytest

import akunu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def compare_with_cpu(other, path, tol, n_tokens=24):
    """Relative L2 of `other`'s logits against the CPU's on 80 random tokens
    (more than one 64-token prefill chunk), then greedy generation: equal, or
    parting only where the CPU's own logits show a near-tie."""
    cpu = akunu.load(path, n_ctx=256)
    rng = np.random.default_rng(abs(hash(path)) % 2**32)
    ids = rng.integers(0, cpu.config["vocab_size"], 80).tolist()
    lc, lo = cpu.logits(ids), other.logits(ids)
    err = rel_l2(lo, lc)
    assert err < tol, f"{os.path.basename(path)}: relative L2 {err:.2e} >= {tol}"
    prompt = ids[:12]
    tc = cpu.generate(prompt, max_tokens=n_tokens).tokens
    to = other.generate(prompt, max_tokens=n_tokens).tokens
    if tc != to:
        k = next(i for i in range(min(len(tc), len(to))) if tc[i] != to[i])
        row = cpu.logits(prompt + tc[:k])[-1]
        gap = abs(float(row[tc[k]]) - float(row[to[k]]))
        assert gap < 5 * tol * (row.max() - row.min()), f"greedy differs at {k} with logit gap {gap}"
    return err


HF_CACHE = os.path.join(ROOT, "tests", ".cache", "hf")


def hf_dir(name):
    """Random-weight directories made by tools/hf_models.py (transformers, CPU). The GPU machine has
    no transformers: there they come pre-made in tests/.cache/hf (tools/cuda_check.sh's carry)."""
    path = os.path.join(HF_CACHE, name)
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    try:
        import hf_models
    except ImportError as e:
        pytest.skip(f"cannot make {name}: {e}")
    try:
        if name.startswith("bert"):
            hf_models.make_bert(path, seed=5)
        else:
            arch, _, quant = name.partition("-")
            src = path if not quant else os.path.join(HF_CACHE, arch)
            if not os.path.exists(os.path.join(src, "config.json")):
                hf_models.make_decoder(arch, src, seed=9)
            if quant:  # e.g. "qwen3-mlx4g64"
                bits, group = quant[3:].split("g")
                hf_models.mlx_quantize_dir(src, path, int(bits), int(group))
    except ImportError as e:
        pytest.skip(f"cannot make {name}: {e}")
    return path
