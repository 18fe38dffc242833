"""Request bodies bounded before any route parses them: their size (413) and,
for JSON, their nesting depth and validity (400), answered in OpenAI's error
shape. Python's json module recurses once per nesting level, so a body of
100000 '[' would otherwise escape as a RecursionError (a 500); numbers of
more than 4300 digits raise a plain ValueError the same way.

Integration (app.py's create_app, after the routes; cli/serve.py):
    # create_app(..., max_json_depth=64) and ServerLimits.max_body_bytes (16 MiB default):
    from .body_limits import install as install_body_limits
    install_body_limits(app, max_bytes=limits.max_body_bytes, max_depth=64)
    # cli/serve.py: --max-body-bytes keeps its meaning (its default may rise to 16 << 20);
    #               --max-json-depth N (default 64) passed through as max_depth.
Install it after the model registry and rate limits (so that it runs before
them: Starlette runs the middleware added last first) and before the
Anthropic API's install (whose middleware reshapes these errors on
/v1/messages).
Multipart uploads (/v1/audio/*) are left to the app's own limits."""

from __future__ import annotations

import json
import re
from typing import Awaitable, Callable, Iterable, Optional

import numpy as np

from .errors import error_response

DEFAULT_MAX_BYTES = 16 << 20
DEFAULT_MAX_DEPTH = 64

# a JSON string literal (escapes included), unrolled for speed on large bodies;
# an unterminated one runs to the end, so no quote is ever scanned from twice
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays / objects in `body`, brackets inside
    strings not counted. Unbalanced input still yields a number; the parser
    that runs afterwards reports what is malformed."""
    openers = body.count(b"[") + body.count(b"{")
    if openers <= 1:
        return openers
    bare = _STRING.sub(b"", body)
    steps = _OPEN[np.frombuffer(bare, np.uint8)]
    if not steps.any():
        return 0
    return int(np.cumsum(steps, dtype=np.int64).max())


class _Reject(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class BodyLimits:
    """Pure ASGI middleware: reads the whole body (stopping at max_bytes),
    checks it, then hands the route the same bytes."""

    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
                 skip_prefixes: Iterable[str] = ("/v1/audio/",)):
        self.app, self.max_bytes, self.max_depth = app, max_bytes, max_depth
        self.skip = tuple(skip_prefixes)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE") \
                or scope["path"].startswith(self.skip) or _is_multipart(scope):
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read(scope, receive)
            self._check(body)
        except _Reject as e:
            await error_response(e.status, e.message, code="request_too_large" if e.status == 413
                                 else "invalid_json")(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, scope, receive) -> bytes:
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            raise _Reject(413, f"request body of {length} bytes exceeds the limit of {self.max_bytes} bytes")
        parts, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:  # bounded even without (or with a false) content-length
                raise _Reject(413, f"request body exceeds the limit of {self.max_bytes} bytes")
            parts.append(chunk)
            if not msg.get("more_body", False):
                break
        return b"".join(parts)

    def _check(self, body: bytes) -> None:
        if not body.strip():
            return  # the route says what it expected
        # the scan only when the brackets could nest deeper than the limit at all
        depth = json_depth(body) if body.count(b"[") + body.count(b"{") > self.max_depth else 0
        if depth > self.max_depth:
            raise _Reject(400, f"the request body nests JSON {depth} levels deep; the limit is {self.max_depth}")
        try:
            json.loads(body)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, bad UTF-8, over-long integers
            raise _Reject(400, f"the request body is not valid JSON: {e}") from None


def _header(scope, name: bytes) -> Optional[str]:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _is_multipart(scope) -> bool:
    return (_header(scope, b"content-type") or "").lower().startswith("multipart/")


def _replay(body: bytes, receive: Callable[[], Awaitable[dict]]):
    """A receive() that gives the buffered body once, then the client's own
    messages (so disconnects are still seen)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def install(app, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Adds the body checks to `app` as its outermost middleware so far."""
    if max_bytes < 1 or max_depth < 1:
        raise ValueError("max_bytes and max_depth must be >= 1")
    app.add_middleware(BodyLimits, max_bytes=max_bytes, max_depth=max_depth)
