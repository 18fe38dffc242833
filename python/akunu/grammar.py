"""Grammar-constrained decoding through xgrammar: GBNF, JSON Schema and
"any JSON". xgrammar tracks the grammar on the host and writes the allowed
tokens as a bitmask; the device sampler applies it before choosing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

import numpy as np

from .errors import AkunuError

_TEXT_TYPES = (1, 4, 6)  # normal, user-defined, byte: tokens that stand for text


def _xgrammar():
    try:
        import xgrammar
    except ImportError as e:  # pragma: no cover - depends on the install
        raise AkunuError("grammar-constrained output needs xgrammar: pip install 'akunu[grammar]'") from e
    return xgrammar


@dataclass(frozen=True)
class Grammar:
    """What the output must match. Build with :meth:`gbnf`, :meth:`json_schema` or :meth:`any_json`."""

    kind: str  # "gbnf" | "json_schema" | "json"
    source: str = ""

    @classmethod
    def gbnf(cls, text: str) -> "Grammar":
        if not isinstance(text, str) or not text.strip():
            raise AkunuError("a GBNF grammar must be a non-empty string")
        return cls("gbnf", text)

    @classmethod
    def json_schema(cls, schema: Union[str, Dict[str, Any]]) -> "Grammar":
        if isinstance(schema, str):
            try:
                json.loads(schema)
            except json.JSONDecodeError as e:
                raise AkunuError(f"the JSON schema is not valid JSON: {e}") from None
            return cls("json_schema", schema)
        if not isinstance(schema, dict):
            raise AkunuError("a JSON schema must be a dict or a JSON string")
        return cls("json_schema", json.dumps(schema))

    @classmethod
    def any_json(cls) -> "Grammar":
        """Any JSON object (OpenAI's json_object mode)."""
        return cls("json")


class GrammarCompiler:
    """One per model: xgrammar's view of the vocabulary and a compile cache."""

    def __init__(self, tokenizer, vocab_size: int, stop_ids: List[int]):
        self._tokenizer = tokenizer
        self._stop_ids = stop_ids
        self.vocab_size = vocab_size
        self._compilers: Dict[bool, Any] = {}

    def _compiler(self, json_mode: bool):
        """xgrammar's compiler. In JSON mode, tokens holding control characters
        are withheld: compact JSON can contain none (inside strings they must
        be escaped), and xgrammar's string rule would let them through."""
        if json_mode not in self._compilers:
            xgr = _xgrammar()
            tok = self._tokenizer
            encoded = []
            for i in range(self.vocab_size):
                b = b""  # control / unused tokens are never text
                if i < tok.vocab_size and tok.token_types[i] in _TEXT_TYPES:
                    b = tok.token_bytes(i)
                    if json_mode and any(c < 0x20 for c in b):
                        b = b""
                encoded.append(b)
            info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=self.vocab_size,
                                     stop_token_ids=self._stop_ids)
            self._compilers[json_mode] = xgr.GrammarCompiler(info, max_threads=2)
        return self._compilers[json_mode]

    def compile(self, grammar: Grammar):
        try:
            if grammar.kind == "gbnf":
                return self._compiler(False).compile_grammar(grammar.source)
            # compact JSON: free whitespace lets a weak model ramble in spaces forever
            schema = grammar.source if grammar.kind == "json_schema" else '{"type": "object"}'
            return self._compiler(True).compile_json_schema(schema, any_whitespace=False)
        except AkunuError:
            raise
        except Exception as e:  # xgrammar reports parse errors as RuntimeError
            raise AkunuError(f"invalid {grammar.kind} grammar: {str(e).strip().splitlines()[0]}") from None


class GrammarState:
    """The grammar's position in one generation and the next token mask."""

    def __init__(self, compiled, vocab_size: int):
        xgr = _xgrammar()
        self._matcher = xgr.GrammarMatcher(compiled)
        self._mask = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)

    def mask_words(self) -> np.ndarray:
        self._matcher.fill_next_token_bitmask(self._mask)
        return self._mask[0].view(np.uint32)

    def accept(self, token: int) -> None:
        if not self._matcher.accept_token(int(token)):
            raise AkunuError(f"token {token} violates the grammar (internal error: the mask allowed it)")

    @property
    def terminated(self) -> bool:
        return self._matcher.is_terminated()
