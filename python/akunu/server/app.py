"""The FastAPI application: routes, per-model queues, streaming with
disconnect handling, API key, size limits, errors in OpenAI's shape.

A model loaded with parallel > 1 (continuous batching) takes every request
at once and queues and batches them itself; its streams advance together on
worker threads of the model's own capacity limiter. Other models (parallel
1, embedding, Whisper) serve one request at a time behind an asyncio lock.
Either way at most max_queue requests wait; one more gets 429."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..batching import QueueFullError
from ..errors import AkunuError
from . import request_fields as rf
from .errors import ApiError, error_response, queue_full
from .metrics import Metrics
from .request_guard import RequestGuard


@dataclass
class ServerLimits:
    max_body_bytes: int = 16 << 20  # request bodies larger than this: 413
    max_tokens: int = 4096          # upper bound on max_tokens (and the default when absent)
    max_audio_bytes: int = 25 << 20  # uploads to /v1/audio/* (OpenAI's limit)
    max_queue: int = 256            # requests waiting for a one-at-a-time model beyond the one served (0: no limit)


class ModelSlot:
    """A model and how requests reach it: a batched model takes them all and
    queues itself; any other serves one at a time behind `lock`."""

    def __init__(self, name: str, model, max_queue: int):
        self.name = name
        self.model = model
        self.lock = asyncio.Lock()
        self.max_queue = max_queue
        self.waiting = 0  # requests waiting for `lock`
        self.created = int(time.time())
        self._limiter: Optional[anyio.CapacityLimiter] = None

    @property
    def batching(self):
        """The model's continuous-batching scheduler, or None (one request at a time)."""
        return getattr(self.model, "batching", None)

    def limiter(self) -> Optional[anyio.CapacityLimiter]:
        """Worker threads for a batched model's requests: one per request it runs
        or queues (plus some for requests on their way in), so anyio's default of
        40 threads never caps the streams it serves. None: anyio's default."""
        b = self.batching
        if b is None:
            return None
        if self._limiter is None:  # created inside the event loop, on first use
            self._limiter = anyio.CapacityLimiter(b.parallel + (b.max_queue or 256) + 16)
        return self._limiter


def _next_chunks(chunks, gate: threading.Lock, most: int = 256) -> List[Dict[str, Any]]:
    """The stream's next chunk and those after it that are ready without waiting (up to
    `most`), so a reader that fell behind catches up in one trip to a worker thread and one
    socket write; [] at the end. `gate` keeps a close from running while a worker thread is
    still inside the generator."""
    ready = getattr(chunks, "ready", None)
    out: List[Dict[str, Any]] = []
    with gate:
        for chunk in chunks:
            out.append(chunk)
            if ready is None or len(out) >= most or not ready():
                break
    return out


def _close_chunks(chunks, gate: threading.Lock, batched: bool) -> None:
    """Stops a stream. A batched one is cancelled first (its KV blocks freed at
    once), which also wakes a worker thread still waiting on its next piece so
    that the generator itself can then be closed."""
    inner = getattr(chunks, "_stream", None) if batched else None
    if inner is not None:
        inner.close()
    with gate:
        chunks.close()


class GenerationStream:
    """A streamed generation on a model's turn. open() computes the first
    chunk before the response starts (so a bad request still gets a 4xx
    rather than a broken event stream); next() pulls the rest one at a time,
    abandoned if the response is cancelled; finish() stops the generation and
    frees the model once, shielded: a cancelled request must still release
    its slot."""

    def __init__(self, slot: "ModelSlot", turn_ctx, metrics=None):
        self.slot, self.ctx, self.metrics = slot, turn_ctx, metrics
        self.limiter, self.batched = slot.limiter(), slot.batching is not None
        self.gate = threading.Lock()
        self.chunks: Optional[Iterator[Dict[str, Any]]] = None
        self.first: Optional[Dict[str, Any]] = None
        self.t0 = time.perf_counter()
        self._done = False

    async def open(self, start: Callable[[], Iterator[Dict[str, Any]]]) -> "GenerationStream":
        """Takes the model's turn and starts the generation (`start`, on a worker thread); on any
        failure frees both and re-raises."""
        await self.ctx.__aenter__()
        try:
            self.chunks = await anyio.to_thread.run_sync(start, limiter=self.limiter)
            self.first = await self.next()
        except BaseException:
            with anyio.CancelScope(shield=True):
                if self.chunks is not None:
                    await anyio.to_thread.run_sync(_close_chunks, self.chunks, self.gate, self.batched)
                await self.ctx.__aexit__(None, None, None)
            raise
        return self

    async def next(self) -> Optional[Dict[str, Any]]:
        # abandoned if the response is cancelled (client gone): finish() then
        # cancels the generation, which ends the thread's wait
        chunks = await anyio.to_thread.run_sync(_next_chunks, self.chunks, self.gate, 1, abandon_on_cancel=True,
                                                limiter=self.limiter)
        return chunks[0] if chunks else None

    async def batches(self) -> AsyncIterator[List[Dict[str, Any]]]:
        """The first chunk, then the rest in lists of those ready together (one chunk each while
        the reader keeps up)."""
        if self.first is None:
            return
        yield [self.first]
        while True:
            chunks = await anyio.to_thread.run_sync(_next_chunks, self.chunks, self.gate, abandon_on_cancel=True,
                                                    limiter=self.limiter)
            if not chunks:
                return
            yield chunks

    async def finish(self) -> None:
        if self._done:
            return
        self._done = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_close_chunks, self.chunks, self.gate, self.batched)
            await self.ctx.__aexit__(None, None, None)
        if self.metrics is not None:
            st = self.chunks.result.stats
            self.metrics.generation(self.slot.name, st.prompt_tokens, st.generated_tokens,
                                    time.perf_counter() - self.t0)


