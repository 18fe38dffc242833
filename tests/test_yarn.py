"""YaRN RoPE scaling (Qwen2.5 / Qwen3 / gpt-oss long contexts), positions well
past the original context exercised:

- Hugging Face directories (rope_scaling "yarn") against transformers on the
  CPU: logits and greedy tokens, with the default attention factor, an
  explicit attention_factor with truncate false and other betas, and the
  mscale / mscale_all_dim ratio. Each case also checks that transformers
  without YaRN is far from it, so the comparison tells YaRN apart.
- GGUF files (llama.cpp's keys: rope.scaling.type = yarn, factor,
  original_context_length, attn_factor, yarn_*) against llama.cpp's logits
  and greedy tokens, recorded in tests/golden/yarn.json by
  ``python -m tests.test_yarn`` (needs llama-cpp-python); the models are
  rebuilt from their seed and checked against the recorded sha256.
- The rope kernels with YaRN's divisors and magnitude: the CPU against a
  numpy transcription of ggml's rope_yarn, and Metal (emulated) and CUDA
  against the CPU, rope / rope_rows / qk_norm_rope_kv.
- Bad YaRN metadata is a clear error.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

import akunu
from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures import random_gguf
from tests.test_device_kernels import device, rel_l2, rng_for  # noqa: F401 - device is a fixture

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "yarn.json")


# -- llama.cpp's YaRN (ggml.c ggml_rope_yarn_corr_dims, ggml-cpu ops.cpp rope_yarn, llama-context.cpp) -----

def ggml_corr_dims(n_dims, n_ctx_orig, base, beta_fast, beta_slow):
    f32 = np.float32

    def corr_dim(n_rot):
        return f32(n_dims) * f32(math.log(f32(n_ctx_orig) / (f32(n_rot) * f32(2) * f32(math.pi)))) / (
            f32(2) * f32(math.log(f32(base))))

    return max(0.0, math.floor(corr_dim(beta_fast))), min(n_dims - 1.0, math.ceil(corr_dim(beta_slow)))


def ggml_rope_yarn(x, positions, base, neox, freq_scale, n_ctx_orig, ext_factor=1.0, attn_factor=1.0,
                   beta_fast=32.0, beta_slow=1.0, freq_factors=None):
    """x [n, heads, d] rotated as ggml's rope_ext with YaRN, float64. attn_factor
    is llama.cpp's rope.scaling.attn_factor: llama-context.cpp sets the kernel's
    attn_factor to get_mscale(1/freq_scale) / (1 + 0.1 ln(1/freq_scale)) times
    it when ext_factor != 0, and rope_yarn multiplies by 1 + 0.1 ln(1/freq_scale)."""
    n, h, d = x.shape
    low, high = ggml_corr_dims(d, n_ctx_orig, base, beta_fast, beta_slow)
    factor = 1.0 / freq_scale
    mscale = attn_factor
    if ext_factor != 0:
        get_mscale = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
        mscale = get_mscale / (1.0 + 0.1 * math.log(factor)) * attn_factor
        mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    j = np.arange(d // 2)
    theta_extrap = np.outer(positions, base ** (-2.0 * j / d))
    if freq_factors is not None:
        theta_extrap = theta_extrap / freq_factors
    theta_interp = freq_scale * theta_extrap
    theta = theta_interp
    if ext_factor != 0:
        ramp = 1 - np.clip((j - low) / max(0.001, high - low), 0, 1)
        mix = ramp * ext_factor
        theta = theta_interp * (1 - mix) + theta_extrap * mix
    c, s = np.cos(theta)[:, None, :] * mscale, np.sin(theta)[:, None, :] * mscale
    out = x.astype(np.float64).copy()
    i0, i1 = (slice(0, d // 2), slice(d // 2, d)) if neox else (slice(0, d, 2), slice(1, d, 2))
    a, b = x[:, :, i0].astype(np.float64), x[:, :, i1].astype(np.float64)
    out[:, :, i0] = a * c - b * s
    out[:, :, i1] = a * s + b * c
    return out


def yarn_table(d, base, factor, n_ctx_orig, ext_factor=1.0, beta_fast=32.0, beta_slow=1.0):
    """The divisors of the inverse frequency and the cos / sin magnitude that
    model_config.cpp derives from the same metadata (what the kernels get)."""
    low, high = ggml_corr_dims(d, n_ctx_orig, base, beta_fast, beta_slow)
    j = np.arange(d // 2)
    mix = (1 - np.clip((j - low) / max(0.001, high - low), 0, 1)) * ext_factor
    div = 1.0 / ((1.0 / factor) * (1 - mix) + mix)
    return div.astype(np.float32), (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)


@pytest.mark.parametrize("neox", [0, 1])
@pytest.mark.parametrize("factor,n_ctx_orig,own_factors", [(4.0, 64, False), (32.0, 4096, False), (8.0, 256, True)])
def test_cpu_rope_matches_ggml_rope_yarn(neox, factor, n_ctx_orig, own_factors):
    """The CPU rope kernel with YaRN's table and magnitude is ggml's rope_yarn
    (the angle blended between interpolation and extrapolation), positions
    on both sides of the original context."""
    rng = np.random.default_rng(int(factor) * 2 + neox)
    heads, d, base = 4, 128, 1e6
    positions = np.array([0, 3, n_ctx_orig - 1, n_ctx_orig, 2 * n_ctx_orig + 5, int(factor * n_ctx_orig) - 1])
    x = rng.standard_normal((len(positions), heads, d)).astype(np.float32)
    div, mscale = yarn_table(d, base, factor, n_ctx_orig)
    own = rng.uniform(1, 4, d // 2).astype(np.float32) if own_factors else None
    table = div * own if own_factors else div
    ref = ggml_rope_yarn(x, positions, base, neox, 1.0 / factor, n_ctx_orig, freq_factors=own)
    y = x.reshape(len(positions), heads * d).copy()
    rows = np.stack([np.zeros_like(positions), positions], 1).astype(np.int32)
    _testing.run_kernel("rope_rows", [y, table, rows],
                        kp.rope(heads, d, len(positions), 0, heads * d, neox, 1, base, 1.0, mscale))
    # float32 angles up to ~1e5 radians: a few 1e-3 absolute
    np.testing.assert_allclose(y.reshape(x.shape), ref, rtol=0, atol=2e-2 * mscale)
    assert rel_l2(y.reshape(x.shape), ref) < 2e-3
    plain = ggml_rope_yarn(x, positions, base, neox, 1.0, n_ctx_orig, ext_factor=0.0)
    assert rel_l2(plain, ref) > 0.1  # YaRN moved the result: the check above tells it apart


# -- kernels on Metal (emulated) and CUDA against the CPU ---------------------------------------------

@pytest.mark.parametrize("neox", [0, 1])
def test_device_rope_yarn(device, neox):
    rng = rng_for(("yarn_rope", neox))
    heads, hd, n = 8, 128, 5
    x = rng.standard_normal((n, heads * hd)).astype(np.float32)
    div, mscale = yarn_table(hd, 1e6, 4.0, 64)
    rows = np.stack([np.arange(n), rng.integers(0, 300, n)], 1).astype(np.int32)
    for name, bufs, params in [
        ("rope", [div], kp.rope(heads, hd, n, 200, heads * hd, neox, 1, 1e6, 1.0, mscale)),
        ("rope_rows", [div, rows], kp.rope(heads, hd, n, 0, heads * hd, neox, 1, 1e6, 1.0, mscale)),
        ("rope", [div], kp.rope(heads, hd, n, 200, heads * hd, neox, 0, 1e6, 0.25, 1.3)),
    ]:
        out = []
        for dev in ("cpu", device):
            y = x.copy()
            _testing.run_kernel(name, [y] + [b.copy() for b in bufs], params, device=dev)
            out.append(y)
        assert rel_l2(out[1], out[0]) < 2e-5, name
        assert abs(np.linalg.norm(out[0]) / np.linalg.norm(x) - params_mscale(params)) < 1e-4


def params_mscale(params):
    return kp.unpack("RopeParams", params)["attn_factor"]


@pytest.mark.parametrize("norm,neox", [(1, 1), (0, 0)])
def test_device_qk_norm_rope_kv_yarn(device, norm, neox):
    """The fused prologue (CUDA; head_prologue.cuh, shared with the decode
    attention) scales cos and sin as the CPU's rope does."""
    rng = rng_for(("yarn_qk", norm, neox))
    heads, kv_heads, hd, n, pos0, max_ctx = 8, 2, 128, 2, 700, 800
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    k = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    v = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    qw = (rng.standard_normal(hd) * 0.3 + 1).astype(np.float32)
    kw = (rng.standard_normal(hd) * 0.3 + 1).astype(np.float32)
    div, mscale = yarn_table(hd, 1e6, 4.0, 64)
    params = kp.qk_norm_rope_kv(heads, kv_heads, hd, n, pos0, norm, 1e-6, 0.0, neox, 1, 1e6, 1.0, max_ctx, mscale)
    res = []
    for dev in ("cpu", device):
        kc = np.full((max_ctx, kv_heads * hd), 0x7E00, np.uint16)
        vc = kc.copy()
        qq, kk = q.copy(), k.copy()
        _testing.run_kernel("qk_norm_rope_kv", [qq, kk, v, qw, kw, div, kc, vc], params, device=dev)
        res.append((qq, kk, kc))
    (qc, kc_, kcc), (qg, kg, kcg) = res
    assert rel_l2(qg, qc) < 2e-5 and rel_l2(kg, kc_) < 2e-5
    rows = slice(pos0, pos0 + n)
    a, b = kcg[rows].view(np.float16).astype(np.float32), kcc[rows].view(np.float16).astype(np.float32)
    assert (np.abs(a - b) <= np.abs(b) * 2 ** -10 + 1e-7).all()


