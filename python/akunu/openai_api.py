"""OpenAI-shaped results (the shapes llama-cpp-python returns), shared by
Model.create_completion / create_chat_completion and akunu-serve."""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, Optional, Sequence, Union

from .errors import AkunuError
from .grammar import Grammar

# llama-cpp-python's defaults for the OpenAI-style calls
DEFAULTS = dict(temperature=0.2, top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.0)

_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "presence_penalty",
                  "frequency_penalty", "seed", "logit_bias", "penalty_last_n")


class ChunkStream:
    """Iterator of OpenAI chunk dicts; ``result`` is the generation's result, ``close()`` stops it."""

    def __init__(self, chunks: Iterator[Dict[str, Any]], stream):
        self._chunks = chunks
        self._stream = stream

    def __iter__(self) -> "ChunkStream":
        return self

    def __next__(self) -> Dict[str, Any]:
        return next(self._chunks)

    @property
    def result(self):
        return self._stream.result

    def close(self) -> None:
        self._chunks.close()
        self._stream.close()


def grammar_from_response_format(response_format: Optional[Dict[str, Any]]) -> Optional[Grammar]:
    """OpenAI's response_format: text, json_object (optionally with a schema, as llama.cpp allows), json_schema."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise AkunuError("response_format must be an object")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return Grammar.json_schema(schema) if schema else Grammar.any_json()
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise AkunuError("response_format json_schema needs {'json_schema': {'name': ..., 'schema': {...}}}")
        return Grammar.json_schema(spec["schema"])
    raise AkunuError(f"response_format type '{kind}' is not supported (text, json_object, json_schema)")


def _usage(result) -> Dict[str, int]:
    p, c = result.stats.prompt_tokens, result.stats.generated_tokens
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _generate_kwargs(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(DEFAULTS)
    for k in _SAMPLING_KEYS:
        if kwargs.get(k) is not None:
            out[k] = kwargs[k]
    if isinstance(out.get("logit_bias"), dict):
        try:
            out["logit_bias"] = {int(k): v for k, v in out["logit_bias"].items()}
        except (TypeError, ValueError):
            raise AkunuError("logit_bias keys must be token ids") from None
    g = grammar_from_response_format(kwargs.get("response_format"))
    if kwargs.get("grammar") is not None:
        if g is not None:
            raise AkunuError("give either grammar or response_format, not both")
        g = kwargs["grammar"]
    if g is not None:
        out["grammar"] = g
    if kwargs.get("stop") is not None:
        out["stop"] = kwargs["stop"]
    out["max_tokens"] = kwargs.get("max_tokens")
    return out


_ACCEPTED = set(_SAMPLING_KEYS) | {"max_tokens", "stop", "stream", "response_format", "grammar", "model",
                                   "n", "stream_options", "max_completion_tokens", "user"}


def _check(kwargs: Dict[str, Any]) -> None:
    unknown = set(kwargs) - _ACCEPTED
    if unknown:
        raise AkunuError(f"unsupported argument(s): {', '.join(sorted(unknown))}")
    n = kwargs.get("n")
    if n is not None and n != 1:
        raise AkunuError(f"n = {n} is not supported: akunu returns one choice per request (n = 1)")
    if kwargs.get("max_completion_tokens") is not None and kwargs.get("max_tokens") is None:
        kwargs["max_tokens"] = kwargs["max_completion_tokens"]


def _stream_tail(s, include_usage: bool, make) -> Iterator[Dict[str, Any]]:
    """The last chunks of a stream: the finish reason, then (if asked) one with usage and no choices."""
    yield make(s.result.finish_reason)
    if include_usage:
        d = make(None)
        d["choices"] = []
        d["usage"] = _usage(s.result)
        yield d


def create_completion(llm, prompt: Union[str, Sequence[int]], /, *, stream: bool = False, **kwargs: Any):
    _check(kwargs)
    include_usage = bool((kwargs.get("stream_options") or {}).get("include_usage"))
    name = kwargs.get("model") or llm.name
    gen = _generate_kwargs(kwargs)
    if gen["max_tokens"] is None:
        gen["max_tokens"] = 16  # OpenAI's default for completions
    cid, created = "cmpl-" + uuid.uuid4().hex, int(time.time())

    def shape(text, finish, result=None):
        d = {"id": cid, "object": "text_completion", "created": created, "model": name,
             "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]}
        if result is not None:
            d["usage"] = _usage(result)
        return d

    if not stream:
        r = llm.generate(prompt, **gen)
        return shape(r.text, r.finish_reason, r)
    s = llm.generate(prompt, stream=True, **gen)

    def chunks() -> Iterator[Dict[str, Any]]:
        try:
            for piece in s:
                yield shape(piece, None)
            yield from _stream_tail(s, include_usage, lambda finish: shape("", finish))
        finally:
            s.close()

    return ChunkStream(chunks(), s)


def create_chat_completion(llm, messages: Sequence[Dict[str, Any]], /, *, stream: bool = False,
                           **kwargs: Any):
    _check(kwargs)
    include_usage = bool((kwargs.get("stream_options") or {}).get("include_usage"))
    name = kwargs.get("model") or llm.name
    gen = _generate_kwargs(kwargs)
    prompt = llm.tokenize(llm.apply_chat_template(messages), add_bos=False)
    cid, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())

    if not stream:
        r = llm.generate(prompt, **gen)
        return {"id": cid, "object": "chat.completion", "created": created, "model": name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": r.text},
                             "logprobs": None, "finish_reason": r.finish_reason}],
                "usage": _usage(r)}
    s = llm.generate(prompt, stream=True, **gen)

    def chunk(delta, finish):
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def chunks() -> Iterator[Dict[str, Any]]:
        try:
            yield chunk({"role": "assistant", "content": ""}, None)
            for piece in s:
                if piece:
                    yield chunk({"content": piece}, None)
            yield from _stream_tail(s, include_usage, lambda finish: chunk({}, finish))
        finally:
            s.close()

    return ChunkStream(chunks(), s)


def create_embedding(model, input: Any, model_name: Optional[str] = None, encoding_format: str = "float",
                     dimensions: Optional[int] = None) -> Dict[str, Any]:
    """OpenAI's embeddings response for `input`: a string, a list of strings, a list of token ids
    or a list of token-id lists (ids already include the model's [CLS] / [SEP])."""
    import base64

    import numpy as np

    if not model.is_embedding_model:
        raise AkunuError(f"the model is not an embedding model ({model.config['architecture']}); "
                         "load one such as all-MiniLM-L6-v2 or a BERT GGUF")
    if encoding_format not in ("float", "base64"):
        raise AkunuError(f"encoding_format must be 'float' or 'base64', got {encoding_format!r}")
    if dimensions is not None and dimensions != model.config["dim"]:
        raise AkunuError(f"this model's embeddings have {model.config['dim']} dimensions; "
                         f"dimensions={dimensions!r} is not supported")
    if isinstance(input, str):
        items: list = [input]
    elif isinstance(input, list) and input and all(isinstance(t, int) and not isinstance(t, bool) for t in input):
        items = [input]
    elif isinstance(input, list) and input and all(isinstance(t, (str, list)) for t in input):
        items = input
    else:
        raise AkunuError("input must be a non-empty string, list of strings, or list of token-id lists")
    texts = [t for t in items if isinstance(t, str)]
    if texts and len(texts) != len(items):
        raise AkunuError("input mixes strings and token ids")
    if texts:
        vectors = model.embed(texts)
        n_tokens = sum(min(len(model.tokenize(t)), model.n_ctx) for t in texts)
    else:
        seqs = []
        for ids in items:
            if not ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
                raise AkunuError("token-id inputs must be non-empty lists of integers")
            seqs.append([int(t) for t in ids])
        with model._exclusive():
            vectors = model._core().embed(seqs)
        n_tokens = sum(len(s) for s in seqs)
    data = []
    for i, v in enumerate(np.asarray(vectors, dtype=np.float32)):
        emb = base64.b64encode(v.astype("<f4").tobytes()).decode() if encoding_format == "base64" else v.tolist()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": model_name or model.name,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}
