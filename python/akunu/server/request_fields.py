"""OpenAI request bodies checked field by field into keyword arguments of
Model.create_completion / create_chat_completion (wrong types: 400 naming
the field)."""

from __future__ import annotations

import math
from typing import Any, Dict

from .errors import ApiError

_NUMBER_FIELDS = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repeat_penalty")
_INT_FIELDS = ("top_k", "seed", "n", "max_tokens", "max_completion_tokens", "penalty_last_n")
# accepted and ignored, as other OpenAI-compatible servers do
_IGNORED = ("user", "suffix", "best_of", "service_tier", "store", "metadata")
MAX_STOP = 4   # OpenAI's limit on stop sequences
MAX_N = 16     # choices per request
MAX_TOP_LOGPROBS = 20  # OpenAI's limit


def _bad(param: str, msg: str) -> ApiError:
    return ApiError(400, f"'{param}': {msg}", param=param)


def sampling_fields(body: Dict[str, Any], max_tokens_limit: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k in _NUMBER_FIELDS:
        v = body.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _bad(k, f"expected a number, got {v!r}")
        out[k] = float(v)
    for k in _INT_FIELDS:
        v = body.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise _bad(k, f"expected an integer, got {v!r}")
        out[k] = v
    if "max_completion_tokens" in out:
        out.setdefault("max_tokens", out.pop("max_completion_tokens"))
        out.pop("max_completion_tokens", None)
    mt = out.get("max_tokens")
    if mt is not None and mt < 0:
        raise _bad("max_tokens", "must be >= 0")
    if mt is not None and mt > max_tokens_limit:
        raise _bad("max_tokens", f"{mt} exceeds this server's limit of {max_tokens_limit}")
    if out.get("max_tokens") is None:
        out["max_tokens"] = max_tokens_limit
    if not 1 <= out.get("n", 1) <= MAX_N:
        raise _bad("n", f"n = {out['n']} is not supported: n must be from 1 to {MAX_N}")
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _bad("stop", f"expected a string or a list of at most {MAX_STOP} strings")
        if len(stop) > MAX_STOP:
            raise _bad("stop", f"at most {MAX_STOP} stop sequences are allowed (OpenAI's limit), got {len(stop)}")
        out["stop"] = stop
    bias = body.get("logit_bias")
    if bias is not None:
        if not isinstance(bias, dict):
            raise _bad("logit_bias", "expected an object mapping token ids to numbers")
        try:
            out["logit_bias"] = {int(k): float(v) for k, v in bias.items()}
        except (TypeError, ValueError):
            raise _bad("logit_bias", "expected an object mapping token ids to numbers") from None
    rf = body.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict):
            raise _bad("response_format", "expected an object")
        out["response_format"] = rf
    so = body.get("stream_options")
    if so is not None:
        if not isinstance(so, dict):
            raise _bad("stream_options", "expected an object")
        out["stream_options"] = so
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream", f"expected true or false, got {stream!r}")
    out["stream"] = stream
    return out


def ignore_eos_field(body: Dict[str, Any], kwargs: Dict[str, Any], stop_ids) -> None:
    """`ignore_eos: true` (vLLM's and llama-server's extension, which load
    generators send for fixed output lengths): the model's end-of-turn tokens
    never sampled, as the CLIs' --ignore-eos does, through logit_bias."""
    v = body.get("ignore_eos")
    if v is None:
        return
    if not isinstance(v, bool):
        raise _bad("ignore_eos", f"expected true or false, got {v!r}")
    if v:
        kwargs["logit_bias"] = {**kwargs.get("logit_bias", {}), **{int(i): float("-inf") for i in stop_ids}}


def chat_logprob_fields(body: Dict[str, Any]) -> Dict[str, Any]:
    """Chat's logprobs (true / false) and top_logprobs (0-20; needs logprobs true)."""
    out: Dict[str, Any] = {}
    lp, top = body.get("logprobs"), body.get("top_logprobs")
    if lp is not None:
        if not isinstance(lp, bool):
            raise _bad("logprobs", f"expected true or false, got {lp!r}")
        out["logprobs"] = lp
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise _bad("top_logprobs", f"expected an integer from 0 to {MAX_TOP_LOGPROBS}, got {top!r}")
        if top and not lp:
            raise _bad("top_logprobs", "needs logprobs: true")
        out["top_logprobs"] = top
    return out


def completion_logprob_fields(body: Dict[str, Any]) -> Dict[str, Any]:
    """The legacy completion's logprobs: how many likeliest tokens to list at each position (0-20)."""
    lp = body.get("logprobs")
    if body.get("top_logprobs") is not None:
        raise _bad("top_logprobs", "a chat completion field; completions take logprobs: N")
    if lp is None:
        return {}
    if isinstance(lp, bool) or not isinstance(lp, int) or not 0 <= lp <= MAX_TOP_LOGPROBS:
        raise _bad("logprobs", f"expected an integer from 0 to {MAX_TOP_LOGPROBS}, got {lp!r}")
    return {"logprobs": lp}


