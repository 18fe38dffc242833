"""Decoding one 30-second window (openai-whisper's DecodingTask, which
faster-whisper's CTranslate2 decoder follows): logit filters (suppressed
tokens, blank at the start, timestamp rules), then greedy, sampled (best of N)
or beam search decoding over the model's self-attention cache slots.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from .tokens import TIME_PRECISION, WhisperTokenizer


@dataclass
class DecodeOptions:
    task: str = "transcribe"
    language: Optional[str] = None
    timestamps: bool = True
    temperature: float = 0.0
    beam_size: int = 1
    best_of: int = 5
    patience: float = 1.0
    suppress_blank: bool = True
    suppress_tokens: Sequence[int] = ()
    max_initial_timestamp: float = 1.0
    seed: int = 0


@dataclass
class WindowResult:
    tokens: List[int]  # sampled tokens, without the end token
    text: str
    avg_logprob: float
    no_speech_prob: float
    temperature: float
    compression_ratio: float
    language: Optional[str] = None
    sum_logprob: float = field(default=0.0, repr=False)


def compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


class LogitFilters:
    """Masks applied to a window's logits before each choice (in place, -inf)."""

    def __init__(self, tok: WhisperTokenizer, opts: DecodeOptions):
        self.tok = tok
        self.opts = opts
        self.suppress = np.array(sorted(set(opts.suppress_tokens)), dtype=np.int64)
        self.begin_suppress = np.array(tok.space + [tok.eot], dtype=np.int64)
        self.max_initial = int(round(opts.max_initial_timestamp / TIME_PRECISION)) \
            if opts.max_initial_timestamp is not None else None

    def apply(self, logits: np.ndarray, sampled: Sequence[int]) -> None:
        self.mask(logits, sampled)
        # a timestamp when all timestamps together are likelier than any text token
        if self.opts.timestamps and self.timestamp_margin(logits) > 0:
            logits[:self.tok.timestamp_begin] = -np.inf

    def mask(self, logits: np.ndarray, sampled: Sequence[int]) -> None:
        """Every filter but the last timestamp rule (which looks at the masked distribution)."""
        tok, ts = self.tok, self.tok.timestamp_begin
        if len(sampled) == 0 and self.opts.suppress_blank:
            logits[self.begin_suppress] = -np.inf
        if self.suppress.size:
            logits[self.suppress] = -np.inf
        if not self.opts.timestamps:
            return
        logits[tok.no_timestamps] = -np.inf
        # timestamps come in pairs (end of one segment, start of the next), except
        # just before the end token
        last_ts = len(sampled) >= 1 and sampled[-1] >= ts
        penultimate_ts = len(sampled) < 2 or sampled[-2] >= ts
        if last_ts:
            if penultimate_ts:
                logits[ts:] = -np.inf
            else:
                logits[:tok.eot] = -np.inf
        stamps = [t for t in sampled if t >= ts]
        if stamps:  # never go back in time (a closing timestamp may repeat the last one)
            floor = stamps[-1] if last_ts and not penultimate_ts else stamps[-1] + 1
            logits[ts:floor] = -np.inf
        if len(sampled) == 0:  # the first token is a timestamp, and not too late
            logits[:ts] = -np.inf
            if self.max_initial is not None:
                logits[ts + self.max_initial + 1:] = -np.inf

    def timestamp_margin(self, logits: np.ndarray) -> float:
        """log P(any timestamp) - log P(best text token) (-inf when no timestamp is allowed)."""
        ts = self.tok.timestamp_begin
        lp = log_softmax(logits)
        finite = lp[ts:][np.isfinite(lp[ts:])]
        if not finite.size:
            return -np.inf
        m = finite.max()
        return float(m + np.log(np.exp(finite - m).sum()) - lp[:ts].max())


