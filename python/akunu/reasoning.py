"""Reasoning apart from the answer: ``message.reasoning_content`` (and
``delta.reasoning_content`` in streams) as vLLM and llama-server return it.

Two syntaxes, chosen from the chat template:
  * ``<think>...</think>`` (Qwen3, QwQ, DeepSeek-R1 and their distills). A
    reply may start inside the block: templates that end the generation
    prompt with ``<think>\\n`` (R1's, Qwen3's in some versions) open it
    themselves, which the rendered prompt shows (its last ``<think>`` is not
    closed). A block that never closes (the reply ran out of tokens) is all
    reasoning.
  * OpenAI's harmony channels (gpt-oss): ``<|channel|>analysis<|message|>...
    <|end|>`` is reasoning, ``<|channel|>final<|message|>...`` the answer.

Streams send only what can no longer change: text that may be the start of a
marker, and whitespace that the whole reply would strip, wait for the next
piece, so the deltas join to the whole reply's fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .chat_template import RESERVED_TEMPLATE_VARIABLES
from .errors import AkunuError

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_CHANNEL, _MESSAGE = "<|channel|>", "<|message|>"
_HARMONY_MARKERS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>",
                    "<|constrain|>")
REASONING_FORMATS = ("auto", "deepseek", "none")  # llama-server's reasoning_format values we take


@dataclass(frozen=True)
class ReasoningSyntax:
    kind: str            # "think" | "harmony"
    starts_inside: bool  # the prompt opened the think block


def syntax_for(template_source: str, prompt_text: str, vocab=()) -> Optional[ReasoningSyntax]:
    """The reply's reasoning syntax under this template and prompt, or None."""
    if _CHANNEL in template_source and "analysis" in template_source:
        return ReasoningSyntax("harmony", False)
    if THINK_CLOSE in template_source or THINK_OPEN in template_source or THINK_CLOSE in vocab:
        return ReasoningSyntax("think", prompt_text.rfind(THINK_OPEN) > prompt_text.rfind(THINK_CLOSE))
    return None


def can_disable_thinking(template_source: str) -> bool:
    """Whether the template takes ``enable_thinking`` (Qwen3's, R1 distills' in llama.cpp's set)."""
    return re.search(r"\benable_thinking\b", template_source) is not None


def template_kwargs(chat_template_kwargs: Any = None, enable_thinking: Any = None,
                    reasoning_effort: Any = None) -> Dict[str, Any]:
    """Extra variables for the chat template: chat_template_kwargs (vLLM's and llama-server's
    field) with the top-level enable_thinking and reasoning_effort on top."""
    out: Dict[str, Any] = {}
    if chat_template_kwargs is not None:
        if not isinstance(chat_template_kwargs, dict) or not all(isinstance(k, str) for k in chat_template_kwargs):
            raise AkunuError("chat_template_kwargs must be an object of template variables")
        if "tools" in chat_template_kwargs:
            raise AkunuError("chat_template_kwargs cannot set tools: give the request's tools field")
        taken = sorted(set(chat_template_kwargs) & RESERVED_TEMPLATE_VARIABLES)
        if taken:
            raise AkunuError(f"chat_template_kwargs cannot set {', '.join(taken)} (the renderer sets it)")
        out.update(chat_template_kwargs)
    if "enable_thinking" in out and not isinstance(out["enable_thinking"], bool):
        raise AkunuError("chat_template_kwargs.enable_thinking must be true or false")
    if enable_thinking is not None:
        if not isinstance(enable_thinking, bool):
            raise AkunuError("enable_thinking must be true or false")
        out["enable_thinking"] = enable_thinking
    if reasoning_effort is not None:
        if reasoning_effort not in ("low", "medium", "high"):
            raise AkunuError(f"reasoning_effort must be 'low', 'medium' or 'high', got {reasoning_effort!r}")
        out["reasoning_effort"] = reasoning_effort
    return out


def check_budget(max_reasoning_tokens: Any) -> Optional[int]:
    """The reasoning's token limit: None (no limit) or a positive integer."""
    v = max_reasoning_tokens
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise AkunuError(f"max_reasoning_tokens must be a positive integer, got {v!r}")
    return v


