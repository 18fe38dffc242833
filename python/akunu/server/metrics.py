"""Counters for GET /metrics, in Prometheus' text format. A batched model's
running and waiting requests, KV blocks, prefix-cache hits and preemptions
come from its scheduler's stats()."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Dict, Optional, Tuple


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

    def render(self, models, batch_stats: Optional[Dict[str, Dict[str, Any]]] = None) -> str:
        """`batch_stats`: model id -> BatchScheduler.stats() of each batched model."""
        batch_stats = batch_stats or {}
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
                   [({"model": m}, batch_stats[m]["waiting"] if m in batch_stats else self.queue_depth[m])
                    for m in models])
            metric("requests_running", "gauge", "Requests being generated",
                   [({"model": m}, batch_stats[m]["running"] if m in batch_stats else self.running[m])
                    for m in models])
        b = [(m, batch_stats[m]) for m in models if m in batch_stats]

        def per_model(fn):
            return [({"model": m}, fn(st)) for m, st in b]

        metric("parallel", "gauge", "Requests a batched model generates at once",
               per_model(lambda st: st["parallel"]))
        metric("kv_blocks_used", "gauge", "KV cache blocks held by running requests",
               per_model(lambda st: st["blocks_used"]))
        metric("kv_blocks_free", "gauge", "KV cache blocks not held by a running request (cached ones included)",
               per_model(lambda st: st["blocks_total"] - st["blocks_used"]))
        metric("kv_blocks_cached", "gauge", "Free KV cache blocks that still hold a reusable prompt prefix",
               per_model(lambda st: st["blocks_cached"]))
        metric("kv_block_size_tokens", "gauge", "Tokens per KV cache block",
               per_model(lambda st: st["block_size"]))
        metric("prefix_cache_hit_ratio", "gauge", "Prompt tokens found in cached blocks / prompt tokens looked up",
               per_model(lambda st: round(st["prefix_hit_tokens"] / st["prefix_lookup_tokens"], 6)
                         if st["prefix_lookup_tokens"] else 0.0))
        metric("prefix_cache_hit_tokens_total", "counter", "Prompt tokens found in cached blocks",
               per_model(lambda st: st["prefix_hit_tokens"]))
        metric("prefix_cache_lookup_tokens_total", "counter", "Prompt tokens looked up in the prefix cache",
               per_model(lambda st: st["prefix_lookup_tokens"]))
        metric("preemptions_total", "counter", "Requests paused because the KV cache ran out (resumed later)",
               per_model(lambda st: st["preemptions"]))
        return "\n".join(out) + "\n"