class WindowDecoder:
    """Runs the passes of one window on the core model's cache slots."""

    def __init__(self, core, tok: WhisperTokenizer, n_text_ctx: int):
        self.core = core
        self.tok = tok
        self.n_text_ctx = n_text_ctx

    def prompt(self, previous: Sequence[int], opts: DecodeOptions) -> List[int]:
        tokens: List[int] = []
        if previous:
            tokens = [self.tok.sot_prev] + list(previous)[-(self.n_text_ctx // 2 - 1):]
        return tokens + self.tok.sot_sequence(opts.language, opts.task, opts.timestamps)

    def _prefill(self, prompt: List[int]):
        """Feeds the prompt into slot 0: (logits after <|startoftranscript|>, logits after the prompt)."""
        split = prompt.index(self.tok.sot) + 1
        at_sot = self.core.decode(0, prompt[:split], 0)
        last = at_sot if split == len(prompt) else self.core.decode(0, prompt[split:], split)
        return at_sot, last

    def detect_language(self) -> tuple:
        """(code, probabilities by code) from the logits after <|startoftranscript|> alone
        (the window must be encoded)."""
        logits = self.core.decode(0, [self.tok.sot], 0).astype(np.float64)
        codes = list(self.tok.languages)
        ids = np.array([self.tok.languages[c] for c in codes])
        lp = log_softmax(logits[ids])
        probs = dict(zip(codes, np.exp(lp).tolist()))
        return codes[int(np.argmax(lp))], probs

    def decode(self, previous: Sequence[int], opts: DecodeOptions) -> WindowResult:
        prompt = self.prompt(previous, opts)
        max_new = self.n_text_ctx - len(prompt)
        at_sot, first = self._prefill(prompt)
        no_speech = 0.0
        if self.tok.no_speech is not None:
            no_speech = float(np.exp(log_softmax(at_sot.astype(np.float64))[self.tok.no_speech]))
        filters = LogitFilters(self.tok, opts)
        if opts.temperature == 0 and opts.beam_size > 1:
            tokens, sum_lp = self._beam_search(first, len(prompt), max_new, filters, opts)
        elif opts.temperature == 0:
            tokens, sum_lp = self._sample(0, first, len(prompt), max_new, filters, 0.0, None)
        else:
            # best of N samples, one after another in slot 0: a sample writes only the
            # positions after the prompt, so the prompt's cache serves every one
            rng = np.random.default_rng(opts.seed)
            best = None
            for _ in range(max(1, opts.best_of)):
                cand = self._sample(0, first, len(prompt), max_new, filters, opts.temperature, rng)
                if best is None or cand[1] / (len(cand[0]) + 1) > best[1] / (len(best[0]) + 1):
                    best = cand
            tokens, sum_lp = best
        text = self.tok.decode(tokens)
        return WindowResult(tokens=tokens, text=text, avg_logprob=sum_lp / (len(tokens) + 1),
                            no_speech_prob=no_speech, temperature=opts.temperature,
                            compression_ratio=compression_ratio(text.strip()), language=opts.language,
                            sum_logprob=sum_lp)

    def _sample(self, slot, first, pos, max_new, filters, temperature, rng):
        tokens: List[int] = []
        sum_lp = 0.0
        logits = first
        for _ in range(max_new):
            x = logits.astype(np.float64)
            filters.apply(x, tokens)
            lp = log_softmax(x)
            if temperature == 0:
                t = int(np.argmax(x))
            else:
                p = np.exp(log_softmax(x / temperature))
                t = int(rng.choice(p.size, p=p / p.sum()))
            sum_lp += float(lp[t])
            if t == self.tok.eot:
                break
            tokens.append(t)
            if pos >= self.n_text_ctx:
                break
            logits = self.core.decode(slot, [t], pos)
            pos += 1
        return tokens, sum_lp

    def _beam_search(self, first, prompt_len, max_new, filters, opts):
        """Beam search as openai-whisper's BeamSearchDecoder: beam_size + 1
        candidates per beam, stop when beam_size * patience sequences ended;
        rank by sum of log-probabilities / length."""
        beam = opts.beam_size
        if beam > self.core.n_slots:
            raise ValueError(f"beam_size {beam} exceeds the {self.core.n_slots} cache slots this model was loaded "
                             f"with (load with n_beams >= {beam})")
        beams: List[List[int]] = [[]]  # sampled tokens per live beam
        scores = [0.0]
        slots_of = [0]  # cache slot of each live beam
        logits = [first]
        finished = {}
        max_finished = max(1, round(beam * opts.patience))
        pos = prompt_len
        for _ in range(max_new):
            candidates = {}
            for i, seq in enumerate(beams):
                x = logits[i].astype(np.float64)
                filters.apply(x, seq)
                lp = log_softmax(x)
                top = np.argpartition(-lp, beam)[:beam + 1]
                for t in top[np.argsort(-lp[top])]:
                    key = tuple(seq) + (int(t),)
                    s = scores[i] + float(lp[t])
                    if key not in candidates or candidates[key][0] < s:
                        candidates[key] = (s, i)
            new_beams, new_scores, sources = [], [], []
            for key, (s, i) in sorted(candidates.items(), key=lambda kv: -kv[1][0]):
                if key[-1] == self.tok.eot:
                    if len(finished) < max_finished:
                        finished[key[:-1]] = s
                else:
                    new_beams.append(list(key))
                    new_scores.append(s)
                    sources.append(i)
                    if len(new_beams) == beam:
                        break
            if len(finished) >= max_finished or not new_beams or pos >= self.n_text_ctx:
                break
            slots = self._reorder_slots([slots_of[i] for i in sources], pos)
            beams, scores, slots_of = new_beams, new_scores, slots
            logits = [self.core.decode(slot, [seq[-1]], pos) for slot, seq in zip(slots, beams)]
            pos += 1
        for seq, s in zip(beams, scores):  # unfinished beams fill up the candidates
            if len(finished) >= beam:
                break
            finished.setdefault(tuple(seq), s)
        best = max(finished.items(), key=lambda kv: kv[1] / max(1, len(kv[0])))
        return list(best[0]), best[1]

    def _reorder_slots(self, source_slots: List[int], n_positions: int) -> List[int]:
        """Cache slot for each new beam: its source beam's slot when first claimed,
        else a copy of that slot into one that no new beam reads from."""
        claimed = set()
        free = [s for s in range(self.core.n_slots) if s not in set(source_slots)]
        slots = []
        for src in source_slots:
            if src not in claimed:
                claimed.add(src)
                slots.append(src)
            else:
                dst = free.pop(0)
                self.core.copy_slot(src, dst, n_positions)
                slots.append(dst)
        return slots
