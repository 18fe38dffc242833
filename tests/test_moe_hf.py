"""Hugging Face directories of the mixture-of-experts families (qwen3_moe,
qwen2_moe, mixtral, olmoe: random weights saved by transformers, one module
per expert; gpt_oss: its experts fused in one tensor a layer) through akunu against transformers: logits and greedy tokens,
with router near-ties (from transformers' own router logits) excused; the
config's routing (norm_topk_prob) honoured; layouts akunu does not run are
clear errors; akunu-inspect's active parameter count."""

import json
import os
import shutil

import numpy as np
import pytest

import akunu

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.fixtures import moe_hf_models  # noqa: E402

PROMPT = [3, 17, 42, 99, 7, 123, 5, 250, 64, 1]
N_NEW = 24
# F16 KV cache and float32 sums in another order: logits within this of transformers'
LOGIT_TOL = 0.03
# gpt-oss's random experts pass its SwiGLU clamps (values up to 56) and its
# logits span about 16 (the others' about 7): the same F16 rounding moves
# them by up to 0.037 (three seeds, 34 positions each)
ARCH_LOGIT_TOL = {"gpt_oss": 0.06}
# MXFP4-packed gpt-oss experts: the CPU rounds the activations of quantized
# matmuls to 8 bits; measured 0.16-0.32 against transformers (logits span
# about 16), where the same decoded experts stored as F32 give 0.017
PACKED_LOGIT_TOL = 0.5
# a token whose router choice is this close in transformers (router logit units, any layer) may be
# routed either way by akunu: its own logits are excused (at most a fifth of them)
ROUTER_GAP = 0.01
CASES = list(moe_hf_models.ARCHS) + ["qwen3_moe-unnormalized"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    made = {}

    def get(case):
        if case not in made:
            arch, _, variant = case.partition("-")
            d = str(tmp_path_factory.mktemp(case))
            # transformers honours norm_topk_prob (llama.cpp fixes it per family); so must akunu
            kw = {"norm_topk_prob": False} if variant == "unnormalized" else {}
            made[case] = (d, moe_hf_models.make(arch, d, seed=len(made) + 7, **kw))
        return made[case]

    return get


def check_logits(ours, ref, gaps, what, tol=None):
    excused = gaps.min(0) < ROUTER_GAP
    assert excused.mean() <= 0.2, f"{excused.sum()} of {len(excused)} tokens are router near-ties"
    err = np.where(excused, 0, np.abs(ours - ref).max(1))
    tol = tol or ARCH_LOGIT_TOL.get(what.partition("-")[0], LOGIT_TOL)
    assert err.max() < tol, f"{what}: max |logit - transformers| {err.max():.4f} at {int(err.argmax())}"


def transformers_greedy(model):
    """transformers' greedy tokens after PROMPT, and its teacher-forced
    logits and router gaps over PROMPT + those tokens."""
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=N_NEW, min_new_tokens=N_NEW, do_sample=False,
                             pad_token_id=0)
    want = out[0, len(PROMPT):].tolist()
    ref, gaps = moe_hf_models.reference(model, PROMPT + want)
    return want, ref, gaps


def check_greedy(m, want, ref, gaps, near):
    """akunu's greedy tokens after PROMPT equal transformers' (want), or part
    only where transformers' teacher-forced logits (ref) are within `near`
    or a router choice is a near-tie."""
    got = m.generate(PROMPT, max_tokens=N_NEW).tokens
    if got != want:
        j = next(i for i in range(N_NEW) if got[i] != want[i])
        row = ref[len(PROMPT) - 1 + j]
        assert row[want[j]] - row[got[j]] < near or gaps[:, len(PROMPT) - 1 + j].min() < ROUTER_GAP, (
            f"step {j}: akunu {got[j]}, transformers {want[j]}")


@pytest.mark.parametrize("case", CASES)
def test_logits_and_greedy_tokens_match_transformers(dirs, case):
    d, model = dirs(case)
    m = akunu.load(d, n_ctx=256)
    want_arch = {"qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe", "mixtral": "llama", "olmoe": "olmoe",
                 "gpt_oss": "gpt-oss"}
    assert m.config["architecture"] == want_arch[case.partition("-")[0]]
    want, ref, gaps = transformers_greedy(model)
    check_logits(m.logits(PROMPT + want), ref, gaps, case)
    check_greedy(m, want, ref, gaps, 0.02)


