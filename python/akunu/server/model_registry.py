"""Models loaded on demand from a directory and unloaded when idle.

`--models-dir DIR` makes every GGUF file and model directory in DIR
loadable, named by its file or directory name without extension; /v1/models
lists them beside the loaded ones, each with `loaded: true|false`. A request
naming a model that is not loaded loads it first: one load at a time per
model, concurrent requests for it wait for that load, and the model becomes
visible to the routes only once it is whole. Names match case-insensitively
(the request body's "model" is rewritten to the model's own name, so the
routes' exact lookup finds it). A Hugging Face repo id (owner/repo,
owner/repo:QUANT, @REV) names a model too: loaded as akunu.load loads it,
from the Hugging Face cache or fetched. `--idle-unload SECONDS` closes models no
request has used for that long (Model.close() frees their memory); a model
still serving requests is never closed under them. POST /v1/models/load and
/v1/models/unload {"model": name} do the same on request (the app's API key
check covers them).

The registry edits the app's own slots dict (app.state.slots, the one
create_app's slot_for reads), so the routes need no change.

Integration:
  cli/serve.py, build_parser():
    ap.add_argument("--models-dir", metavar="DIR", help="load models from DIR on request (GGUF files and "
                    "model directories, named without extension)")
    ap.add_argument("--idle-unload", type=float, metavar="SECONDS", default=None,
                    help="unload models no request used for this long")
    (MODEL positional: nargs="*", at least one MODEL or --models-dir)
  cli/serve.py, main(): a loader with the CLI's options, passed to create_app:
    def loader(path):  # a copy of args per load: loads of two models may overlap
        a = argparse.Namespace(**{**vars(args), "model": path, "speech_ok": True})
        m = load_model(a)
        start_batching(m, a)
        return m
    create_app(models, ..., models_dir=args.models_dir, idle_unload=args.idle_unload, loader=loader,
               model_paths=model_ids(args.models))
  app.py's create_app (those four new keyword arguments), after the routes and
  before the other installs:
    if models_dir or idle_unload:
        from .model_registry import install as install_registry
        install_registry(app, models_dir=models_dir, loader=loader, idle_unload=idle_unload,
                         api_key=api_key, paths=model_paths, max_queue=limits.max_queue,
                         max_body_bytes=limits.max_body_bytes)
  app.py: create_app must accept an empty `models` when models_dir is given
  (today it raises, and `default = next(iter(slots))`); until then the CLI
  loads the first model of the directory as the default.
Install it first of the four (registry, rate limits, body limits, Anthropic
API): Starlette runs the middleware added last first, so requests are
checked, counted and reshaped before a model is loaded for them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from fastapi import APIRouter, Request

from .app import ModelSlot
from .errors import ApiError

_CONFIG_FILES = ("config.json", "model.bin")  # what makes a directory a model (HF / MLX / CTranslate2)


@dataclass
class _Use:
    slot: ModelSlot
    active: int = 0                 # requests inside the app with this model
    last_used: float = field(default_factory=time.monotonic)
    retired: bool = False           # unloaded: closed once `active` is 0


def scan(models_dir: str) -> Dict[str, str]:
    """Model name -> path for the GGUF files and model directories in `models_dir`."""
    out: Dict[str, str] = {}
    try:
        entries = sorted(os.scandir(models_dir), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        if e.name.startswith("."):
            continue
        if e.is_file() and e.name.lower().endswith(".gguf"):
            out.setdefault(e.name[:-5], e.path)
        elif e.is_dir() and (any(os.path.isfile(os.path.join(e.path, f)) for f in _CONFIG_FILES)
                             or any(f.lower().endswith(".gguf") for f in os.listdir(e.path))):
            out.setdefault(e.name, e.path)
    return out


def _default_loader(path: str):
    import akunu

    return akunu.load(path)


def _is_repo_id(name: str) -> bool:
    """Whether `name` reads as a Hugging Face repo id (owner/repo[:QUANT][@REV]), which the loader
    resolves through akunu.hub as akunu.load does (from the cache, or fetched)."""
    from ..hub import parse_repo_id

    try:
        return "/" in name and parse_repo_id(name) is not None
    except Exception:  # a malformed id is no model name at all
        return False


class ModelRegistry:
    def __init__(self, app, models_dir: Optional[str] = None, loader: Callable[[str], Any] = _default_loader,
                 idle_unload: Optional[float] = None, paths: Optional[Dict[str, str]] = None,
                 max_queue: Optional[int] = None):
        self.slots: Dict[str, ModelSlot] = app.state.slots
        self.models_dir, self.loader, self.idle_unload = models_dir, loader, idle_unload
        self.paths = dict(paths or {})   # where the models given at start came from (to reload them)
        self.default = next(iter(self.slots), None)
        first = next(iter(self.slots.values()), None)
        self.max_queue = max_queue if max_queue is not None else (first.max_queue if first else 256)
        self.uses: Dict[str, _Use] = {name: _Use(slot) for name, slot in self.slots.items()}
        self._loading: Dict[str, concurrent.futures.Future] = {}
        self._reaper: Optional[asyncio.Task] = None

    # -- names ------------------------------------------------------------------------
    def available(self) -> Dict[str, str]:
        """Every model that can be loaded: name -> path."""
        out = dict(self.paths)
        if self.models_dir:
            for name, path in scan(self.models_dir).items():
                out.setdefault(name, path)
        return out

    def canonical(self, name: str) -> Optional[str]:
        """The model's own name for `name` in any letter case; None if there is none."""
        if name in self.slots:
            return name
        low = name.lower()
        for n in self.slots:
            if n.lower() == low:
                return n
        avail = self.available()
        if name in avail:
            return name
        found = next((n for n in avail if n.lower() == low), None)
        if found is None and _is_repo_id(name):  # a Hugging Face repo id: loaded (fetched) by its name
            return name
        return found

    # -- loading ------------------------------------------------------------------------
    async def acquire(self, name: str) -> ModelSlot:
        """The loaded model `name` (loading it if need be), counted as in use until release()."""
        while True:
            use = self.uses.get(name)
            if use is not None and not use.retired and self.slots.get(name) is use.slot:
                use.active += 1
                use.last_used = time.monotonic()
                return use.slot
            await self._load(name)

    def release(self, slot: ModelSlot) -> None:
        use = self.uses.get(slot.name)
        if use is None or use.slot is not slot:
            return
        use.active -= 1
        use.last_used = time.monotonic()
        if use.retired and use.active == 0:
            self._close(use)

    async def _load(self, name: str) -> None:
        fut = self._loading.get(name)
        if fut is None:  # the first request for it starts the load; the others wait on the same future
            path = self.available().get(name) or (name if _is_repo_id(name) else None)
            if path is None:
                raise ApiError(404, f"the model '{name}' does not exist", "not_found_error", "model",
                               "model_not_found")
            fut = concurrent.futures.Future()
            self._loading[name] = fut
            threading.Thread(target=self._load_thread, args=(name, path, fut, asyncio.get_running_loop()),
                             daemon=True, name=f"load {name}").start()
        try:
            await asyncio.wrap_future(fut)
        except Exception as e:  # every waiter reports the failed load; the next request tries again
            raise ApiError(500, f"the model '{name}' could not be loaded: {e}", "server_error", "model",
                           "model_load_failed") from None

    def _load_thread(self, name: str, path: str, fut: concurrent.futures.Future, loop) -> None:
        try:
            model, error = self.loader(path), None
        except BaseException as e:  # any failure reaches the waiting requests
            model, error = None, e
        # published on the event loop (where the routes read slots), whole, and
        # even if every request that waited for it has gone
        loop.call_soon_threadsafe(self._publish, name, model, error, fut)

    def _publish(self, name: str, model, error: Optional[BaseException], fut: concurrent.futures.Future) -> None:
        self._loading.pop(name, None)
        if error is not None:
            fut.set_exception(error)
            return
        slot = ModelSlot(name, model, self.max_queue)
        self.slots[name] = slot
        self.uses[name] = _Use(slot)
        fut.set_result(model)

    # -- unloading ------------------------------------------------------------------------
    def unload(self, name: str) -> bool:
        """Stops serving `name` at once and closes it when its last request ends.
        False if it was not loaded."""
        use = self.uses.get(name)
        if use is None or use.retired or self.slots.get(name) is not use.slot:
            return False
        if name not in self.available():
            raise ApiError(409, f"the model '{name}' has no file to load it again from; it stays loaded",
                           param="model", code="model_pinned")
        del self.slots[name]
        use.retired = True
        if use.active == 0:
            self._close(use)
        return True

    def _close(self, use: _Use) -> None:
        if self.uses.get(use.slot.name) is use:
            del self.uses[use.slot.name]
        close = getattr(use.slot.model, "close", None)
        if close is not None:
            # off the event loop: closing a batched model joins its worker thread
            threading.Thread(target=close, daemon=True, name=f"close {use.slot.name}").start()

    def reap(self) -> List[str]:
        """Unloads the models idle for idle_unload seconds; their names."""
        if not self.idle_unload:
            return []
        now, out = time.monotonic(), []
        for name, use in list(self.uses.items()):
            if (not use.retired and use.active == 0 and now - use.last_used >= self.idle_unload
                    and name in self.available()):
                self.unload(name)
                out.append(name)
        return out

    def ensure_reaper(self) -> None:
        """Starts the idle check on the running event loop (again, if that loop changed)."""
        if not self.idle_unload:
            return
        loop = asyncio.get_running_loop()
        if self._reaper is not None and not self._reaper.done() and self._reaper.get_loop() is loop:
            return
        self._reaper = loop.create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        period = min(1.0, max(self.idle_unload / 4, 0.05))
        while True:
            await asyncio.sleep(period)
            self.reap()


