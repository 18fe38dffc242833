"""Tool calling for chat completions, as OpenAI's API has it: the request's
tools and tool_choice checked; tools rendered by the model's chat template
(transformers' message format); required / named calls constrained by the
grammar engine to the family's call syntax and each function's JSON schema;
the reply parsed into ``tool_calls`` whole or as stream deltas."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import string
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .errors import AkunuError
from .grammar import Grammar, no_raw_control_characters
from .tool_call_formats import FORMATS, Parsed, ToolFormat, parse

_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")  # OpenAI's rule for function names
_ALNUM = string.ascii_letters + string.digits


@dataclass
class ToolRequest:
    """A request's tools, how they may be used, and the reply's call format."""

    tools: List[Dict[str, Any]]   # OpenAI tool dicts, as given
    choice: str                   # "auto" | "required" | "named"
    forced: Optional[str]         # the function a named choice forces
    parallel: bool
    fmt: ToolFormat
    native: bool                  # the chat template renders tools itself

    @property
    def names(self) -> List[str]:
        return [t["function"]["name"] for t in self.tools]

    @property
    def constrained(self) -> bool:
        return self.choice != "auto"

    def parse(self, text: str, final: bool = True) -> Parsed:
        return parse(text, self.fmt, self.names, final)

    def new_id(self) -> str:
        # Mistral's templates take only 9-character alphanumeric ids
        if self.fmt.name == "mistral":
            return "".join(secrets.choice(_ALNUM) for _ in range(9))
        return "call_" + secrets.token_hex(12)


# -- the request ---------------------------------------------------------------------
def check_tools(tools: Any) -> List[Dict[str, Any]]:
    if not isinstance(tools, list):
        raise AkunuError("tools must be a list of {'type': 'function', 'function': {...}} objects")
    seen = set()
    for i, t in enumerate(tools):
        if (not isinstance(t, dict) or t.get("type", "function") != "function"
                or not isinstance(t.get("function"), dict)):
            raise AkunuError(f"tools[{i}] must be {{'type': 'function', 'function': "
                             "{'name': ..., 'parameters': ...}}")
        f = t["function"]
        name = f.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise AkunuError(f"tools[{i}].function.name must be 1-64 letters, digits, '_' or '-', got {name!r}")
        if name in seen:
            raise AkunuError(f"tools[{i}]: the function name '{name}' appears twice")
        seen.add(name)
        params = f.get("parameters")
        if params is not None:
            if not isinstance(params, dict):
                raise AkunuError(f"tools[{i}].function.parameters must be a JSON schema object")
            _check_schema(params, f"tools[{i}].function.parameters")
    return [{**t, "type": "function"} for t in tools]


def _check_schema(schema: Dict[str, Any], where: str) -> None:
    try:
        import jsonschema
    except ImportError:  # optional: xgrammar still rejects schemas it cannot compile
        return
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        raise AkunuError(f"{where} is not a valid JSON schema: {e.message}") from None


_FAMILY_TOKENS = (("<tool_call>", "hermes"), ("[TOOL_CALLS]", "mistral"), ("<|python_tag|>", "llama3"))
_families: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def tool_format(template, vocab: Sequence[str] = ()) -> ToolFormat:
    """The family's call format: from the markers the chat template itself writes for
    tool calls; for a template without tools, from the family's tool-call tokens in the
    vocabulary; else the generic JSON format."""
    if template is not None and template in _families:
        return _families[template]
    src = template.source if template is not None else ""
    name = "generic"
    if supports_tools(template):
        if "<tool_call>" in src:
            name = "hermes"
        elif "[TOOL_CALLS]" in src:
            name = "mistral"
        elif "<|python_tag|>" in src or "<|start_header_id|>" in src:
            name = "llama3"
    else:
        tokens = set(vocab)
        name = next((fam for tok, fam in _FAMILY_TOKENS if tok in tokens), "generic")
    if template is not None and (len(vocab) or supports_tools(template)):
        _families[template] = FORMATS[name]  # the vocabulary is the template's model's: cached with it
    return FORMATS[name]


def supports_tools(template) -> bool:
    """Whether the chat template renders a `tools` list (else the tools go into a system message)."""
    return template is not None and re.search(r"\btools\b", template.source) is not None


def prepare(template, tools: Any = None, tool_choice: Any = None, parallel_tool_calls: Any = None,
            vocab: Sequence[str] = ()) -> Optional[ToolRequest]:
    """The request's tool settings; None when the model may not call tools (none given,
    or tool_choice "none")."""
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise AkunuError("parallel_tool_calls must be true or false")
    checked = check_tools(tools) if tools is not None else []
    choice, forced = "auto" if checked else "none", None
    if tool_choice is not None:
        if isinstance(tool_choice, str):
            if tool_choice not in ("none", "auto", "required"):
                raise AkunuError(f"tool_choice must be 'none', 'auto', 'required' or "
                                 f"{{'type': 'function', 'function': {{'name': ...}}}}, got {tool_choice!r}")
            choice = tool_choice
        elif (isinstance(tool_choice, dict) and tool_choice.get("type") == "function"
              and isinstance(tool_choice.get("function"), dict)
              and isinstance(tool_choice["function"].get("name"), str)):
            choice, forced = "named", tool_choice["function"]["name"]
        else:
            raise AkunuError("tool_choice must be 'none', 'auto', 'required' or "
                             "{'type': 'function', 'function': {'name': ...}}")
    if choice == "none":
        return None
    if not checked:
        raise AkunuError(f"tool_choice {tool_choice!r} needs a non-empty tools list")
    if forced is not None and forced not in {t["function"]["name"] for t in checked}:
        raise AkunuError(f"tool_choice names the function '{forced}', which is not among the tools")
    return ToolRequest(checked, choice, forced, parallel_tool_calls is not False, tool_format(template, vocab),
                       supports_tools(template))


# -- the prompt ----------------------------------------------------------------------
def _arguments_dict(args: Any) -> Any:
    """transformers' message format: a tool call's arguments as a dict (templates
    write them with tojson), not the JSON string OpenAI clients send back."""
    if isinstance(args, str):
        try:
            value = json.loads(args)
        except ValueError:
            return args
        return value if isinstance(value, dict) else args
    return args


def _mistral_id(i: Any) -> Any:
    if isinstance(i, str) and len(i) == 9 and i.isalnum():
        return i
    return hashlib.sha256(str(i).encode()).hexdigest()[:9] if i is not None else i


def template_messages(messages: Sequence[Any], req: Optional[ToolRequest], template,
                      vocab: Sequence[str] = ()) -> List[Any]:
    """The conversation as the chat template wants it: assistant tool calls with dict
    arguments; for templates without tools, calls and results written as text."""
    native = supports_tools(template)
    fmt = tool_format(template, vocab)
    mistral = native and fmt.name == "mistral"
    out: List[Any] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            out.append(m)  # validate_messages reports it
            continue
        calls = m.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                raise AkunuError(f"message {i}: tool_calls must be a list of objects")
            norm = []
            for c in calls:
                f = c.get("function") if isinstance(c.get("function"), dict) else c
                if not isinstance(f.get("name"), str):
                    raise AkunuError(f"message {i}: each tool call needs function.name")
                fn = {"name": f["name"], "arguments": _arguments_dict(f.get("arguments", {}))}
                cid = _mistral_id(c.get("id")) if mistral else c.get("id")
                norm.append({"id": cid, "type": "function", "function": fn})
            m = {**m, "tool_calls": norm}
        if mistral and m.get("role") == "tool" and "tool_call_id" in m:
            m = {**m, "tool_call_id": _mistral_id(m["tool_call_id"])}
        out.append(m)
    if not native:
        out = _as_text(out, fmt)
        if req is not None:
            out = _with_tool_prompt(out, req)
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def write_calls(calls: List[Dict[str, Any]], fmt: ToolFormat) -> str:
    """Calls ({'name', 'arguments'} with dict arguments) as the family writes them."""
    if fmt.name == "hermes":
        return "\n".join("<tool_call>\n" + json.dumps(c, ensure_ascii=False) + "\n</tool_call>" for c in calls)
    if fmt.name == "llama3":
        return "; ".join(json.dumps({"name": c["name"], "parameters": c["arguments"]}, ensure_ascii=False)
                         for c in calls)
    if fmt.name == "mistral":
        return "[TOOL_CALLS]" + json.dumps(calls, ensure_ascii=False)
    return json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)


def _as_text(messages: List[Any], fmt: ToolFormat) -> List[Any]:
    """Tool calls and results in plain turns, for templates that know neither: a call is
    the assistant's text in the family's syntax, results are a user turn (merged with
    user turns next to it)."""
    if not any(isinstance(m, dict) and (m.get("tool_calls") or m.get("role") == "tool") for m in messages):
        return messages
    out: List[Any] = []
    for m in messages:
        if isinstance(m, dict) and m.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                     for c in m["tool_calls"]]
            text = write_calls(calls, fmt)
            before = _text_of(m.get("content"))
            m = {"role": "assistant", "content": (before + "\n" if before else "") + text}
        elif isinstance(m, dict) and m.get("role") == "tool":
            label = m.get("name") or m.get("tool_call_id") or "tool"
            m = {"role": "user", "content": f"Result of {label}:\n{_text_of(m.get('content'))}", "_tool": True}
        if (out and isinstance(m, dict) and isinstance(out[-1], dict) and m.get("role") == "user"
                and out[-1].get("role") == "user" and (m.get("_tool") or out[-1].get("_tool"))):
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + _text_of(m.get("content")),
                       "_tool": True}
            continue
        out.append(m)
    return [{k: v for k, v in m.items() if k != "_tool"} if isinstance(m, dict) else m for m in out]


_EXAMPLE = {"name": "<function name>", "arguments": {"<parameter>": "<value>"}}


def _with_tool_prompt(messages: List[Any], req: ToolRequest) -> List[Any]:
    """The tools described in the system message, with instructions in the family's syntax."""
    functions = [t["function"] for t in req.tools]
    if req.choice == "named":
        rule = f"You must call the function {req.forced}."
    elif req.choice == "required":
        rule = "You must call one of these functions."
    else:
        rule = "Call a function only when it helps; otherwise reply normally."
    several = ("several calls one after another" if req.fmt.name in ("hermes", "llama3")
               else "a JSON list of call objects")
    text = ("You can call these functions:\n" + json.dumps(functions, ensure_ascii=False) +
            "\n\nTo call a function, reply with only:\n" + write_calls([_EXAMPLE], req.fmt) +
            f"\nTo call several at once, write {several}. " + rule)
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": _text_of(first.get("content")) + "\n\n" + text}] + list(messages[1:])
    return [{"role": "system", "content": text}] + list(messages)