def test_unnormalized_routing_differs_from_normalized(dirs):
    """The flag is read: the same weights with and without norm_topk_prob give other logits."""
    d_norm, _ = dirs("qwen3_moe")
    d = d_norm + "-flipped"
    shutil.copytree(d_norm, d)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["norm_topk_prob"] = False
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    a, b = akunu.load(d_norm, n_ctx=64).logits(PROMPT), akunu.load(d, n_ctx=64).logits(PROMPT)
    assert np.abs(a - b).max() > 0.05


@pytest.mark.parametrize("key,value,match", [
    ("mlp_only_layers", [1], "mlp_only_layers"),
    ("decoder_sparse_step", 2, "decoder_sparse_step"),
    ("num_experts_per_tok", None, "num_experts_per_tok"),
])
def test_unsupported_layouts_are_clear_errors(dirs, tmp_path, key, value, match):
    d_src, _ = dirs("qwen3_moe")
    d = str(tmp_path / "bad")
    shutil.copytree(d_src, d)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if value is None:
        del cfg[key]
    else:
        cfg[key] = value
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(akunu.AkunuError, match=match):
        akunu.load(d)


def test_missing_expert_is_a_clear_error(dirs, tmp_path):
    from safetensors.numpy import load_file, save_file

    d_src, _ = dirs("mixtral")
    d = str(tmp_path / "gap")
    shutil.copytree(d_src, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    del t["model.layers.1.block_sparse_moe.experts.3.w2.weight"]
    save_file(t, os.path.join(d, "model.safetensors"))
    with pytest.raises(akunu.AkunuError, match="experts"):
        akunu.load(d)


def test_inspect_counts_active_parameters(dirs, capsys):
    from akunu.cli import inspect

    d, model = dirs("qwen2_moe")
    assert inspect.main([d, "--json", "--no-tensors"]) == 0
    s = json.loads(capsys.readouterr().out)
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    assert s["totals"]["params"] == total
    assert s["totals"]["active_params"] == total - experts + experts * 2 // 8
    assert s["model"]["expert_count"] == 8 and s["model"]["expert_used_count"] == 2


@pytest.mark.parametrize("tensor,match", [
    ("model.layers.0.mlp.experts.gate_up_proj", "blocks but no scales"),  # packed blocks alone
    ("model.layers.1.mlp.experts.down_proj", "not \\[experts, ff, dim\\]"),  # cut to two dimensions
])
def test_gpt_oss_experts_it_cannot_read_are_clear_errors(dirs, tmp_path, tensor, match):
    """gpt-oss checkpoints with MXFP4-packed blocks but no scales, and fused
    expert tensors of the wrong shape: a clear error at load."""
    from safetensors.numpy import load_file, save_file

    d_src, _ = dirs("gpt_oss")
    d = str(tmp_path / "bad")
    shutil.copytree(d_src, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    if "gate_up" in tensor:
        t[tensor + "_blocks"] = np.zeros((8, 64, 2, 16), np.uint8)
        del t[tensor]
    else:
        t[tensor] = t[tensor].reshape(t[tensor].shape[0], -1)
    save_file(t, os.path.join(d, "model.safetensors"))
    with pytest.raises(akunu.AkunuError, match=match):
        akunu.load(d)


# -- gpt-oss checkpoints with MXFP4-packed experts (as OpenAI publishes them) --------------------


def _transformers_dequantized(blocks, scales):
    """transformers' own MXFP4 decoding (its Mxfp4 integration): [E, K, rows] float32."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    return convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales), dtype=torch.float32).numpy()


@pytest.fixture(scope="module")
def packed_gpt_oss(dirs, tmp_path_factory):
    """The random gpt_oss directory with its experts replaced by random
    MXFP4 blocks and scales (..._blocks [E, rows, K / 32, 16], ..._scales
    [E, rows, K / 32]) and config.json's quantization_config, beside a copy
    of transformers' model holding transformers' decoding of those blocks."""
    import copy

    from safetensors.numpy import load_file, save_file

    d_src, model = dirs("gpt_oss")
    ref = copy.deepcopy(model)
    d = str(tmp_path_factory.mktemp("gpt_oss-mxfp4"))
    shutil.rmtree(d)
    shutil.copytree(d_src, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    rng = np.random.default_rng(11)
    decoded = {}
    for name in [n for n in t if n.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))]:
        E, K, rows = t[name].shape  # transformers' x @ W layout
        blocks = rng.integers(0, 256, (E, rows, K // 32, 16), dtype=np.uint8)
        scales = rng.integers(121, 125, (E, rows, K // 32), dtype=np.uint8)  # 2^-6 .. 2^-3: weights up to 0.75
        t[name + "_blocks"], t[name + "_scales"] = blocks, scales
        del t[name]
        decoded[name] = _transformers_dequantized(blocks, scales)
        with torch.no_grad():
            ref.get_parameter(name).copy_(torch.from_numpy(decoded[name]))
    save_file(t, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                                       "model.layers.*.mlp.router",
                                                                                       "model.embed_tokens", "lm_head"]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d, ref, decoded


def test_packed_experts_decode_as_transformers_decodes_them(packed_gpt_oss):
    """The GGUF tensors akunu makes of the packed experts (MXFP4 blocks, a row
    an output feature, gate and up apart) decode by gguf-py to exactly
    transformers' decoding of the checkpoint."""
    import gguf

    from akunu import _core

    d, _, decoded = packed_gpt_oss
    tensors = {x["name"]: x for x in _core.read_model(d, with_data=True)["tensors"]}

    def ours(name):
        x = tensors[name]
        assert x["dtype"] == "MXFP4", (name, x["dtype"])
        raw = np.frombuffer(x["data"], dtype=np.uint8)
        return gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.MXFP4).reshape(list(reversed(x["shape"])))

    layers = sorted({int(n.split(".")[2]) for n in decoded})
    assert layers == [0, 1]
    for layer in layers:
        gate_up = decoded[f"model.layers.{layer}.mlp.experts.gate_up_proj"].transpose(0, 2, 1)  # [E, 2 ff, dim]
        down = decoded[f"model.layers.{layer}.mlp.experts.down_proj"].transpose(0, 2, 1)  # [E, dim, ff]
        np.testing.assert_array_equal(ours(f"blk.{layer}.ffn_gate_exps.weight"), gate_up[:, 0::2])
        np.testing.assert_array_equal(ours(f"blk.{layer}.ffn_up_exps.weight"), gate_up[:, 1::2])
        np.testing.assert_array_equal(ours(f"blk.{layer}.ffn_down_exps.weight"), down)


def test_packed_gpt_oss_matches_transformers(packed_gpt_oss):
    """The packed directory through akunu against transformers holding the
    decoded experts: logits (the CPU rounds the MXFP4 matmuls' activations to
    8 bits, as for every quantized format) and greedy tokens."""
    d, ref, _ = packed_gpt_oss
    m = akunu.load(d, n_ctx=256)
    want, logits, gaps = transformers_greedy(ref)
    check_logits(m.logits(PROMPT + want), logits, gaps, "gpt_oss-mxfp4", PACKED_LOGIT_TOL)
    check_greedy(m, want, logits, gaps, PACKED_LOGIT_TOL)


@pytest.mark.parametrize("change,match", [
    ("scales_shape", "are not MXFP4 blocks"),   # scales of another group count
    ("blocks_dtype", "are bytes \\(U8\\)"),     # blocks stored as F16
    ("no_blocks", "scales but no blocks"),
    ("odd_rows", "even count"),                 # gate / up rows not in pairs
])
def test_packed_experts_it_cannot_read_are_clear_errors(packed_gpt_oss, tmp_path, change, match):
    from safetensors.numpy import load_file, save_file

    d_src, _, _ = packed_gpt_oss
    d = str(tmp_path / "bad")
    shutil.copytree(d_src, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    name = "model.layers.1.mlp.experts.gate_up_proj"
    b, s = t[name + "_blocks"], t[name + "_scales"]
    if change == "scales_shape":
        t[name + "_scales"] = np.concatenate([s, s], axis=2)
    elif change == "blocks_dtype":
        t[name + "_blocks"] = b.view(np.float16)
    elif change == "no_blocks":
        del t[name + "_blocks"]
    else:
        t[name + "_blocks"], t[name + "_scales"] = b[:, 1:], s[:, 1:]
    save_file(t, os.path.join(d, "model.safetensors"))
    with pytest.raises(akunu.AkunuError, match=match):
        akunu.load(d)
