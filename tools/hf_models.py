"""Random-weight Hugging Face model directories for tests, written with
transformers on the CPU, and MLX's affine group quantization in numpy.

- ``make_decoder(arch, out_dir)``: a small llama / qwen2 / qwen3 / gemma / gemma3
  model (config.json + model.safetensors + a word-level tokenizer.json).
- ``make_bert(out_dir)``: a small BERT with a WordPiece tokenizer and the
  sentence-transformers modules (mean pooling, Normalize).
- ``mlx_quantize_dir(src, dst, bits, group)``: the same weights as an MLX
  quantized directory (uint32-packed weights, float16 scales and biases,
  "quantization" in config.json); returns the dequantized state dict, the
  numpy reference of what the quantized model computes.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Dict, Tuple

import numpy as np

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=512)


def _word_tokenizer(out_dir: str, vocab_size: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)


def _config(arch: str):
    import transformers as tf

    common = dict(SMALL, initializer_range=0.25, tie_word_embeddings=False, bos_token_id=None,
                  eos_token_id=None, pad_token_id=None)
    if arch == "llama":
        return tf.LlamaConfig(**common, rope_theta=10000.0)
    if arch == "llama3":  # Llama 3.1's frequency-dependent RoPE scaling
        return tf.LlamaConfig(**common, rope_theta=500000.0, rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64})
    if arch == "qwen2":
        return tf.Qwen2Config(**common)
    if arch == "qwen3":
        return tf.Qwen3Config(**dict(common, tie_word_embeddings=True))
    if arch == "gemma":
        return tf.GemmaConfig(**dict(common, tie_word_embeddings=True), hidden_activation="gelu_pytorch_tanh")
    if arch == "gemma3":
        return tf.Gemma3TextConfig(**dict(common, tie_word_embeddings=True), sliding_window=8,
                                   query_pre_attn_scalar=16, rope_local_base_freq=10000.0,
                                   layer_types=["sliding_attention", "full_attention"])
    raise ValueError(arch)


def make_decoder(arch: str, out_dir: str, seed: int = 0):
    """Writes the directory; returns the transformers model (float32, eval mode)."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(_config(arch), torch_dtype=torch.float32).eval()
    with torch.no_grad():  # norms away from 1 so a wrong norm convention shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) * 0.5 + 0.75 - (1.0 if arch.startswith("gemma") else 0.0))
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    _word_tokenizer(out_dir, SMALL["vocab_size"])
    return model


_BERT_WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "is", "fast", "engine", "hello", "world", "run",
               "model", "text", "embed", "ing", "s", "ed", "quick", "brown", "fox", "jump", "over", "lazy"]


def make_bert(out_dir: str, seed: int = 0, layers: int = 2):
    import torch
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)] + list(".,!?'")
    vocab_list = special + letters + ["##" + c for c in letters] + _BERT_WORDS + ["##" + w for w in _BERT_WORDS]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(vocab_list))}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
        ("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.decoder = decoders.WordPiece()
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, special=True) for t in special])

    torch.manual_seed(seed)
    cfg = tf.BertConfig(vocab_size=len(vocab), hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=128, initializer_range=0.2)
    model = tf.BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_(torch.rand_like(p) * 0.5 + (0.75 if name.endswith("weight") else -0.25))
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True}, f)
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize"}], f)
    with open(os.path.join(out_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 64, "pooling_mode_mean_tokens": True}, f)
    with open(os.path.join(out_dir, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 96, "do_lower_case": False}, f)
    return model, tok


def bert_reference(model, tok, texts, max_len: int = 96) -> np.ndarray:
    """transformers forward + mean pooling + L2 normalization (sentence-transformers' pipeline)."""
    import torch

    out = []
    for t in texts:
        ids = tok.encode(t).ids
        if len(ids) > max_len:
            ids = ids[: max_len - 1] + ids[-1:]
        with torch.no_grad():
            h = model(input_ids=torch.tensor([ids])).last_hidden_state[0].double()
        e = h.mean(0)
        out.append((e / e.norm()).numpy())
    return np.array(out)


# -- MLX affine group quantization ----------------------------------------------------------