def create_app(models: Dict[str, Any], api_key: Optional[str] = None,
               limits: Optional[ServerLimits] = None, models_dir: Optional[str] = None,
               idle_unload: Optional[float] = None, loader: Optional[Callable[[str], Any]] = None,
               model_paths: Optional[Dict[str, str]] = None, rate_limit_rpm: Optional[int] = None,
               rate_limit_tpm: Optional[int] = None, max_json_depth: int = 64) -> FastAPI:
    """`models`: model id -> loaded akunu Model. The first is the default.
    `models_dir`: more models, loaded on their first request (and with
    `idle_unload` seconds, unloaded when unused; `loader(path)` loads one,
    `model_paths` says where the given models came from: model_registry.py).
    `rate_limit_rpm` / `rate_limit_tpm`: requests and tokens a minute per API
    key (rate_limits.py). Bodies are bounded in size and JSON nesting
    (body_limits.py); POST /v1/messages serves Anthropic's Messages API
    (anthropic_api.py)."""
    if not models and not models_dir:
        raise ValueError("create_app needs at least one model, or a models directory")
    limits = limits or ServerLimits()
    slots = {name: ModelSlot(name, m, limits.max_queue) for name, m in models.items()}
    default = next(iter(slots), None)
    metrics = Metrics()
    app = FastAPI(title="akunu", version=__version__)
    app.state.slots = slots
    app.state.metrics = metrics

    # -- plumbing ---------------------------------------------------------------
    app.add_middleware(RequestGuard, api_key=api_key, max_body_bytes=limits.max_body_bytes,
                       max_audio_bytes=limits.max_audio_bytes, metrics=metrics)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError):
        return e.response()

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError):
        return error_response(422, f"invalid request: {e.errors()}")

    @app.exception_handler(Exception)
    async def internal_error(_: Request, e: Exception):
        # a bug, not the client's fault: say so without a traceback in the body
        return error_response(500, f"internal error: {type(e).__name__}: {e}", "server_error")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException):
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        return error_response(e.status_code, str(e.detail), kind)

    async def read_json(request: Request) -> Dict[str, Any]:
        body = b""
        async for chunk in request.stream():  # bounded even without a content-length header
            body += chunk
            if len(body) > limits.max_body_bytes:
                raise ApiError(413, f"request body exceeds the limit of {limits.max_body_bytes} bytes")
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return data

    def slot_for(name: Optional[str]) -> ModelSlot:
        if name is None or name == "":
            if default is None or default not in slots:
                raise ApiError(400, f"name a model; available: {', '.join(slots) or 'none loaded yet'}",
                               param="model", code="model_not_found")
            return slots[default]
        if name not in slots:
            raise ApiError(404, f"the model '{name}' does not exist; available: {', '.join(slots)}",
                           "not_found_error", "model", "model_not_found")
        return slots[name]

    @asynccontextmanager
    async def turn(slot: ModelSlot):
        """Waits for the model (queue) and holds it; a batched model's requests
        go straight to it (it queues them, and raises QueueFullError itself)."""
        if slot.batching is not None:
            yield
            return
        if slot.max_queue and slot.lock.locked() and slot.waiting >= slot.max_queue:
            raise queue_full(f"{slot.waiting} requests are already waiting for the model '{slot.name}' "
                             f"(max_queue = {slot.max_queue}); try again later")
        slot.waiting += 1
        metrics.add(metrics.queue_depth, slot.name, 1)
        try:
            await slot.lock.acquire()
        finally:
            slot.waiting -= 1
            metrics.add(metrics.queue_depth, slot.name, -1)
        metrics.add(metrics.running, slot.name, 1)
        try:
            yield
        finally:
            metrics.add(metrics.running, slot.name, -1)
            slot.lock.release()

    def as_api_error(e: AkunuError) -> ApiError:
        if isinstance(e, QueueFullError):
            return queue_full(str(e))
        return ApiError(400, str(e))

    def text_model(slot: ModelSlot) -> ModelSlot:
        if getattr(slot.model, "is_whisper", False):
            raise ApiError(400, f"the model '{slot.name}' is a speech-to-text model: use /v1/audio/transcriptions",
                           param="model")
        return slot

    # -- generation ---------------------------------------------------------------
    async def generate(request: Request, slot: ModelSlot, fn, kwargs: Dict[str, Any]):
        stream = kwargs.pop("stream")
        kwargs["model"] = slot.name
        limiter = slot.limiter()
        if not stream:
            async with turn(slot):
                t0 = time.perf_counter()
                try:
                    out = await anyio.to_thread.run_sync(lambda: fn(**kwargs), limiter=limiter)
                except AkunuError as e:
                    raise as_api_error(e) from None
            u = out["usage"]
            metrics.generation(slot.name, u["prompt_tokens"], u["completion_tokens"], time.perf_counter() - t0)
            return JSONResponse(out)
        # Streaming: the first chunk is computed before answering (GenerationStream)
        try:
            gen = await GenerationStream(slot, turn(slot), metrics).open(lambda: fn(stream=True, **kwargs))
        except AkunuError as e:
            raise as_api_error(e) from None
        return _StreamWithCleanup(sse(gen), gen.finish)

    async def sse(gen: GenerationStream) -> AsyncIterator[bytes]:
        # a client that leaves ends the response (Starlette listens for the disconnect), which
        # cancels this generator and stops the generation
        try:
            async for chunks in gen.batches():
                yield "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()
        except AkunuError as e:
            err = {"error": {"message": str(e), "type": "server_error", "param": None, "code": None}}
            yield f"data: {json.dumps(err)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    # -- routes -------------------------------------------------------------------
    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await read_json(request)
        slot = text_model(slot_for(rf.model_field(body)))
        messages = rf.messages_field(body)
        kwargs = rf.sampling_fields(body, limits.max_tokens)
        rf.ignore_eos_field(body, kwargs, slot.model.stop_ids)
        kwargs.update(rf.tool_fields(body))
        kwargs.update(rf.chat_logprob_fields(body))
        kwargs.update(rf.reasoning_fields(body))
        kwargs["messages"] = messages
        return await generate(request, slot, slot.model.create_chat_completion, kwargs)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await read_json(request)
        slot = text_model(slot_for(rf.model_field(body)))
        prompt = rf.prompt_field(body)
        kwargs = rf.sampling_fields(body, limits.max_tokens)
        rf.ignore_eos_field(body, kwargs, slot.model.stop_ids)
        kwargs.update(rf.completion_logprob_fields(body))
        if rf.echo_field(body):
            kwargs["echo"] = True
        kwargs["prompt"] = prompt
        return await generate(request, slot, slot.model.create_completion, kwargs)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        body = await read_json(request)
        slot = text_model(slot_for(rf.model_field(body)))
        fmt = body.get("encoding_format", "float")
        dims = body.get("dimensions")
        if "input" not in body:
            raise ApiError(400, "'input' is required", param="input")
        async with turn(slot):
            try:
                return JSONResponse(await anyio.to_thread.run_sync(
                    lambda: slot.model.create_embedding(body["input"], slot.name, fmt, dims)))
            except AkunuError as e:
                raise ApiError(400, str(e), param="input") from None

    # -- speech -----------------------------------------------------------------
    def speech_slot(name: Optional[str]) -> ModelSlot:
        whisper = [s for s in slots.values() if getattr(s.model, "is_whisper", False)]
        if not whisper:
            raise ApiError(404, "no speech-to-text (Whisper) model is loaded", "not_found_error", "model",
                           "model_not_found")
        if name in slots:
            if not getattr(slots[name].model, "is_whisper", False):
                raise ApiError(400, f"the model '{name}' is not a speech-to-text model", param="model")
            return slots[name]
        if not name or name.startswith("whisper"):  # OpenAI clients send "whisper-1"
            return whisper[0]
        return slot_for(name)  # 404 naming the models

    async def audio(request: Request, task: str):
        try:
            form = await request.form(max_files=1, max_fields=32, max_part_size=limits.max_audio_bytes)
        except Exception as e:  # malformed multipart, or not multipart at all
            raise ApiError(400, f"expected multipart/form-data with a 'file' part: {e}") from None
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise ApiError(400, "'file' is required: the audio file as a multipart upload", param="file")
        data = await upload.read()
        if len(data) > limits.max_audio_bytes:
            raise ApiError(413, f"the audio file exceeds the limit of {limits.max_audio_bytes} bytes")
        fields = rf.audio_fields(form, task)
        slot = speech_slot(fields.pop("model"))
        fmt, stream = fields.pop("response_format"), fields.pop("stream")
        from ..whisper.formats import to_srt, to_verbose_dict, to_vtt

        if stream:
            async with turn(slot):
                try:
                    segments = await anyio.to_thread.run_sync(
                        lambda: list(slot.model.transcribe_stream(data, **fields)))
                except (AkunuError, ValueError) as e:
                    raise ApiError(400, str(e), param="file") from None

            async def events() -> AsyncIterator[bytes]:
                for seg in segments:
                    yield f"data: {json.dumps({'type': 'transcript.text.delta', 'delta': seg.text})}\n\n".encode()
                text = "".join(seg.text for seg in segments).strip()
                yield f"data: {json.dumps({'type': 'transcript.text.done', 'text': text})}\n\n".encode()

            return StreamingResponse(events(), media_type="text/event-stream")
        async with turn(slot):
            try:
                result = await anyio.to_thread.run_sync(lambda: slot.model.transcribe(data, **fields))
            except (AkunuError, ValueError) as e:
                raise ApiError(400, str(e), param="file") from None
        if fmt == "text":
            return PlainTextResponse(result.text + "\n")
        if fmt == "srt":
            return PlainTextResponse(to_srt(result))
        if fmt == "vtt":
            return PlainTextResponse(to_vtt(result), media_type="text/vtt")
        if fmt == "verbose_json":
            return JSONResponse(to_verbose_dict(result, task))
        return JSONResponse({"text": result.text})

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request):
        return await audio(request, "transcribe")

    @app.post("/v1/audio/translations")
    async def translations(request: Request):
        return await audio(request, "translate")

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list",
                "data": [{"id": s.name, "object": "model", "created": s.created, "owned_by": "akunu",
                          "meta": {"n_ctx": s.model.n_ctx, "architecture": s.model.config["architecture"],
                                   "device": s.model.device}} for s in slots.values()]}

    @app.get("/health")
    async def health():
        # touches no model, lock or worker thread: answers at once under any load
        return {"status": "ok", "models": list(slots)}

    @app.post("/tokenize")
    async def tokenize(request: Request):
        body = await read_json(request)
        slot = text_model(slot_for(rf.model_field(body)))
        text = body.get("content", body.get("prompt"))
        if not isinstance(text, str):
            raise ApiError(400, "'content': expected a string", param="content")
        add = body.get("add_special", True)
        if not isinstance(add, bool):
            raise ApiError(400, "'add_special': expected true or false", param="add_special")
        return {"tokens": slot.model.tokenize(text, add_bos=add)}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        body = await read_json(request)
        slot = text_model(slot_for(rf.model_field(body)))
        toks = body.get("tokens")
        if not isinstance(toks, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in toks):
            raise ApiError(400, "'tokens': expected a list of token ids", param="tokens")
        try:
            return {"content": slot.model.detokenize(toks)}
        except AkunuError as e:
            raise as_api_error(e) from None

    @app.get("/metrics")
    async def prometheus():
        batched = {s.name: s.batching for s in slots.values() if s.batching is not None}
        # on a worker thread: the schedulers' counters take their locks
        stats = await anyio.to_thread.run_sync(lambda: {n: b.stats() for n, b in batched.items()}) \
            if batched else {}
        return PlainTextResponse(metrics.render(list(slots), stats), media_type="text/plain; version=0.0.4")

    # Starlette runs the middleware added last first: bodies are checked and
    # reshaped (Anthropic's API), then counted against the key's limits,
    # before a model is loaded for them.
    if models_dir or idle_unload:
        from .model_registry import install as install_registry

        install_registry(app, models_dir=models_dir, loader=loader, idle_unload=idle_unload, api_key=api_key,
                         paths=model_paths, max_queue=limits.max_queue, max_body_bytes=limits.max_body_bytes)
    if rate_limit_rpm or rate_limit_tpm:
        from .rate_limits import install as install_rate_limits

        install_rate_limits(app, requests_per_minute=rate_limit_rpm, tokens_per_minute=rate_limit_tpm,
                            api_key=api_key)
    from .anthropic_api import install as install_anthropic
    from .body_limits import install as install_body_limits
    from .responses_api import install as install_responses

    install_body_limits(app, max_bytes=limits.max_body_bytes, max_depth=max_json_depth)
    install_responses(app, max_tokens=limits.max_tokens)  # POST /v1/responses (responses_api.py)
    install_anthropic(app, max_tokens=limits.max_tokens)
    return app


class _StreamWithCleanup(StreamingResponse):
    """Server-sent events whose cleanup runs when the response ends for any
    reason: finished, client gone, or task cancelled (an async generator's
    own finally would wait for garbage collection in the last two cases)."""

    def __init__(self, body, on_close):
        super().__init__(body, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()