def test_cpu_qk_norm_rope_kv_scales_as_rope():
    """The CPU's fused prologue passes attn_factor to its rope."""
    rng = np.random.default_rng(5)
    heads, kv_heads, hd, n, pos0, max_ctx = 4, 2, 64, 1, 100, 128
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    k = rng.standard_normal((n, kv_heads * hd)).astype(np.float32)
    v = np.zeros((n, kv_heads * hd), np.float32)
    div, mscale = yarn_table(hd, 1e4, 4.0, 64)
    kc, vc = np.zeros((max_ctx, kv_heads * hd), np.uint16), np.zeros((max_ctx, kv_heads * hd), np.uint16)
    qq, kk = q.copy(), k.copy()
    _testing.run_kernel("qk_norm_rope_kv", [qq, kk, v, q, k, div, kc, vc],
                        kp.qk_norm_rope_kv(heads, kv_heads, hd, n, pos0, 0, 1e-6, 0.0, 1, 1, 1e4, 1.0, max_ctx, mscale))
    ref = ggml_rope_yarn(q.reshape(n, heads, hd), np.array([pos0]), 1e4, 1, 0.25, 64)
    assert rel_l2(qq.reshape(ref.shape), ref) < 1e-5


# -- Hugging Face directories against transformers -----------------------------------------------------

