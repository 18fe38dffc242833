"""Log-probabilities of generated tokens, for OpenAI's ``logprobs`` fields.

The decode loops return token ids, not logits, so the log-probabilities come
from a teacher-forced pass afterwards (or after each streamed chunk): the
model is fed prompt + generated tokens through its prefill table, the code
path of ``Model.logits``, and the row at position j is the distribution the
token at j + 1 was drawn from. They are the model's own (raw) distribution,
before temperature, penalties, bias or grammar masks, as OpenAI and vLLM
report them by default.

Two ways to run the pass, with the same numbers (every row depends on its
own position's inputs only; both feed the prefill table):
  * one pass over the whole context (``core.logits``): fast (one GEMM per
    weight), but it returns a row for every position, prompt included;
  * a walk: keep the KV cache of the prompt (or of what it shares with the
    cache), then feed the new tokens one by one through the prefill table
    and read each last row (``core.prefill`` + ``core.last_logits``):
    memory of one row, work of one pass per new token.
The first is taken when its rows fit ``MAX_PASS_BYTES`` and it is not much
more work than the walk.

Either leaves the single-stream KV cache holding context[:-1] and says so in
``model._cached``, as Model.logits does: the next generation reuses it, and
a generation that is still running (a stream between two chunks, whose cache
then already holds context[:-1]) continues from the same positions. Its cache
rows are then the prefill table's: on the CPU they are bit for bit the
decode's, on a GPU they may differ in the last bits, which can tip a later
near-tie of a stream with logprobs the other way.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

import numpy as np

from .errors import AkunuError

MAX_TOP_LOGPROBS = 20          # OpenAI's limit
MAX_PASS_BYTES = 256 << 20     # float32 logits one whole-context pass may return
# A whole-context pass costs about one row of work per position; the walk one
# single-row pass per new token, which on a CPU costs many rows of a batched
# pass (the weights are read once per pass). Whole pass when rows <= this x new.
WALK_COST = 8


@dataclass
class TokenLogprob:
    token: int
    logprob: float
    top: List[tuple]  # (token id, logprob), most likely first


def _log_softmax_rows(rows: np.ndarray, chosen: Sequence[int], top_n: int) -> List[TokenLogprob]:
    out = []
    for row, tok in zip(rows, chosen):
        x = row.astype(np.float64)
        m = np.max(x)
        lse = m + np.log(np.sum(np.exp(x - m)))
        lp = x - lse
        top: List[tuple] = []
        if top_n > 0:
            k = min(top_n, lp.shape[0])
            idx = np.argpartition(-lp, k - 1)[:k]
            idx = idx[np.lexsort((idx, -lp[idx]))]  # most likely first, ties by id
            top = [(int(i), float(lp[i])) for i in idx]
        out.append(TokenLogprob(int(tok), float(lp[tok]), top))
    return out


def compute(model, context: Sequence[int], start: int, top_n: int, holding_turn: bool = False) -> List[TokenLogprob]:
    """Log-probabilities of context[start:], each given the tokens before it (start >= 1).

    `holding_turn`: the caller already has the model's turn (a single-stream generation
    that is open between two chunks); otherwise the turn is taken here."""
    context = [int(t) for t in context]
    if not 1 <= start <= len(context):
        raise AkunuError(f"logprobs: start {start} is outside a context of {len(context)} tokens")
    if start == len(context):
        return []
    if holding_turn:
        return _compute(model, context, start, top_n)
    with model._exclusive():
        return _compute(model, context, start, top_n)


def _compute(model, context: List[int], start: int, top_n: int) -> List[TokenLogprob]:
    core = model._core()
    vocab = int(model.config["vocab_size"])
    feed = context[:-1]  # the last token is predicted, never fed
    new = len(context) - start
    cached = model._cached[: core.n_past]
    common = 0
    limit = min(len(cached), start - 1)
    while common < limit and cached[common] == feed[common]:
        common += 1
    common = core.reusable_prefix(common)  # 0 when a sliding-window ring has moved past it
    walk_rows = (start - 1 - common) + WALK_COST * new
    if len(feed) * vocab * 4 <= MAX_PASS_BYTES and len(feed) <= walk_rows:
        model._cached = []
        rows = core.logits(feed)[start - 1:]
        model._cached = feed[: core.n_past]
        return _log_softmax_rows(rows, context[start:], top_n)
    model._cached = []
    try:
        core.truncate(common)
        if common < start - 1:
            core.prefill(feed[common:start - 1])
        out: List[TokenLogprob] = []
        for j in range(start - 1, len(feed)):
            core.prefill([feed[j]])
            out += _log_softmax_rows(core.last_logits(), [context[j + 1]], top_n)
        return out
    finally:
        model._cached = feed[: core.n_past]


# -- OpenAI's shapes ----------------------------------------------------------------------
def _token_text(tokenizer, tok: int) -> tuple:
    """(text, bytes) of a token: its bytes, or for a control token (no text) its name."""
    if tok >= tokenizer.vocab_size:
        return "", b""
    b = tokenizer.token_bytes(tok)
    if not b and tokenizer.tokens[tok]:
        b = tokenizer.tokens[tok].encode("utf-8")
    return b.decode("utf-8", errors="replace"), b


def chat_content(tokenizer, lps: List[TokenLogprob], top_n: int) -> List[Dict[str, Any]]:
    """choices[].logprobs.content of a chat completion (or chunk)."""
    def entry(tok, lp):
        text, b = _token_text(tokenizer, tok)
        return {"token": text, "logprob": lp, "bytes": list(b)}

    return [{**entry(t.token, t.logprob), "top_logprobs": [entry(i, lp) for i, lp in t.top[:top_n]]}
            for t in lps]


class LegacyOffsets:
    """text_offset of the legacy completion shape: characters of text before each token,
    counted as the stream's text is made (whole UTF-8 characters)."""

    def __init__(self, start: int = 0):
        self.offset = start
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def next(self, b: bytes) -> int:
        at = self.offset
        self.offset += len(self._utf8.decode(b))
        return at


