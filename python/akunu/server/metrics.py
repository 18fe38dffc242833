"""Counters for GET /metrics, in Prometheus' text format."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Dict, Tuple


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.requests: Dict[Tuple[str, int], int] = defaultdict(int)
        self.prompt_tokens: Dict[str, int] = defaultdict(int)
        self.completion_tokens: Dict[str, int] = defaultdict(int)
        self.decode_tok_s: Dict[str, float] = {}
        self.queue_depth: Dict[str, int] = defaultdict(int)
        self.running: Dict[str, int] = defaultdict(int)

    def request(self, endpoint: str, status: int) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1

    def generation(self, model: str, prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
        with self._lock:
            self.prompt_tokens[model] += prompt_tokens
            self.completion_tokens[model] += completion_tokens
            if seconds > 0 and completion_tokens > 0:
                self.decode_tok_s[model] = completion_tokens / seconds

    def add(self, table: Dict[str, int], model: str, delta: int) -> None:
        with self._lock:
            table[model] += delta

    def render(self, models) -> str:
        out = []

        def metric(name, kind, help_, rows):
            out.append(f"# HELP akunu_{name} {help_}")
            out.append(f"# TYPE akunu_{name} {kind}")
            for labels, v in rows:
                lab = ",".join(f'{k}="{val}"' for k, val in labels.items())
                out.append(f"akunu_{name}{{{lab}}} {v}")

        with self._lock:
            metric("requests_total", "counter", "HTTP requests by endpoint and status",
                   [({"endpoint": e, "status": s}, n) for (e, s), n in sorted(self.requests.items())])
            metric("prompt_tokens_total", "counter", "Prompt tokens processed",
                   [({"model": m}, self.prompt_tokens[m]) for m in models])
            metric("completion_tokens_total", "counter", "Tokens generated",
                   [({"model": m}, self.completion_tokens[m]) for m in models])
            metric("decode_tokens_per_second", "gauge", "Tokens per second of the latest generation (prompt included in its time)",
                   [({"model": m}, round(self.decode_tok_s.get(m, 0.0), 3)) for m in models])
            metric("queue_depth", "gauge", "Requests waiting for the model",
                   [({"model": m}, self.queue_depth[m]) for m in models])
            metric("requests_running", "gauge", "Requests being generated",
                   [({"model": m}, self.running[m]) for m in models])
        return "\n".join(out) + "\n"