HF_CASES = {
    "qwen3-default": ("qwen3", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    "qwen2-attention_factor": ("qwen2", {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32,
                                         "attention_factor": 1.3, "beta_fast": 16.0, "beta_slow": 2.0,
                                         "truncate": False}),
    "llama-mscale": ("llama", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                               "mscale": 0.707, "mscale_all_dim": 1.0}),
}


def make_hf_yarn(arch, rope_scaling, out_dir, seed):
    """A random model as tests.fixtures.hf_models makes them, with rope_scaling;
    returns it and the same weights without YaRN."""
    import torch
    import transformers as tf

    from tests.fixtures.hf_models import SMALL, _word_tokenizer

    cls = {"qwen3": tf.Qwen3Config, "qwen2": tf.Qwen2Config, "llama": tf.LlamaConfig}[arch]
    common = dict(SMALL, initializer_range=0.25, tie_word_embeddings=arch == "qwen3", bos_token_id=None,
                  eos_token_id=None, pad_token_id=None, max_position_embeddings=256)
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(cls(**common, rope_scaling=dict(rope_scaling)),
                                                dtype=torch.float32).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) * 0.5 + 0.75)
    model.save_pretrained(out_dir, safe_serialization=True)
    _word_tokenizer(out_dir, SMALL["vocab_size"])
    plain = tf.AutoModelForCausalLM.from_config(cls(**common), dtype=torch.float32).eval()
    plain.load_state_dict(model.state_dict())
    return model, plain


