"""The Python face of a loaded model: text in, text out."""

from __future__ import annotations

import codecs
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _core
from .errors import AkunuError, UnsupportedModelError
from .model_zoo import resolve_model_path
from .tokenizer import GGUFTokenizer

# Control tokens that end a turn in common chat formats (llama.cpp's EOG set).
_END_OF_GENERATION = {
    "<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<|eom_id|>",
    "</s>", "<eos>", "<|end_of_text|>",
}


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        # the first generated token comes from the prefill pass
        n = max(self.generated_tokens - 1, 0)
        return n / self.decode_seconds if self.decode_seconds > 0 else 0.0


@dataclass
class GenerationResult:
    text: str
    tokens: List[int]
    stats: GenerationStats = field(default_factory=GenerationStats)
    finish_reason: str = "length"


class Model:
    """A model loaded on a device. Create it with :func:`akunu.load`."""

    def __init__(self, path: str, device: str = "cpu", n_ctx: Optional[int] = None, n_threads: int = 0):
        if device not in ("cpu", "auto", "cuda", "metal"):
            raise AkunuError(f"unknown device '{device}' (expected 'cpu', 'cuda', 'metal' or 'auto')")
        if n_ctx is not None and n_ctx <= 0:
            raise AkunuError(f"n_ctx must be positive, got {n_ctx}")
        path = resolve_model_path(path)
        self.path = path
        self._m = _core.Model(path, device, int(n_ctx or 0), int(n_threads))
        self.metadata: Dict[str, Any] = self._core().metadata
        try:
            self.tokenizer = GGUFTokenizer(self.metadata)
        except AkunuError:
            raise
        except Exception as e:  # malformed tokenizer metadata
            raise UnsupportedModelError(f"cannot build the tokenizer from this file: {e}") from e
        self.stop_ids = self._end_of_generation_ids()

    def _core(self):
        if self._m is None:
            raise AkunuError("this model has been closed")
        return self._m

    # -- introspection --------------------------------------------------------
    @property
    def config(self) -> Dict[str, Any]:
        """Dimensions, layers, heads, vocabulary size and architecture."""
        return self._core().config

    @property
    def device(self) -> str:
        return self._core().device_name

    @property
    def memory_bytes(self) -> int:
        return self._core().memory_bytes

    def _end_of_generation_ids(self) -> List[int]:
        ids = set()
        for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
            v = self.metadata.get(key)
            if isinstance(v, int) and 0 <= v < self.tokenizer.vocab_size:
                ids.add(v)
        for i, (t, ty) in enumerate(zip(self.tokenizer.tokens, self.tokenizer.token_types)):
            if ty == 3 and t in _END_OF_GENERATION:
                ids.add(i)
        return sorted(ids)

    # -- text <-> ids ---------------------------------------------------------
    def tokenize(self, text: str, add_bos: bool = True) -> List[int]:
        return self.tokenizer.encode(text, add_bos=add_bos)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    # -- compute --------------------------------------------------------------
    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits after each position, shape (len(tokens), vocab), float32, from one prefill."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise AkunuError("logits() needs at least one token")
        return self._core().logits(tokens)

    def generate(
        self,
        prompt: Union[str, Sequence[int]],
        max_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: Optional[int] = None,
        stream: bool = False,
    ):
        """Generate a continuation of `prompt` (text or token ids).

        Returns a :class:`GenerationResult`, or with ``stream=True`` an iterator of
        text pieces (UTF-8 characters split across tokens come out whole).
        Temperature 0 is greedy decoding on the device's chain path.
        """
        if max_tokens < 0:
            raise AkunuError(f"max_tokens must be >= 0, got {max_tokens}")
        if temperature < 0:
            raise AkunuError(f"temperature must be >= 0, got {temperature}")
        if not 0.0 < top_p <= 1.0:
            raise AkunuError(f"top_p must be in (0, 1], got {top_p}")
        ids = self.tokenize(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        if not ids:
            raise AkunuError("the prompt is empty")
        if len(ids) + max_tokens > self.config["n_ctx"]:
            if len(ids) >= self.config["n_ctx"]:
                raise AkunuError(
                    f"prompt of {len(ids)} tokens does not fit the context of {self.config['n_ctx']} tokens"
                )
            max_tokens = self.config["n_ctx"] - len(ids)
        gen = self._generate_pieces(ids, max_tokens, temperature, top_k, top_p, seed)
        if stream:
            return (piece for piece, _ in gen)
        pieces = []
        result = GenerationResult(text="", tokens=[])
        for piece, res in gen:
            pieces.append(piece)
            result = res
        result.text = "".join(pieces)
        return result

    def _generate_pieces(self, ids, max_tokens, temperature, top_k, top_p, seed):
        stats = GenerationStats(prompt_tokens=len(ids))
        result = GenerationResult(text="", tokens=[], stats=stats)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        if max_tokens == 0:
            yield "", result
            return
        self._core().truncate(0)
        rng = np.random.default_rng(seed)
        t0 = time.perf_counter()
        first = self._core().prefill(ids)
        if temperature > 0:
            first = _sample(self._core().last_logits()[0], temperature, top_k, top_p, rng)
        stats.prefill_seconds = time.perf_counter() - t0
        pending = [first]
        t1 = time.perf_counter()
        while pending:
            for tok in pending:
                result.tokens.append(tok)
                stats.generated_tokens += 1
                if tok in self.stop_ids:
                    result.finish_reason = "stop"
                    stats.decode_seconds = time.perf_counter() - t1
                    yield utf8.decode(b"", final=True), result
                    return
                yield utf8.decode(self.tokenizer.token_bytes(tok)), result
            remaining = max_tokens - len(result.tokens)
            if remaining <= 0:
                break
            last = pending[-1]
            if temperature > 0:
                pending = [_sample(self._core().decode_logits(last)[0], temperature, top_k, top_p, rng)]
            else:
                # chunks of 4 keep streaming responsive; the chain runs on the device
                pending = self._core().decode_greedy(last, min(remaining, 4), self.stop_ids)
        stats.decode_seconds = time.perf_counter() - t1
        yield utf8.decode(b"", final=True), result

    # -- lifetime -------------------------------------------------------------
    def close(self) -> None:
        """Free the model's memory now rather than at garbage collection."""
        self._m = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sample(logits: np.ndarray, temperature: float, top_k: int, top_p: float, rng) -> int:
    z = logits.astype(np.float64) / temperature
    if top_k and top_k < z.size:
        kth = np.partition(z, -top_k)[-top_k]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p)
        cum = np.cumsum(p[order])
        keep = order[: int(np.searchsorted(cum, top_p)) + 1]
        mask = np.zeros_like(p)
        mask[keep] = p[keep]
        p = mask / mask.sum()
    return int(rng.choice(p.size, p=p))


def load(path: str, device: str = "cpu", n_ctx: Optional[int] = None, n_threads: int = 0) -> Model:
    """Load a GGUF model (a path, or a named model such as ``"gemma3-270m"``)."""
    return Model(path, device=device, n_ctx=n_ctx, n_threads=n_threads)
