"""The Python face of a loaded model: text in, text out."""

from __future__ import annotations

import json
import os
import secrets
import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _core
from .batching import BatchedStream, BatchScheduler, results_of, run_to_end
from .chat_template import ChatTemplate
from .cuda_libraries import export_cublas_dirs
from .errors import AkunuError, UnsupportedModelError
from .generation import Generation, GenerationRequest, GenerationResult, GenerationStats
from .grammar import Grammar, GrammarCompiler
from .model_zoo import resolve_model_path
from .sampling import SamplingConfig
from .stop_strings import normalize_stop
from .hf_tokenizer import HFTokenizer
from .kv_types import KV_TYPE_NAMES, KvTypeArg, parse_kv_type
from .tokenizer import GGUFTokenizer
from .turns import TurnLock
from . import async_calls

__all__ = ["Model", "load", "GenerationResult", "GenerationStats", "GenerationStream"]

# Control tokens that end a turn in common chat formats (llama.cpp's EOG set).
_END_OF_GENERATION = {
    "<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<|eom_id|>",
    "</s>", "<eos>", "<|end_of_text|>",
}
# The devices akunu knows; "cuda" and "metal" may be missing from a build,
# which their own error then says.
_DEVICES = ("cpu", "auto", "cuda", "metal")
# parallel=None: generations batched at once when callers overlap, and the
# batched KV cache's default size in tokens (at least one whole context)
AUTO_PARALLEL = 16
AUTO_KV_TOKENS = 16384
# ...from how many generations at once: a batched step of a few rows costs about
# their single-stream steps' sum on the CPU, and less than two of them on a GPU
# (Llama-3.2-1B F16 on an H200: 1.49 / 1.66 ms for 1 / 4 rows against 0.92 ms;
# two threads on an H100, `bench.threads`: 1.10x their calls one after another
# batched from two, 1.00x waiting for a third)
AUTO_MIN_OVERLAP_CPU = 2
AUTO_MIN_OVERLAP_GPU = 2


def _known_device(device: str) -> bool:
    # _core.device_names() adds "metal-emu" (the Metal kernels emulated on the
    # CPU, for tests) only while its library, named by AKUNU_MSL_EMU_LIB, loads.
    return device in _DEVICES or device in _core.device_names()


