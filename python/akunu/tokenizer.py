"""Tokenizers built with Hugging Face `tokenizers` from GGUF metadata.

Three families, as llama.cpp knows them:
- ``tokenizer.ggml.model = llama``: SentencePiece-style BPE over scored pieces
  (Llama 2, Gemma). Merges are derived from the piece scores, with byte fallback.
- ``tokenizer.ggml.model = gpt2``: byte-level BPE with explicit merges and a
  pre-tokenizer regex chosen by ``tokenizer.ggml.pre``.
- ``tokenizer.ggml.model = bert``: WordPiece (BERT embedding models). llama.cpp's
  converter writes word-initial pieces with a leading U+2581 and continuation
  pieces bare; they are mapped back to WordPiece's bare / ``##`` form.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from .errors import UnsupportedModelError

# llama.cpp token types
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6

_GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""
_LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_QWEN2 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# OpenAI's o200k pattern (gpt-4o, gpt-oss) as llama.cpp rewrites it for GGUF "gpt-4o"
# vocabularies. tokenizer.json holds the original,
#   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|...;
# the rewrite spells the upper run as letters that are not a-z and the lower run as letters
# that are not A-Z, so a letter outside ASCII belongs to both and a combining mark to
# neither (it splits off as punctuation does), and its contractions fold ASCII case only.
# llama.cpp's ids follow the rewrite, and so do these.
_GPT4O = (
    r"""[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"""
    r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"""
    r"""|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"""
    r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# tokenizer.ggml.pre -> list of regexes applied in sequence (llama.cpp's table)
_PRE_REGEXES: Dict[str, List[str]] = {
    "default": [_GPT2],
    "gpt-2": [_GPT2],
    "gpt2": [_GPT2],
    "mpt": [_GPT2],
    "olmo": [_GPT2],
    "llama-bpe": [_LLAMA3],
    "llama3": [_LLAMA3],
    "dbrx": [_LLAMA3],
    "smaug-bpe": [_LLAMA3],
    "qwen2": [_QWEN2],
    "starcoder": [r"\p{N}", _GPT2],
    "refact": [r"\p{N}", _GPT2],
    "command-r": [r"\p{N}", _GPT2],
    "smollm": [r"\p{N}", _GPT2],
    "gpt-4o": [_GPT4O],
}
_IGNORE_MERGES = {"llama-bpe", "llama3", "dbrx", "smaug-bpe"}


class TokenizerBase:
    """What GGUF and tokenizer.json tokenizers share: decoding and token bytes.
    Subclasses set kind, tokens, token_types and _tok (a `tokenizers.Tokenizer`)."""

    kind: str
    tokens: List[str]
    token_types: List[int]

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special)

    def save_tokenizer_json(self, folder: str) -> None:
        """This tokenizer as a Hugging Face tokenizer folder (tokenizer.json and a
        tokenizer_config.json naming the fast class), for tools that load one by
        path (load generators counting tokens, transformers' AutoTokenizer)."""
        import json
        import os

        os.makedirs(folder, exist_ok=True)
        self._tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)

    def encode_batch(self, texts: Sequence[str], add_bos: bool = True) -> List[List[int]]:
        """encode() of each text; subclasses hand the list to `tokenizers`, which spreads it over the cores."""
        return [self.encode(t, add_bos) for t in texts]

    def _piece_text(self, piece: str) -> str:
        """A (non byte-level) piece as text: SentencePiece's U+2581 is a space."""
        return piece.replace("\u2581", " ")

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes a token stands for (for streaming that never splits UTF-8).
        Ids past the tokenizer's vocabulary (rows a model pads its output
        head with, which sampling can still draw) stand for no text."""
        if not 0 <= token_id < len(self.tokens):
            return b""
        piece = self.tokens[token_id]
        ty = self.token_types[token_id]
        if ty == _CONTROL:
            return b""
        if self.kind == "gpt2":
            return _bytelevel_decode(piece)
        if ty == _BYTE and piece.startswith("<0x") and piece.endswith(">"):
            return bytes([int(piece[3:-1], 16)])
        return self._piece_text(piece).encode("utf-8")


class GGUFTokenizer(TokenizerBase):
    """Text <-> token ids for one GGUF model, plus its special-token ids."""

    def __init__(self, metadata: Dict[str, Any]):
        kind = metadata.get("tokenizer.ggml.model")
        tokens = metadata.get("tokenizer.ggml.tokens")
        if kind is None or tokens is None:
            raise UnsupportedModelError("the model file has no tokenizer (tokenizer.ggml.model / tokens missing)")
        self.kind = kind
        self.tokens: List[str] = list(tokens)
        n = len(self.tokens)
        types = list(metadata.get("tokenizer.ggml.token_type") or [_NORMAL] * n)
        if len(types) != n:
            raise UnsupportedModelError("tokenizer.ggml.token_type length does not match the vocabulary")
        self.token_types = types
        self.bos_id: Optional[int] = metadata.get("tokenizer.ggml.bos_token_id")
        self.eos_id: Optional[int] = metadata.get("tokenizer.ggml.eos_token_id")
        self.add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", kind == "llama"))
        self.add_eos = bool(metadata.get("tokenizer.ggml.add_eos_token", False))
        if kind == "llama":
            self._tok = self._build_spm(metadata)
        elif kind == "gpt2":
            self._tok = self._build_bpe(metadata)
        elif kind == "bert":
            self._tok = self._build_wordpiece(metadata)
            self.add_bos = False  # [CLS] ... [SEP] come from the post-processor (encode with add_bos)
        else:
            raise UnsupportedModelError(
                f"tokenizer model '{kind}' is not supported (expected 'llama', 'gpt2' or 'bert')")
        self._add_special_tokens()

    # -- construction -------------------------------------------------------
    def _build_spm(self, md: Dict[str, Any]) -> Tokenizer:
        scores = list(md.get("tokenizer.ggml.scores") or [0.0] * len(self.tokens))
        vocab = {t: i for i, t in enumerate(self.tokens)}
        # A merge (a, b) exists when a, b and a+b are pieces; SentencePiece merges
        # the pair whose result scores highest first, which ranks the merges.
        ranked = []
        for i, piece in enumerate(self.tokens):
            if self.token_types[i] not in (_NORMAL, _USER_DEFINED) or len(piece) < 2:
                continue
            for cut in range(1, len(piece)):
                a, b = piece[:cut], piece[cut:]
                ia, ib = vocab.get(a), vocab.get(b)
                if ia is not None and ib is not None:
                    ranked.append((-scores[i], i, ia, ib, a, b))
        ranked.sort()
        merges = [(a, b) for _, _, _, _, a, b in ranked]
        unk_id = md.get("tokenizer.ggml.unknown_token_id", 0)
        unk = self.tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(self.tokens) else None
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, byte_fallback=True, fuse_unk=True))
        self.add_space_prefix = bool(md.get("tokenizer.ggml.add_space_prefix", True))
        norm = [normalizers.Replace(" ", "\u2581")]
        if self.add_space_prefix:
            norm.insert(0, normalizers.Prepend("\u2581"))
        tok.normalizer = normalizers.Sequence(norm)
        dec = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
        if self.add_space_prefix:
            dec.append(decoders.Strip(content=" ", left=1, right=0))
        tok.decoder = decoders.Sequence(dec)
        return tok

    def _build_bpe(self, md: Dict[str, Any]) -> Tokenizer:
        raw = md.get("tokenizer.ggml.merges")
        if raw is None:
            raise UnsupportedModelError("byte-level BPE tokenizer without tokenizer.ggml.merges")
        merges = []
        for m in raw:
            a, sep, b = m.partition(" ")
            if not sep:
                raise UnsupportedModelError(f"malformed BPE merge {m!r}")
            merges.append((a, b))
        vocab = {t: i for i, t in enumerate(self.tokens)}
        pre = md.get("tokenizer.ggml.pre", "default")
        # Llama 3's tokenizer takes a pre-token that is itself in the vocabulary
        # as is, without merging (llama.cpp: ignore_merges for LLAMA3).
        ignore_merges = pre in _IGNORE_MERGES
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
        regexes = _PRE_REGEXES.get(pre)
        if regexes is None:
            raise UnsupportedModelError(
                f"pre-tokenizer '{pre}' is not supported (known: {', '.join(sorted(_PRE_REGEXES))})"
            )
        steps = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
        tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
        tok.decoder = decoders.ByteLevel()
        return tok

    def _build_wordpiece(self, md: Dict[str, Any]) -> Tokenizer:
        vocab: Dict[str, int] = {}
        for i, t in enumerate(self.tokens):
            if self.token_types[i] == _CONTROL or (t.startswith("[") and t.endswith("]")):
                piece = t
            elif t.startswith("\u2581"):
                piece = t[1:]
            else:
                piece = "##" + t
            vocab.setdefault(piece, i)
        unk_id = md.get("tokenizer.ggml.unknown_token_id", 100)
        unk = self.tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(self.tokens) else "[UNK]"
        tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=unk, max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                    lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        cls_id = md.get("tokenizer.ggml.cls_token_id", md.get("tokenizer.ggml.bos_token_id"))
        sep_id = md.get("tokenizer.ggml.seperator_token_id", md.get("tokenizer.ggml.eos_token_id"))
        if isinstance(cls_id, int) and isinstance(sep_id, int) and 0 <= cls_id < len(self.tokens) \
                and 0 <= sep_id < len(self.tokens):
            cls, sep = self.tokens[cls_id], self.tokens[sep_id]
            tok.post_processor = processors.TemplateProcessing(
                single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
                special_tokens=[(cls, cls_id), (sep, sep_id)])
        tok.decoder = decoders.WordPiece()
        return tok

    def _add_special_tokens(self) -> None:
        added = []
        for i, (t, ty) in enumerate(zip(self.tokens, self.token_types)):
            if ty == _CONTROL or (ty == _USER_DEFINED and self.kind == "gpt2"):
                added.append(AddedToken(t, special=ty == _CONTROL, normalized=False))
            elif ty == _USER_DEFINED:
                added.append(AddedToken(t, special=False, normalized=True))
        if added:
            self._tok.add_tokens(added)

    # -- use ----------------------------------------------------------------
    def encode(self, text: str, add_bos: bool = True) -> List[int]:
        text = _valid_utf8(text)
        if self.kind == "bert":
            return self._tok.encode(text, add_special_tokens=add_bos).ids
        ids = self._tok.encode(text, add_special_tokens=False).ids
        if add_bos and self.add_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return ids

    def encode_batch(self, texts: Sequence[str], add_bos: bool = True) -> List[List[int]]:
        texts = [_valid_utf8(t) for t in texts]
        if self.kind == "bert":
            return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=add_bos)]
        lead = [self.bos_id] if add_bos and self.add_bos and self.bos_id is not None else []
        return [lead + e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]


def _valid_utf8(text: str) -> str:
    """Lone surrogates (e.g. from JSON "\\ud800") become U+FFFD instead of failing in `tokenizers`."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bytes_to_unicode() -> Dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


_BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}


def _bytelevel_decode(piece: str) -> bytes:
    try:
        return bytes(_BYTE_DECODER[c] for c in piece)
    except KeyError:
        return piece.encode("utf-8")