# -- the request's model, before the routes see it ------------------------------------------
class RegistryMiddleware:
    """Pure ASGI: for a JSON request naming a model, loads it (or waits for
    its load), fixes the name's case, and holds the model in use until the
    response (streamed ones included) has been sent."""

    SKIP = ("/v1/models/load", "/v1/models/unload", "/health", "/metrics")

    def __init__(self, app, registry: ModelRegistry, api_key: Optional[str] = None,
                 max_body_bytes: int = 16 << 20):
        self.app, self.registry, self.api_key = app, registry, api_key
        self.max_body_bytes = max_body_bytes  # a larger body is passed on unread (the app answers 413)

    def _authorized(self, scope) -> bool:
        if not self.api_key:
            return True
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        given = headers.get(b"authorization", b"")
        if headers.get(b"x-api-key") is not None and not given:
            given = b"Bearer " + headers[b"x-api-key"]
        return hmac.compare_digest(given, f"Bearer {self.api_key}".encode())

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.registry.ensure_reaper()
        ctype = dict(scope.get("headers", ())).get(b"content-type", b"").lower()
        if scope["method"] != "POST" or scope["path"] in self.SKIP or ctype.startswith(b"multipart/") \
                or not self._authorized(scope):  # the app answers 401 without loading anything
            await self.app(scope, receive, send)
            return
        body, receive = await _buffer(receive, self.max_body_bytes)
        try:
            data = json.loads(body) if body is not None and body.strip() else None
        except (ValueError, RecursionError):
            data = None  # the route reports what is wrong with it
        name = data.get("model") if isinstance(data, dict) else None
        if isinstance(data, dict) and (name is None or name == ""):
            name = self.registry.default
        if not isinstance(name, str) or not name:
            await self.app(scope, receive, send)
            return
        canon = self.registry.canonical(name)
        if canon is None:
            await self.app(scope, receive, send)  # the route's 404 names the models
            return
        if canon != data.get("model", canon):
            data["model"] = canon
            body = json.dumps(data).encode()
            scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
                         + [(b"content-length", str(len(body)).encode())])
            receive = _replay(body, receive)
        try:
            slot = await self.registry.acquire(canon)
        except ApiError as e:
            await e.response()(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.registry.release(slot)


async def _buffer(receive, limit: int):
    """(the body, or None past `limit` bytes; a receive() that gives the app
    everything read, then the rest)."""
    parts, size = [], 0
    while True:
        msg = await receive()
        if msg["type"] != "http.request":
            return None, _replay_messages(parts + [msg], receive)
        parts.append(msg)
        size += len(msg.get("body", b""))
        if not msg.get("more_body", False):
            body = b"".join(m.get("body", b"") for m in parts)
            return body, _replay(body, receive)
        if size > limit:
            return None, _replay_messages(parts, receive)


def _replay_messages(msgs, receive):
    pending = list(msgs)

    async def replay():
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


def _replay(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


# -- routes ------------------------------------------------------------------------------------
def _model_entry(slot: ModelSlot) -> Dict[str, Any]:
    m = slot.model
    meta = {"device": getattr(m, "device", None)}
    if getattr(m, "config", None) is not None:
        meta.update(n_ctx=getattr(m, "n_ctx", None), architecture=m.config.get("architecture"))
    return {"id": slot.name, "object": "model", "created": slot.created, "owned_by": "akunu", "loaded": True,
            "meta": meta}


def router(registry: ModelRegistry) -> APIRouter:
    r = APIRouter()

    @r.get("/v1/models")
    async def list_models():
        data = [_model_entry(s) for s in list(registry.slots.values())]
        for name, path in registry.available().items():
            if name not in registry.slots:
                try:
                    created = int(os.path.getmtime(path))
                except OSError:  # a named model (akunu.load resolves it), not a file
                    created = 0
                data.append({"id": name, "object": "model", "created": created, "owned_by": "akunu",
                             "loaded": False})
        return {"object": "list", "data": data}

    async def named(request: Request) -> str:
        try:
            body = json.loads(await request.body())
        except (ValueError, RecursionError):
            raise ApiError(400, "the request body is not valid JSON") from None
        name = body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, "'model': expected the name of a model", param="model")
        canon = registry.canonical(name)
        if canon is None:
            raise ApiError(404, f"the model '{name}' does not exist; available: "
                           f"{', '.join(sorted(set(registry.slots) | set(registry.available())))}",
                           "not_found_error", "model", "model_not_found")
        return canon

    @r.post("/v1/models/load")
    async def load(request: Request):
        name = await named(request)
        slot = await registry.acquire(name)
        registry.release(slot)
        return _model_entry(slot)

    @r.post("/v1/models/unload")
    async def unload(request: Request):
        name = await named(request)
        was = registry.unload(name)
        return {"id": name, "object": "model", "loaded": False, "unloaded": was}

    return r


def install(app, models_dir: Optional[str] = None, loader: Optional[Callable[[str], Any]] = None,
            idle_unload: Optional[float] = None, api_key: Optional[str] = None,
            paths: Optional[Dict[str, str]] = None, max_queue: Optional[int] = None,
            max_body_bytes: int = 16 << 20) -> ModelRegistry:
    """Adds the registry to `app` (create_app's): its /v1/models replaces the
    app's own, /v1/models/load and /unload, and the middleware that loads a
    request's model. `loader(path)` -> model (default: akunu.load(path)).
    `paths`: where the models given to create_app came from, so that they too
    can be unloaded and loaded again."""
    if models_dir is not None and not os.path.isdir(models_dir):
        raise ValueError(f"--models-dir: '{models_dir}' is not a directory")
    if idle_unload is not None and idle_unload <= 0:
        raise ValueError("--idle-unload must be > 0 seconds")
    registry = ModelRegistry(app, models_dir, loader or _default_loader, idle_unload, paths, max_queue)
    app.state.model_registry = registry
    # first among the app's routes: ahead of its own GET /v1/models, which lists only loaded models
    app.router.routes[0:0] = router(registry).routes
    app.add_middleware(RegistryMiddleware, registry=registry, api_key=api_key, max_body_bytes=max_body_bytes)

    async def start_idle_check() -> None:
        registry.ensure_reaper()  # from the start, not only after the first request

    if idle_unload and hasattr(app.router, "on_startup"):
        app.router.on_startup.append(start_idle_check)
    return registry