class GenerationStream:
    """Iterator of text pieces; ``result`` holds tokens, stats and finish reason once it ends.

    A generation that starts alone on the single-stream path may move into the
    batch scheduler between two decode chunks when other callers arrive
    (``take_over``); it goes on there from the tokens it has drawn, as the same
    stream and the same ``result``."""

    def __init__(self, gen: Generation, release, take_over=None):
        self._gen = gen
        self._release = release
        self._take_over = take_over
        self._it = iter(gen)
        self._batched = None  # the BatchedStream it goes on in, once handed over
        self.result: GenerationResult = gen.result

    def __iter__(self) -> "GenerationStream":
        return self

    def __next__(self) -> str:
        if self._batched is not None:
            return next(self._batched)
        try:
            piece, _ = next(self._it)
            return piece
        except StopIteration:
            if not self._gen.handed_over:
                self.close()
                raise
        except BaseException:
            self.close()
            raise
        # handed over: the batch has the request before this turn is given back
        self._it = None
        try:
            self._batched = self._take_over(self._gen)
        finally:
            self._release()
        return next(self._batched)

    def ready(self) -> bool:
        """Whether the next piece is already here (only a handed-over generation can say)."""
        return self._batched is not None and self._batched.ready()

    def close(self) -> None:
        """Stop generating (the KV cache keeps what was computed) and free the model for other calls."""
        if self._batched is not None:
            self._batched.close()
        elif self._it is not None:
            self._it.close()
            self._it = None
            self._release()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Model:
    """A model loaded on a device. Create it with :func:`akunu.load`.

    Generation reuses the KV cache: a prompt that starts with the tokens of
    the previous context (a chat's earlier turns) only prefills the rest.

    Every call is safe from any number of threads and asyncio tasks at once
    (``agenerate``, ``astream`` and the other ``a``-prefixed calls).

    - ``parallel=None`` (the default): a generation that finds the model free
      runs on the fast single-stream path; once ``AUTO_MIN_OVERLAP_*`` (2 on
      the CPU and on a GPU) overlap, they run together in continuously batched
      passes (batching.py, created then, up to ``AUTO_PARALLEL`` at once), and
      the single-stream one joins them at its next decode chunk, taking its
      KV rows along; fewer wait their turn.
    - ``parallel=N`` (N > 1): every generation runs in the batch, up to N at once.
    - ``parallel=1``: one generation at a time on the single-stream path; the
      others wait in arrival order, and a streamed generation holds its turn
      until it is read to its end or closed.

    In a batch each generation keeps its own settings and gets the tokens it
    would have alone; more than the batch holds wait their turn.
    """

    def __init__(self, path: str, device: str = "cpu", n_ctx: Optional[int] = None, n_threads: int = 0,
                 chat_template: Optional[str] = None, n_batch: Optional[int] = None,
                 parallel: Optional[int] = None, kv_tokens: Optional[int] = None, max_queue: int = 0,
                 tensor_parallel: int = 1, kv_type: KvTypeArg = None):
        if not _known_device(device):
            raise AkunuError(f"unknown device '{device}' (expected 'cpu', 'cuda', 'metal' or 'auto')")
        if n_ctx is not None and (isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx <= 0):
            raise AkunuError(f"n_ctx must be a positive integer, got {n_ctx!r}")
        if n_batch is not None and (isinstance(n_batch, bool) or not isinstance(n_batch, int) or n_batch <= 0):
            raise AkunuError(f"n_batch must be a positive integer, got {n_batch!r}")
        if isinstance(tensor_parallel, bool) or not isinstance(tensor_parallel, int) or tensor_parallel < 1:
            raise AkunuError(f"tensor_parallel must be a positive integer, got {tensor_parallel!r}")
        path = resolve_model_path(path)
        self.path = path
        if device in ("cuda", "auto"):
            export_cublas_dirs()  # before the CUDA backend first loads cuBLAS (and NCCL, found the same way)
        k_type, v_type = parse_kv_type(kv_type)
        self._m = _core.Model(path, device, int(n_ctx or 0), int(n_threads), int(n_batch or 0), int(tensor_parallel),
                              k_type, v_type)
        self.tensor_parallel: int = int(tensor_parallel)  # devices the model is split over
        self.metadata: Dict[str, Any] = self._core().metadata
        self.format: str = self._core().format  # "gguf" or "safetensors" (a Hugging Face / MLX directory)
        try:
            if self.format == "gguf":
                self.tokenizer = GGUFTokenizer(self.metadata)
            else:
                self.tokenizer = HFTokenizer(path)
                for k, v in self.tokenizer.metadata().items():
                    self.metadata.setdefault(k, v)
        except AkunuError:
            raise
        except Exception as e:  # malformed tokenizer metadata
            raise UnsupportedModelError(f"cannot build the tokenizer from this model: {e}") from e
        self.is_embedding_model: bool = bool(self._core().is_encoder)
        self.stop_ids = self._end_of_generation_ids()
        self.chat_template = None if self.is_embedding_model else ChatTemplate.for_model(
            self.metadata, self.tokenizer.tokens, self.tokenizer.bos_id, self.tokenizer.eos_id, chat_template)
        self._cached: List[int] = []  # tokens whose KV is in the cache, position by position
        # callers take turns in arrival order (threads, asyncio tasks: turns.py)
        self._turns = TurnLock(max_queue)
        self._grammar_compiler: Optional[GrammarCompiler] = None
        self._batch: Optional[BatchScheduler] = None
        if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
            raise AkunuError(f"parallel must be a positive integer or None, got {parallel!r}")
        _check_kv_tokens(kv_tokens)
        # parallel=None: batching starts when generations first overlap (_overlap_batch)
        self._auto = parallel is None and not self.is_embedding_model
        self._auto_kv_tokens = kv_tokens
        self._max_queue = max_queue
        self._auto_lock = threading.Lock()
        # generations at once from which they batch (batching.py: a step's cost against its rows)
        self._min_overlap = AUTO_MIN_OVERLAP_CPU if self.device == "cpu" else AUTO_MIN_OVERLAP_GPU
        if parallel is not None and parallel > 1 and not self.is_embedding_model:
            self.enable_batching(parallel, kv_tokens=kv_tokens, max_queue=max_queue)

    def enable_batching(self, parallel: int, kv_tokens: Optional[int] = None, max_queue: int = 0) -> None:
        """Serve up to `parallel` generations at once (continuous batching over a paged KV cache
        of `kv_tokens` tokens; default: each sequence's whole context, as far as memory allows).
        `max_queue` (0: no limit) bounds the requests waiting beyond those."""
        if self.is_embedding_model:
            raise AkunuError("this is an embedding model: it does not generate")
        _check_kv_tokens(kv_tokens)
        with self._exclusive(), self._auto_lock:
            self._auto = False  # every generation runs in this batch from now on
            if self._batch is not None:
                self._batch.close()
                self._batch = None
            self._batch = BatchScheduler(self, parallel, kv_tokens or 0, max_queue)

    def _overlap_batch(self) -> Optional[BatchScheduler]:
        """With parallel=None: the scheduler for generations that overlap, created on first
        need; None when it cannot be (no memory for its cache): callers then take turns."""
        with self._auto_lock:
            if self._batch is None and self._auto:
                kv = self._auto_kv_tokens or min(AUTO_PARALLEL * self.n_ctx, max(self.n_ctx, AUTO_KV_TOKENS))
                try:
                    self._batch = BatchScheduler(self, AUTO_PARALLEL, kv, self._max_queue)
                except AkunuError:
                    self._auto = False
            return self._batch

    @property
    def batching(self) -> Optional[BatchScheduler]:
        """The continuous-batching scheduler (None until parallel > 1, enable_batching() or,
        with parallel=None, the first generations that overlap)."""
        return self._batch

    def _core(self):
        if self._m is None:
            raise AkunuError("this model has been closed")
        return self._m

    # -- introspection --------------------------------------------------------
    @property
    def config(self) -> Dict[str, Any]:
        """Dimensions, layers, heads, vocabulary size, context size and architecture; for
        generative models also the KV cache's element types (``k_cache_type``,
        ``v_cache_type``: "f16", "bf16", "q8_0", "q4_0") and its bytes per token."""
        c = self._core().config
        for key in ("k_cache_type", "v_cache_type"):
            if key in c:
                c[key] = KV_TYPE_NAMES[c[key]]
        return c

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name") or self.config["architecture"])

    @property
    def device(self) -> str:
        """The backend running the model ("cpu", "cuda" or "metal")."""
        return self._core().device_name

    @property
    def memory_bytes(self) -> int:
        """Bytes of weights, KV cache and scratch buffers."""
        return self._core().memory_bytes

    @property
    def n_ctx(self) -> int:
        return int(self.config["n_ctx"])

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
        """Token ids of `text`; special tokens written in the text (e.g. ``<start_of_turn>``) are parsed."""
        if not isinstance(text, str):
            raise AkunuError(f"tokenize() takes a string, got {type(text).__name__}")
        return self.tokenizer.encode(text, add_bos=add_bos)

    def detokenize(self, ids: Sequence[int], skip_special: bool = True) -> str:
        """Text of token ids."""
        ids = [int(t) for t in ids]
        bad = [t for t in ids if not 0 <= t < self.tokenizer.vocab_size]
        if bad:
            raise AkunuError(f"token id {bad[0]} is outside the vocabulary (size {self.tokenizer.vocab_size})")
        return self.tokenizer.decode(ids, skip_special=skip_special)

    # -- compute --------------------------------------------------------------
    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits after each position, shape (len(tokens), vocab), float32, from one prefill."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise AkunuError("logits() needs at least one token")
        with self._exclusive():
            self._cached = []
            out = self._core().logits(tokens)
            self._cached = tokens[: self._core().n_past]
            return out

    def embed(self, texts: Union[str, Sequence[str]], truncate: bool = True) -> np.ndarray:
        """Sentence embeddings from an embedding model (BERT): float32, shape (len(texts), dim),
        or (dim,) for one string. Pooling (mean, CLS or last token) and L2 normalization are the
        model's own (sentence-transformers' 1_Pooling and Normalize modules; GGUF pooling_type).
        Texts longer than the model's max_seq_length are truncated, or with ``truncate=False`` an error.
        """
        if not self.is_embedding_model:
            raise AkunuError(f"this is a generative model ({self.config['architecture']}): embed() needs an "
                             "embedding model such as BERT (e.g. akunu.load('all-minilm-l6-v2'))")
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        if not all(isinstance(t, str) for t in items):
            raise AkunuError("embed() takes a string or a list of strings")
        max_len = min(int(self.metadata.get("akunu.max_seq_length") or self.n_ctx), self.n_ctx)
        seqs = []
        for ids in self.tokenizer.encode_batch(items, add_bos=True):
            if len(ids) > max_len:
                if not truncate:
                    raise AkunuError(f"text of {len(ids)} tokens exceeds the model's {max_len}-token limit")
                ids = ids[: max_len - 1] + ids[-1:]  # keep the closing [SEP]
            seqs.append(ids)
        with self._exclusive():
            out = self._core().embed(seqs) if seqs else np.zeros((0, self.config["dim"]), np.float32)
        return out[0] if single else out

    def reset(self) -> None:
        """Forget the cached context (the next generation prefills its whole prompt)."""
        with self._exclusive():
            self._core().truncate(0)
            self._cached = []

    def generate(
        self,
        prompt: Union[str, Sequence[int]],
        max_tokens: Optional[int] = 128,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        repeat_penalty: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        penalty_last_n: int = 64,
        seed: Optional[int] = None,
        logit_bias: Optional[Dict[int, float]] = None,
        stop: Union[None, str, Sequence[str]] = None,
        grammar: Union[None, str, Grammar] = None,
        json_schema: Union[None, str, Dict[str, Any]] = None,
        speculative: bool = False,
        add_bos: bool = True,
        stream: bool = False,
    ) -> Union[GenerationResult, GenerationStream]:
        """Generate a continuation of `prompt` (text or token ids).

        Sampling: temperature 0 is greedy on the device's chain path; otherwise
        the device sampler draws from softmax(logits / temperature) restricted
        by top_k, top_p and min_p, after logit_bias and llama.cpp's repeat /
        presence / frequency penalties over the last `penalty_last_n` tokens.
        `stop` strings end generation and never appear in the text; so do the
        model's end-of-turn tokens. `grammar` (GBNF text or a :class:`Grammar`)
        or `json_schema` (a dict, a JSON string, or ``"any"`` for any JSON value)
        constrain the output. `speculative` uses n-gram drafts verified in one
        batched pass (greedy only; the tokens are those of plain greedy).
        `max_tokens` None runs to the end of the context.

        Returns a :class:`GenerationResult`, or with ``stream=True`` a
        :class:`GenerationStream` of text pieces (UTF-8 characters come out whole).
        """
        sampling = SamplingConfig(
            temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
            presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
            penalty_last_n=penalty_last_n, seed=seed, logit_bias=dict(logit_bias or {}),
        )
        req = self._request(prompt, max_tokens, sampling, stop, grammar, json_schema, speculative, add_bos,
                            stream)
        if self._auto:
            b = self._batch
            if b is None or not b.busy():
                if self._turns.try_acquire():
                    return self._alone(req, stream)  # nobody else generates: the single-stream path
                # Too few at once to gain from a batched step (a GPU's costs about three
                # single-stream steps of a small model): wait for the turn instead.
                if self._turns.callers() + 1 < self._min_overlap and not self._turns.held_here():
                    self._turns.acquire()
                    return self._alone(req, stream)
            b = self._overlap_batch()
            if b is not None:
                return self._batched(b, req, stream)
        elif self._batch is not None:
            return self._batched(self._batch, req, stream)
        self._turns.acquire()
        return self._alone(req, stream)

    def _batched(self, b: BatchScheduler, req: GenerationRequest, stream: bool):
        """Joins the running batch (speculative drafts: plain greedy's tokens)."""
        bs = BatchedStream(b.submit(req), b)
        if stream:
            return bs
        run_to_end(bs, async_calls.cancelled)
        return bs.result

    def _alone(self, req: GenerationRequest, stream: bool):
        """On the single-stream path, holding the turn (given back when the stream ends)."""
        try:
            gen = Generation(self, req)
        except BaseException:
            self._turns.release()
            raise
        take_over = None
        # others arriving meanwhile batch; this one joins them between two decode chunks
        if self._auto:
            gen.hand_over = lambda remaining: self._batch is not None and self._batch.busy()
            take_over = self._hand_over
        s = GenerationStream(gen, self._turns.release, take_over)
        if stream:
            return s
        run_to_end(s, async_calls.cancelled)  # stops early when an asyncio caller was cancelled
        return s.result

    def _hand_over(self, gen: Generation) -> BatchedStream:
        b = self._batch
        if b is None:
            raise AkunuError("this model has been closed")
        # (the turn is still held: the single-stream cache holds this generation's rows)
        return BatchedStream(b.take_over(gen.req, gen.emitter, gen.decode_started, self._cached), b)

    def generate_batch(self, prompts: Sequence[Union[str, Sequence[int]]], max_tokens: Optional[int] = 128,
                       **kwargs: Any) -> List[GenerationResult]:
        """Generate for many prompts at once (evaluation jobs): one result per prompt, in order.

        Takes :meth:`generate`'s keyword arguments (the same for every prompt).
        Runs on the continuous-batching scheduler: with ``parallel=None`` the one
        overlapping callers share, with ``parallel=1`` one created on first use with
        ``parallel = min(len(prompts), 16)``; each result is the one the prompt gets alone.
        """
        if kwargs.pop("stream", False):
            raise AkunuError("generate_batch() returns whole results")
        prompts = list(prompts)
        if not prompts:
            return []
        if (self._overlap_batch() if self._auto else self._batch) is None:
            self.enable_batching(min(len(prompts), AUTO_PARALLEL))
        # holding the turn, every prompt goes to the batch (none starts on the single-stream path)
        held = self._auto and self._turns.try_acquire()
        streams = []
        try:
            for p in prompts:
                streams.append(self.generate(p, max_tokens=max_tokens, stream=True, **kwargs))
        except BaseException:
            for s in streams:
                s.close()
            raise
        finally:
            if held:
                self._turns.release()
        return results_of(streams, async_calls.cancelled)

    def _request(self, prompt, max_tokens, sampling: SamplingConfig, stop, grammar, json_schema, speculative,
                 add_bos, stream) -> GenerationRequest:
        """Every check before any work: bad settings fail here."""
        if self.is_embedding_model:
            raise AkunuError(f"this is an embedding model ({self.config['architecture']}): it cannot generate "
                             "text; use embed()")
        sampling.validate(self.config["vocab_size"])
        stops = normalize_stop(stop)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 0):
            raise AkunuError(f"max_tokens must be a non-negative integer or None, got {max_tokens!r}")
        if grammar is not None and json_schema is not None:
            raise AkunuError("give either grammar or json_schema, not both")
        g = None
        if grammar is not None:
            g = grammar if isinstance(grammar, Grammar) else Grammar.gbnf(grammar)
        elif json_schema is not None:
            g = Grammar.any_json() if json_schema == "any" else Grammar.json_schema(json_schema)
        if speculative and (sampling.needs_sampler or g is not None):
            raise AkunuError("speculative decoding is greedy only: use temperature 0, no penalties, logit bias "
                             "or grammar")
        if isinstance(prompt, str):
            ids = self.tokenize(prompt, add_bos=add_bos)
        else:
            try:
                ids = [int(t) for t in prompt]
            except (TypeError, ValueError):
                raise AkunuError("prompt must be a string or a sequence of token ids") from None
            bad = [t for t in ids if not 0 <= t < self.config["vocab_size"]]
            if bad:
                raise AkunuError(f"prompt token id {bad[0]} is outside the vocabulary "
                                 f"(size {self.config['vocab_size']})")
        if not ids:
            raise AkunuError("the prompt is empty")
        n_ctx = self.n_ctx
        if len(ids) >= n_ctx:
            raise AkunuError(f"prompt of {len(ids)} tokens does not fit the context of {n_ctx} tokens "
                             f"(load with a larger n_ctx, or shorten the prompt)")
        room = n_ctx - len(ids)
        max_tokens = room if max_tokens is None else min(max_tokens, room)
        compiled = self._compile_grammar(g) if g is not None else None
        seed = sampling.seed if sampling.seed is not None else secrets.randbits(63)
        return GenerationRequest(ids=ids, max_tokens=max_tokens, sampling=sampling, stops=stops,
                                 grammar=compiled, speculative=bool(speculative), seed=seed,
                                 stream_chunk=4 if stream else 16)

    def _compile_grammar(self, g: Grammar):
        if self._grammar_compiler is None:
            self._grammar_compiler = GrammarCompiler(self.tokenizer, self.config["vocab_size"], self.stop_ids)
        return self._grammar_compiler.compile(g)

    # -- chat -----------------------------------------------------------------
    def apply_chat_template(self, messages: Sequence[Dict[str, Any]], add_generation_prompt: bool = True) -> str:
        """The prompt text for `messages` under this model's chat template."""
        if self.chat_template is None:
            raise AkunuError("this is an embedding model: it has no chat template")
        return self.chat_template.render(messages, add_generation_prompt=add_generation_prompt)

    def chat(self, messages: Sequence[Dict[str, Any]], max_tokens: Optional[int] = None, **kwargs: Any):
        """Generate the assistant's reply to `messages` (OpenAI-style dicts).

        Takes :meth:`generate`'s keyword arguments. Earlier turns already in
        the KV cache are not prefilled again.
        """
        text = self.apply_chat_template(messages)
        return self.generate(self.tokenize(text, add_bos=False), max_tokens=max_tokens, **kwargs)

    def create_completion(self, prompt: Union[str, Sequence[int]], **kwargs: Any):
        """OpenAI / llama-cpp-python shaped completion (a dict, or an iterator of chunk dicts with stream=True).

        Takes OpenAI's fields: max_tokens, temperature, top_p, stop (at most 4), seed, n (choices
        1-16; choice i samples with seed + i), echo (the prompt before the text), response_format,
        stream, stream_options, logprobs (N alternatives a token: the legacy shape)."""
        from .openai_api import create_completion

        return create_completion(self, prompt, **kwargs)

    def create_chat_completion(self, messages: Sequence[Dict[str, Any]], **kwargs: Any):
        """OpenAI / llama-cpp-python shaped chat completion (a dict, or chunk dicts with stream=True).

        Takes create_completion's fields (but echo) and OpenAI's tool calling: tools, tool_choice
        ("auto", "none", "required" or {"type": "function", "function": {"name": ...}}; the last
        two constrain the reply to a valid call) and parallel_tool_calls. Calls come back as the
        message's tool_calls (tool_calls.py); messages may hold assistant tool_calls and
        role "tool" results."""
        from .openai_api import create_chat_completion

        return create_chat_completion(self, messages, **kwargs)

    def create_embedding(self, input: Any, model: Optional[str] = None, encoding_format: str = "float",
                         dimensions: Optional[int] = None) -> Dict[str, Any]:
        """OpenAI / llama-cpp-python shaped embeddings of a string, strings or token-id lists."""
        from .openai_api import create_embedding

        return create_embedding(self, input, model, encoding_format, dimensions)

    # -- asyncio --------------------------------------------------------------
    # The same arguments as the calls above. The work runs on a thread of the
    # call's own, so the event loop never blocks; callers take turns on the
    # model in arrival order; cancelling the task stops its generation at the
    # next piece and frees the model for the callers behind it.
    async def agenerate(self, prompt: Union[str, Sequence[int]], **kwargs: Any) -> GenerationResult:
        """:meth:`generate` for asyncio: ``await model.agenerate(prompt, max_tokens=...)``."""
        if kwargs.pop("stream", False):
            raise AkunuError("agenerate() returns the whole result; use astream() for the pieces")
        return await async_calls.call(lambda: self.generate(prompt, **kwargs))

    def astream(self, prompt: Union[str, Sequence[int]], **kwargs: Any):
        """Text pieces as they are generated: ``async for piece in model.astream(prompt, ...)``
        (an async iterator; ending it early, or its task, stops the generation)."""
        kwargs.pop("stream", None)
        return async_calls.iterate(lambda: self.generate(prompt, stream=True, **kwargs))

    async def achat(self, messages: Sequence[Dict[str, Any]], **kwargs: Any) -> GenerationResult:
        """:meth:`chat` for asyncio."""
        if kwargs.pop("stream", False):
            raise AkunuError("achat() returns the whole result; use acreate_chat_completion(stream=True) for pieces")
        return await async_calls.call(lambda: self.chat(messages, **kwargs))

    async def acreate_completion(self, prompt: Union[str, Sequence[int]], stream: bool = False, **kwargs: Any):
        """:meth:`create_completion` for asyncio: a dict, or with ``stream=True`` an async iterator of chunks."""
        if stream:
            return async_calls.iterate(lambda: self.create_completion(prompt, stream=True, **kwargs))
        return await async_calls.call(lambda: self.create_completion(prompt, **kwargs))

    async def acreate_chat_completion(self, messages: Sequence[Dict[str, Any]], stream: bool = False,
                                      **kwargs: Any):
        """:meth:`create_chat_completion` for asyncio: a dict, or with ``stream=True`` an async iterator of chunks."""
        if stream:
            return async_calls.iterate(lambda: self.create_chat_completion(messages, stream=True, **kwargs))
        return await async_calls.call(lambda: self.create_chat_completion(messages, **kwargs))

    async def aembed(self, texts: Union[str, Sequence[str]], truncate: bool = True) -> np.ndarray:
        """:meth:`embed` for asyncio."""
        return await async_calls.call(lambda: self.embed(texts, truncate))

    # -- lifetime -------------------------------------------------------------
    def _exclusive(self) -> TurnLock:
        return self._turns  # ``with``: one turn

    def close(self) -> None:
        """Free the model's memory (weights, KV cache) now rather than at garbage collection."""
        if self._batch is not None:
            self._batch.close()
            self._batch = None
        self._m = None
        self._cached = []

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_kv_tokens(kv_tokens: Optional[int]) -> None:
    if kv_tokens is not None and (isinstance(kv_tokens, bool) or not isinstance(kv_tokens, int) or kv_tokens <= 0):
        raise AkunuError(f"kv_tokens must be a positive integer, got {kv_tokens!r}")


