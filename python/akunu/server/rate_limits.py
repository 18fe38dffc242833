"""Per-key rate limits: requests per minute and tokens per minute, over a
sliding 60-second window. A request over either limit gets 429 with
Retry-After (the seconds until the window has room) in OpenAI's error shape
(type "requests" or "tokens", code "rate_limit_exceeded"); every response
carries OpenAI's x-ratelimit-* headers.

The key is the bearer token (or x-api-key); a request without one is
limited by its client address. When the server has an API key, requests
bearing another one are left to the app's 401 and not counted. Tokens are
counted from what a response reports: `usage` of a JSON answer (OpenAI's
total_tokens, Anthropic's input_tokens + output_tokens) or of a stream's
events (OpenAI's usage chunk, Anthropic's message_start / message_delta);
an OpenAI stream without a usage chunk counts one token per content chunk.
A request is admitted while the key's window holds fewer tokens than the
limit, so one long answer may overshoot it once; the next waits.

Integration:
  cli/serve.py, build_parser():
    ap.add_argument("--rate-limit-rpm", type=int, default=None, metavar="N",
                    help="requests per minute per API key (default: no limit)")
    ap.add_argument("--rate-limit-tpm", type=int, default=None, metavar="N",
                    help="tokens (prompt + generated) per minute per API key (default: no limit)")
  app.py's create_app (new keyword arguments rate_limit_rpm=None, rate_limit_tpm=None), after the routes:
    if rate_limit_rpm or rate_limit_tpm:
        from .rate_limits import install as install_rate_limits
        install_rate_limits(app, requests_per_minute=rate_limit_rpm, tokens_per_minute=rate_limit_tpm,
                            api_key=api_key)
Install it after the model registry and before the body limits and the
Anthropic API (so that malformed bodies are refused before they count)."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
import time
from collections import deque
from typing import Callable, Deque, Dict, List, Optional, Tuple

from .errors import error_response

WINDOW = 60.0
EXEMPT = ("/health",)   # health checks are never limited
_MAX_JSON = 8 << 20     # larger JSON answers (embeddings) are not parsed for their usage


class _Window:
    def __init__(self):
        self.requests: Deque[float] = deque()
        self.tokens: Deque[Tuple[float, int]] = deque()
        self.token_sum = 0

    def prune(self, now: float) -> None:
        while self.requests and self.requests[0] <= now - WINDOW:
            self.requests.popleft()
        while self.tokens and self.tokens[0][0] <= now - WINDOW:
            self.token_sum -= self.tokens.popleft()[1]

    def empty(self) -> bool:
        return not self.requests and not self.tokens


class RateLimiter:
    """The sliding windows of every key; thread-safe."""

    def __init__(self, requests_per_minute: Optional[int] = None, tokens_per_minute: Optional[int] = None,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000):
        for name, v in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.rpm, self.tpm, self.clock, self.max_keys = requests_per_minute, tokens_per_minute, clock, max_keys
        self._windows: Dict[str, _Window] = {}
        self._mu = threading.Lock()

    def _window(self, key: str, now: float) -> _Window:
        w = self._windows.get(key)
        if w is None:
            if len(self._windows) >= self.max_keys:  # forget keys whose windows emptied
                for k in [k for k, v in self._windows.items() if (v.prune(now), v.empty())[1]]:
                    del self._windows[k]
            w = self._windows[key] = _Window()
        w.prune(now)
        return w

    def admit(self, key: str) -> Tuple[Optional[str], float, Dict[str, str]]:
        """(None or "requests" / "tokens": the limit hit, seconds until there is room, headers)."""
        with self._mu:
            now = self.clock()
            w = self._window(key, now)
            hit, wait = None, 0.0
            if self.rpm is not None and len(w.requests) >= self.rpm:
                hit, wait = "requests", w.requests[len(w.requests) - self.rpm] + WINDOW - now
            elif self.tpm is not None and w.token_sum >= self.tpm:
                # room once enough of the oldest tokens leave the window
                left = w.token_sum
                for t, n in w.tokens:
                    left -= n
                    if left < self.tpm:
                        hit, wait = "tokens", t + WINDOW - now
                        break
            if hit is None:
                w.requests.append(now)
            return hit, max(wait, 0.0), self._headers(w, now)

    def record(self, key: str, tokens: int) -> None:
        if tokens <= 0 or self.tpm is None:
            return
        with self._mu:
            now = self.clock()
            w = self._window(key, now)
            w.tokens.append((now, tokens))
            w.token_sum += tokens

    def _headers(self, w: _Window, now: float) -> Dict[str, str]:
        h: Dict[str, str] = {}
        if self.rpm is not None:
            h["x-ratelimit-limit-requests"] = str(self.rpm)
            h["x-ratelimit-remaining-requests"] = str(max(self.rpm - len(w.requests), 0))
            if w.requests:
                h["x-ratelimit-reset-requests"] = f"{max(w.requests[0] + WINDOW - now, 0):.3f}s"
        if self.tpm is not None:
            h["x-ratelimit-limit-tokens"] = str(self.tpm)
            h["x-ratelimit-remaining-tokens"] = str(max(self.tpm - w.token_sum, 0))
        return h


class TokenCounter:
    """Reads the tokens a response used from its body as it passes."""

    def __init__(self, content_type: bytes):
        self.sse = content_type.startswith(b"text/event-stream")
        self.json = content_type.startswith(b"application/json")
        self.buf = b""
        self.tokens = 0
        self.usage_seen = False
        self.content_chunks = 0

    def feed(self, data: bytes) -> None:
        if self.json:
            if len(self.buf) + len(data) <= _MAX_JSON:
                self.buf += data
            return
        if not self.sse:
            return
        self.buf += data
        *events, self.buf = self.buf.split(b"\n\n")
        for ev in events:
            for line in ev.split(b"\n"):
                if line.startswith(b"data:"):
                    self._event(line[5:].strip())

    def _event(self, data: bytes) -> None:
        if not data.startswith(b"{"):
            return  # [DONE]
        try:
            d = json.loads(data)
        except ValueError:
            return
        # OpenAI's usage chunk, Anthropic's message_start, the Responses API's response.completed
        u = d.get("usage") or (d.get("message") or {}).get("usage") or (d.get("response") or {}).get("usage")
        if isinstance(u, dict):
            self.usage_seen = True
            self.tokens += _usage_tokens(u)
        for c in d.get("choices") or []:
            delta = c.get("delta") or {}
            if delta.get("content") or delta.get("tool_calls") or c.get("text"):
                self.content_chunks += 1

    def total(self) -> int:
        if self.json:
            try:
                u = json.loads(self.buf).get("usage")
            except (ValueError, AttributeError):
                return 0
            return _usage_tokens(u) if isinstance(u, dict) else 0
        return self.tokens if self.usage_seen else self.content_chunks


def _usage_tokens(u: dict) -> int:
    def num(k):
        v = u.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

    if num("total_tokens"):
        return num("total_tokens")
    return num("prompt_tokens") + num("completion_tokens") + num("input_tokens") + num("output_tokens")


class RateLimits:
    """Pure ASGI middleware around the app."""

    def __init__(self, app, limiter: RateLimiter, api_key: Optional[str] = None):
        self.app, self.limiter, self.api_key = app, limiter, api_key

    def key_of(self, scope) -> Optional[str]:
        """The limited identity; None for a request the app will refuse (wrong key)."""
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        auth = headers.get(b"authorization", b"")
        token = auth[7:] if auth[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"")
        if self.api_key:
            if not hmac.compare_digest(token, self.api_key.encode()):
                return None
        if token:  # hashed: no key is kept in memory as given
            return "key:" + hashlib.sha256(token).hexdigest()[:32]
        client = scope.get("client")
        return "addr:" + (client[0] if client else "unknown")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        key = self.key_of(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        hit, wait, headers = self.limiter.admit(key)
        if hit is not None:
            secs = max(1, math.ceil(wait))
            limit = self.limiter.rpm if hit == "requests" else self.limiter.tpm
            msg = (f"Rate limit reached for {hit} per minute (limit: {limit}) for this API key. "
                   f"Please try again in {secs}s.")
            await error_response(429, msg, hit, code="rate_limit_exceeded",
                                 headers={**headers, "Retry-After": str(secs)})(scope, receive, send)
            return
        counter: List[TokenCounter] = []
        extra = [(k.encode(), v.encode()) for k, v in headers.items()]

        async def counting_send(msg) -> None:
            if msg["type"] == "http.response.start":
                ctype = next((v for k, v in msg.get("headers", ()) if k.lower() == b"content-type"), b"")
                counter.append(TokenCounter(ctype.lower()))
                msg = dict(msg, headers=list(msg.get("headers", ())) + extra)
            elif msg["type"] == "http.response.body" and counter:
                counter[0].feed(msg.get("body", b""))
            await send(msg)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if counter:
                self.limiter.record(key, counter[0].total())


def install(app, requests_per_minute: Optional[int] = None, tokens_per_minute: Optional[int] = None,
            api_key: Optional[str] = None, clock: Callable[[], float] = time.monotonic) -> RateLimiter:
    """Adds the limits to `app`; returns the limiter (its windows, for inspection)."""
    limiter = RateLimiter(requests_per_minute, tokens_per_minute, clock)
    app.add_middleware(RateLimits, limiter=limiter, api_key=api_key)
    return limiter
