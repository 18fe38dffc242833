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

    @classmethod
    def after_thinking(cls, answer: Optional["Grammar"], opened: bool,
                       max_tokens: Optional[int] = None) -> "Grammar":
        """A reply that reasons first: free text up to the first ``</think>``, then `answer`
        (None: any text). With `opened` the prompt has written ``<think>`` and the reply
        starts inside the block; else the block is optional and the reply opens it. The
        block's text holds no ``</think>``; `max_tokens` bounds it (then ``</think>`` comes)."""
        return cls.gbnf(thinking_ebnf(answer, opened, max_tokens))


def no_raw_control_characters(ebnf: str) -> str:
    """xgrammar's rule for length-bounded strings admits raw control characters, which
    JSON forbids in strings: every negated character class (they only occur in string
    rules) also excludes U+0000-U+001F. Quoted literals are left as they are."""
    out, i, n = [], 0, len(ebnf)
    while i < n:
        c = ebnf[i]
        if c == '"':  # a literal: copy it through its closing quote
            j = i + 1
            while j < n and ebnf[j] != '"':
                j += 2 if ebnf[j] == "\\" else 1
            out.append(ebnf[i:j + 1])
            i = j + 1
            continue
        if c == "[":  # a character class: copy through its closing bracket
            j = i + 1
            while j < n and ebnf[j] != "]":
                j += 2 if ebnf[j] == "\\" else 1
            cls = ebnf[i:j + 1]
            if cls.startswith("[^") and not cls.startswith("[^\\0-\\x1f"):
                cls = "[^\\0-\\x1f" + cls[2:]
            out.append(cls)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def json_ebnf(schema: str) -> str:
    """Compact JSON valid for `schema` (a JSON string) as EBNF with root rule ``root``,
    raw control characters kept out of strings (the JSON-mode vocabulary does that when
    the schema is compiled alone; embedded, the grammar must)."""
    xgr = _xgrammar()
    try:
        ebnf = str(xgr.Grammar.from_json_schema(schema, any_whitespace=False))
    except Exception as e:  # xgrammar reports unsupported schemas as RuntimeError
        raise AkunuError(f"invalid json_schema grammar: {str(e).strip().splitlines()[0]}") from None
    return no_raw_control_characters(ebnf)


def answer_ebnf(g: Grammar) -> str:
    """What `g` accepts as EBNF with root rule ``root``, to embed in a larger grammar."""
    if g.kind == "gbnf":
        return g.source
    return json_ebnf(g.source if g.kind == "json_schema" else '{"type": "object"}')


# what may sit between "</think>" and the answer: the line breaks reasoning models write there,
# bounded so that a weak model cannot pad the reply with blank lines forever
_AFTER_THINK = r'root ::= [ \n]{0,4}'


def thinking_ebnf(answer: Optional[Grammar], opened: bool, max_tokens: Optional[int] = None) -> str:
    """The EBNF of Grammar.after_thinking, composed with xgrammar's structural tags: the think
    block is a tag whose any-text body excludes its end marker, so the first ``</think>``
    closes it and the answer's grammar applies from there."""
    from xgrammar.structural_tag import (AnyTextFormat, GrammarFormat, OptionalFormat, SequenceFormat,
                                         StructuralTag, TagFormat)

    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                   or max_tokens < 1):
        raise AkunuError(f"the reasoning's token limit must be a positive integer, got {max_tokens!r}")
    xgr = _xgrammar()
    body = AnyTextFormat(max_tokens=max_tokens) if max_tokens is not None else AnyTextFormat()
    block = SequenceFormat(elements=[TagFormat(begin="" if opened else "<think>", content=body, end="</think>"),
                                     GrammarFormat(grammar=_AFTER_THINK)])
    think = block if opened else OptionalFormat(content=block)
    rest = GrammarFormat(grammar=answer_ebnf(answer)) if answer is not None else AnyTextFormat()
    try:
        g = xgr.Grammar.from_structural_tag(StructuralTag(format=SequenceFormat(elements=[think, rest])))
    except Exception as e:
        raise AkunuError(f"invalid {answer.kind if answer else 'text'} grammar: "
                         f"{str(e).strip().splitlines()[0]}") from None
    return str(g)


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
