"""The CUDA backend against the CPU backend (the reference meaning of every
op): logits on random-weight models of every architecture and weight format,
greedy tokens, the device sampler's distribution and seeds, all under the
default tuning (tests/test_cuda_tuning.py runs the other CudaTuning choices).
Skips with the reason when this build has no CUDA backend or no GPU is visible."""

import glob
import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import compare_with_cpu, hf_dir, rel_l2
from tests.fixtures.sampling_reference import chi_square_ok, probabilities

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUANTIZED = sorted(glob.glob(os.path.join(ROOT, "tests", "models", "*.gguf")))


def cuda_or_skip(path, **kw):
    try:
        return akunu.load(path, device="cuda", **kw)
    except akunu.AkunuError as e:
        if "not available" in str(e):
            pytest.skip(f"no CUDA: {e}")
        raise


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("cuda")
    out = []
    for arch in ("llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3"):
        for dtype in ("F32", "F16", "BF16"):
            p = str(d / f"{arch}-{dtype}.gguf")
            random_gguf.write_model(p, arch, dtype, seed=13)
            out.append(p)
    return out


def compare(path, tol):
    return compare_with_cpu(cuda_or_skip(path, n_ctx=256), path, tol)


def test_float_models_match_cpu(float_models):
    errs = {os.path.basename(p): compare(p, 2e-3) for p in float_models}
    print("relative L2 of logits, CUDA vs CPU:", {k: f"{v:.1e}" for k, v in errs.items()})


@pytest.mark.parametrize("path", QUANTIZED, ids=[os.path.basename(p) for p in QUANTIZED])
def test_quantized_models_match_cpu(path):
    # Both round activations to 8 bits for integer dots, as llama.cpp does: the
    # CPU per 32 values for Q4_0/Q8_0 (as CUDA) and per 256 for K-quants (CUDA:
    # per 32, as llama.cpp's CUDA backend); other formats multiply floats on CUDA.
    compare(path, 3e-2)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_mxfp4_models_match_cpu(tmp_path, arch):
    """Every matrix MXFP4 (token embeddings too): prefill logits (the tensor
    cores past 16 tokens), greedy tokens and one-token decode steps (the
    integer decode GEMV on 8-bit activations) against the CPU."""
    p = str(tmp_path / f"{arch}-mxfp4.gguf")
    random_gguf.write_model(p, arch, "MXFP4", seed=39)
    compare(p, 3e-2)
    compare_decode_steps(p, 3e-2)


def compare_decode_steps(path, tol, n_ctx=256, n_prompt=20):
    """One-token decode steps, logits step by step: the decode GEMVs and the
    Q8Links between them (a writer preparing the next command's input), which
    the logits of a prefill do not run and greedy tokens check only loosely."""
    other = cuda_or_skip(path, n_ctx=n_ctx)
    cpu = akunu.load(path, n_ctx=n_ctx)
    ids = np.random.default_rng(7).integers(0, cpu.config["vocab_size"], n_prompt).tolist()
    for m in (cpu, other):
        m._core().prefill(ids)
    for t in ids[:6]:
        lc, lo = cpu._core().decode_logits(t), other._core().decode_logits(t)
        err = rel_l2(lo, lc)
        assert err < tol, f"{os.path.basename(path)}: decode step relative L2 {err:.2e}"


@pytest.mark.parametrize("path", QUANTIZED, ids=[os.path.basename(p) for p in QUANTIZED])
def test_decode_steps_match_cpu(path):
    compare_decode_steps(path, 3e-2)


def test_float_decode_steps_match_cpu(float_models):
    for path in float_models:
        compare_decode_steps(path, 2e-3)


QWEN3_06B_WIDTHS = dict(dim=1024, ffn_dim=3072, n_heads=16, n_kv_heads=8, head_dim=128)
LLAMA_1B_WIDTHS = dict(dim=2048, ffn_dim=8192, n_heads=32, n_kv_heads=8, head_dim=64)