# -- constrained calls -------------------------------------------------------------------
def _call_schema(tool: Dict[str, Any], arg_key: str) -> Dict[str, Any]:
    params = tool["function"].get("parameters") or {"type": "object", "properties": {}}
    return {"type": "object", "properties": {"name": {"const": tool["function"]["name"]}, arg_key: params},
            "required": ["name", arg_key], "additionalProperties": False}


def constraint(req: ToolRequest) -> Grammar:
    """A grammar whose every sentence is a call (or, with parallel calls, several) in the
    family's syntax, naming an allowed function with arguments valid for its schema."""
    try:
        import xgrammar as xgr
        from xgrammar.structural_tag import (ConstStringFormat, GrammarFormat, SequenceFormat, StructuralTag,
                                             TagFormat, TagsWithSeparatorFormat)
    except ImportError as e:  # pragma: no cover - depends on the install
        raise AkunuError("tool_choice 'required' or a named function needs xgrammar: "
                         "pip install 'akunu[grammar]'") from e
    fmt = req.fmt
    arg_key = "parameters" if fmt.name == "llama3" else "arguments"
    tools = [t for t in req.tools if req.forced is None or t["function"]["name"] == req.forced]
    schemas = [_call_schema(t, arg_key) for t in tools]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    try:
        # compact JSON: free whitespace would let a weak model ramble in spaces
        call = str(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False))
    except Exception as e:  # xgrammar reports unsupported schemas as RuntimeError
        raise AkunuError(f"the tools' parameters cannot be turned into a grammar: "
                         f"{str(e).strip().splitlines()[0]}") from None
    one = not req.parallel or req.choice == "named"

    def calls(begin: str, end: str, sep: str):
        tag = TagFormat(begin=begin, content=GrammarFormat(grammar=call), end=end)
        return TagsWithSeparatorFormat(tags=[tag], separator=sep, at_least_one=True, stop_after_first=one)

    if fmt.name == "hermes":
        form = calls("<tool_call>\n", "\n</tool_call>", "\n")
    elif fmt.name == "llama3":
        form = calls("", "", "; ")
    elif fmt.name == "mistral":
        # [TOOL_CALLS] is a control token: the grammar writes the visible list
        form = SequenceFormat(elements=[ConstStringFormat(value="["), calls("", "", ", "),
                                        ConstStringFormat(value="]")])
    elif one:
        form = GrammarFormat(grammar=call)
    else:
        form = SequenceFormat(elements=[ConstStringFormat(value="["), calls("", "", ", "),
                                        ConstStringFormat(value="]")])
    ebnf = str(xgr.Grammar.from_structural_tag(StructuralTag(format=form)))
    return Grammar.gbnf(no_raw_control_characters(ebnf))