def mlx_quantize(w: np.ndarray, bits: int, group: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MLX's affine quantization of a 2-D float matrix (rows x K): returns (packed uint32
    [rows, K*bits/32], scales [rows, K/group] f16, biases f16). Per group: scale = (max-min)/(2^bits-1),
    with the edge of larger magnitude represented exactly; values are a little-endian bit stream."""
    rows, K = w.shape
    n_bins = (1 << bits) - 1
    g = w.reshape(rows, K // group, group).astype(np.float32)
    w_max, w_min = g.max(-1, keepdims=True), g.min(-1, keepdims=True)
    mask = np.abs(w_min) > np.abs(w_max)
    scales = np.maximum((w_max - w_min) / n_bins, 1e-7)
    scales = np.where(mask, scales, -scales)
    edge = np.where(mask, w_min, w_max)
    q0 = np.round(edge / scales)
    scales = np.where(q0 != 0, edge / np.where(q0 != 0, q0, 1), scales)
    biases = np.where(q0 == 0, 0, edge)
    scales16, biases16 = scales.astype(np.float16), biases.astype(np.float16)
    q = np.clip(np.round((g - biases16.astype(np.float32)) / scales16.astype(np.float32)), 0, n_bins)
    q = q.astype(np.uint32).reshape(rows, K)
    bitplanes = ((q[:, :, None] >> np.arange(bits, dtype=np.uint32)) & 1).astype(np.uint8)
    packed = np.packbits(bitplanes.reshape(rows, K * bits), axis=1, bitorder="little")
    return packed.view(np.uint32).reshape(rows, K * bits // 32), scales16[..., 0], biases16[..., 0]


def mlx_dequantize(packed: np.ndarray, scales: np.ndarray, biases: np.ndarray, bits: int, group: int) -> np.ndarray:
    rows = packed.shape[0]
    K = packed.shape[1] * 32 // bits
    stream = np.unpackbits(packed.view(np.uint8).reshape(rows, -1), axis=1, bitorder="little")
    q = (stream.reshape(rows, K, bits).astype(np.uint32) << np.arange(bits, dtype=np.uint32)).sum(-1)
    q = q.reshape(rows, K // group, group).astype(np.float32)
    w = q * scales.astype(np.float32)[..., None] + biases.astype(np.float32)[..., None]
    return w.reshape(rows, K)


def mlx_quantize_dir(src: str, dst: str, bits: int, group: int) -> Dict[str, np.ndarray]:
    """Quantizes every 2-D weight whose rows split into groups (Linear layers and the embedding,
    as mlx-lm does); returns the state dict with those weights dequantized."""
    from safetensors.numpy import load_file, save_file

    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name != "model.safetensors" and os.path.isfile(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    tensors = load_file(os.path.join(src, "model.safetensors"))
    out, reference = {}, {}
    for name, t in tensors.items():
        if t.ndim == 2 and name.endswith(".weight") and t.shape[1] % group == 0 and "norm" not in name:
            packed, s, b = mlx_quantize(t, bits, group)
            base = name[: -len(".weight")]
            out[name], out[base + ".scales"], out[base + ".biases"] = packed, s, b
            reference[name] = mlx_dequantize(packed, s, b, bits, group)
        else:
            out[name] = t
            reference[name] = t.astype(np.float32)
    save_file(out, os.path.join(dst, "model.safetensors"))
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization"] = {"group_size": group, "bits": bits}
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    return reference


def make_whisper(out_dir: str, tokenizer_json: str, seed: int = 0, n_mels: int = 80, vocab_size: int = 51865,
                 dtype: str = "float32", dim: int = 64, layers: int = 2, heads: int = 4):
    """A random-weight Whisper (transformers WhisperForConditionalGeneration; tiny test shape
    by default, Whisper tiny's with dim=384, layers=4, heads=6) with a real Whisper
    tokenizer.json; returns the float32 transformers model (eval mode)."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.WhisperConfig(vocab_size=vocab_size, num_mel_bins=n_mels, d_model=dim, encoder_layers=layers,
                           encoder_attention_heads=heads, decoder_layers=layers, decoder_attention_heads=heads,
                           encoder_ffn_dim=4 * dim, decoder_ffn_dim=4 * dim, max_source_positions=1500,
                           max_target_positions=448, init_std=0.1, pad_token_id=50257, bos_token_id=50257,
                           eos_token_id=50257, decoder_start_token_id=50258)
    model = tf.WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # LayerNorms away from the identity so a wrong norm shows
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(torch.rand_like(p) * 0.5 + (0.75 if name.endswith("weight") else -0.25))
            elif name.endswith(".bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    os.makedirs(out_dir, exist_ok=True)
    saved = model if dtype == "float32" else tf.WhisperForConditionalGeneration(cfg).to(getattr(torch, dtype))
    if saved is not model:
        saved.load_state_dict(model.state_dict())
        with torch.no_grad():  # the reference runs the rounded weights
            for p_ref, p_saved in zip(model.parameters(), saved.parameters()):
                p_ref.copy_(p_saved.float())
    saved.save_pretrained(out_dir, safe_serialization=True)
    shutil.copy(tokenizer_json, os.path.join(out_dir, "tokenizer.json"))
    return model


def whisper_reference(path: str):
    """A float32 transformers WhisperForConditionalGeneration holding the weights of any
    Whisper that akunu reads (GGUF, HF or CTranslate2 directory), through akunu's own
    reader and names (quantized GGUF weights dequantized by gguf-py): the exact-arithmetic
    reference for real checkpoints."""
    import sys

    import torch
    import transformers as tf

    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # after an installed akunu
    from akunu import _core
    from convert_hf_to_gguf import _tensor_array

    model = _core.read_model(path, with_data=True)
    md = model["metadata"]
    g = lambda k: int(md["whisper." + k])  # noqa: E731
    cfg = tf.WhisperConfig(vocab_size=0, num_mel_bins=g("n_mels"), d_model=g("embedding_length"),
                           encoder_layers=g("encoder.block_count"), decoder_layers=g("block_count"),
                           encoder_attention_heads=g("encoder.attention.head_count"),
                           decoder_attention_heads=g("attention.head_count"),
                           encoder_ffn_dim=g("encoder.feed_forward_length"), decoder_ffn_dim=g("feed_forward_length"),
                           max_source_positions=g("encoder.context_length"),
                           max_target_positions=g("context_length"))
    names = {"attn_norm": "self_attn_layer_norm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.out_proj",
             "cross_attn_norm": "encoder_attn_layer_norm", "cross_attn_q": "encoder_attn.q_proj",
             "cross_attn_k": "encoder_attn.k_proj", "cross_attn_v": "encoder_attn.v_proj",
             "cross_attn_output": "encoder_attn.out_proj", "ffn_norm": "final_layer_norm", "ffn_up": "fc1",
             "ffn_down": "fc2"}
    top = {"enc.conv1": "encoder.conv1", "enc.conv2": "encoder.conv2", "enc.position_embd": "encoder.embed_positions",
           "enc.output_norm": "encoder.layer_norm", "token_embd": "decoder.embed_tokens",
           "position_embd": "decoder.embed_positions", "output_norm": "decoder.layer_norm"}
    state = {}
    for t in model["tensors"]:
        base, part = t["name"].rsplit(".", 1)
        if base in top:
            hf = top[base]
        else:
            side, rest = ("encoder", base[len("enc.blk."):]) if base.startswith("enc.blk.") else \
                ("decoder", base[len("blk."):])
            layer, name = rest.split(".", 1)
            hf = f"{side}.layers.{layer}.{names[name]}"
        a = _tensor_array(t, dequantize=True)
        if base in ("enc.conv1", "enc.conv2") and part == "weight":
            a = a.reshape(a.shape[0], -1, 3)
        state[f"model.{hf}.{part}"] = torch.from_numpy(np.ascontiguousarray(a))
    for k in [k for k in state if k.endswith("k_proj.bias")]:  # CTranslate2 stores zeros there
        if float(state.pop(k).abs().max()) != 0.0:
            raise ValueError(f"{k} is not zero: transformers' Whisper has no key bias")
    cfg.vocab_size = state["model.decoder.embed_tokens.weight"].shape[0]
    ref = tf.WhisperForConditionalGeneration(cfg).eval()
    missing, unexpected = ref.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "proj_out.weight"]
    if missing or unexpected:
        raise ValueError(f"weights not mapped: missing {missing[:4]}, unexpected {unexpected[:4]}")
    ref.tie_weights()
    return ref
