"""Tensor parallelism (akunu.load(..., tensor_parallel=N)): the model split
over N ranks (attention heads and KV heads, FFN widths, every expert's FFN
and the vocabulary; one all-reduce after each block's output projections)
must compute what one device computes: logits within float tolerance and the
same greedy tokens (or a parting at a near-tie of the one-device logits), for
every architecture the split serves and every weight format, through the
single-stream tables, the fused decode tables and the batch engine. On the
CPU the ranks are threads; AKUNU_TP_DEVICE=cuda runs the same checks on
GPUs 0..N-1 (NCCL) against one GPU."""

import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf

DEVICE = os.environ.get("AKUNU_TP_DEVICE", "cpu")
SPLIT_ARCHS = tuple(a for a in random_gguf.ARCHS + random_gguf.MOE_ARCHS + random_gguf.DENSE_ARCHS +
                    random_gguf.FUSED_TENSOR_ARCHS if a not in ("olmoe", "olmo2", "gpt-oss"))
PROMPT = list(range(5, 45))
N_GEN = 16


def model(tmp_path_factory, arch, dtype, shape=None):
    path = str(tmp_path_factory.mktemp("tp") / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(path, arch, dtype, shape=shape)
    return path


def load(path, n, **kw):
    if DEVICE == "cuda" and n > 1:
        try:
            import torch

            if torch.cuda.device_count() < n:
                pytest.skip(f"{n} GPUs needed")
        except ImportError:
            pass
    return akunu.load(path, device=DEVICE, tensor_parallel=n, **kw)


def greedy_agrees(one, split_tokens, one_tokens, tie):
    """Equal tokens, or a parting where the one-device logits' top two are within `tie` (relative to the
    logits' scale: the logits' own tolerance, as two summation orders, or 8-bit roundings of slightly
    different activations, may part them there)."""
    if split_tokens == one_tokens:
        return True
    i = next(k for k, (a, b) in enumerate(zip(split_tokens, one_tokens)) if a != b)
    logits = one._core().logits(PROMPT + one_tokens[:i])[-1]
    top = np.sort(logits)[-2:]
    return float(top[1] - top[0]) <= tie * float(np.abs(logits).max())


def check_split(path, n, tol):
    one = load(path, 1)
    ref = one._core().logits(PROMPT)
    ref_tokens = one.generate(PROMPT, max_tokens=N_GEN).tokens
    split = load(path, n)
    assert split._core().tensor_parallel == n
    assert split.config["n_heads"] == one.config["n_heads"]  # the model's own dimensions, not a rank's
    got = split._core().logits(PROMPT)
    assert got.shape == ref.shape and np.isfinite(got).all()
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    assert err < tol, f"logits of {n} ranks differ from one device's by {err:.2e} (relative)"
    assert greedy_agrees(one, split.generate(PROMPT, max_tokens=N_GEN).tokens, ref_tokens, tol)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("arch", SPLIT_ARCHS)
def test_every_architecture_splits(tmp_path_factory, arch, n):
    check_split(model(tmp_path_factory, arch, "F32"), n, 1e-3)


# Column-split rows (O, down) must end on block boundaries: 32-value blocks at the default shape, 256-value
# K-quant blocks at a wider one.
WIDE = random_gguf.Shape(dim=512, n_heads=8, n_kv_heads=4, head_dim=64, ffn_dim=2048, vocab=1000)


@pytest.mark.parametrize("dtype,shape", [("F16", None), ("BF16", None), ("Q4_0", None), ("Q8_0", None),
                                         ("Q4_K_M-blocks", WIDE)], ids=["F16", "BF16", "Q4_0", "Q8_0", "Q4_K_M"])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_every_format_splits(tmp_path_factory, arch, dtype, shape):
    path = model(tmp_path_factory, arch, dtype, shape)
    check_split(path, 2, 2e-2 if dtype.startswith("Q") else 1e-3)


def test_uneven_vocabulary_and_replicated_kv_heads(tmp_path_factory):
    # a vocabulary of 1000 over 4 ranks is 250 a rank; 1001 leaves the last slice short (zero rows);
    # one KV head is replicated on every rank
    shape = random_gguf.Shape(vocab=1001, n_kv_heads=1)
    check_split(model(tmp_path_factory, "llama", "F32", shape), 4, 1e-3)


@pytest.mark.parametrize("experts", ["width", "whole"])
@pytest.mark.parametrize("arch", ["qwen3moe", "qwen2moe", "mixtral"])
def test_experts_split_by_width_and_by_whole_experts(tmp_path_factory, monkeypatch, arch, experts):
    """Every expert's FFN split by width, or whole experts a rank (expert parallelism: each rank's
    expert matmuls take the routed ids of its own experts, the others add nothing)."""
    monkeypatch.setenv("AKUNU_TP_EXPERTS", experts)
    path = model(tmp_path_factory, arch, "F16")
    for n in (2, 4):
        check_split(path, n, 1e-3)


def test_k_quant_experts_go_whole(tmp_path_factory):
    """Experts 256 wide in Q4_K over 2 ranks would be half a block each: whole experts instead."""
    shape = random_gguf.Shape(dim=512, n_heads=8, n_kv_heads=4, head_dim=64, vocab=1000, n_experts=8,
                              n_experts_used=2, expert_ffn_dim=256)
    check_split(model(tmp_path_factory, "qwen3moe", "Q4_K_M-blocks", shape), 2, 2e-2)


def test_unknown_expert_split_is_a_clear_error(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("AKUNU_TP_EXPERTS", "rows")
    with pytest.raises(akunu.AkunuError, match="AKUNU_TP_EXPERTS"):
        load(model(tmp_path_factory, "qwen3moe", "F32"), 2)


def test_fused_decode_tables_split(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("AKUNU_CPU_FUSED_DECODE", "1")
    for arch in ("llama", "gemma3", "qwen2moe"):
        check_split(model(tmp_path_factory, arch, "F16"), 2, 1e-3)


@pytest.mark.parametrize("fused", ["0", "1"])
def test_batch_engine_splits(tmp_path_factory, monkeypatch, fused):
    """Continuous batching over the split model: each request's tokens equal the split model's solo run."""
    monkeypatch.setenv("AKUNU_CPU_FUSED_BATCH", fused)
    path = model(tmp_path_factory, "qwen3", "F16")
    prompts = [list(range(3, 3 + n)) for n in (5, 17, 40, 9)]
    solo = load(path, 2)
    want = [solo.generate(p, max_tokens=12).tokens for p in prompts]
    want_sampled = solo.generate(prompts[1], max_tokens=12, temperature=0.8, seed=3).tokens
    batched = load(path, 2, parallel=4)
    assert [r.tokens for r in batched.generate_batch(prompts, max_tokens=12)] == want
    assert batched.generate(prompts[1], max_tokens=12, temperature=0.8, seed=3).tokens == want_sampled


def test_weight_reads_of_a_split_model_are_a_clear_error(tmp_path_factory):
    path = model(tmp_path_factory, "llama", "F16")
    assert load(path, 1)._core().decode_weight_reads()["unread"] == 0
    with pytest.raises(akunu.AkunuError, match="split over several"):
        load(path, 2)._core().decode_weight_reads()


def test_chat_and_stream_through_a_split_model(tmp_path_factory):
    path = model(tmp_path_factory, "llama", "F16")
    one, split = load(path, 1), load(path, 2)
    msgs = [{"role": "user", "content": "Hello there"}]
    a = one.create_chat_completion(msgs, max_tokens=8, temperature=0)["choices"][0]["message"]["content"]
    b = split.create_chat_completion(msgs, max_tokens=8, temperature=0)["choices"][0]["message"]["content"]
    assert a == b
    assert "".join(split.generate("Once", max_tokens=8, stream=True)) == one.generate("Once", max_tokens=8).text


@pytest.mark.parametrize("arch,why", [("olmo2", "span every head"), ("olmoe", "span every head"),
                                      ("gpt-oss", "sinks and projection biases")])
def test_families_a_split_cannot_compute_are_a_clear_error(tmp_path_factory, arch, why):
    with pytest.raises(akunu.AkunuError, match=why):
        load(model(tmp_path_factory, arch, "F32"), 2)


def test_shapes_that_do_not_split_are_a_clear_error(tmp_path_factory):
    path = model(tmp_path_factory, "llama", "F32")  # 4 heads, 2 KV heads
    with pytest.raises(akunu.AkunuError, match="4 attention heads do not split evenly"):
        load(path, 3)
    kq = model(tmp_path_factory, "llama", "Q4_K_M-blocks")  # O's rows of 256 split in two: half a Q4_K block
    with pytest.raises(akunu.AkunuError, match="not whole Q4_K blocks"):
        load(kq, 2)


@pytest.mark.parametrize("value", [0, -2, True, 2.0])
def test_bad_tensor_parallel_values(tmp_path_factory, value):
    with pytest.raises(akunu.AkunuError, match="tensor_parallel"):
        akunu.load(model(tmp_path_factory, "llama", "F32"), tensor_parallel=value)


def test_embedding_models_and_other_devices_refuse(tmp_path_factory):
    from tests.fixtures import hf_models

    bert = str(tmp_path_factory.mktemp("bert"))
    hf_models.make_bert(bert)
    with pytest.raises(akunu.AkunuError, match="decoder models"):
        akunu.load(bert, tensor_parallel=2)
    path = model(tmp_path_factory, "llama", "F32")
    with pytest.raises(akunu.AkunuError, match="runs on 'cuda'"):
        akunu.load(path, device="metal", tensor_parallel=2)


@pytest.mark.skipif(DEVICE != "cuda", reason="the peer-to-peer all-reduce is the CUDA backend's")
def test_peer_to_peer_and_nccl_reductions_agree(tmp_path_factory, monkeypatch):
    """Decode steps' reductions go over the GPUs' peer-to-peer links, prefill's through NCCL; with
    AKUNU_P2P_ALL_REDUCE=0 NCCL serves all. Two ranks' sums are one addition either way: the same bits."""
    path = model(tmp_path_factory, "qwen3", "F16")
    runs = []
    for p2p in ("1", "0"):
        monkeypatch.setenv("AKUNU_P2P_ALL_REDUCE", p2p)
        m = load(path, 2)
        toks = m.generate(PROMPT, max_tokens=64).tokens
        runs.append((toks, m._core().logits(PROMPT + toks[:8])))
        del m
    assert runs[0][0] == runs[1][0]
    assert np.array_equal(runs[0][1], runs[1][1])


def test_command_line_tools_take_tp(tmp_path_factory):
    """--tp on the CLIs and akunu-serve reaches akunu.load; akunu-bench reports it in its rows."""
    import json
    import subprocess
    import sys

    from akunu.cli import serve
    from akunu.cli.common import load_model

    path = model(tmp_path_factory, "llama", "F16")
    args = serve.build_parser().parse_args([path, "--tp", "2", "--device", DEVICE])
    args.model = path
    assert load_model(args, quiet=True).tensor_parallel == 2
    out = subprocess.run([sys.executable, "-m", "akunu.cli.bench", path, "--device", DEVICE, "--tp", "2", "-p", "8",
                          "-n", "4", "-r", "1", "-o", "json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and all(r["tensor_parallel"] == 2 and r["avg_ts"] > 0 for r in rows)
    bad = subprocess.run([sys.executable, "-m", "akunu.cli.bench", path, "--tp", "0"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--tp must be at least 1" in bad.stderr
