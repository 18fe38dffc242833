"""OpenAI-shaped results (the shapes llama-cpp-python returns), shared by
Model.create_completion / create_chat_completion and akunu-serve."""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import AkunuError
from . import logprobs as lp_mod
from . import reasoning, tool_calls
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

    def ready(self) -> bool:
        """Whether the generation has a piece waiting (a batched one says; others: False)."""
        ready = getattr(self._stream, "ready", None)
        return bool(ready and ready())

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
_REASONING_ARGS = {"reasoning_format", "chat_template_kwargs", "enable_thinking", "reasoning_effort",
                   "max_reasoning_tokens"}
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
    if kwargs.get("max_completion_tokens") is not None and kwargs.get("max_tokens") is None:
        kwargs["max_tokens"] = kwargs["max_completion_tokens"]


def _top_n(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= lp_mod.MAX_TOP_LOGPROBS:
        raise AkunuError(f"{name} must be an integer from 0 to {lp_mod.MAX_TOP_LOGPROBS}, got {value!r}")
    return value


def _chat_logprobs(kwargs: Dict[str, Any]) -> Optional[int]:
    """Chat's logprobs (true / false) and top_logprobs (0-20): the top count, or None for none."""
    lp, top = kwargs.get("logprobs"), kwargs.get("top_logprobs")
    if lp is not None and not isinstance(lp, bool):
        raise AkunuError(f"logprobs must be true or false, got {lp!r}")
    n = _top_n(top, "top_logprobs") if top is not None else 0
    if n and not lp:
        raise AkunuError("top_logprobs needs logprobs: true")
    return n if lp else None


def _completion_logprobs(kwargs: Dict[str, Any]) -> Optional[int]:
    """The legacy completion's logprobs: the number of likeliest tokens to list (0-20), or None."""
    if kwargs.get("top_logprobs") is not None:
        raise AkunuError("top_logprobs is a chat completion field; completions take logprobs: N")
    lp = kwargs.get("logprobs")
    return None if lp is None else _top_n(lp, "logprobs")


def _prompt_ids(llm, prompt) -> List[int]:
    """The token ids generate() makes of a completion prompt."""
    if isinstance(prompt, str):
        return llm.tokenize(prompt)
    return [int(t) for t in prompt]


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
    from .batching import results_of

    return results_of([llm.generate(prompt, stream=True, **_choice_kwargs(gen, i)) for i in range(n)],
                      async_calls.cancelled)


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

    def ready(self) -> bool:
        ready = getattr(self.streams[-1], "ready", None)
        return bool(ready and ready())

    def close(self) -> None:
        for s in self.streams:
            s.close()


def _usage_chunk(make, choices: "_Choices") -> Dict[str, Any]:
    d = make(None)
    d["choices"] = []
    d["usage"] = _usage_of([s.result for s in choices.streams])
    return d


def _logprob_trackers(llm, prompt_ids, top_n: Optional[int]):
    """A Tracker per generation result (logprobs.py), or None when none were asked for."""
    if top_n is None:
        return None
    return lambda result: lp_mod.Tracker(llm, prompt_ids, result, top_n)


def create_completion(llm, prompt: Union[str, Sequence[int]], /, *, stream: bool = False, **kwargs: Any):
    echo = kwargs.pop("echo", False)
    if not isinstance(echo, bool):
        raise AkunuError("echo must be true or false")
    _check(kwargs)
    top_n = _completion_logprobs(kwargs)
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
    tracker = None
    if top_n is not None:
        try:
            tracker = _logprob_trackers(llm, _prompt_ids(llm, prompt), top_n)
        except (TypeError, ValueError):
            raise AkunuError("prompt must be a string or a sequence of token ids") from None

    def choice(i, text, finish, logprobs=None):
        return {"text": text, "index": i, "logprobs": logprobs, "finish_reason": finish}

    def shape(choices, usage=None):
        d = {"id": cid, "object": "text_completion", "created": created, "model": name, "choices": choices}
        if usage is not None:
            d["usage"] = usage
        return d

    if not stream:
        rs = _generate_n(llm, prompt, gen, n)
        out = []
        for i, r in enumerate(rs):
            lps = None
            if tracker is not None:
                lps = lp_mod.completion_logprobs(llm.tokenizer, tracker(r).take(final=True), top_n,
                                                 lp_mod.LegacyOffsets(len(prefix)))
            out.append(choice(i, prefix + r.text, r.finish_reason, lps))
        return shape(out, _usage_of(rs))
    cs = _Choices(llm, prompt, gen, n)
    # a single-stream generation holds the model's turn while it is open (the logprobs pass
    # then runs inside that turn); a batched one never does
    in_turn = llm.batching is None

    def chunks() -> Iterator[Dict[str, Any]]:
        try:
            for i in range(n):
                s = cs.stream(i)
                t = tracker(s.result) if tracker is not None else None
                offsets = lp_mod.LegacyOffsets(len(prefix))

                def lps(final=False):
                    if t is None:
                        return None
                    got = t.take(holding_turn=in_turn and not final, final=final)
                    return lp_mod.completion_logprobs(llm.tokenizer, got, top_n, offsets) if got or final else None

                if prefix:
                    yield shape([choice(i, prefix, None)])
                for piece in s:
                    yield shape([choice(i, piece, None, lps())])
                yield shape([choice(i, "", s.result.finish_reason, lps(final=True))])
            if include_usage:
                yield _usage_chunk(lambda _: shape([]), cs)
        finally:
            cs.close()

    return ChunkStream(chunks(), cs)


def _render_chat(llm, messages, tools: Optional[tool_calls.ToolRequest],
                 template_kwargs: Optional[Dict[str, Any]] = None) -> str:
    template = llm.chat_template
    if template is None:
        raise AkunuError("this is an embedding model: it has no chat template")
    vocab = llm.tokenizer.tokens
    msgs = tool_calls.template_messages(messages, tools, template, vocab) \
        if isinstance(messages, (list, tuple)) else messages
    extra = dict(template_kwargs or {})
    if tools is not None and tools.native:
        extra["tools"] = tools.tools
    return template.render(msgs, **extra)


def _chat_prompt(llm, messages, tools: Optional[tool_calls.ToolRequest],
                 template_kwargs: Optional[Dict[str, Any]] = None):
    return llm.tokenize(_render_chat(llm, messages, tools, template_kwargs), add_bos=False)


def _message(r, tools: Optional[tool_calls.ToolRequest],
             syntax: Optional[reasoning.ReasoningSyntax] = None) -> Tuple[Dict[str, Any], str]:
    """The assistant message of one result and its finish reason."""
    thought, text, seen = reasoning.split(r.text, syntax)
    base: Dict[str, Any] = {"role": "assistant"}
    if seen:
        base["reasoning_content"] = thought
    if tools is None:
        return {**base, "content": text}, r.finish_reason
    parsed = tools.parse(text)
    calls = tool_calls.openai_calls(parsed, tools)
    if not calls:
        return {**base, "content": text}, r.finish_reason
    msg = {**base, "content": parsed.content or None, "tool_calls": calls}
    return msg, "tool_calls" if r.finish_reason == "stop" else r.finish_reason


def _chat_logprobs_field(llm, lps, top_n: int) -> Dict[str, Any]:
    return {"content": lp_mod.chat_content(llm.tokenizer, lps, top_n), "refusal": None}


def _thinking_grammar(llm, messages, tools, tkw: Dict[str, Any], gen: Dict[str, Any], fmt: str,
                      budget: Optional[int]) -> Tuple[str, Optional[reasoning.ReasoningSyntax]]:
    """The rendered prompt and the reply's reasoning syntax; sets gen's grammar for thinking.

    While the model thinks in a <think> block (the template opens it, or the model may), a
    grammar (response_format, a forced tool call, max_reasoning_tokens) is composed after the
    block: the reasoning is free up to "</think>", the constraint applies from there. A reply
    that cannot think that way (the caller turned thinking off, reasoning_format "none",
    harmony's channels) keeps the constraint from its first token: templates that can turn
    thinking off are told to, and the constrained text is never read as reasoning."""
    template = llm.chat_template
    text = _render_chat(llm, messages, tools, tkw)
    found = reasoning.syntax_for(template.source, text, llm.tokenizer.tokens) if template is not None else None
    syntax = found if fmt != "none" else None
    constrained = "grammar" in gen
    thinks = (found is not None and found.kind == "think" and tkw.get("enable_thinking") is not False
              and (fmt != "none" or not constrained))
    if thinks and (constrained or budget is not None):
        answer = gen.get("grammar")
        if isinstance(answer, str):
            answer = Grammar.gbnf(answer)
        gen["grammar"] = Grammar.after_thinking(answer, found.starts_inside, budget)
        return text, syntax
    if constrained:
        if reasoning.can_disable_thinking(template.source) and "enable_thinking" not in tkw:
            tkw["enable_thinking"] = False
            text = _render_chat(llm, messages, tools, tkw)
        syntax = None
    return text, syntax


def create_chat_completion(llm, messages: Sequence[Dict[str, Any]], /, *, stream: bool = False,
                           **kwargs: Any):
    tool_args = {k: kwargs.pop(k) for k in list(kwargs) if k in _CHAT_ONLY}
    think_args = {k: kwargs.pop(k) for k in list(kwargs) if k in _REASONING_ARGS}
    _check(kwargs)
    top_n = _chat_logprobs(kwargs)
    fmt = reasoning.check_format(think_args.pop("reasoning_format", None))
    budget = reasoning.check_budget(think_args.pop("max_reasoning_tokens", None))
    tkw = reasoning.template_kwargs(**think_args)
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
    text, syntax = _thinking_grammar(llm, messages, tools, tkw, gen, fmt, budget)
    prompt = llm.tokenize(text, add_bos=False)
    tracker = _logprob_trackers(llm, prompt, top_n)
    cid, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())

    if not stream:
        rs = _generate_n(llm, prompt, gen, n)
        choices = []
        for i, r in enumerate(rs):
            msg, finish = _message(r, tools, syntax)
            lps = None
            if tracker is not None:
                lps = _chat_logprobs_field(llm, tracker(r).take(final=True), top_n)
            choices.append({"index": i, "message": msg, "logprobs": lps, "finish_reason": finish})
        return {"id": cid, "object": "chat.completion", "created": created, "model": name,
                "choices": choices, "usage": _usage_of(rs)}
    cs = _Choices(llm, prompt, gen, n)
    in_turn = llm.batching is None  # see create_completion

    def chunk(i, delta, finish, logprobs=None):
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                "choices": [{"index": i, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}

    def choice_chunks(i) -> Iterator[Dict[str, Any]]:
        s = cs.stream(i)
        t = tracker(s.result) if tracker is not None else None
        pending: List[Any] = []  # logprobs of tokens whose text no chunk has carried yet

        def out(deltas, finish=None, final=False):
            """Chunks for deltas; the logprobs of the tokens so far ride on the first."""
            if t is not None:
                pending.extend(t.take(holding_turn=in_turn and not final, final=final))
            if finish is not None:
                deltas = list(deltas) + [{}]
            for k, d in enumerate(deltas):
                last = k == len(deltas) - 1
                lps = None
                if pending and (k == 0 or finish is not None and last):
                    lps = _chat_logprobs_field(llm, pending, top_n)
                    pending.clear()
                yield chunk(i, d, finish if finish is not None and last else None, lps)

        yield chunk(i, {"role": "assistant", "content": ""}, None)
        split = reasoning.DeltaSplitter(syntax)
        ds = tool_calls.DeltaStream(tools) if tools is not None else None

        def deltas_of(r_delta, c_delta, end=False):
            ds_out = []
            if r_delta:
                ds_out.append({"reasoning_content": r_delta})
            if ds is None:
                if c_delta:
                    ds_out.append({"content": c_delta})
            else:  # content held back while a call may be opening; calls as OpenAI streams them
                if c_delta:
                    ds_out += ds.feed(c_delta)
                if end:
                    ds_out += ds.finish()
            return ds_out

        for piece in s:
            yield from out(deltas_of(*split.feed(piece)))
        tail = deltas_of(*split.finish(), end=True)
        finish = s.result.finish_reason
        if ds is not None and ds.called and finish == "stop":
            finish = "tool_calls"
        yield from out(tail, finish=finish, final=True)

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