@pytest.mark.parametrize("case", sorted(HF_CASES))
def test_hf_yarn_matches_transformers(tmp_path, case):
    torch = pytest.importorskip("torch")
    arch, scaling = HF_CASES[case]
    model, plain = make_hf_yarn(arch, scaling, str(tmp_path), seed=len(case))
    rng = np.random.default_rng(len(case))
    seq = rng.integers(0, 256, 160).tolist()  # 160 positions: 2.5 to 5 original contexts
    with torch.no_grad():
        ref = model(torch.tensor([seq])).logits[0].double().numpy()
        ref_plain = plain(torch.tensor([seq])).logits[0].double().numpy()
    m = akunu.load(str(tmp_path), n_ctx=256)
    ours = m.logits(seq)
    err = rel_l2(ours, ref)
    assert err < 5e-3, f"relative L2 against transformers {err:.2e}"
    late = slice(100, None)  # past every case's original context
    assert rel_l2(ours[late], ref[late]) < 5e-3
    assert rel_l2(ref_plain[late], ref[late]) > 20 * max(err, 1e-3), "YaRN does not change transformers' logits"
    prompt = seq[:120]
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0)
    assert m.generate(prompt, max_tokens=16).tokens == out[0, len(prompt):].tolist()


def test_hf_yarn_metal_emulation_matches_cpu(tmp_path):
    """A YaRN directory through the Metal kernels (emulated) against the CPU."""
    pytest.importorskip("torch")
    from tests.fixtures.backend_compare import compare_with_cpu
    from tests.test_device_kernels import build_metal_emulation

    name = os.environ.get("AKUNU_METAL_DEVICE", "metal-emu")
    if name == "metal-emu":
        build_metal_emulation()
    arch, scaling = HF_CASES["qwen3-default"]
    make_hf_yarn(arch, scaling, str(tmp_path), seed=3)
    try:
        other = akunu.load(str(tmp_path), device=name, n_ctx=256)
    except Exception as e:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"device {name} unavailable: {e}")
    compare_with_cpu(other, str(tmp_path), 2e-3)


# -- GGUF files against llama.cpp ---------------------------------------------------------------------

# name -> (arch, rope.scaling.* metadata); llama keeps its Llama 3 rope_freqs too (both divide the angle)
GGUF_CASES = {
    "qwen3-yarn": ("qwen3", {"type": "yarn", "factor": 4.0, "original_context_length": 64}),
    "qwen2-yarn-attn_factor": ("qwen2", {"type": "yarn", "factor": 8.0, "original_context_length": 32,
                                         "attn_factor": 1.25}),
    "llama-yarn-rope_freqs": ("llama", {"type": "yarn", "factor": 4.0, "original_context_length": 64}),
}
GGUF_SEED = 7
N_SEQ, N_PROMPT, N_GEN = 150, 100, 16
LOGIT_ROWS = [5, 63, 64, 99, 120, 149]
LOGIT_TOL, TIE = 0.02, 0.02


def write_yarn_gguf(path, arch, meta):
    """random_gguf's model of `arch` with `meta` as <arch>.rope.scaling.* keys."""
    import gguf

    add_base = gguf.GGUFWriter.add_rope_freq_base

    def with_scaling(self, value):
        add_base(self, value)
        for k, v in meta.items():
            key = f"{self.arch}.rope.scaling.{k}"
            if isinstance(v, str):
                self.add_string(key, v)
            elif isinstance(v, int):
                self.add_uint32(key, v)
            else:
                self.add_float32(key, v)

    gguf.GGUFWriter.add_rope_freq_base = with_scaling
    try:
        return random_gguf.write_model(path, arch, "F32", seed=GGUF_SEED)
    finally:
        gguf.GGUFWriter.add_rope_freq_base = add_base


def gguf_sequence():
    rng = np.random.default_rng(GGUF_SEED)
    return [1] + rng.integers(3, 512, N_SEQ - 1).tolist()


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN) as f:
        return json.load(f)


@pytest.mark.parametrize("name", sorted(GGUF_CASES))
def test_gguf_yarn_matches_llama_cpp(tmp_path, golden, name):
    pytest.importorskip("gguf")
    rec = golden[name]
    arch, meta = GGUF_CASES[name]
    assert rec["arch"] == arch and rec["meta"] == meta
    path = str(tmp_path / f"{name}.gguf")
    assert write_yarn_gguf(path, arch, meta) == rec["sha256"], "the random model changed: rerun python -m tests.test_yarn"
    m = akunu.load(path, n_ctx=256)
    seq = gguf_sequence()
    ours = m.logits(seq)
    ref = np.array(rec["logits"], np.float64)
    err = np.abs(ours[rec["logit_rows"]] - ref).max()
    assert err < LOGIT_TOL, f"max |logit - llama.cpp| = {err:.4f}"
    prompt = seq[:N_PROMPT]
    got = m.generate(prompt, max_tokens=N_GEN).tokens
    want = rec["greedy_tokens"]
    if got != want:  # teacher forcing: a parting only at a near-tie of our own logits
        logits = m.logits(prompt + want[:-1])
        for j, w in enumerate(want):
            row = logits[N_PROMPT - 1 + j]
            gap = float(row.max() - row[w])
            assert gap <= TIE, f"step {j}: akunu picks {int(row.argmax())}, llama.cpp {w}, gap {gap:.4f}"