@pytest.mark.parametrize("arch,dtype,widths,tol", [
    ("qwen3", "Q4_0", QWEN3_06B_WIDTHS, 3e-2),  # gate + up's in-block writer, the residual writer (1024 rows)
    ("llama", "Q8_0", LLAMA_1B_WIDTHS, 3e-2),  # the paired lean gate + up, the residual writer (2048 rows)
    ("llama", "Q4_K_M-blocks", LLAMA_1B_WIDTHS, 3e-2),  # Q4_K / Q6_K rows, regrouped at this width
    ("qwen3", "F16", QWEN3_06B_WIDTHS, 2e-3),  # the float residual writer, 4 warps a row (8-row sums of squares)
    ("llama", "F16", LLAMA_1B_WIDTHS, 2e-3),  # the float residual writer, 2 warps a row
], ids=["qwen3-0.6b-q4_0", "llama-1b-q8_0", "llama-1b-q4_k_m", "qwen3-0.6b-f16", "llama-1b-f16"])
def test_decode_steps_at_real_widths(tmp_path, arch, dtype, widths, tol):
    """Decode steps of two layers at the real models' widths, where the
    decode GEMVs and Q8Link writers take the kernels the benchmarks time
    (the test models above are too narrow for most of them)."""
    p = str(tmp_path / f"{arch}-{dtype}.gguf")
    random_gguf.write_model(p, arch, dtype, seed=3, shape=random_gguf.Shape(n_layers=2, vocab=512, ctx=512, **widths))
    compare_decode_steps(p, tol)


@pytest.mark.parametrize("arch,dtype,widths", [
    ("llama", "F16", LLAMA_1B_WIDTHS),  # 4 query heads a block, head_dim 64
    ("qwen3", "Q8_0", QWEN3_06B_WIDTHS),  # 2 query heads a block, QK norm in the absorbed prologue
], ids=["llama-1b-f16", "qwen3-0.6b-q8_0"])
def test_decode_steps_with_a_long_cache(tmp_path, arch, dtype, widths):
    """A cache of 16384 positions takes the grouped-query decode attention
    (one block for the query heads of a KV group, many key splits), with the
    prologue absorbed; 3000 keys span many splits that combine."""
    p = str(tmp_path / f"{arch}-{dtype}-long.gguf")
    random_gguf.write_model(p, arch, dtype, seed=5, shape=random_gguf.Shape(n_layers=2, vocab=512, ctx=16384, **widths))
    compare_decode_steps(p, 2e-3 if dtype == "F16" else 3e-2, n_ctx=16384, n_prompt=3000)


@pytest.mark.parametrize("arch", ["llama", "gemma"])
def test_regrouped_q6_k_model_matches_cpu(tmp_path, arch):
    """Q4_K / Q6_K blocks placed as Q4_K_M places them, at a width (2048)
    where CUDA loads Q6_K regrouped (Q6_K_X8: output, a layer's attn_v and
    ffn_down; gemma's tied table, so its embedding lookup too)."""
    p = str(tmp_path / f"{arch}-q4_k_m-blocks.gguf")
    shape = random_gguf.Shape(dim=2048, n_layers=2, n_heads=16, n_kv_heads=4, head_dim=128, ffn_dim=2048,
                              vocab=512, ctx=512)
    random_gguf.write_model(p, arch, "Q4_K_M-blocks", seed=21, shape=shape)
    compare(p, 3e-2)


@pytest.mark.parametrize("temperature,top_k,top_p,min_p", [
    (1.3, 0, 0.95, 0.0), (0.8, 5, 1.0, 0.0), (1.0, 0, 1.0, 0.05), (0.9, 20, 0.9, 0.05), (1.0, 0, 1.0, 0.0),
])
def test_sampling_distribution(float_models, temperature, top_k, top_p, min_p):
    m = cuda_or_skip(float_models[0], n_ctx=256)
    core = m._core()
    prompt = m.tokenize("the cat sat on the mat and the cat sat")
    core.truncate(0)
    core.prefill(prompt)
    logits = core.last_logits()[0]
    p = probabilities(logits, temperature, top_k, top_p, min_p)
    counts = np.zeros(logits.size)
    for seed in range(2000):
        core.set_sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        counts[core.sample_next()] += 1
    assert counts[p == 0].sum() == 0, "a filtered-out token was drawn"
    ok, stat, limit = chi_square_ok(counts, p)
    assert ok, f"chi-square {stat:.1f} > {limit:.1f}"


