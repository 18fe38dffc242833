"""Random-weight GGUF models at small shapes, for every architecture akunu runs.

The same seed gives the same bytes (numpy's Generator and gguf's writer are
deterministic), so tests can rebuild a model and check it against the sha256
that ``tools/make_golden.py`` recorded next to llama.cpp's outputs.

Shapes are small but keep every dimension a multiple of 256 so llama.cpp's
K-quant quantizer applies to every matrix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

ARCHS = ("llama", "qwen2", "qwen3", "gemma", "gemma3")


@dataclass
class Shape:
    dim: int = 256
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 64
    ffn_dim: int = 512
    vocab: int = 512
    ctx: int = 512
    sliding_window: int = 0
    extra: Dict[str, object] = field(default_factory=dict)


def default_shape(arch: str) -> Shape:
    if arch == "gemma3":
        # six layers so the 5-local/1-global pattern appears; a small window so
        # a 40-token test crosses it
        return Shape(n_layers=6, sliding_window=16, n_kv_heads=1)
    if arch == "gemma":
        return Shape(n_kv_heads=1)
    return Shape()


def spm_vocab(n: int):
    """A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte pieces, then
    scored pieces of letters, so llama.cpp and akunu both tokenize text with it."""
    tokens: List[str] = ["<unk>", "<s>", "</s>"]
    types: List[int] = [2, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    pieces: List[str] = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    for a in "etaoinshrdlu":
        for b in "etaoinshrdlu":
            pieces.append(a + b)
            pieces.append("\u2581" + a + b)
    pieces = list(dict.fromkeys(pieces))
    while len(tokens) < n and pieces:
        tokens.append(pieces.pop(0))
        types.append(1)
    while len(tokens) < n:
        tokens.append(f"<unused{len(tokens)}>")
        types.append(5)
    scores = [0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(n - 259)]
    return tokens[:n], scores[:n], types[:n]


def llama3_rope_factors(head_dim: int, base: float, factor=8.0, low=1.0, high=4.0, orig_ctx=64) -> np.ndarray:
    """Llama 3 frequency factors (what convert_hf_to_gguf writes as rope_freqs),
    with a small original context so the scaling matters at test lengths."""
    freqs = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    low_wl, high_wl = orig_ctx / low, orig_ctx / high
    out = []
    for f in freqs:
        wl = 2 * np.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (orig_ctx / wl - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def random_blocks(rng, rows: int, n_blocks: int, block_bytes: int, scale_offsets, positive: bool) -> np.ndarray:
    """Random quantized blocks (uint8, shape (rows, n_blocks * block_bytes)):
    random bytes, then each f16 scale field (at scale_offsets) a modest value,
    positive where the format multiplies by it as such (K-quant d / dmin)."""
    raw = rng.integers(0, 256, size=(rows, n_blocks, block_bytes), dtype=np.uint8)
    for off in scale_offsets:
        d = (rng.uniform(0.001, 0.02, size=(rows, n_blocks)) * rng.choice([-1, 1], size=(rows, n_blocks))).astype(np.float16)
        if positive:
            d = np.abs(d)
        raw[:, :, off : off + 2] = d.view(np.uint8).reshape(rows, n_blocks, 2)
    return raw.reshape(rows, n_blocks * block_bytes)


def kquant_blocks(rng, six: bool, rows: int, cols: int) -> np.ndarray:
    """Random Q6_K (six) or Q4_K blocks whose weights come out near the
    float writer's N(0, 1 / cols) (every scale set so; quants random)."""
    nb, std = cols // 256, cols ** -0.5
    if six:  # w = d * sc * (q - 32): q uniform (sd 18.5), |sc| 1..8 (rms 4.8)
        raw = rng.integers(0, 256, size=(rows, nb, 210), dtype=np.uint8)
        sc = rng.integers(1, 9, size=(rows, nb, 16)) * rng.choice([-1, 1], size=(rows, nb, 16))
        raw[:, :, 192:208] = sc.astype(np.int8).view(np.uint8)
        fields = {208: std / (18.5 * 4.8)}
    else:  # w = d * sc * q - dmin * m, 6-bit sc and m: dmin = 7.5 d centres it, sd about 250 d
        raw = rng.integers(0, 256, size=(rows, nb, 144), dtype=np.uint8)
        fields = {0: std / 250, 2: 7.5 * std / 250}
    for off, v in fields.items():
        raw[:, :, off : off + 2] = np.full((rows, nb), v, np.float16).view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, nb * raw.shape[2])