def _is_whisper(path: str) -> bool:
    """Cheaply, before loading: a directory says so in its files (a CTranslate2 model.bin is only
    read for Whisper; a Hugging Face config.json names its model_type); a GGUF in its header."""
    if os.path.isdir(path):
        config = os.path.join(path, "config.json")
        if os.path.isfile(os.path.join(path, "model.bin")) and os.path.isfile(config):
            return True
        try:
            with open(config, encoding="utf-8") as f:
                return json.load(f).get("model_type") == "whisper"
        except (OSError, ValueError, AttributeError):
            return False  # the loader reports what is wrong with the directory
    return _core.model_architecture(path) == "whisper"


def load(path: str, device: str = "cpu", n_ctx: Optional[int] = None, n_threads: int = 0,
         chat_template: Optional[str] = None, n_beams: int = 5, n_batch: Optional[int] = None,
         parallel: Optional[int] = None, kv_tokens: Optional[int] = None, max_queue: int = 0,
         revision: Optional[str] = None, tensor_parallel: int = 1, kv_type: KvTypeArg = None):
    """Load a model: a GGUF file, a Hugging Face / MLX directory (config.json + safetensors +
    tokenizer.json), a CTranslate2 Whisper directory (model.bin, as faster-whisper uses), a
    named model such as ``"gemma3-270m"``, ``"all-minilm-l6-v2"`` or ``"whisper-tiny.en"``, or
    a Hugging Face repo id (``"owner/repo"``, ``"owner/repo:Q4_K_M"``,
    ``"owner/repo/file.gguf"``; `revision` or ``@REV``: a branch, tag or commit), fetched into
    the Hugging Face cache.
    Whisper models come back as :class:`akunu.whisper.WhisperModel` (``transcribe()``), with
    decoder caches for beam searches up to `n_beams` wide.

    `device`: "cpu", "cuda", "metal" or "auto". `n_ctx`: context size in tokens
    (default: the model's, at most 4096). `chat_template`: "chatml", "llama3",
    "gemma" or jinja2 source, replacing the file's own. `n_batch`: prompt tokens per
    prefill pass (default: the device's, 64 on the CPU and 512 on CUDA); larger passes
    use more memory for activations and logits. `parallel`: generations served at once
    by continuous batching. None (default): a lone generation runs on the fast
    single-stream path; when two or more generations overlap (threads, asyncio
    tasks) they are batched together, up to 16 at once, the first
    joining them between two decode chunks; N > 1: every generation in the batch, N at once; 1: one at a time on the
    single-stream path, the others waiting in arrival order. `kv_tokens`: the batched
    KV cache's size in tokens, shared by all of them (default: as much as parallel
    whole contexts, as far as memory allows; with parallel=None
    ``min(16 * n_ctx, max(n_ctx, 16384))``, allocated when generations first overlap).
    `max_queue`: callers that may wait for the model beyond those (0: no limit); one
    more raises QueueFullError.
    `tensor_parallel`: split the model over that many devices (Megatron-style tensor
    parallelism: attention heads, FFN and vocabulary split, one all-reduce after each
    block's output projections): GPUs 0..N-1 over NCCL on "cuda", threads on "cpu".
    `kv_type`: the KV cache's element type, as llama.cpp's ``-ctk`` / ``-ctv``:
    "f16" (default), "bf16", "q8_0" or "q4_0", or a (K, V) pair such as
    ``("q8_0", "f16")`` or ``"q8_0,f16"``; Q8_0 halves the cache, Q4_0 takes about
    a quarter, with logits a little further from the F16 cache's.
    """
    path = resolve_model_path(path, revision=revision)
    if _known_device(device) and _is_whisper(path):
        if tensor_parallel != 1:
            raise AkunuError("tensor parallelism serves text-generation models; Whisper runs on one device")
        if kv_type is not None and parse_kv_type(kv_type) != (0, 0):
            raise AkunuError("kv_type applies to text-generation models; Whisper's caches are F16")
        from .whisper import WhisperModel

        return WhisperModel(path, device=device, n_threads=n_threads, n_beams=n_beams, max_queue=max_queue)
    return Model(path, device=device, n_ctx=n_ctx, n_threads=n_threads, chat_template=chat_template,
                 n_batch=n_batch, parallel=parallel, kv_tokens=kv_tokens, max_queue=max_queue,
                 tensor_parallel=tensor_parallel, kv_type=kv_type)