def test_sampling_seeds(float_models):
    m = cuda_or_skip(float_models[0], n_ctx=256)
    kw = dict(max_tokens=40, temperature=0.9, top_k=50, top_p=0.9, min_p=0.02, repeat_penalty=1.1, seed=7)
    a = m.generate("once upon a time", **kw)
    m.reset()
    assert m.generate("once upon a time", **kw).tokens == a.tokens


def test_device_names_and_auto(float_models):
    m = cuda_or_skip(float_models[0], n_ctx=64)
    assert m.device == "cuda"
    assert akunu.load(float_models[0], device="auto", n_ctx=64).device == "cuda"


def test_speculative_and_grammar_on_cuda(float_models):
    import json

    m = cuda_or_skip(float_models[7], n_ctx=512)  # qwen3 F16
    prompt = "one two three four five six seven eight " * 5
    m.reset()
    plain = m.generate(prompt, max_tokens=48)
    m.reset()
    spec = m.generate(prompt, max_tokens=48, speculative=True)
    assert spec.tokens == plain.tokens and spec.stats.draft_tokens > 0
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "ok": {"type": "boolean"}},
              "required": ["n", "ok"], "additionalProperties": False}
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        pytest.skip("xgrammar is not installed here")
    for seed in range(10):
        r = m.generate("json:", max_tokens=60, json_schema=schema, temperature=0.0 if seed == 0 else 1.0, seed=seed)
        assert r.finish_reason == "stop" and set(json.loads(r.text)) == {"n", "ok"}


# -- Hugging Face / MLX directories and BERT embeddings (issue: SafeTensors, MLX, BERT) ----------

def test_bert_embeddings_match_cpu():
    path = hf_dir("bert")
    gpu = cuda_or_skip(path)
    cpu = akunu.load(path)
    texts = ["hello world", "the quick brown fox jumps over the lazy dog", "cat " * 80]  # 82 tokens: > 64
    eg, ec = gpu.embed(texts), cpu.embed(texts)
    cos = (eg * ec).sum(1)
    assert cos.min() > 0.99999, cos
    assert rel_l2(eg, ec) < 1e-3


@pytest.mark.parametrize("name", ["llama", "gemma3", "qwen3-mlx4g64", "llama-mlx8g32", "llama-mlx3g64"])
def test_hf_directories_match_cpu(name):
    # Converted HF checkpoints: 5e-3 (prefill GEMMs on the tensor cores take F16
    # operands; random-weight GGUF models above stay under 2e-3)
    err = compare(hf_dir(name), 5e-3)
    print(f"{name}: relative L2 of logits, CUDA vs CPU {err:.1e}")


# -- Whisper ---------------------------------------------------------------------------------
# `python -m tools.prepare_offline DEST --whisper` writes these here, for a machine without
# internet: tokenizer.json of Whisper base, tiny.en converted to a Q5_0 GGUF, 16 kHz espeak-ng clips.
WHISPER_CACHE = os.path.join(ROOT, "tests", ".cache", "whisper-cuda")