def check_format(reasoning_format: Any) -> str:
    if reasoning_format is None:
        return "auto"
    if reasoning_format not in REASONING_FORMATS:
        raise AkunuError(f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}, got {reasoning_format!r}")
    return reasoning_format


def _partial_suffix(text: str, markers) -> int:
    """Length of the longest end of `text` that is a proper start of a marker."""
    best = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(text)), best, -1):
            if text.endswith(m[:n]):
                best = n
                break
    return best


def split(text: str, syntax: Optional[ReasoningSyntax], final: bool = True) -> Tuple[str, str, bool]:
    """(reasoning, content, reasoning seen) of a reply; with final=False, only what the
    rest of the reply cannot change (each field a start of the final one)."""
    if syntax is None:
        return "", text, False
    if syntax.kind == "harmony":
        return _split_harmony(text, final)
    return _split_think(text, syntax.starts_inside, final)


def _split_think(text: str, inside: bool, final: bool) -> Tuple[str, str, bool]:
    if not inside:
        body = text.lstrip()
        if not body.startswith(THINK_OPEN):
            if not final and THINK_OPEN.startswith(body):
                return "", "", False  # whitespace or "<thi": a block may be opening
            return "", text, False
        text = body[len(THINK_OPEN):]
    end = text.find(THINK_CLOSE)
    if end < 0:  # still thinking (or never stopped)
        if not final:
            text = text[: len(text) - _partial_suffix(text, (THINK_CLOSE,))].rstrip()
        return text.strip(), "", True
    reasoning, content = text[:end].strip(), text[end + len(THINK_CLOSE):].lstrip()
    return reasoning, content, True


_HARMONY_SEGMENT = re.compile(r"(?:<\|start\|>[^<]*)?<\|channel\|>([^<]*?)(?:<\|constrain\|>[^<]*)?<\|message\|>")


def _split_harmony(text: str, final: bool) -> Tuple[str, str, bool]:
    if not final:
        text = text[: len(text) - _partial_suffix(text, _HARMONY_MARKERS)]
    if _CHANNEL not in text:
        if not final and (not text.strip() or text.lstrip().startswith("<|")):
            return "", "", False  # a channel header may be coming
        return "", text, False
    reasoning, content, seen = [], [], False
    pos = 0
    lead = text[: text.find(_CHANNEL)]
    if lead.strip() and not lead.strip().startswith("<|start|>"):
        content.append(lead)
    for m in _HARMONY_SEGMENT.finditer(text):
        if m.start() < pos:
            continue
        channel = m.group(1).strip().split()[0] if m.group(1).strip() else ""
        body_start = m.end()
        ends = [i for i in (text.find(e, body_start) for e in ("<|end|>", "<|return|>", "<|call|>")) if i >= 0]
        body_end = min(ends) if ends else len(text)
        nxt = text.find("<|start|>", body_start)
        if nxt >= 0 and nxt < body_end:
            body_end = nxt
        body = text[body_start:body_end]
        if channel == "analysis":
            reasoning.append(body)
            seen = True
        else:
            content.append(body)
        pos = body_end
    return "".join(reasoning), "".join(content), seen


class DeltaSplitter:
    """Text pieces in, (reasoning delta, content delta) out; the deltas join to split()."""

    def __init__(self, syntax: Optional[ReasoningSyntax]):
        self.syntax = syntax
        self.text = ""
        self._reasoning = ""
        self._content = ""

    def feed(self, piece: str) -> Tuple[str, str]:
        self.text += piece
        return self._deltas(*split(self.text, self.syntax, final=False)[:2])

    def finish(self) -> Tuple[str, str]:
        return self._deltas(*split(self.text, self.syntax, final=True)[:2])

    def _deltas(self, reasoning: str, content: str) -> Tuple[str, str]:
        r = c = ""
        if reasoning.startswith(self._reasoning) and len(reasoning) > len(self._reasoning):
            r, self._reasoning = reasoning[len(self._reasoning):], reasoning
        if content.startswith(self._content) and len(content) > len(self._content):
            c, self._content = content[len(self._content):], content
        return r, c
