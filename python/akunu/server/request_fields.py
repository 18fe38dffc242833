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
_IGNORED = ("user", "logprobs", "top_logprobs", "echo", "suffix", "best_of", "parallel_tool_calls",
            "service_tier", "store", "metadata")


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
    if out.get("n", 1) != 1:
        raise _bad("n", f"only n = 1 is supported, got {out['n']}")
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 16:
            raise _bad("stop", "expected a string or a list of at most 16 strings")
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
