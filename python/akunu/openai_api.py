"""OpenAI-shaped results (the shapes llama-cpp-python returns), shared by
Model.create_completion / create_chat_completion and akunu-serve."""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import AkunuError
from . import tool_calls
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
                                   "n", "stream_options", "max_completion_tokens", "user", "logprobs",
                                   "top_logprobs"}
_CHAT_ONLY = {"tools", "tool_choice", "parallel_tool_calls"}
MAX_STOP = 4    # OpenAI's limit on stop sequences
MAX_N = 16      # choices per request (OpenAI allows 128; each is a generation of its own here)


def _check(kwargs: Dict[str, Any]) -> None:
    unknown = set(kwargs) - _ACCEPTED
    if unknown:
        raise AkunuError(f"unsupported argument(s): {', '.join(sorted(unknown))}")
    n = kwargs.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N):
        raise AkunuError(f"n = {n!r} is not supported: n must be an integer from 1 to {MAX_N}")
    stop = kwargs.get("stop")
    if isinstance(stop, (list, tuple)) and len(stop) > MAX_STOP:
        raise AkunuError(f"stop takes at most {MAX_STOP} sequences (OpenAI's limit), got {len(stop)}")
    # the decode loops return token ids, not their logits: no log-probabilities to report
    if kwargs.get("logprobs") not in (None, False) or kwargs.get("top_logprobs") not in (None, 0):
        raise AkunuError("logprobs is not supported yet")
    if kwargs.get("max_completion_tokens") is not None and kwargs.get("max_tokens") is None:
        kwargs["max_tokens"] = kwargs["max_completion_tokens"]


def _usage_of(results) -> Dict[str, int]:
    """Usage of n choices of one prompt: the prompt counted once."""
    p = results[0].stats.prompt_tokens
    c = sum(r.stats.generated_tokens for r in results)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _choice_kwargs(gen: Dict[str, Any], i: int) -> Dict[str, Any]:
    """Choice i's settings: with a seed, seed + i, so that sampled choices differ and repeat."""
    if i and gen.get("seed") is not None:
        return {**gen, "seed": gen["seed"] + i}
    return gen


def _generate_n(llm, prompt, gen: Dict[str, Any], n: int):
    """n whole results for one prompt: together on the batching scheduler when the model
    has one, else one after another."""
    if n == 1:
        return [llm.generate(prompt, **gen)]
    if llm.batching is None:
        return [llm.generate(prompt, **_choice_kwargs(gen, i)) for i in range(n)]
    from . import async_calls
    from .batching import run_to_end

    streams = [llm.generate(prompt, stream=True, **_choice_kwargs(gen, i)) for i in range(n)]
    try:
        for s in streams:
            run_to_end(s, async_calls.cancelled)
    finally:
        for s in streams:
            s.close()
    return [s.result for s in streams]


class _Choices:
    """The streams of n choices, run one after another: ``result`` sums what they did so far
    (prompt counted once), ``close()`` stops the one running."""

    def __init__(self, llm, prompt, gen: Dict[str, Any], n: int):
        self._start = lambda i: llm.generate(prompt, stream=True, **_choice_kwargs(gen, i))
        self.n = n
        self.streams: List[Any] = [self._start(0)]  # the first one checks the request

    def stream(self, i: int):
        if i == len(self.streams):
            self.streams.append(self._start(i))
        return self.streams[i]

    @property
    def result(self):
        from .generation import GenerationResult, GenerationStats

        rs = [s.result for s in self.streams]
        if len(rs) == 1:
            return rs[0]
        u = _usage_of(rs)
        return GenerationResult(text="", tokens=[], finish_reason=rs[-1].finish_reason,
                                stats=GenerationStats(prompt_tokens=u["prompt_tokens"],
                                                      generated_tokens=u["completion_tokens"]))

    def close(self) -> None:
        for s in self.streams:
            s.close()


def _usage_chunk(make, choices: "_Choices") -> Dict[str, Any]:
    d = make(None)
    d["choices"] = []
    d["usage"] = _usage_of([s.result for s in choices.streams])
    return d


