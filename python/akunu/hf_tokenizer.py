"""The tokenizer of a Hugging Face / MLX model directory: its own
``tokenizer.json`` through `tokenizers`, special-token ids from
``tokenizer_config.json`` / ``config.json``, and the chat template from
``tokenizer_config.json``. Same interface as :class:`GGUFTokenizer`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence

from tokenizers import Tokenizer

from .errors import UnsupportedModelError
from .tokenizer import _BYTE, _CONTROL, _NORMAL, TokenizerBase, _valid_utf8


def _read_json(path: str) -> Dict[str, Any]:
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise UnsupportedModelError(f"cannot read {path}: {e}") from None
    return data if isinstance(data, dict) else {}


def _token_text(v: Any) -> Optional[str]:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


class HFTokenizer(TokenizerBase):
    """Text <-> token ids from a model directory's tokenizer.json."""

    def __init__(self, directory: str):
        path = os.path.join(directory, "tokenizer.json")
        if not os.path.exists(path):
            raise UnsupportedModelError(f"the model directory '{directory}' has no tokenizer.json")
        try:
            self._tok = Tokenizer.from_file(path)
            # padding / truncation saved in tokenizer.json are batch settings of its
            # trainer; akunu feeds exact sequences and truncates itself
            self._tok.no_padding()
            self._tok.no_truncation()
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
        except Exception as e:
            raise UnsupportedModelError(f"cannot load {path}: {e}") from None
        self.config = _read_json(os.path.join(directory, "tokenizer_config.json"))
        model_cfg = _read_json(os.path.join(directory, "config.json"))
        vocab = self._tok.get_vocab(with_added_tokens=True)
        n = max(vocab.values()) + 1 if vocab else 0
        self.tokens: List[str] = [""] * n
        for t, i in vocab.items():
            self.tokens[i] = t
        self.token_types = [_NORMAL] * n
        for i, added in self._tok.get_added_tokens_decoder().items():
            if added.special and 0 <= i < n:
                self.token_types[i] = _CONTROL
        model_type = (spec.get("model") or {}).get("type", "")
        decoder = json.dumps(spec.get("decoder") or {})
        self.kind = "bert" if model_type == "WordPiece" else "gpt2" if '"ByteLevel"' in decoder else "llama"
        if self.kind == "llama":
            for i, t in enumerate(self.tokens):
                if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                    self.token_types[i] = _BYTE
        self.bos_id = self._special_id("bos_token", model_cfg.get("bos_token_id"))
        self.eos_id = self._special_id("eos_token", model_cfg.get("eos_token_id"))
        self.chat_template: Optional[str] = self.config.get("chat_template") if isinstance(
            self.config.get("chat_template"), str) else None

    def _special_id(self, key: str, fallback: Any) -> Optional[int]:
        text = _token_text(self.config.get(key))
        if text is not None:
            i = self._tok.token_to_id(text)
            if i is not None:
                return i
        if isinstance(fallback, list) and fallback:
            fallback = fallback[0]
        return fallback if isinstance(fallback, int) and 0 <= fallback < len(self.tokens) else None

    def metadata(self) -> Dict[str, Any]:
        """GGUF-named tokenizer keys, so code written against GGUF metadata sees the same facts."""
        md: Dict[str, Any] = {"tokenizer.ggml.model": self.kind}
        if self.bos_id is not None:
            md["tokenizer.ggml.bos_token_id"] = self.bos_id
        if self.eos_id is not None:
            md["tokenizer.ggml.eos_token_id"] = self.eos_id
        if self.chat_template:
            md["tokenizer.chat_template"] = self.chat_template
        return md

    def encode(self, text: str, add_bos: bool = True) -> List[int]:
        # tokenizer.json's post-processor adds what the model expects (BOS, or [CLS] ... [SEP])
        return self._tok.encode(_valid_utf8(text), add_special_tokens=add_bos).ids

    def encode_batch(self, texts: Sequence[str], add_bos: bool = True) -> List[List[int]]:
        return [e.ids for e in self._tok.encode_batch([_valid_utf8(t) for t in texts], add_special_tokens=add_bos)]

    def _piece_text(self, piece: str) -> str:
        if self.kind == "bert":  # WordPiece: "##" continues a word, anything else starts one
            return piece[2:] if piece.startswith("##") else " " + piece
        return super()._piece_text(piece)
