"""The first check every HTTP request meets: the API key, the declared body
size, and the count of responses by path and status for /metrics.

A plain ASGI middleware rather than FastAPI's ``@app.middleware("http")``:
that one runs each response through a memory stream and a task of its own,
which costs a streamed completion several task switches per chunk on the
event loop that every stream shares."""

from __future__ import annotations

import hmac
from typing import Optional

from .errors import ApiError


class RequestGuard:
    def __init__(self, app, api_key: Optional[str], max_body_bytes: int, max_audio_bytes: int, metrics):
        self.app = app
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.max_audio_bytes = max_audio_bytes
        self.metrics = metrics

    def _problem(self, path: str, headers: dict) -> Optional[ApiError]:
        if self.api_key and path != "/health":
            auth = headers.get(b"authorization", b"")
            if not hmac.compare_digest(auth, f"Bearer {self.api_key}".encode()):
                return ApiError(401, "invalid or missing API key (send 'Authorization: Bearer KEY')",
                                "authentication_error", code="invalid_api_key")
        length = headers.get(b"content-length")
        limit = self.max_audio_bytes if path.startswith("/v1/audio/") else self.max_body_bytes
        if length is not None and length.isdigit() and int(length) > limit:
            return ApiError(413, f"request body of {length.decode()} bytes exceeds the limit of {limit} bytes")
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        # a repeated header counts by its first value, as Starlette's Request.headers reads it
        headers = {}
        for k, v in scope.get("headers", ()):
            headers.setdefault(k.lower(), v)
        problem = self._problem(path, headers)
        if problem is not None:
            self.metrics.request(path, problem.status)
            await problem.response()(scope, receive, send)
            return

        async def counted_send(message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.request(path, message["status"])
            await send(message)

        await self.app(scope, receive, counted_send)