def create_completion(llm, prompt: Union[str, Sequence[int]], /, *, stream: bool = False, **kwargs: Any):
    echo = kwargs.pop("echo", False)
    if not isinstance(echo, bool):
        raise AkunuError("echo must be true or false")
    _check(kwargs)
    n = kwargs.get("n") or 1
    include_usage = bool((kwargs.get("stream_options") or {}).get("include_usage"))
    name = kwargs.get("model") or llm.name
    gen = _generate_kwargs(kwargs)
    if gen["max_tokens"] is None:
        gen["max_tokens"] = 16  # OpenAI's default for completions
    cid, created = "cmpl-" + uuid.uuid4().hex, int(time.time())
    prefix = ""
    if echo:  # the prompt is written before each choice's text
        prefix = prompt if isinstance(prompt, str) else llm.detokenize(prompt)

    def choice(i, text, finish):
        return {"text": text, "index": i, "logprobs": None, "finish_reason": finish}

    def shape(choices, usage=None):
        d = {"id": cid, "object": "text_completion", "created": created, "model": name, "choices": choices}
        if usage is not None:
            d["usage"] = usage
        return d

    if not stream:
        rs = _generate_n(llm, prompt, gen, n)
        return shape([choice(i, prefix + r.text, r.finish_reason) for i, r in enumerate(rs)], _usage_of(rs))
    cs = _Choices(llm, prompt, gen, n)

    def chunks() -> Iterator[Dict[str, Any]]:
        try:
            for i in range(n):
                s = cs.stream(i)
                if prefix:
                    yield shape([choice(i, prefix, None)])
                for piece in s:
                    yield shape([choice(i, piece, None)])
                yield shape([choice(i, "", s.result.finish_reason)])
            if include_usage:
                yield _usage_chunk(lambda _: shape([]), cs)
        finally:
            cs.close()

    return ChunkStream(chunks(), cs)


def _chat_prompt(llm, messages, tools: Optional[tool_calls.ToolRequest]):
    template = llm.chat_template
    if template is None:
        raise AkunuError("this is an embedding model: it has no chat template")
    vocab = llm.tokenizer.tokens
    msgs = tool_calls.template_messages(messages, tools, template, vocab) \
        if isinstance(messages, (list, tuple)) else messages
    extra = {"tools": tools.tools} if tools is not None and tools.native else {}
    return llm.tokenize(template.render(msgs, **extra), add_bos=False)


def _message(r, tools: Optional[tool_calls.ToolRequest]) -> Tuple[Dict[str, Any], str]:
    """The assistant message of one result and its finish reason."""
    if tools is None:
        return {"role": "assistant", "content": r.text}, r.finish_reason
    parsed = tools.parse(r.text)
    calls = tool_calls.openai_calls(parsed, tools)
    if not calls:
        return {"role": "assistant", "content": r.text}, r.finish_reason
    msg = {"role": "assistant", "content": parsed.content or None, "tool_calls": calls}
    return msg, "tool_calls" if r.finish_reason == "stop" else r.finish_reason


def create_chat_completion(llm, messages: Sequence[Dict[str, Any]], /, *, stream: bool = False,
                           **kwargs: Any):
    tool_args = {k: kwargs.pop(k) for k in list(kwargs) if k in _CHAT_ONLY}
    _check(kwargs)
    n = kwargs.get("n") or 1
    include_usage = bool((kwargs.get("stream_options") or {}).get("include_usage"))
    name = kwargs.get("model") or llm.name
    tools = tool_calls.prepare(llm.chat_template, vocab=llm.tokenizer.tokens, **tool_args)
    gen = _generate_kwargs(kwargs)
    if tools is not None and tools.constrained:
        if "grammar" in gen:
            raise AkunuError("tool_choice 'required' or a named function sets the output's grammar: "
                             "give no grammar or response_format with it")
        gen["grammar"] = tool_calls.constraint(tools)
    prompt = _chat_prompt(llm, messages, tools)
    cid, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())

    if not stream:
        rs = _generate_n(llm, prompt, gen, n)
        choices = []
        for i, r in enumerate(rs):
            msg, finish = _message(r, tools)
            choices.append({"index": i, "message": msg, "logprobs": None, "finish_reason": finish})
        return {"id": cid, "object": "chat.completion", "created": created, "model": name,
                "choices": choices, "usage": _usage_of(rs)}
    cs = _Choices(llm, prompt, gen, n)

    def chunk(i, delta, finish):
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def choice_chunks(i) -> Iterator[Dict[str, Any]]:
        s = cs.stream(i)
        yield chunk(i, {"role": "assistant", "content": ""}, None)
        if tools is None:
            for piece in s:
                if piece:
                    yield chunk(i, {"content": piece}, None)
            yield chunk(i, {}, s.result.finish_reason)
            return
        # content held back while a call may be opening; calls as OpenAI streams them
        ds = tool_calls.DeltaStream(tools)
        for piece in s:
            for d in ds.feed(piece):
                yield chunk(i, d, None)
        for d in ds.finish():
            yield chunk(i, d, None)
        finish = s.result.finish_reason
        yield chunk(i, {}, "tool_calls" if ds.called and finish == "stop" else finish)

    def chunks() -> Iterator[Dict[str, Any]]:
        try:
            for i in range(n):
                yield from choice_chunks(i)
            if include_usage:
                yield _usage_chunk(lambda _: chunk(0, {}, None), cs)
        finally:
            cs.close()

    return ChunkStream(chunks(), cs)


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
