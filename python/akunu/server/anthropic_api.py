"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
over the models the OpenAI routes serve: a request is translated into the
arguments of the model's create_chat_completion (system prompt, text /
tool_use / tool_result blocks, tools and tool_choice, sampling fields) and
its answer, whole or streamed, back into Anthropic's message and events. A
conversation ending with assistant text is continued from that text (a
"prefill"), as a text completion of the rendered prompt.
Errors on these paths take Anthropic's shape ({"type": "error", "error":
{"type", "message"}}), including the app's own (401, 404, 413, 429), and
the `x-api-key` header is taken as well as `Authorization: Bearer`.

Integration (app.py's create_app, after the routes; nothing in cli/serve.py):
    from .anthropic_api import install as install_anthropic
    install_anthropic(app, max_tokens=limits.max_tokens)
Install it last, after the body limits, rate limits and model registry, so
that its middleware runs first and reshapes their errors too."""

from __future__ import annotations

import json
import math
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ..batching import QueueFullError
from ..errors import AkunuError
from .app import GenerationStream, _StreamWithCleanup
from .errors import ApiError, queue_full

PREFIX = "/v1/messages"
_STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
# Anthropic's error type for an HTTP status
_ERROR_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error",
               429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}


def _bad(param: str, msg: str) -> ApiError:
    return ApiError(400, f"{param}: {msg}", param=param)


# -- request: Anthropic -> create_chat_completion -----------------------------------
def _text_of(content: Any, where: str) -> str:
    """A tool_result's or system prompt's content: a string or a list of text blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, b in enumerate(content):
            if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
                raise _bad(f"{where}[{j}]", "expected a text block {'type': 'text', 'text': ...} "
                                            "(images and documents are not supported)")
            parts.append(b["text"])
        return "\n\n".join(parts)
    raise _bad(where, "expected a string or a list of text blocks")


def _blocks(content: Any, where: str) -> List[Dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _bad(where, "expected a string or a list of content blocks")
    for j, b in enumerate(content):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise _bad(f"{where}[{j}]", "expected a content block with a string 'type'")
    return content


def _user_messages(blocks: List[Dict[str, Any]], where: str) -> List[Dict[str, Any]]:
    """A user turn: tool results become 'tool' messages, text the user message
    after them (Anthropic puts results first, answering the last assistant turn)."""
    out, texts = [], []
    for j, b in enumerate(blocks):
        w = f"{where}[{j}]"
        if b["type"] == "text":
            if not isinstance(b.get("text"), str):
                raise _bad(f"{w}.text", "expected a string")
            texts.append(b["text"])
        elif b["type"] == "tool_result":
            if not isinstance(b.get("tool_use_id"), str):
                raise _bad(f"{w}.tool_use_id", "expected a string")
            text = _text_of(b.get("content"), f"{w}.content")
            if b.get("is_error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text})
        else:
            raise _bad(f"{w}.type", f"'{b['type']}' blocks are not supported in user turns "
                                    "(text and tool_result are)")
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _assistant_message(blocks: List[Dict[str, Any]], where: str) -> Dict[str, Any]:
    texts, calls = [], []
    for j, b in enumerate(blocks):
        w = f"{where}[{j}]"
        if b["type"] == "text":
            if not isinstance(b.get("text"), str):
                raise _bad(f"{w}.text", "expected a string")
            texts.append(b["text"])
        elif b["type"] == "tool_use":
            if not isinstance(b.get("id"), str) or not isinstance(b.get("name"), str):
                raise _bad(w, "a tool_use block needs a string 'id' and 'name'")
            if not isinstance(b.get("input", {}), dict):
                raise _bad(f"{w}.input", "expected an object")
            calls.append({"id": b["id"], "type": "function",
                          "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}))}})
        elif b["type"] in ("thinking", "redacted_thinking"):
            continue  # earlier reasoning is not replayed to the model
        else:
            raise _bad(f"{w}.type", f"'{b['type']}' blocks are not supported in assistant turns "
                                    "(text and tool_use are)")
    msg: Dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        msg["tool_calls"] = calls
    return msg


def chat_messages(body: Dict[str, Any]) -> List[Dict[str, Any]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages", "expected a non-empty list of messages")
    out: List[Dict[str, Any]] = []
    if body.get("system") is not None:
        system = _text_of(body["system"], "system")
        if system:
            out.append({"role": "system", "content": system})
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise _bad(f"messages[{i}].role", "expected 'user' or 'assistant'")
        blocks = _blocks(m.get("content"), f"messages[{i}].content")
        if m["role"] == "user":
            out.extend(_user_messages(blocks, f"messages[{i}].content"))
        else:
            out.append(_assistant_message(blocks, f"messages[{i}].content"))
    return out


def tool_kwargs(body: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "expected a list of {'name', 'description', 'input_schema'} objects")
        converted = []
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                raise _bad(f"tools[{i}]", "expected an object with a string 'name'")
            if t.get("type") not in (None, "custom"):
                raise _bad(f"tools[{i}].type", f"server tools ('{t['type']}') are not supported")
            schema = t.get("input_schema", {"type": "object", "properties": {}})
            if not isinstance(schema, dict):
                raise _bad(f"tools[{i}].input_schema", "expected a JSON schema object")
            fn = {"name": t["name"], "parameters": schema}
            if isinstance(t.get("description"), str):
                fn["description"] = t["description"]
            converted.append({"type": "function", "function": fn})
        if converted:
            out["tools"] = converted
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
            raise _bad("tool_choice", "expected {'type': 'auto' | 'any' | 'tool' | 'none'}")
        kind = choice["type"]
        if kind == "tool":
            if not isinstance(choice.get("name"), str):
                raise _bad("tool_choice.name", "expected the name of one of the tools")
            out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif "tools" in out or kind != "auto":
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
        if choice.get("disable_parallel_tool_use") is True and "tools" in out:
            out["parallel_tool_calls"] = False
    if out.get("tool_choice") == "none":
        out.pop("tools", None)  # no tool may be called: the prompt need not list them
    return out


def _number(body: Dict[str, Any], key: str, lo: float, hi: float) -> Optional[float]:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise _bad(key, f"expected a number from {lo} to {hi}, got {v!r}")
    return float(v)


def sampling_kwargs(body: Dict[str, Any], max_tokens_limit: int) -> Dict[str, Any]:
    mt = body.get("max_tokens")
    if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
        raise _bad("max_tokens", f"a positive integer is required, got {mt!r}")
    if mt > max_tokens_limit:
        raise _bad("max_tokens", f"{mt} exceeds this server's limit of {max_tokens_limit}")
    out: Dict[str, Any] = {"max_tokens": mt}
    for key, hi in (("temperature", 1.0), ("top_p", 1.0)):
        v = _number(body, key, 0.0, hi)
        if v is not None:
            out[key] = v
    k = body.get("top_k")
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise _bad("top_k", f"expected a non-negative integer, got {k!r}")
        out["top_k"] = k
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise _bad("stop_sequences", "expected a list of non-empty strings")
        if stops:
            out["stop"] = stops
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream", f"expected true or false, got {stream!r}")
    out["stream"] = stream
    out.update(thinking_kwargs(body, mt))
    return out


def thinking_kwargs(body: Dict[str, Any], max_tokens: int) -> Dict[str, Any]:
    """Extended thinking as the chat template's switch: {"type": "enabled",
    "budget_tokens": N} turns thinking on with at most N reasoning tokens
    (Anthropic's rule: at least 1024 and below max_tokens); {"type":
    "disabled"} turns it off; absent, the template's default holds."""
    t = body.get("thinking")
    if t is None:
        return {}
    if not isinstance(t, dict) or t.get("type") not in ("enabled", "disabled"):
        raise _bad("thinking", "expected {'type': 'enabled', 'budget_tokens': N} or {'type': 'disabled'}")
    if t["type"] == "disabled":
        if set(t) - {"type"}:
            raise _bad("thinking", "a disabled thinking takes no other fields")
        return {"enable_thinking": False}
    if set(t) - {"type", "budget_tokens"}:
        raise _bad("thinking", f"unknown fields {sorted(set(t) - {'type', 'budget_tokens'})}")
    budget = t.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
        raise _bad("thinking.budget_tokens", f"an integer of at least 1024 is required, got {budget!r}")
    if budget >= max_tokens:
        raise _bad("thinking.budget_tokens", f"must be less than max_tokens ({max_tokens}), got {budget}")
    return {"enable_thinking": True, "max_reasoning_tokens": budget}


# -- response: chat completion -> Anthropic ------------------------------------------
def _message_id() -> str:
    return "msg_" + uuid.uuid4().hex


def _tool_input(arguments: str) -> Dict[str, Any]:
    try:
        v = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def to_message(out: Dict[str, Any], model: str, stop: Optional[str] = None) -> Dict[str, Any]:
    choice = out["choices"][0]
    msg = choice["message"]
    content: List[Dict[str, Any]] = []
    if msg.get("reasoning_content"):  # the reasoning first, as a thinking block
        content.append({"type": "thinking", "thinking": msg["reasoning_content"], "signature": ""})
    if msg.get("content"):
        content.append({"type": "text", "text": msg["content"]})
    for c in msg.get("tool_calls") or []:
        content.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": _tool_input(c["function"]["arguments"])})
    u = out["usage"]
    reason = "stop_sequence" if stop is not None else _STOP_REASON.get(choice["finish_reason"], "end_turn")
    return {"id": _message_id(), "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": reason, "stop_sequence": stop,
            "usage": {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"]}}


def matched_stop(model, result, stops: List[str]) -> Optional[str]:
    """The stop sequence that ended a generation, or None (an end-of-turn token,
    the length limit, a finished tool call). The generated tokens' text holds
    the sequence the reply was cut at; no earlier one, or it would have
    stopped there."""
    if not stops or result.finish_reason != "stop" or not result.tokens \
            or result.tokens[-1] in getattr(model, "stop_ids", ()):
        return None
    # decoded as the generation decoded them (byte pieces, bad UTF-8 replaced), not as detokenize() cleans up
    tok = getattr(model, "tokenizer", None)
    full = b"".join(tok.token_bytes(t) for t in result.tokens).decode("utf-8", "replace") \
        if hasattr(tok, "token_bytes") else model.detokenize(result.tokens)
    found = [(full.find(s), -len(s), s) for s in stops if s in full]
    return min(found)[2] if found else None


def collect(chunks) -> Dict[str, Any]:
    """A chat completion assembled from its stream of chunks (one choice)."""
    text, thought, calls, finish = [], [], {}, "stop"
    for chunk in chunks:
        for c in chunk.get("choices", []):
            d = c.get("delta", {})
            if d.get("reasoning_content"):
                thought.append(d["reasoning_content"])
            if d.get("content") or c.get("text"):
                text.append(d.get("content") or c["text"])
            for tc in d.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": tc.get("id"), "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                fn = tc.get("function", {})
                call["function"]["name"] += fn.get("name", "")
                call["function"]["arguments"] += fn.get("arguments", "")
            finish = c.get("finish_reason") or finish
    st = chunks.result.stats
    msg: Dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if thought:
        msg["reasoning_content"] = "".join(thought)
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": st.prompt_tokens, "completion_tokens": st.generated_tokens,
                      "total_tokens": st.prompt_tokens + st.generated_tokens}}


def _event(kind: str, data: Dict[str, Any]) -> bytes:
    data = {"type": kind, **data}
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


class EventTranslator:
    """OpenAI chat chunks in, Anthropic stream events out: one content block
    per run of reasoning (thinking), per run of text and per tool call, each
    opened, filled and closed."""

    def __init__(self):
        self.index = -1          # the open block's index
        self.open: Optional[str] = None  # "text", or the OpenAI index of the open tool call
        self.finish: Optional[str] = None

    def _start(self, key: str, block: Dict[str, Any]) -> List[bytes]:
        out = self._stop()
        self.index += 1
        self.open = key
        out.append(_event("content_block_start", {"index": self.index, "content_block": block}))
        return out

    def _stop(self) -> List[bytes]:
        if self.open is None:
            return []
        out = []
        if self.open == "thinking":  # a thinking block closes with its (empty) signature
            out.append(_event("content_block_delta", {"index": self.index,
                                                      "delta": {"type": "signature_delta", "signature": ""}}))
        self.open = None
        return out + [_event("content_block_stop", {"index": self.index})]

    def feed(self, chunk: Dict[str, Any]) -> List[bytes]:
        out: List[bytes] = []
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            thought = delta.get("reasoning_content")
            if thought:
                if self.open != "thinking":
                    out += self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                out.append(_event("content_block_delta", {"index": self.index,
                                                          "delta": {"type": "thinking_delta", "thinking": thought}}))
            text = delta.get("content") or choice.get("text")  # a chat chunk, or a prefill's text chunk
            if text:
                if self.open != "text":
                    out += self._start("text", {"type": "text", "text": ""})
                out.append(_event("content_block_delta", {"index": self.index,
                                                          "delta": {"type": "text_delta", "text": text}}))
            for call in delta.get("tool_calls") or []:
                key = f"call{call['index']}"
                fn = call.get("function", {})
                if "id" in call:
                    out += self._start(key, {"type": "tool_use", "id": call["id"], "name": fn.get("name", ""),
                                             "input": {}})
                if fn.get("arguments") and self.open == key:
                    out.append(_event("content_block_delta", {
                        "index": self.index, "delta": {"type": "input_json_delta", "partial_json": fn["arguments"]}}))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return out

    def end(self, output_tokens: int, stop: Optional[str] = None) -> List[bytes]:
        out = self._stop()
        reason = "stop_sequence" if stop is not None else _STOP_REASON.get(self.finish or "stop", "end_turn")
        out.append(_event("message_delta", {
            "delta": {"stop_reason": reason, "stop_sequence": stop},
            "usage": {"output_tokens": output_tokens}}))
        out.append(_event("message_stop", {}))
        return out


# -- errors in Anthropic's shape ----------------------------------------------------------
def anthropic_error(status: int, message: str) -> Dict[str, Any]:
    kind = _ERROR_TYPE.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


class AnthropicShape:
    """Pure ASGI middleware on /v1/messages*: `x-api-key` becomes the bearer
    token the app checks, and any JSON error in OpenAI's shape is rewritten
    in Anthropic's (whichever layer produced it)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        headers = list(scope.get("headers", ()))
        names = {k.lower() for k, _ in headers}
        key = next((v for k, v in headers if k.lower() == b"x-api-key"), None)
        if key is not None and b"authorization" not in names:
            headers.append((b"authorization", b"Bearer " + key))
            scope = dict(scope, headers=headers)
        start: Optional[dict] = None
        parts: List[bytes] = []

        async def reshaping_send(msg) -> None:
            nonlocal start
            if msg["type"] == "http.response.start":
                ctype = next((v for k, v in msg.get("headers", ()) if k.lower() == b"content-type"), b"")
                if msg["status"] >= 400 and ctype.startswith(b"application/json"):
                    start = msg  # held back until the body is whole
                    return
            elif msg["type"] == "http.response.body" and start is not None:
                parts.append(msg.get("body", b""))
                if msg.get("more_body", False):
                    return
                await self._send_reshaped(start, b"".join(parts), send)
                return
            await send(msg)

        await self.app(scope, receive, reshaping_send)

    @staticmethod
    async def _send_reshaped(start: dict, body: bytes, send) -> None:
        try:
            err = json.loads(body)["error"]
            new = json.dumps(anthropic_error(start["status"], err["message"])).encode()
        except (ValueError, KeyError, TypeError):
            new = body  # not an OpenAI-shaped error: as it was
        headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(new)).encode()))
        await send(dict(start, headers=headers))
        await send({"type": "http.response.body", "body": new, "more_body": False})


# -- routes -----------------------------------------------------------------------------
async def _json(request: Request) -> Dict[str, Any]:
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError) as e:
        raise ApiError(400, f"the request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _slot(app, body: Dict[str, Any]):
    slots = app.state.slots
    name = body.get("model")
    if name is not None and not isinstance(name, str):
        raise _bad("model", "expected a string")
    if not name:
        if not slots:
            raise ApiError(404, "no model is loaded", "not_found_error", "model", "model_not_found")
        slot = next(iter(slots.values()))
    elif name in slots:
        slot = slots[name]
    else:
        raise ApiError(404, f"the model '{name}' does not exist; available: {', '.join(slots)}",
                       "not_found_error", "model", "model_not_found")
    if getattr(slot.model, "is_whisper", False) or getattr(slot.model, "chat_template", None) is None:
        raise ApiError(400, f"the model '{slot.name}' is not a chat model", param="model")
    return slot


@asynccontextmanager
async def _turn(slot, metrics=None):
    """The model for this request: a batched model queues requests itself; any
    other serves one at a time behind its slot's lock, as the OpenAI routes do
    (and counted in the same queue / running gauges)."""
    if slot.batching is not None:
        yield
        return
    if slot.max_queue and slot.lock.locked() and slot.waiting >= slot.max_queue:
        raise queue_full(f"{slot.waiting} requests are already waiting for the model '{slot.name}' "
                         f"(max_queue = {slot.max_queue}); try again later")

    def gauge(which, d):
        if metrics is not None:
            metrics.add(getattr(metrics, which), slot.name, d)

    slot.waiting += 1
    gauge("queue_depth", 1)
    try:
        await slot.lock.acquire()
    finally:
        slot.waiting -= 1
        gauge("queue_depth", -1)
    gauge("running", 1)
    try:
        yield
    finally:
        gauge("running", -1)
        slot.lock.release()


def _as_api_error(e: AkunuError) -> ApiError:
    return queue_full(str(e)) if isinstance(e, QueueFullError) else ApiError(400, str(e))


def count_prompt_tokens(model, messages: List[Dict[str, Any]], tools: Dict[str, Any]) -> int:
    """Tokens of the prompt the chat template renders (tools included), as the
    chat completion would feed it."""
    from .. import tool_calls
    from ..openai_api import _chat_prompt

    prefill = prefill_of(messages, tools)
    if prefill is not None and messages[:-1]:
        return len(prefill_prompt(model, messages, prefill))
    req = tool_calls.prepare(model.chat_template, vocab=model.tokenizer.tokens, **tools)
    return len(_chat_prompt(model, messages, req))


def prefill_of(msgs: List[Dict[str, Any]], tools: Dict[str, Any]) -> Optional[str]:
    """The text of a final assistant turn, which Anthropic's API continues
    rather than answers (a "prefill"); None when the conversation ends with
    the user, or with tools in play (their calls are parsed from a reply of
    its own)."""
    last = msgs[-1]
    if last["role"] != "assistant" or last.get("tool_calls") or tools.get("tools"):
        return None
    text = last.get("content") or ""
    if text != text.rstrip():
        raise _bad(f"messages[{len(msgs) - 1}]", "the final assistant content cannot end with whitespace")
    return text


def prefill_prompt(model, msgs: List[Dict[str, Any]], prefill: str) -> List[int]:
    """Token ids of the conversation before the final assistant turn, its
    reply opened, and the prefill written into it."""
    from .. import tool_calls

    template = model.chat_template
    head = tool_calls.template_messages(msgs[:-1], None, template, model.tokenizer.tokens)
    return model.tokenize(template.render(head, add_generation_prompt=True) + prefill, add_bos=False)


def _as_chat(out: Dict[str, Any]) -> Dict[str, Any]:
    """A text completion in a chat completion's shape (a prefill's reply)."""
    c = out["choices"][0]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": c["text"]},
                         "finish_reason": c["finish_reason"]}], "usage": out["usage"]}


def _generate(model, name: str, msgs, tools, kwargs, stream: bool):
    """The model's chat completion of `msgs`, or with a prefill its text
    completion continuing the final assistant turn."""
    prefill = prefill_of(msgs, tools)
    if prefill is None or not msgs[:-1]:
        return model.create_chat_completion(msgs, stream=stream, model=name, **kwargs)
    plain = {k: v for k, v in kwargs.items()
             if k not in ("tools", "tool_choice", "parallel_tool_calls", "enable_thinking", "max_reasoning_tokens")}
    out = model.create_completion(prefill_prompt(model, msgs, prefill), stream=stream, model=name, **plain)
    return out if stream else _as_chat(out)


def _complete(model, name: str, msgs, kwargs) -> Tuple[Dict[str, Any], Optional[str]]:
    """The whole chat completion and the stop sequence that ended it. With stop
    sequences it is run as a stream, whose result keeps the generated tokens
    that tell which sequence (if any) was met."""
    tools = {k: v for k, v in kwargs.items() if k in ("tools", "tool_choice", "parallel_tool_calls")}
    if "stop" not in kwargs:
        return _generate(model, name, msgs, tools, kwargs, False), None
    chunks = _generate(model, name, msgs, tools, kwargs, True)
    try:
        out = collect(chunks)
        return out, matched_stop(model, chunks.result, kwargs["stop"])
    finally:
        chunks.close()


def router(max_tokens: int = 4096) -> APIRouter:
    r = APIRouter()

    @r.post(PREFIX)
    async def messages(request: Request):
        body = await _json(request)
        slot = _slot(request.app, body)
        msgs, tools = chat_messages(body), tool_kwargs(body)
        kwargs = {**sampling_kwargs(body, max_tokens), **tools}
        stream = kwargs.pop("stream")
        model = slot.model
        limiter = slot.limiter()
        metrics = getattr(request.app.state, "metrics", None)
        if not stream:
            async with _turn(slot, metrics):
                t0 = time.perf_counter()
                try:
                    out, stop = await anyio.to_thread.run_sync(lambda: _complete(model, slot.name, msgs, kwargs),
                                                               limiter=limiter)
                except AkunuError as e:
                    raise _as_api_error(e) from None
            if metrics is not None:
                metrics.generation(slot.name, out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"],
                                   time.perf_counter() - t0)
            return JSONResponse(to_message(out, slot.name, stop))
        return await _stream(request, slot, msgs, tools, kwargs, metrics)

    @r.post(PREFIX + "/count_tokens")
    async def count_tokens(request: Request):
        body = await _json(request)
        slot = _slot(request.app, body)
        msgs, tools = chat_messages(body), tool_kwargs(body)
        try:
            n = await anyio.to_thread.run_sync(lambda: count_prompt_tokens(slot.model, msgs, tools))
        except AkunuError as e:
            raise ApiError(400, str(e)) from None
        return {"input_tokens": n}

    return r


async def _stream(request: Request, slot, msgs, tools, kwargs, metrics):
    """Anthropic's event stream. The prompt is counted and the first chunk
    computed before answering, so a bad request still gets a 4xx."""
    model = slot.model
    try:
        n_prompt = await anyio.to_thread.run_sync(lambda: count_prompt_tokens(model, msgs, tools),
                                                  limiter=slot.limiter())
        gen = await GenerationStream(slot, _turn(slot, metrics), metrics).open(
            lambda: _generate(model, slot.name, msgs, tools, kwargs, True))
    except AkunuError as e:
        raise _as_api_error(e) from None

    async def events() -> AsyncIterator[bytes]:
        tr = EventTranslator()
        yield _event("message_start", {"message": {
            "id": _message_id(), "type": "message", "role": "assistant", "model": slot.name, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": n_prompt, "output_tokens": 0}}})
        try:
            async for chunks in gen.batches():
                yield b"".join(ev for chunk in chunks for ev in tr.feed(chunk))
        except AkunuError as e:
            yield _event("error", {"error": {"type": "api_error", "message": str(e)}})
            return
        result = gen.chunks.result
        for ev in tr.end(result.stats.generated_tokens, matched_stop(model, result, kwargs.get("stop"))):
            yield ev

    return _StreamWithCleanup(events(), gen.finish)


def install(app, max_tokens: int = 4096) -> None:
    """Adds /v1/messages and /v1/messages/count_tokens to `app`, and the
    middleware that reshapes their errors and takes `x-api-key`."""
    app.include_router(router(max_tokens))
    app.add_middleware(AnthropicShape)
