"""OpenAI's Responses API (POST /v1/responses) over the models the chat route
serves: a request is translated into the arguments of the model's
create_chat_completion (input items and instructions as messages, function
tools, tool_choice, text.format as response_format, reasoning.effort as the
template's switch) and its answer, whole or streamed, into a `response`
object or its server-sent events. Reasoning becomes a `reasoning` item,
text a `message` item with an `output_text` part, each call a
`function_call` item; the client feeds calls and their results back as
`function_call` / `function_call_output` items.

Responses are not stored: `store: true`, `previous_response_id` and item
references answer 400. Errors take OpenAI's shape (the app's own handlers).

Integration (app.py's create_app, with the other API installs):
    from .responses_api import install as install_responses
    install_responses(app, max_tokens=limits.max_tokens)"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Dict, List, Optional

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ..errors import AkunuError
from .anthropic_api import _as_api_error, _json, _slot, _turn
from .app import GenerationStream, _StreamWithCleanup
from .errors import ApiError

PATH = "/v1/responses"
# fields taken; "include", "user", "service_tier" and "text.verbosity" are accepted and ignored
_FIELDS = {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
           "temperature", "top_p", "text", "reasoning", "stream", "store", "previous_response_id", "metadata",
           "user", "include", "service_tier", "truncation", "background", "seed", "max_reasoning_tokens"}
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}


def _bad(param: str, msg: str) -> ApiError:
    return ApiError(400, f"'{param}': {msg}", param=param)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


# -- request: Responses -> create_chat_completion -----------------------------------------
@dataclass
class ResponsesRequest:
    messages: List[Dict[str, Any]]
    kwargs: Dict[str, Any]        # create_chat_completion's keyword arguments
    stream: bool
    echo: Dict[str, Any] = field(default_factory=dict)  # request settings the response object repeats


def _text_of(content: Any, where: str) -> str:
    """A message's content: a string, or a list of input_text / output_text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(where, "expected a string or a list of content parts")
    parts = []
    for j, p in enumerate(content):
        kind = p.get("type") if isinstance(p, dict) else None
        if kind in ("input_text", "output_text"):
            if not isinstance(p.get("text"), str):
                raise _bad(f"{where}[{j}].text", "expected a string")
            parts.append(p["text"])
        elif kind == "refusal":
            continue  # an earlier refusal is not replayed
        else:
            raise _bad(f"{where}[{j}]", "expected an input_text or output_text part "
                                        "(images, files and audio are not supported)")
    return "".join(parts)