def whisper_input(name):
    p = os.path.join(WHISPER_CACHE, name)
    if not os.path.exists(p):
        pytest.skip(f"{p} is missing: run python -m tools.prepare_offline DEST --whisper where the models can be fetched")
    return p


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_whisper_random_tiny_shape_matches_cpu(tmp_path, dtype):
    """A random Whisper at tiny's real shape (384 wide, 4 + 4 layers, 1500 encoder positions)."""
    from tests.fixtures import hf_models
    from akunu.whisper.mel import log_mel_spectrogram, pad_or_trim

    d = str(tmp_path / dtype)
    hf_models.make_whisper(d, whisper_input("tokenizer.json"), dtype=dtype, dim=384, layers=4, heads=6)
    gpu, cpu = cuda_or_skip(d), akunu.load(d)
    rng = np.random.default_rng(3)
    audio = (0.1 * rng.standard_normal(16000 * 12) * np.sin(np.arange(16000 * 12) / 700)).astype(np.float32)
    mel = pad_or_trim(log_mel_spectrogram(audio, 80, padding=160))
    # the encoder's GEMMs run on the tensor cores with F16 operands (~3e-4
    # relative each, test_device_kernels' prefill bound), through 4 layers
    enc = rel_l2(gpu.encode(mel), cpu.encode(mel))
    prompt = [50258, 50259, 50359, 50363]
    lg, lc = gpu._m.decode(0, prompt, 0), cpu._m.decode(0, prompt, 0)
    errs = [rel_l2(lg, lc)]  # also K/V rounded to F16 after sums in another order
    tokens = list(prompt)
    for _ in range(24):  # raw greedy, fed to both: every step's logits agree
        t = int(np.argmax(lc))
        tokens.append(t)
        lg, lc = gpu._m.decode(0, [t], len(tokens) - 1), cpu._m.decode(0, [t], len(tokens) - 1)
        errs.append(rel_l2(lg, lc))
    print(f"whisper {dtype}: encoder rel L2 {enc:.2e}, decode max {max(errs):.2e}")
    assert enc < 3e-3
    assert max(errs) < 3e-3
    gpu._m.copy_slot(0, 4, len(tokens))  # a copied GPU cache continues like the original
    np.testing.assert_array_equal(gpu._m.decode(4, [7], len(tokens)), gpu._m.decode(0, [7], len(tokens)))


def test_whisper_real_transcription_matches_cpu():
    """Real tiny.en (Q5_0): each window's tokens equal the CPU's, or part at a near-tie of the
    CPU's own (filtered) logits; beam search runs on the GPU's cache slots."""
    from akunu.whisper.decoding import DecodeOptions, LogitFilters
    from akunu.whisper.mel import pad_or_trim
    from akunu.whisper.metrics import word_error_rate

    path = whisper_input("tiny.en-q5_0.gguf")
    clips = sorted(glob.glob(os.path.join(WHISPER_CACHE, "*.npy")))
    gpu, cpu = cuda_or_skip(path), akunu.load(path)
    assert gpu.device == "cuda"
    for clip in clips:
        audio = np.load(clip)
        mel = pad_or_trim(cpu.mel(audio))
        for timestamps in (True, False):
            opts = DecodeOptions(language="en", timestamps=timestamps, suppress_tokens=cpu.suppress_tokens)
            gpu.encode(mel)
            a = gpu._decoder.decode([], opts).tokens
            cpu.encode(mel)
            b = cpu._decoder.decode([], opts).tokens
            if a == b:
                continue
            k = next(i for i in range(min(len(a), len(b)) + 1) if i == min(len(a), len(b)) or a[i] != b[i])
            prompt = cpu._decoder.prompt([], opts)
            raw = cpu._m.decode(0, prompt + b[:k], 0).astype(np.float64)
            filters = LogitFilters(cpu.tokenizer, opts)
            x = raw.copy()
            filters.apply(x, b[:k])
            eot = cpu.tokenizer.eot
            ta, tb = (a[k] if k < len(a) else eot), (b[k] if k < len(b) else eot)
            if x[tb] - x[ta] < 0.5:
                continue  # a near-tie between the two tokens
            # or a near-tie of the timestamp rule (all timestamps vs the best text token)
            y = raw.copy()
            filters.mask(y, b[:k])
            assert timestamps and abs(filters.timestamp_margin(y)) < 0.5, \
                f"{os.path.basename(clip)} step {k}: {ta} vs CPU {tb}"
        ga = gpu.transcribe(audio, temperature=0.0, beam_size=5).text
        ca = cpu.transcribe(audio, temperature=0.0, beam_size=5).text
        assert word_error_rate(ca, ga) <= 0.2, (ga, ca)
