"""Convert a model directory to GGUF, reading it with akunu's own directory
readers (the same names and checks the engine loads with), so converted and
unconverted models run the same weights.

- BERT embedding models (a sentence-transformers directory such as
  all-MiniLM-L6-v2): llama.cpp's layout: tensor and metadata names of its BERT
  architecture, a WordPiece vocabulary with its "phantom space" pieces, pooling
  type, plus akunu.normalize_embeddings and akunu.max_seq_length.
- Whisper (a Hugging Face WhisperForConditionalGeneration directory or a
  CTranslate2 directory as faster-whisper uses): akunu's Whisper layout
  (src/weight/whisper_names.h), with tokenizer.json stored under
  tokenizer.huggingface.json. --outtype q8_0 / q5_0 / q4_0 quantizes the matrices.

Usage: akunu-convert MODEL_DIR OUT.gguf [--outtype f32|f16|q8_0|q5_0|q4_0]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

_TOKEN_NORMAL, _TOKEN_CONTROL = 1, 3


def _wordpiece_vocab(model_dir: str):
    """Pieces in llama.cpp's form: '##x' -> 'x', word-initial 'x' -> '\u2581x', [SPECIAL] as is."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        spec = json.load(f)
    model = spec.get("model") or {}
    if model.get("type") != "WordPiece":
        raise SystemExit("tokenizer.json is not a WordPiece tokenizer: only BERT models convert")
    vocab = model["vocab"]
    tokens = [""] * (max(vocab.values()) + 1)
    for piece, i in vocab.items():
        tokens[i] = piece
    special = {t["content"] for t in spec.get("added_tokens", []) if t.get("special")}
    pieces, types = [], []
    for t in tokens:
        if t in special or (t.startswith("[") and t.endswith("]")):
            pieces.append(t)
            types.append(_TOKEN_CONTROL if t in special else _TOKEN_NORMAL)
        elif t.startswith("##"):
            pieces.append(t[2:])
            types.append(_TOKEN_NORMAL)
        else:
            pieces.append("\u2581" + t)
            types.append(_TOKEN_NORMAL)
    ids = {t: i for i, t in enumerate(tokens)}
    return pieces, types, ids


def convert(model_dir: str, out_path: str, outtype: str = "f32") -> None:
    try:
        import gguf
    except ImportError:
        raise SystemExit("akunu-convert writes GGUF with gguf-py: pip install 'akunu[convert]'") from None

    from akunu import _core

    model = _core.read_model(model_dir, with_data=True)
    md = model["metadata"]
    if md.get("general.architecture") == "whisper":
        return convert_whisper(model_dir, out_path, model, outtype)
    if md.get("general.architecture") != "bert":
        raise SystemExit(f"only BERT and Whisper models convert (this is {md.get('general.architecture')})")
    w = gguf.GGUFWriter(out_path, "bert")
    w.add_name(str(md.get("general.name", "bert")))
    w.add_context_length(int(md["bert.context_length"]))
    w.add_embedding_length(int(md["bert.embedding_length"]))
    w.add_feed_forward_length(int(md["bert.feed_forward_length"]))
    w.add_block_count(int(md["bert.block_count"]))
    w.add_head_count(int(md["bert.attention.head_count"]))
    w.add_layer_norm_eps(float(md["bert.attention.layer_norm_epsilon"]))
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType(int(md.get("bert.pooling_type", 1))))
    w.add_bool("akunu.normalize_embeddings", bool(md.get("akunu.normalize_embeddings", True)))
    if "akunu.max_seq_length" in md:
        w.add_uint32("akunu.max_seq_length", int(md["akunu.max_seq_length"]))

    pieces, types, ids = _wordpiece_vocab(model_dir)
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(pieces)
    w.add_token_types(types)
    w.add_token_type_count(int(md.get("bert.token_type_count", 2)))
    for name, adder in (("[UNK]", w.add_unk_token_id),
                        ("[CLS]", lambda i: w.add_uint32("tokenizer.ggml.cls_token_id", i)),
                        ("[SEP]", w.add_sep_token_id), ("[PAD]", w.add_pad_token_id),
                        ("[MASK]", w.add_mask_token_id)):
        if name in ids:
            adder(ids[name])

    _write_tensors(w, model["tensors"], outtype, keep_f32=("position_embd.weight",))
    _finish(w)


def _tensor_array(t, dequantize: bool = False) -> np.ndarray:
    if t["dtype"] not in ("F32", "F16", "BF16"):
        if dequantize:  # gguf-py's numpy dequantization
            import gguf

            raw = np.frombuffer(t["data"], dtype=np.uint8)
            qtype = gguf.GGMLQuantizationType(t["type_id"])
            return gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(list(reversed(t["shape"])))
        raise SystemExit(f"tensor {t['name']} is {t['dtype']}: only float models convert")
    src = {"F32": np.float32, "F16": np.float16}.get(t["dtype"])
    if src is None:  # BF16 -> F32
        a = (np.frombuffer(t["data"], dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        a = np.frombuffer(t["data"], dtype=src).astype(np.float32)
    return a.reshape(list(reversed(t["shape"])))  # GGUF order -> numpy (outermost first)


def _write_tensors(w, tensors, outtype: str, keep_f32=()) -> None:
    """Vectors stay F32 (as llama.cpp's converter does); matrices take the output type."""
    import gguf

    for t in tensors:
        a = _tensor_array(t)
        if a.ndim != 2 or t["name"] in keep_f32 or outtype == "f32":
            w.add_tensor(t["name"], a)
        elif outtype in ("q8_0", "q5_0", "q4_0") and a.shape[1] % 32 == 0:
            qtype = gguf.GGMLQuantizationType[outtype.upper()]
            q = gguf.quants.quantize(a, qtype)
            w.add_tensor(t["name"], q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            w.add_tensor(t["name"], a.astype(np.float16))


def _finish(w) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def convert_whisper(model_dir: str, out_path: str, model, outtype: str) -> None:
    import gguf

    md = model["metadata"]
    w = gguf.GGUFWriter(out_path, "whisper")
    w.add_name(os.path.basename(os.path.normpath(str(md.get("general.name", model_dir)))))
    for key, value in md.items():
        if not key.startswith("whisper."):
            continue
        if isinstance(value, list):
            w.add_array(key, [int(v) for v in value])
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_uint32(key, int(value))
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        w.add_string("tokenizer.huggingface.json", f.read())
    # position tables are added as F32 rows; conv weights keep full precision (tiny, and first in line)
    _write_tensors(w, model["tensors"], outtype,
                   keep_f32=("position_embd.weight", "enc.position_embd.weight", "enc.conv1.weight"))
    _finish(w)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=("f32", "f16", "q8_0", "q5_0", "q4_0"), default="f32")
    a = ap.parse_args()
    convert(a.model_dir, a.out, a.outtype)
    print(a.out)


if __name__ == "__main__":
    main()