def completion_logprobs(tokenizer, lps: List[TokenLogprob], top_n: int, offsets: LegacyOffsets) -> Dict[str, Any]:
    """choices[].logprobs of a (legacy) completion: tokens, token_logprobs, top_logprobs, text_offset."""
    tokens, values, tops, offs = [], [], [], []
    for t in lps:
        text, b = _token_text(tokenizer, t.token)
        tokens.append(text)
        values.append(t.logprob)
        top: Dict[str, float] = {}
        for i, lp in t.top[:top_n]:  # tokens of the same text: the likelier one's value
            top.setdefault(_token_text(tokenizer, i)[0], lp)
        tops.append(top)
        offs.append(offsets.next(tokenizer.token_bytes(t.token) if t.token < tokenizer.vocab_size else b""))
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offs}


class Tracker:
    """The logprobs of one choice's tokens as they come: ``take()`` returns those of the
    tokens generated since the last call. An end-of-turn token that ended the reply is
    left out (it is not part of the text)."""

    def __init__(self, model, prompt_ids: Sequence[int], result, top_n: int):
        self.model = model
        self.prompt = list(prompt_ids)
        self.result = result  # the generation's live GenerationResult
        self.top_n = top_n
        self.done = 0  # generated tokens whose logprobs were taken

    def take(self, holding_turn: bool = False, final: bool = False) -> List[TokenLogprob]:
        toks = list(self.result.tokens)
        end = len(toks)
        if end and toks[-1] in self.model.stop_ids and (final or self.result.finish_reason == "stop"):
            end -= 1
        if end <= self.done:
            return []
        ctx = self.prompt + toks[:end]
        out = compute(self.model, ctx, len(self.prompt) + self.done, self.top_n, holding_turn)
        self.done = end
        return out
