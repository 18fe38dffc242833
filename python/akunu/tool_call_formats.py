"""How each model family writes a tool call, and a parser that finds the
calls in generated text, complete or still being written.

Formats (the parser is chosen from the chat template: tool_calls.py):
  hermes   ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Qwen, Hermes);
           several blocks in a row are parallel calls; text before them is content;
           untagged call JSON at the start counts too (the tag may be a hidden token)
  llama3   ``{"name": ..., "parameters": {...}}`` at the start of the reply, optionally
           after ``<|python_tag|>``; several separated by ``;``
  mistral  ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (the tag is a control
           token, so usually only the list is visible), or ``[TOOL_CALLS]name[ARGS]{...}``
  generic  a JSON call object (or a list of them) as the whole reply, optionally in a
           ```json fence: the format tool_calls.py asks templates without tool support for

Untagged JSON (and JSON in a fence) is a call only when its first key is "name"
and it names an offered tool, so a JSON answer is told from a call at once.

The parser is a pure function of the text so far: parse(text, final=False)
says which text is certainly content and which calls have begun (name known,
arguments as written so far), so a stream can send OpenAI deltas by
comparing successive parses; parse(text, final=True) is the whole answer.
Arguments are the model's own JSON text of the arguments object, so the
streamed fragments add up to exactly the final string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Collection, List, Optional, Tuple

_WS = " \t\r\n"


@dataclass(frozen=True)
class ToolFormat:
    name: str
    openers: Tuple[str, ...]   # visible text that starts a block of calls anywhere in the reply
    closers: Tuple[str, ...]   # what ends a block opened by the opener of the same index ("" none)
    bare: bool                 # a call may start the reply (or follow another) with no opener
    arg_keys: Tuple[str, ...] = ("arguments", "parameters")
    separators: str = ""       # characters allowed between consecutive calls besides whitespace


FORMATS = {
    # bare: a tokenizer that hides <tool_call> as a control token leaves only the JSON
    "hermes": ToolFormat("hermes", ("<tool_call>",), ("</tool_call>",), bare=True),
    "llama3": ToolFormat("llama3", ("<|python_tag|>",), ("",), bare=True, separators=";"),
    "mistral": ToolFormat("mistral", ("[TOOL_CALLS]",), ("",), bare=True),
    "generic": ToolFormat("generic", ("```json", "```"), ("```", "```"), bare=True),
}


@dataclass
class ParsedCall:
    name: str
    arguments: str     # JSON text of the arguments object (so far, while incomplete)
    complete: bool


@dataclass
class Parsed:
    content: str                      # text that is not part of a call
    calls: List[ParsedCall] = field(default_factory=list)

    @property
    def complete_calls(self) -> List[ParsedCall]:
        return [c for c in self.calls if c.complete]


class _Invalid(Exception):
    """Not a (well-formed) call: the text is content."""


class _Incomplete(Exception):
    """The text ends before the value does."""


# -- a JSON scanner that tells "invalid" from "not finished yet" ---------------------
_LITERAL = re.compile(r"[0-9A-Za-z.+\-]+")


def _ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _string_end(s: str, i: int) -> int:
    j = i + 1
    n = len(s)
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return j + 1
        if c < " ":
            raise _Invalid  # JSON strings hold no raw control characters
        j += 1
    raise _Incomplete


def _value_end(s: str, i: int) -> int:
    if i >= len(s):
        raise _Incomplete
    c = s[i]
    if c == '"':
        return _string_end(s, i)
    if c in "{[":
        close = "}" if c == "{" else "]"
        j = _ws(s, i + 1)
        if j >= len(s):
            raise _Incomplete
        if s[j] == close:
            return j + 1
        while True:
            if c == "{":
                if j >= len(s):
                    raise _Incomplete
                if s[j] != '"':
                    raise _Invalid
                j = _ws(s, _string_end(s, j))
                if j >= len(s):
                    raise _Incomplete
                if s[j] != ":":
                    raise _Invalid
                j = _ws(s, j + 1)
            j = _ws(s, _value_end(s, j))
            if j >= len(s):
                raise _Incomplete
            if s[j] == ",":
                j = _ws(s, j + 1)
                continue
            if s[j] == close:
                return j + 1
            raise _Invalid
    m = _LITERAL.match(s, i)
    if not m:
        raise _Invalid
    if m.end() == len(s):
        raise _Incomplete  # a number or literal that may go on
    try:
        json.loads(m.group())
    except ValueError:
        raise _Invalid from None
    return m.end()


@dataclass
class _Call:
    name: Optional[str] = None
    args_start: Optional[int] = None
    args_end: Optional[int] = None
    end: Optional[int] = None   # after the call object's closing brace


def _scan_call(s: str, i: int, fmt: ToolFormat, name_first: bool) -> _Call:
    """The call object at s[i] == '{', as far as the text goes (end None: unfinished).
    name_first: an object whose first key is not "name" is no call (untagged JSON is
    then told from a call at its first key, not at its end)."""
    call = _Call()
    try:
        j = _ws(s, i + 1)
        if j >= len(s):
            raise _Incomplete
        if s[j] == "}":
            raise _Invalid  # no name
        while True:
            if s[j] != '"':
                raise _Invalid
            ke = _string_end(s, j)
            key = json.loads(s[j:ke])
            if name_first and call.name is None and key != "name":
                raise _Invalid
            j = _ws(s, ke)
            if j >= len(s):
                raise _Incomplete
            if s[j] != ":":
                raise _Invalid
            vs = _ws(s, j + 1)
            if key in fmt.arg_keys:
                if call.args_start is not None:
                    raise _Invalid  # two argument objects
                call.args_start = vs
            ve = _value_end(s, vs)
            if key == "name":
                name = json.loads(s[vs:ve])
                if not isinstance(name, str) or not name:
                    raise _Invalid
                call.name = name
            elif key in fmt.arg_keys:
                call.args_end = ve
            j = _ws(s, ve)
            if j >= len(s):
                raise _Incomplete
            if s[j] == ",":
                j = _ws(s, j + 1)
                if j >= len(s):
                    raise _Incomplete
                continue
            if s[j] == "}":
                call.end = j + 1
                break
            raise _Invalid
    except _Incomplete:
        return call
    except (ValueError, RecursionError):
        raise _Invalid from None
    if call.name is None:
        raise _Invalid
    return call


def _arguments(s: str, call: _Call) -> Tuple[str, bool]:
    """(arguments text so far, whether it is final); arguments given as a JSON string are
    decoded, and only once whole."""
    if call.args_start is None:
        return ("{}", True) if call.end is not None else ("", False)
    if call.args_end is None:
        if call.args_start < len(s) and s[call.args_start] == '"':
            return "", False
        return s[call.args_start:], False
    raw = s[call.args_start:call.args_end]
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise _Invalid from None
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except (ValueError, RecursionError):
            raise _Invalid from None
        if not isinstance(inner, dict):
            raise _Invalid
        return value, True
    if not isinstance(value, dict):
        raise _Invalid
    return raw, True


class _Block:
    """Calls found from one start position: complete calls, maybe one unfinished, and
    where the block ends (None: the text ends inside it)."""

    def __init__(self):
        self.calls: List[ParsedCall] = []
        self.end: Optional[int] = None


def _check_name(name: Optional[str], names: Optional[Collection[str]]) -> None:
    if name is not None and names is not None and name not in names:
        raise _Invalid


def _payload(s: str, i: int, fmt: ToolFormat, names: Optional[Collection[str]], block: _Block) -> Optional[int]:
    """Scans one call object or a list of them at s[i]; returns the end, None if unfinished."""
    if i >= len(s):
        return None
    if s[i] == "{":
        items_start, in_list = i, False
    elif s[i] == "[":
        items_start, in_list = _ws(s, i + 1), True
        if items_start >= len(s):
            return None
        if s[items_start] != "{":
            raise _Invalid
    else:
        raise _Invalid
    j = items_start
    while True:
        call = _scan_call(s, j, fmt, name_first=names is not None)
        _check_name(call.name, names)
        if call.name is not None:
            args, done = _arguments(s, call)
            block.calls.append(ParsedCall(call.name, args, done and call.end is not None))
        if call.end is None:
            return None
        if not in_list:
            return call.end
        j = _ws(s, call.end)
        if j >= len(s):
            return None
        if s[j] == "]":
            return j + 1
        if s[j] != ",":
            raise _Invalid
        j = _ws(s, j + 1)
        if j >= len(s):
            return None
        if s[j] != "{":
            raise _Invalid


_MISTRAL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def _mistral_named(s: str, i: int, block: _Block) -> Optional[int]:
    """``name[ARGS]{...}`` after ``[TOOL_CALLS]`` (Mistral's newer templates)."""
    m = _MISTRAL_NAME.match(s, i)
    if not m:
        raise _Invalid
    j = m.end()
    rest = s[j:j + 6]
    if not "[ARGS]".startswith(rest) or (len(rest) < 6 and j + len(rest) < len(s)):
        raise _Invalid
    if len(rest) < 6:
        return None
    a = _ws(s, j + 6)
    if a >= len(s):
        return None
    if s[a] != "{":
        raise _Invalid
    try:
        e = _value_end(s, a)
    except _Incomplete:
        block.calls.append(ParsedCall(m.group(), s[a:], False))
        return None
    except RecursionError:
        raise _Invalid from None
    args, _ = _arguments(s, _Call(m.group(), a, e, e))
    block.calls.append(ParsedCall(m.group(), args, True))
    return e


def _block(s: str, i: int, fmt: ToolFormat, opener: int, names: Optional[Collection[str]], final: bool) -> _Block:
    """The calls of the block at s[i]: after opener number `opener` (-1: a bare payload)."""
    block = _Block()
    if opener >= 0:
        j = _ws(s, i + len(fmt.openers[opener]))
        closer = fmt.closers[opener]
        # behind a tag of the model's own the intent is plain: any name is a call
        check = None if fmt.name in ("hermes", "mistral") else names
    else:
        j, closer, check = i, "", names
    if j >= len(s):
        return block
    if fmt.name == "mistral" and opener >= 0 and s[j] not in "[{":
        end = _mistral_named(s, j, block)
    else:
        end = _payload(s, j, fmt, check, block)
    if end is None:
        return block
    if closer:
        k = _ws(s, end)
        if s.startswith(closer, k):
            end = k + len(closer)
        elif closer.startswith(s[k:]):  # the closer may still come (or was left out at the end)
            if not final:
                return block
            end = len(s)
        # else: no closer (some models omit it); the block ends after its payload
    block.end = end
    return block


def _partial_opener(s: str, openers: Tuple[str, ...]) -> int:
    """Length of the longest tail of s that begins an opener."""
    best = 0
    for o in openers:
        for n in range(min(len(o) - 1, len(s)), best, -1):
            if s.endswith(o[:n]):
                best = n
                break
    return best


def _next_opener(text: str, i: int, fmt: ToolFormat) -> Tuple[int, int]:
    """(position, opener number) of the first opener at or after i; (-1, -1) if none."""
    start, opener = -1, -1
    for n, o in enumerate(fmt.openers):
        p = text.find(o, i)
        if p >= 0 and (start < 0 or p < start):
            start, opener = p, n
    return start, opener


def parse(text: str, fmt: ToolFormat, names: Optional[Collection[str]] = None, final: bool = True) -> Parsed:
    """Content and calls of `text`. `names`: the offered tools (bare JSON must name one).
    final=False: the text may go on; content that could still turn out to be part of a call
    is held back, and the last call may be unfinished."""
    segments: List[str] = []   # text between blocks, whitespace next to a block removed
    calls: List[ParsedCall] = []
    cur, cur_after_block = "", False  # the segment being read, and whether a block precedes it
    pos, bare_ok = 0, fmt.bare

    def flush(before_block: bool) -> None:
        t = cur.lstrip(_WS) if cur_after_block else cur
        t = t.rstrip(_WS) if before_block else t
        if t:
            segments.append(t)

    while True:
        k = _ws(text, pos)
        at_bare = (bare_ok and k < len(text) and text[k] in "{[" and not (cur + text[pos:k]).strip()
                   and (cur_after_block or not segments))
        start, opener = (k, -1) if at_bare else _next_opener(text, pos, fmt)
        if start < 0:
            cur += text[pos:]
            if not final:
                # hold back what may still begin a call: a partial opener, trailing
                # whitespace, and (for bare formats) a reply that so far is only whitespace
                cur = cur[: len(cur) - _partial_opener(cur, fmt.openers)].rstrip(_WS)
                if bare_ok and not segments and not cur.strip():
                    cur = ""
            flush(before_block=False)
            break
        try:
            block = _block(text, start, fmt, opener, names, final)
        except _Invalid:
            block = None
        if block is not None and block.end is None and not final:
            # the text ends inside this block: what precedes it is content; its calls have begun
            cur += text[pos:start]
            flush(before_block=True)
            calls += block.calls
            break
        if block is None or block.end is None or not block.calls:
            # not a call after all: the opener is text, up to the next opener (a bare
            # JSON value is text too: the search for openers starts at it)
            if opener < 0:
                cur += text[pos:start]
                pos, bare_ok = start, False
                continue
            nxt, _ = _next_opener(text, start + len(fmt.openers[opener]), fmt)
            nxt = len(text) if nxt < 0 else nxt
            cur += text[pos:nxt]
            pos, bare_ok = nxt, False
            if pos >= len(text):
                if not final:
                    cur = cur[: len(cur) - _partial_opener(cur, fmt.openers)].rstrip(_WS)
                flush(before_block=False)
                break
            continue
        cur += text[pos:start]
        flush(before_block=True)
        calls += block.calls
        cur, cur_after_block = "", True
        pos, bare_ok = block.end, fmt.bare
        if fmt.separators:
            k = _ws(text, pos)
            if k < len(text) and text[k] in fmt.separators:
                pos = k + 1
    if final and not calls:
        return Parsed(text)  # no call: the reply is exactly what the model wrote
    return Parsed("\n".join(segments), calls)
