"""Chat templates rendered with jinja2 the way transformers'
``apply_chat_template`` does (sandboxed, trim_blocks/lstrip_blocks,
``raise_exception``, ``tojson``, ``strftime_now``), with built-in ChatML,
Llama 3 and Gemma templates for files that carry none."""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence

from .errors import AkunuError

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
    " + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

# Gemma's own template: no system role, so a system message is prefixed to the first user turn.
GEMMA = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- set role = "model" if message['role'] == 'assistant' else message['role'] -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\\n' }}
{%- endif -%}
"""

BUILTIN = {"chatml": CHATML, "llama3": LLAMA3, "gemma": GEMMA}


class TemplateError(AkunuError):
    """The chat template rejected the conversation (its raise_exception) or failed to render."""


def _raise_exception(message: str):
    raise TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Optional[int] = None, separators=None,
            sort_keys: bool = False) -> str:
    # transformers' tojson: no HTML escaping, unlike jinja2's built-in filter
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _generation_extension():
    """``{% generation %}...{% endgeneration %}`` marks assistant text for
    training masks (transformers); rendering just emits the body."""
    from jinja2.ext import Extension

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser):
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    return Generation


@lru_cache(maxsize=16)
def _compile(source: str):
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:  # pragma: no cover
        raise AkunuError("chat templates need jinja2: pip install jinja2") from e
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols, _generation_extension()])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"the chat template does not parse: {e}") from None


def validate_messages(messages: Any) -> List[Dict[str, Any]]:
    """Checks the OpenAI message shape; content given as a list of text parts is joined."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise AkunuError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise AkunuError(f"message {i} must be a dict with 'role' and 'content'")
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str):
            raise AkunuError(f"message {i}: role must be a string")
        if isinstance(content, list):
            parts = []
            for p in content:
                if not (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)):
                    raise AkunuError(f"message {i}: only text content parts are supported")
                parts.append(p["text"])
            content = "".join(parts)
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise AkunuError(f"message {i}: content must be a string or a list of text parts")
        out.append({**m, "role": role, "content": content})
    return out


# variables render() sets itself (tools has its own argument)
RESERVED_TEMPLATE_VARIABLES = {"messages", "add_generation_prompt", "bos_token", "eos_token", "raise_exception",
                               "strftime_now"}


class ChatTemplate:
    """A model's chat template: its own from the GGUF, else a built-in chosen by its special tokens."""

    def __init__(self, source: str, name: str, bos_token: str = "", eos_token: str = ""):
        self.source = source
        self.name = name
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._template = _compile(source)

    @classmethod
    def for_model(cls, metadata: Dict[str, Any], tokens: Sequence[str], bos_id: Optional[int],
                  eos_id: Optional[int], override: Optional[str] = None) -> "ChatTemplate":
        def tok(i):
            return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else ""

        bos, eos = tok(bos_id), tok(eos_id)
        if override:
            src = BUILTIN.get(override, override)
            return cls(src, override if override in BUILTIN else "custom", bos, eos)
        src = metadata.get("tokenizer.chat_template")
        if isinstance(src, str) and src.strip():
            return cls(src, "gguf", bos, eos)
        vocab = set(tokens)
        if "<start_of_turn>" in vocab:
            name = "gemma"
        elif "<|start_header_id|>" in vocab:
            name = "llama3"
        else:
            name = "chatml"
        return cls(BUILTIN[name], name, bos, eos)

    def render(self, messages: Sequence[Dict[str, Any]], add_generation_prompt: bool = True,
               tools: Optional[List[Dict[str, Any]]] = None, **extra: Any) -> str:
        """The prompt text. `tools`: OpenAI function tools ({"type": "function", "function":
        {...}}), handed to the template as transformers' apply_chat_template hands them.
        `extra`: more template variables (``enable_thinking``, ``reasoning_effort``, a
        request's chat_template_kwargs); the ones the renderer sets itself are refused."""
        taken = sorted(set(extra) & RESERVED_TEMPLATE_VARIABLES)
        if taken:
            raise TemplateError(f"template variable(s) {', '.join(taken)} cannot be set by the request")
        msgs = validate_messages(messages)
        try:
            # tools / documents are passed as None when absent, as transformers does
            kw = {"documents": None, **extra, "tools": tools}
            return self._template.render(messages=msgs, add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token, **kw)
        except TemplateError:
            raise
        except Exception as e:
            raise TemplateError(f"the chat template failed to render: {e}") from None