def use_more_bits(layer: int, n_layers: int) -> bool:
    """llama.cpp's Q4_K_M rule for the layers whose attn_v / ffn_down get Q6_K."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def write_model(path: str, arch: str, dtype: str = "F32", seed: int = 0, shape: Optional[Shape] = None) -> str:
    """Writes a random model; dtype F32, F16, BF16, or Q4_0 / Q8_0 through
    gguf-py's quantizer (every matrix, token embeddings too; for llama.cpp's
    mixes such as Q4_K_M use its quantizer). Returns the file's sha256.
    dtype "Q4_K_M-blocks": random Q4_K / Q6_K blocks placed as llama.cpp's
    Q4_K_M places them (kquant_blocks), written in seconds: large K-quant
    files without llama.cpp's quantizer, for timing runs and for backend
    against backend checks."""
    import gguf

    s = shape or default_shape(arch)
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"random-{arch}")
    w.add_context_length(s.ctx)
    w.add_embedding_length(s.dim)
    w.add_block_count(s.n_layers)
    w.add_feed_forward_length(s.ffn_dim)
    w.add_head_count(s.n_heads)
    w.add_head_count_kv(s.n_kv_heads)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    base = 500000.0 if arch == "llama" else 1000000.0 if arch == "gemma3" else 10000.0
    w.add_rope_freq_base(base)
    if s.sliding_window:
        w.add_sliding_window(s.sliding_window)
    w.add_file_type(0)
    tokens, scores, types = spm_vocab(s.vocab)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)

    np_dtype = {"F32": np.float32, "F16": np.float16}.get(dtype)

    def mat(name: str, rows: int, cols: int, std: Optional[float] = None):
        if dtype == "Q4_K_M-blocks":
            tied_table = name == "token_embd.weight" and arch == "gemma"  # also the output there
            six = name == "output.weight" or tied_table or (
                name.endswith(("attn_v.weight", "ffn_down.weight")) and use_more_bits(int(name.split(".")[1]), s.n_layers))
            qtype = gguf.GGMLQuantizationType.Q6_K if six else gguf.GGMLQuantizationType.Q4_K
            w.add_tensor(name, kquant_blocks(rng, six, rows, cols), raw_dtype=qtype)
            return
        a = rng.standard_normal((rows, cols)).astype(np.float32) * (std if std is not None else cols ** -0.5)
        if dtype in ("BF16", "Q4_0", "Q8_0"):
            qtype = gguf.GGMLQuantizationType[dtype]
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, a.astype(np_dtype))

    def vec(name: str, n: int, center: float = 1.0, std: float = 0.1):
        w.add_tensor(name, (center + std * rng.standard_normal(n)).astype(np.float32))

    qd, kvd = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    # Gemma scales embeddings by sqrt(dim); keep the scaled rows near unit size
    # so the layers, not the input token, decide the (tied) logits.
    mat("token_embd.weight", s.vocab, s.dim, std=2.0 * s.dim ** -0.5 if arch.startswith("gemma") else 1.0)
    vec("output_norm.weight", s.dim)
    if arch != "gemma":  # gemma ties the output to the token embedding
        mat("output.weight", s.vocab, s.dim, std=2.0 * s.dim ** -0.5)
    if arch == "llama":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(s.head_dim, base))
    for l in range(s.n_layers):
        p = f"blk.{l}."
        vec(p + "attn_norm.weight", s.dim)
        mat(p + "attn_q.weight", qd, s.dim)
        mat(p + "attn_k.weight", kvd, s.dim)
        mat(p + "attn_v.weight", kvd, s.dim)
        if arch == "qwen2":
            vec(p + "attn_q.bias", qd, 0.0, 0.5)
            vec(p + "attn_k.bias", kvd, 0.0, 0.5)
            vec(p + "attn_v.bias", kvd, 0.0, 0.5)
        if arch in ("qwen3", "gemma3"):
            vec(p + "attn_q_norm.weight", s.head_dim)
            vec(p + "attn_k_norm.weight", s.head_dim)
        mat(p + "attn_output.weight", s.dim, qd)
        if arch == "gemma3":
            vec(p + "post_attention_norm.weight", s.dim)
        vec(p + "ffn_norm.weight", s.dim)
        mat(p + "ffn_gate.weight", s.ffn_dim, s.dim)
        mat(p + "ffn_up.weight", s.ffn_dim, s.dim)
        mat(p + "ffn_down.weight", s.dim, s.ffn_dim)
        if arch == "gemma3":
            vec(p + "post_ffw_norm.weight", s.dim)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sha256_of(path)


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
