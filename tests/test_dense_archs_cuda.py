"""Granite, OLMo 2, SmolLM3 and Phi-3 on CUDA against the CPU backend (the
reference meaning), skipped without a GPU: prefill logits and greedy tokens
(tests.fixtures.backend_compare), one-token decode steps through the fused
decode tables a GPU replays (NoPE layers there rotate by angle 0; OLMo 2
keeps the plain commands), the llama.cpp golden logits on the GPU, and batch
invariance through the fused batch tables (OLMo 2: the plain ones)."""

import glob
import os

import numpy as np
import pytest

from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import compare_with_cpu
from tests.test_cuda import compare_decode_steps, cuda_or_skip
from tests.test_dense_archs import RECORDS, model_path, tolerances
from tests.fixtures.golden_models import GOLDEN

DENSE = random_gguf.DENSE_ARCHS + random_gguf.FUSED_TENSOR_ARCHS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DENSE_QUANTIZED = sorted(glob.glob(os.path.join(ROOT, "tests", "models", "dense", "*.gguf")))


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("dense-cuda")
    out = []
    for arch in DENSE:
        for dtype in ("F32", "F16", "BF16"):
            p = str(d / f"{arch}-{dtype}.gguf")
            random_gguf.write_model(p, arch, dtype, seed=13)
            out.append(p)
    return out


def test_float_models_match_cpu(float_models):
    for p in float_models:
        compare_with_cpu(cuda_or_skip(p, n_ctx=256), p, 2e-3)
        compare_decode_steps(p, 2e-3)


@pytest.mark.parametrize("path", DENSE_QUANTIZED, ids=[os.path.basename(p) for p in DENSE_QUANTIZED])
def test_quantized_models_match_cpu(path):
    compare_with_cpu(cuda_or_skip(path, n_ctx=256), path, 3e-2)
    compare_decode_steps(path, 3e-2)


@pytest.mark.parametrize("rec", RECORDS, ids=[r["name"] for r in RECORDS])
def test_logits_match_llama_cpp_on_cuda(rec, cache_dir):
    m = cuda_or_skip(model_path(rec, cache_dir), n_ctx=256)
    seq = rec["prompt_tokens"] + rec["greedy_tokens"][:-1]
    ref = np.load(os.path.join(GOLDEN, f"dense-{rec['name']}-logits.npy")).astype(np.float32)
    err = np.abs(m.logits(seq) - ref).max()
    tol = tolerances(rec)[1]
    assert err < tol, f"max |logit - llama.cpp| = {err:.4f} (tolerance {tol})"


@pytest.mark.parametrize("arch", DENSE)
def test_batch_invariance_on_cuda(float_models, arch):
    """Requests in one continuous batch on the GPU get the tokens each gets alone there."""
    path = next(p for p in float_models if os.path.basename(p) == f"{arch}-F16.gguf")
    rng = np.random.default_rng([5, len(arch)])
    reqs = [(rng.integers(3, 512, int(n)).tolist(), kw) for n, kw in zip(
        (1, 40, 7, 90), ({}, {"temperature": 0.8, "seed": 11}, {}, {"temperature": 1.0, "top_k": 20, "seed": 3}))]
    solo = cuda_or_skip(path, n_ctx=256)
    want = []
    for p, kw in reqs:
        solo.reset()
        want.append(solo.generate(p, max_tokens=10, **kw).tokens)
    m = cuda_or_skip(path, n_ctx=256, parallel=4, kv_tokens=4 * 256)
    try:
        streams = [m.generate(p, max_tokens=10, stream=True, **kw) for p, kw in reqs]
        got = []
        for s in streams:
            for _ in s:
                pass
            got.append(s.result.tokens)
        assert got == want
    finally:
        m.close()