def input_messages(body: Dict[str, Any]) -> List[Dict[str, Any]]:
    """instructions and input as chat messages: function_call items become an assistant
    turn's tool_calls, function_call_output items tool messages."""
    out: List[Dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _bad("instructions", "expected a string")
        if instructions:
            out.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        return out + [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise _bad("input", "expected a string or a non-empty list of input items")
    names: Dict[str, str] = {}  # call_id -> function name, for results written as text
    for i, it in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(it, dict):
            raise _bad(where, "expected an object")
        kind = it.get("type", "message")
        if kind == "message":
            role = it.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise _bad(f"{where}.role", "expected 'user', 'assistant', 'system' or 'developer'")
            text = _text_of(it.get("content"), f"{where}.content")
            out.append({"role": "system" if role == "developer" else role, "content": text})
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(it.get(key), str):
                    raise _bad(f"{where}.{key}", "expected a string")
            names[it["call_id"]] = it["name"]
            call = {"id": it["call_id"], "type": "function",
                    "function": {"name": it["name"], "arguments": it["arguments"]}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":  # one turn: its text and every call
                last.setdefault("tool_calls", []).append(call)
                last["content"] = last["content"] or None
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if not isinstance(it.get("call_id"), str):
                raise _bad(f"{where}.call_id", "expected a string")
            output = it.get("output")
            text = output if isinstance(output, str) else _text_of(output, f"{where}.output")
            msg = {"role": "tool", "tool_call_id": it["call_id"], "content": text}
            if it["call_id"] in names:
                msg["name"] = names[it["call_id"]]
            out.append(msg)
        elif kind == "reasoning":
            continue  # earlier reasoning is not replayed to the model
        elif kind == "item_reference":
            raise _bad(f"{where}.type", "item references need stored responses, which this server does not keep")
        else:
            raise _bad(f"{where}.type", f"'{kind}' items are not supported "
                                        "(message, function_call, function_call_output and reasoning are)")
    if not any(m["role"] != "system" for m in out):
        raise _bad("input", "expected at least one message besides the instructions")
    return out


def tool_kwargs(body: Dict[str, Any]) -> Dict[str, Any]:
    """Function tools in the Responses shape ({'type': 'function', 'name', ...}) in the chat
    shape, and tool_choice / parallel_tool_calls."""
    out: Dict[str, Any] = {}
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "expected a list of {'type': 'function', 'name', 'parameters'} objects")
        converted = []
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or t.get("type") != "function":
                kind = t.get("type") if isinstance(t, dict) else None
                raise _bad(f"tools[{i}]", f"only function tools are supported, got {kind!r}")
            if not isinstance(t.get("name"), str):
                raise _bad(f"tools[{i}].name", "expected a string")
            fn: Dict[str, Any] = {"name": t["name"]}
            if t.get("description") is not None:
                if not isinstance(t["description"], str):
                    raise _bad(f"tools[{i}].description", "expected a string")
                fn["description"] = t["description"]
            if t.get("parameters") is not None:
                fn["parameters"] = t["parameters"]  # checked as a JSON schema by the chat completion
            converted.append({"type": "function", "function": fn})
        if converted:
            out["tools"] = converted
    choice = body.get("tool_choice")
    if choice is not None:
        if isinstance(choice, str) and choice in ("none", "auto", "required"):
            out["tool_choice"] = choice
        elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
            out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        else:
            raise _bad("tool_choice", "expected 'none', 'auto', 'required' or {'type': 'function', 'name': ...}")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise _bad("parallel_tool_calls", "expected true or false")
        if "tools" in out:
            out["parallel_tool_calls"] = parallel
    if out.get("tool_choice") == "none":
        out.pop("tools", None)  # no tool may be called: the prompt need not list them
    elif "tool_choice" in out and "tools" not in out:
        raise _bad("tool_choice", "needs a non-empty tools list")
    return out


def text_format(body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """text.format as a chat response_format (None: plain text)."""
    text = body.get("text")
    if text is None:
        return None
    if not isinstance(text, dict) or set(text) - {"format", "verbosity"}:
        raise _bad("text", "expected an object with 'format' (and 'verbosity')")
    if text.get("verbosity") not in (None, "low", "medium", "high"):
        raise _bad("text.verbosity", "expected 'low', 'medium' or 'high'")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        if not isinstance(fmt.get("name"), str) or not fmt["name"]:
            raise _bad("text.format.name", "expected the schema's name")
        if not isinstance(fmt.get("schema"), dict):
            raise _bad("text.format.schema", "expected a JSON schema object")
        return {"type": "json_schema", "json_schema": {"name": fmt["name"], "schema": fmt["schema"]}}
    raise _bad("text.format", "expected {'type': 'text' | 'json_object' | 'json_schema', ...}")


def reasoning_kwargs(body: Dict[str, Any]) -> Dict[str, Any]:
    """reasoning.effort as the chat template's switches: 'none' turns thinking off, the
    others become reasoning_effort (minimal as low, xhigh as high); summary is ignored
    (the reasoning itself is returned)."""
    r = body.get("reasoning")
    if r is None:
        return {}
    if not isinstance(r, dict) or set(r) - {"effort", "summary", "generate_summary"}:
        raise _bad("reasoning", "expected an object with 'effort' and 'summary'")
    effort = r.get("effort")
    if effort is None:
        return {}
    if effort == "none":
        return {"enable_thinking": False}
    if effort not in _EFFORT:
        raise _bad("reasoning.effort", "expected 'none', 'minimal', 'low', 'medium', 'high' or 'xhigh'")
    return {"reasoning_effort": _EFFORT[effort]}


def _number(body: Dict[str, Any], key: str, hi: float) -> Optional[float]:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= hi:
        raise _bad(key, f"expected a number from 0 to {hi}, got {v!r}")
    return float(v)


def _check_fields(body: Dict[str, Any]) -> None:
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise _bad(unknown[0], "unknown or unsupported field" + (f" (also: {', '.join(unknown[1:])})"
                                                                 if unknown[1:] else ""))
    if body.get("store") is True:
        raise _bad("store", "responses are not stored on this server: send store: false (or leave it out) "
                            "and pass the conversation as input items")
    if body.get("previous_response_id") is not None:
        raise _bad("previous_response_id", "responses are not stored on this server: "
                                           "send the earlier output items back in input instead")
    if body.get("background") not in (None, False):
        raise _bad("background", "background responses need stored responses, which this server does not keep")
    if body.get("truncation") not in (None, "disabled"):
        raise _bad("truncation", "only 'disabled' is supported")
    for key, kind, what in (("store", bool, "true or false"), ("metadata", dict, "an object"),
                            ("include", list, "a list of strings"), ("user", str, "a string"),
                            ("service_tier", str, "a string")):
        v = body.get(key)
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool) != (kind is bool)):
            raise _bad(key, f"expected {what}")
    meta = body.get("metadata") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise _bad("metadata", "expected an object of string values")


def parse_request(body: Dict[str, Any], max_tokens_limit: int) -> ResponsesRequest:
    _check_fields(body)
    messages = input_messages(body)
    kwargs: Dict[str, Any] = {**tool_kwargs(body), **reasoning_kwargs(body)}
    mt = body.get("max_output_tokens")
    if mt is not None:
        if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
            raise _bad("max_output_tokens", f"expected a positive integer, got {mt!r}")
        if mt > max_tokens_limit:
            raise _bad("max_output_tokens", f"{mt} exceeds this server's limit of {max_tokens_limit}")
    kwargs["max_tokens"] = mt if mt is not None else max_tokens_limit
    for key, hi in (("temperature", 2.0), ("top_p", 1.0)):
        v = _number(body, key, hi)
        if v is not None:
            kwargs[key] = v
    seed = body.get("seed")  # not OpenAI's: llama-server's, for repeatable sampling
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise _bad("seed", "expected an integer")
        kwargs["seed"] = seed
    if body.get("max_reasoning_tokens") is not None:  # akunu's: a bound on the reasoning (Python API's name)
        kwargs["max_reasoning_tokens"] = body["max_reasoning_tokens"]  # checked by the chat completion
    rf = text_format(body)
    if rf is not None:
        kwargs["response_format"] = rf
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream", f"expected true or false, got {stream!r}")
    fmt = (body.get("text") or {}).get("format") or {"type": "text"}
    echo = {"instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
            "max_output_tokens": mt, "temperature": kwargs.get("temperature", 1.0), "top_p": kwargs.get("top_p", 1.0),
            "tools": [_tool_echo(t) for t in body.get("tools") or []],
            "tool_choice": body.get("tool_choice") or "auto",
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "text": {"format": fmt}, "reasoning": {"effort": (body.get("reasoning") or {}).get("effort"),
                                                   "summary": None},
            "store": False, "previous_response_id": None, "truncation": "disabled", "user": body.get("user")}
    return ResponsesRequest(messages, kwargs, stream, echo)


def _tool_echo(t: Dict[str, Any]) -> Dict[str, Any]:
    return {"type": "function", "name": t["name"], "description": t.get("description"),
            "parameters": t.get("parameters"), "strict": t.get("strict")}


# -- response: chat completion -> Responses -------------------------------------------------
def _usage(prompt_tokens: int, output_tokens: int, reasoning_tokens: int = 0) -> Dict[str, Any]:
    return {"input_tokens": prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": min(reasoning_tokens, output_tokens)},
            "total_tokens": prompt_tokens + output_tokens}


def reasoning_tokens(model, items: List[Dict[str, Any]]) -> int:
    """The reasoning's tokens, counted by tokenizing its text again (the generation does not
    mark where the reasoning ended; the markers around it are not counted)."""
    text = "".join(c["text"] for it in items if it["type"] == "reasoning" for c in it["content"])
    return len(model.tokenize(text, add_bos=False)) if text else 0


def response_object(rid: str, created: int, model: str, req: ResponsesRequest, status: str,
                    output: List[Dict[str, Any]], usage: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return {"id": rid, "object": "response", "created_at": created, "status": status, "error": None,
            "incomplete_details": incomplete, "model": model, "output": output, "usage": usage, **req.echo}


def _status(finish: Optional[str]) -> str:
    return "incomplete" if finish == "length" else "completed"


def reasoning_item(text: str, status: str, iid: Optional[str] = None) -> Dict[str, Any]:
    return {"type": "reasoning", "id": iid or _new_id("rs"), "summary": [],
            "content": [{"type": "reasoning_text", "text": text}], "status": status}


def message_item(text: str, status: str, iid: Optional[str] = None) -> Dict[str, Any]:
    return {"type": "message", "id": iid or _new_id("msg"), "role": "assistant", "status": status,
            "content": [_text_part(text)]}


def _text_part(text: str) -> Dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(call_id: str, name: str, arguments: str, status: str, iid: Optional[str] = None) -> Dict[str, Any]:
    return {"type": "function_call", "id": iid or _new_id("fc"), "call_id": call_id, "name": name,
            "arguments": arguments, "status": status}


def output_items(out: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A chat completion's message as output items: reasoning, the text, the calls."""
    choice = out["choices"][0]
    msg, status = choice["message"], _status(choice["finish_reason"])
    items: List[Dict[str, Any]] = []
    if msg.get("reasoning_content"):
        items.append(reasoning_item(msg["reasoning_content"], "completed" if msg.get("content") or
                                    msg.get("tool_calls") else status))
    calls = msg.get("tool_calls") or []
    if msg.get("content") or not calls and (status == "completed" or not items):
        items.append(message_item(msg.get("content") or "", status))  # an empty answer is a message too
    for c in calls:
        items.append(call_item(c["id"], c["function"]["name"], c["function"]["arguments"], "completed"))
    return items


class EventTranslator:
    """Chat chunks in, Responses events out: an output item per run of reasoning, per run of
    text and per call, each added, filled and done in turn."""

    def __init__(self, rid: str, created: int, model: str, req: ResponsesRequest,
                 count_reasoning: Callable[[List[Dict[str, Any]]], int] = lambda items: 0):
        self.rid, self.created, self.model, self.req = rid, created, model, req
        self.count_reasoning = count_reasoning
        self.seq = 0
        self.items: List[Dict[str, Any]] = []   # finished and open items, in output order
        self.open: Optional[str] = None          # "reasoning", "text", or "call<index>"
        self.finish: Optional[str] = None

    def event(self, kind: str, **data: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **data}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

    def response(self, status: str, usage: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return response_object(self.rid, self.created, self.model, self.req, status, self.items, usage)

    def start(self) -> List[bytes]:
        r = self.response("in_progress")
        return [self.event("response.created", response=r), self.event("response.in_progress", response=r)]

    def _where(self) -> Dict[str, Any]:
        return {"item_id": self.items[-1]["id"], "output_index": len(self.items) - 1}

    def _open(self, key: str, item: Dict[str, Any]) -> List[bytes]:
        out = self._close()
        self.open = key
        self.items.append(item)
        out.append(self.event("response.output_item.added", output_index=len(self.items) - 1, item=item))
        if item["type"] != "function_call":
            part = {"type": "reasoning_text", "text": ""} if item["type"] == "reasoning" else _text_part("")
            out.append(self.event("response.content_part.added", content_index=0, part=part, **self._where()))
        return out

    def _close(self, status: str = "completed") -> List[bytes]:
        if self.open is None:
            return []
        self.open = None
        item = self.items[-1]
        item["status"] = status
        out: List[bytes] = []
        if item["type"] == "reasoning":
            text = item["content"][0]["text"]
            out.append(self.event("response.reasoning_text.done", content_index=0, text=text, **self._where()))
            out.append(self.event("response.content_part.done", content_index=0, part=item["content"][0],
                                  **self._where()))
        elif item["type"] == "message":
            part = item["content"][0]
            out.append(self.event("response.output_text.done", content_index=0, text=part["text"], logprobs=[],
                                  **self._where()))
            out.append(self.event("response.content_part.done", content_index=0, part=part, **self._where()))
        else:
            out.append(self.event("response.function_call_arguments.done", arguments=item["arguments"],
                                  name=item["name"], **self._where()))
        out.append(self.event("response.output_item.done", output_index=len(self.items) - 1, item=item))
        return out

    def feed(self, chunk: Dict[str, Any]) -> List[bytes]:
        out: List[bytes] = []
        for choice in chunk.get("choices", []):
            d = choice.get("delta") or {}
            if d.get("reasoning_content"):
                if self.open != "reasoning":
                    out += self._open("reasoning", reasoning_item("", "in_progress"))
                self.items[-1]["content"][0]["text"] += d["reasoning_content"]
                out.append(self.event("response.reasoning_text.delta", content_index=0,
                                      delta=d["reasoning_content"], **self._where()))
            if d.get("content"):
                if self.open != "text":
                    out += self._open("text", message_item("", "in_progress"))
                self.items[-1]["content"][0]["text"] += d["content"]
                out.append(self.event("response.output_text.delta", content_index=0, delta=d["content"],
                                      logprobs=[], **self._where()))
            for tc in d.get("tool_calls") or []:
                key = f"call{tc['index']}"
                fn = tc.get("function") or {}
                if "id" in tc:
                    out += self._open(key, call_item(tc["id"], fn.get("name", ""), "", "in_progress"))
                if fn.get("arguments") and self.open == key:
                    self.items[-1]["arguments"] += fn["arguments"]
                    out.append(self.event("response.function_call_arguments.delta", delta=fn["arguments"],
                                          **self._where()))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return out

    def end(self, prompt_tokens: int, output_tokens: int) -> List[bytes]:
        status = _status(self.finish)
        calls = any(it["type"] == "function_call" for it in self.items)
        out = self._close("completed" if self.open and self.open.startswith("call") else status)
        if not calls and not any(it["type"] == "message" for it in self.items) \
                and (status == "completed" or not self.items):
            out += self._open("text", message_item("", "in_progress")) + self._close(status)  # an empty answer
        r = self.response(status, _usage(prompt_tokens, output_tokens, self.count_reasoning(self.items)))
        out.append(self.event("response.completed" if status == "completed" else "response.incomplete", response=r))
        return out


# -- the route ----------------------------------------------------------------------------
def router(max_tokens: int = 4096) -> APIRouter:
    r = APIRouter()

    @r.post(PATH)
    async def responses(request: Request):
        body = await _json(request)
        req = parse_request(body, max_tokens)
        slot = _slot(request.app, body)
        model, name = slot.model, slot.name
        metrics = getattr(request.app.state, "metrics", None)
        rid, created = _new_id("resp"), int(time.time())
        start = lambda stream=False: model.create_chat_completion(req.messages, stream=stream, model=name,  # noqa: E731
                                                                  **req.kwargs)
        if not req.stream:
            async with _turn(slot, metrics):
                t0 = time.perf_counter()
                try:
                    out = await anyio.to_thread.run_sync(start, limiter=slot.limiter())
                except AkunuError as e:
                    raise _as_api_error(e) from None
            u = out["usage"]
            if metrics is not None:
                metrics.generation(name, u["prompt_tokens"], u["completion_tokens"], time.perf_counter() - t0)
            status, items = _status(out["choices"][0]["finish_reason"]), output_items(out)
            usage = _usage(u["prompt_tokens"], u["completion_tokens"], reasoning_tokens(model, items))
            return JSONResponse(response_object(rid, created, name, req, status, items, usage))
        try:
            gen = await GenerationStream(slot, _turn(slot, metrics), metrics).open(lambda: start(True))
        except AkunuError as e:
            raise _as_api_error(e) from None
        tr = EventTranslator(rid, created, name, req, lambda items: reasoning_tokens(model, items))
        return _StreamWithCleanup(_events(gen, tr), gen.finish)

    return r


async def _events(gen: GenerationStream, tr: EventTranslator) -> AsyncIterator[bytes]:
    for ev in tr.start():
        yield ev
    try:
        async for chunks in gen.batches():
            yield b"".join(ev for chunk in chunks for ev in tr.feed(chunk))
    except AkunuError as e:
        yield tr.event("error", code="server_error", message=str(e), param=None)
        return
    st = gen.chunks.result.stats
    for ev in tr.end(st.prompt_tokens, st.generated_tokens):
        yield ev


def install(app, max_tokens: int = 4096) -> None:
    """Adds POST /v1/responses to `app`."""
    app.include_router(router(max_tokens))
