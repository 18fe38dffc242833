"""Sampling settings, validated before any work starts.

The meaning of every knob is the device sampler's (backend/cpu/kernels/sampling.cpp):
logit bias is added, then llama.cpp's repetition penalties over the last
``penalty_last_n`` context tokens, then a grammar mask; the draw is from
softmax(logits / temperature) restricted by top_k, then top_p, then min_p.
Temperature 0 is greedy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Mapping, Optional

from .errors import AkunuError


@dataclass
class SamplingConfig:
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64
    seed: Optional[int] = None
    logit_bias: Dict[int, float] = field(default_factory=dict)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "SamplingConfig":
        """Build from keyword arguments, ignoring ``None`` values (OpenAI-style requests)."""
        names = {f.name for f in fields(cls)}
        unknown = set(kwargs) - names
        if unknown:
            raise AkunuError(f"unknown sampling setting(s): {', '.join(sorted(unknown))}")
        cfg = cls(**{k: v for k, v in kwargs.items() if v is not None})
        cfg.validate()
        return cfg

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalizes(self) -> bool:
        return self.penalty_last_n > 0 and (
            self.repeat_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0
        )

    @property
    def needs_sampler(self) -> bool:
        """False when plain argmax gives the same tokens (the fast greedy chain)."""
        return not self.greedy or self.penalizes or bool(self.logit_bias)

    def validate(self, vocab_size: Optional[int] = None) -> None:
        def number(name: str) -> float:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise AkunuError(f"{name} must be a number, got {v!r}")
            if not math.isfinite(v):
                raise AkunuError(f"{name} must be finite, got {v}")
            return float(v)

        def integer(name: str) -> int:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise AkunuError(f"{name} must be an integer, got {v!r}")
            return v

        if number("temperature") < 0:
            raise AkunuError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if integer("top_k") < 0:
            raise AkunuError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < number("top_p") <= 1.0:
            raise AkunuError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= number("min_p") <= 1.0:
            raise AkunuError(f"min_p must be in [0, 1], got {self.min_p}")
        if number("repeat_penalty") <= 0:
            raise AkunuError(f"repeat_penalty must be > 0 (1 = off), got {self.repeat_penalty}")
        number("presence_penalty")
        number("frequency_penalty")
        if integer("penalty_last_n") < 0:
            raise AkunuError(f"penalty_last_n must be >= 0, got {self.penalty_last_n}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise AkunuError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.logit_bias, Mapping):
            raise AkunuError("logit_bias must map token ids to numbers")
        for k, v in self.logit_bias.items():
            try:
                tid = int(k)
            except (TypeError, ValueError):
                raise AkunuError(f"logit_bias key {k!r} is not a token id") from None
            if vocab_size is not None and not 0 <= tid < vocab_size:
                raise AkunuError(f"logit_bias token id {tid} is outside the vocabulary (size {vocab_size})")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v == math.inf:
                raise AkunuError(f"logit_bias value for token {tid} must be a number or -inf, got {v!r}")

    def core_kwargs(self, default_seed: int) -> Dict[str, Any]:
        """Arguments of ``_core.Model.set_sampling``."""
        seed = default_seed if self.seed is None else self.seed
        return dict(
            temperature=float(self.temperature), top_k=int(self.top_k), top_p=float(self.top_p),
            min_p=float(self.min_p), repeat_penalty=float(self.repeat_penalty),
            presence_penalty=float(self.presence_penalty), frequency_penalty=float(self.frequency_penalty),
            penalty_window=int(self.penalty_last_n), seed=int(seed) & 0xFFFFFFFFFFFFFFFF,
            logit_bias=[(int(k), float(v)) for k, v in self.logit_bias.items()],
        )