# -- the reply -------------------------------------------------------------------------
def openai_calls(parsed: Parsed, req: ToolRequest) -> List[Dict[str, Any]]:
    return [{"id": req.new_id(), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in parsed.complete_calls]


class DeltaStream:
    """Text pieces in, OpenAI chat deltas out: content that cannot be part of a call, then
    for each call a first delta with index, id, type, name and empty arguments, and
    argument fragments after it."""

    def __init__(self, req: ToolRequest):
        self.req = req
        self.text = ""
        self._content = ""                    # content sent so far
        self._calls: List[List[str]] = []     # per call sent: [id, name, arguments sent]

    def feed(self, piece: str) -> List[Dict[str, Any]]:
        self.text += piece
        return self._deltas(self.req.parse(self.text, final=False))

    def finish(self) -> List[Dict[str, Any]]:
        self.final = self.req.parse(self.text, final=True)
        return self._deltas(self.final)

    @property
    def called(self) -> bool:
        """Whether the reply called tools (every call sent, and complete)."""
        calls = self.final.complete_calls
        return bool(calls) and len(calls) == len(self._calls)

    def _deltas(self, parsed: Parsed) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        # a parse that no longer extends what was sent (a call that went wrong after it
        # began) cannot be taken back: only extensions are sent
        if parsed.content.startswith(self._content) and len(parsed.content) > len(self._content):
            out.append({"content": parsed.content[len(self._content):]})
            self._content = parsed.content
        for i, c in enumerate(parsed.calls):
            if i == len(self._calls):
                cid = self.req.new_id()
                self._calls.append([cid, c.name, ""])
                out.append({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                            "function": {"name": c.name, "arguments": ""}}]})
            sent = self._calls[i]
            if sent[1] != c.name:
                break
            if c.arguments.startswith(sent[2]) and len(c.arguments) > len(sent[2]):
                out.append({"tool_calls": [{"index": i, "function": {"arguments": c.arguments[len(sent[2]):]}}]})
                sent[2] = c.arguments
        return out