def test_gguf_yarn_differs_from_plain_rope(tmp_path, golden):
    """The recorded llama.cpp logits are YaRN's: the same model without the
    scaling keys is far from them past the original context."""
    pytest.importorskip("gguf")
    arch, meta = GGUF_CASES["qwen3-yarn"]
    path = str(tmp_path / "plain.gguf")
    random_gguf.write_model(path, arch, "F32", seed=GGUF_SEED)
    plain = akunu.load(path, n_ctx=256).logits(gguf_sequence())
    ref = np.array(golden["qwen3-yarn"]["logits"], np.float64)
    assert np.abs(plain[golden["qwen3-yarn"]["logit_rows"]][-1] - ref[-1]).max() > 10 * LOGIT_TOL


# -- bad metadata --------------------------------------------------------------------------------------

@pytest.mark.parametrize("meta,message", [
    ({"type": "yarn", "factor": -2.0}, "rope.scaling.factor"),
    ({"type": "yarn", "factor": 4.0, "yarn_beta_fast": 0.0}, "yarn_beta_fast"),
    ({"type": "yarn", "factor": 4.0, "original_context_length": 1 << 30}, "original_context_length"),
    ({"type": "yarn", "factor": 4.0, "attn_factor": 0.0}, "attn_factor"),
    ({"type": "longrope", "factor": 4.0}, "longrope"),
])
def test_bad_gguf_yarn_metadata_is_a_clear_error(tmp_path, meta, message):
    pytest.importorskip("gguf")
    path = str(tmp_path / "bad.gguf")
    write_yarn_gguf(path, "qwen3", meta)
    with pytest.raises(akunu.AkunuError, match=message):
        akunu.load(path, n_ctx=64)


def test_bad_hf_yarn_config_is_a_clear_error(tmp_path):
    pytest.importorskip("torch")
    make_hf_yarn("qwen3", HF_CASES["qwen3-default"][1], str(tmp_path), seed=1)
    cfg_path = tmp_path / "config.json"
    cfg = json.loads(cfg_path.read_text())
    key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    cfg[key]["attention_factor"] = -1.0
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(akunu.AkunuError, match="attention factor"):
        akunu.load(str(tmp_path), n_ctx=64)


# -- recording llama.cpp's outputs ---------------------------------------------------------------------

def record_golden():
    """llama.cpp's logits (LOGIT_ROWS of one pass over the sequence) and greedy
    tokens for every GGUF case, into tests/golden/yarn.json."""
    import tempfile

    import llama_cpp

    out = {}
    seq = gguf_sequence()
    with tempfile.TemporaryDirectory() as d:
        for name, (arch, meta) in sorted(GGUF_CASES.items()):
            path = os.path.join(d, name + ".gguf")
            sha = write_yarn_gguf(path, arch, meta)
            ll = llama_cpp.Llama(path, n_ctx=256, n_batch=256, logits_all=True, verbose=False, n_threads=2, seed=0)
            ll.eval(seq)
            scores = np.array(ll.scores[:N_SEQ], np.float64)
            ll.reset()
            ll.eval(seq[:N_PROMPT])
            greedy = []
            for _ in range(N_GEN):
                t = int(np.argmax(ll.scores[ll.n_tokens - 1]))
                greedy.append(t)
                ll.eval([t])
            out[name] = {"arch": arch, "meta": meta, "seed": GGUF_SEED, "sha256": sha,
                         "llama_cpp": getattr(llama_cpp, "__version__", "?"), "logit_rows": LOGIT_ROWS,
                         "logits": [[round(float(v), 5) for v in scores[r]] for r in LOGIT_ROWS],
                         "greedy_tokens": greedy}
            del ll
    with open(GOLDEN, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    record_golden()