_TEMPLATE_FIELDS = {"enable_thinking": bool, "reasoning_effort": str, "reasoning_format": str,
                    "chat_template_kwargs": dict, "max_reasoning_tokens": int}
_EXPECTED = {bool: "true or false", dict: "an object", str: "a string", int: "an integer"}


def reasoning_fields(body: Dict[str, Any]) -> Dict[str, Any]:
    """chat_template_kwargs, enable_thinking, reasoning_effort, reasoning_format and
    max_reasoning_tokens of a chat request (their values are checked by the chat completion itself)."""
    out: Dict[str, Any] = {}
    for k, kind in _TEMPLATE_FIELDS.items():
        v = body.get(k)
        if v is None:
            continue
        if isinstance(v, bool) != (kind is bool) or not isinstance(v, kind):
            raise _bad(k, f"expected {_EXPECTED[kind]}")
        out[k] = v
    return out


def tool_fields(body: Dict[str, Any]) -> Dict[str, Any]:
    """tools, tool_choice and parallel_tool_calls of a chat request (their content is
    checked by the chat completion itself)."""
    out: Dict[str, Any] = {}
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise _bad("tools", "expected a list of {'type': 'function', 'function': {...}} objects")
        out["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, (str, dict)):
            raise _bad("tool_choice", "expected 'none', 'auto', 'required' or "
                                      "{'type': 'function', 'function': {'name': ...}}")
        out["tool_choice"] = choice
    parallel = body.get("parallel_tool_calls")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise _bad("parallel_tool_calls", f"expected true or false, got {parallel!r}")
        out["parallel_tool_calls"] = parallel
    return out


def echo_field(body: Dict[str, Any]) -> bool:
    echo = body.get("echo", False)
    if echo is None:
        return False
    if not isinstance(echo, bool):
        raise _bad("echo", f"expected true or false, got {echo!r}")
    return echo


def model_field(body: Dict[str, Any]):
    m = body.get("model")
    if m is not None and not isinstance(m, str):
        raise _bad("model", "expected a string")
    return m


def messages_field(body: Dict[str, Any]):
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages", "expected a non-empty list of messages")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}]", "expected an object with a string 'role'")
        c = m.get("content")
        if not (c is None or isinstance(c, str) or isinstance(c, list)):
            raise _bad(f"messages[{i}].content", "expected a string or a list of text parts")
    return msgs


def prompt_field(body: Dict[str, Any]):
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]  # a batch of one
    if isinstance(p, str):
        return p
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
        return p
    raise _bad("prompt", "expected a string, a list of token ids, or a list holding one of those")


_AUDIO_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


def audio_fields(form, task: str) -> Dict[str, Any]:
    """OpenAI's /v1/audio/{transcriptions,translations} form fields -> transcribe() arguments
    (plus model, response_format and stream, which the route takes out)."""
    def text(name: str, default=None):
        v = form.get(name, default)
        if v is not None and not isinstance(v, str):
            raise _bad(name, "expected a text field")
        return v

    fmt = text("response_format", "json")
    if fmt not in _AUDIO_FORMATS:
        raise _bad("response_format", f"expected one of {', '.join(_AUDIO_FORMATS)}")
    out: Dict[str, Any] = {"model": text("model"), "response_format": fmt, "task": task,
                           "initial_prompt": text("prompt") or None}
    stream = (text("stream", "false") or "false").lower()
    if stream not in ("true", "false"):
        raise _bad("stream", "expected true or false")
    out["stream"] = stream == "true"
    language = text("language")
    if language and task == "transcribe":
        out["language"] = language
    t = text("temperature")
    if t not in (None, ""):
        try:
            temp = float(t)
        except ValueError:
            raise _bad("temperature", "expected a number") from None
        if not 0.0 <= temp <= 1.0:
            raise _bad("temperature", "expected a number in [0, 1]")
        # OpenAI: 0 means the reference's automatic fallback; a value fixes it
        if temp > 0:
            out["temperature"] = temp
    grains = form.getlist("timestamp_granularities[]") + form.getlist("timestamp_granularities")
    if any(g not in ("segment", "word") for g in grains):
        raise _bad("timestamp_granularities[]", "expected 'segment' or 'word'")
    if "word" in grains:
        raise _bad("timestamp_granularities[]", "word timestamps are not supported (segment only)")
    # timestamp tokens on for every format, as OpenAI's and faster-whisper's
    # decoding: they steer the text too, not only the segment times
    out["timestamps"] = True
    return out
