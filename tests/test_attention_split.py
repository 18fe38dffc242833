"""The CPU's decode attention over a long cache: a single block of tokens
whose KV heads are too few to keep every thread busy spreads each row's key
chunks over the threads (flash-decoding, backend/cpu/kernels/attention.cpp
attention_split). The softmax is defined chunk by chunk on a fixed grid of
key positions, so the split rows must be

  (a) within the float64 reference's bound (tests/test_kv_types.py's);
  (b) the same bits on any number of threads (one thread takes the unsplit
      path);
  (c) the same bits as the same rows inside a prompt pass (the unsplit path
      over several blocks of tokens).

Outputs and cache rows past the pass are poisoned; inputs are fresh every run
(AKUNU_TEST_SEED repeats one)."""

import numpy as np
import pytest

from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.test_kv_types import KV_TYPES, attention_case, attention_ref, decode_rows, seed_msg

# heads, KV heads, head_dim, position of the first token, tokens, window
CASES = {
    # Gemma 3 270M's global layers: one KV head of 256, twelve chunks
    "gemma-global": (4, 1, 256, 3000, 1, 0),
    # its local layers: a 512-key window starting mid-chunk
    "gemma-window": (4, 1, 256, 2000, 1, 512),
    # GQA 8 at head_dim 64: two items of eight query heads
    "gqa8-hd64": (16, 2, 64, 5000, 1, 0),
    # three rows at once (speculative verification), their ranges ending apart
    "three-rows": (8, 1, 128, 1400, 3, 0),
    # the keys end one past a chunk: the last chunk holds one key
    "one-key-chunk": (4, 1, 128, 256, 1, 0),
    # a full block: 16 tokens x GQA 8 = 128 rows an item
    "sixteen-rows-gqa8": (32, 4, 128, 900, 16, 0),
    # head_dim 72: V rows weighted one row at a time (not in 16s)
    "hd72": (8, 4, 72, 700, 1, 0),
}
TYPES = [("f16", "f16"), ("q8_0", "q4_0")]
PROMPT_BEFORE = 21  # (c): the rows follow this many prompt tokens in one pass


def make_case(case, t_k, t_v):
    c = attention_case(case, t_k, t_v, cases=CASES, q_rows_before=PROMPT_BEFORE)
    return dict(c, pos0=c["past"], total=c["past"] + c["n"], max_ctx=c["kc"].shape[0], t_k=t_k, t_v=t_v)


def run(c, n_tokens, threads):
    """The last n_tokens rows of q, ending at the case's last position."""
    H, hd = c["H"], c["hd"]
    q = np.ascontiguousarray(c["q"][-n_tokens:])
    out = np.full((n_tokens, H * hd), np.nan, np.float32)
    params = kp.attention(H, c["KV"], hd, n_tokens, c["total"] - n_tokens, c["window"], H * hd, H * hd,
                          1 / np.sqrt(hd), c["max_ctx"], k_type=KV_TYPES[c["t_k"]], v_type=KV_TYPES[c["t_v"]])
    _testing.run_kernel("attention", [q, c["kc"], c["vc"], out], params, n_threads=threads)
    return out


@pytest.mark.parametrize("t_k,t_v", TYPES)
@pytest.mark.parametrize("case", CASES)
def test_split_decode_attention(case, t_k, t_v):
    c = make_case(case, t_k, t_v)
    msg = seed_msg(c["key"])
    if c["hd"] % 32 and t_k != "f16":  # a head of a block type's row must be whole blocks
        with pytest.raises(Exception, match="head_dim a multiple of 32"):
            run(c, c["n"], 2)
        return
    one = run(c, c["n"], 1)
    # (a) against float64 over the cache as the kernels read it
    kf = decode_rows(t_k, c["kc"][:c["total"]], c["kv_dim"], as_read=True)
    vf = decode_rows(t_v, c["vc"][:c["total"]], c["kv_dim"], as_read=True)
    ref, bound = attention_ref(c["q"][-c["n"]:], kf, vf, c["H"], c["KV"], c["hd"], c["pos0"], c["window"],
                               1 / np.sqrt(c["hd"]))
    err = np.abs(one - ref)
    assert (err <= bound).all(), f"max error {err.max()}, {(err > bound).sum()} past the bound: {msg}"
    # (b) split over 2..7 threads: the one-thread bits
    for threads in (2, 3, 4, 7):
        np.testing.assert_array_equal(run(c, c["n"], threads), one, err_msg=f"{threads} threads: {msg}")
    # (c) the same rows at the end of a prompt pass of two blocks
    prompt = run(c, PROMPT_BEFORE + c["n"], 2)
    np.testing.assert_array_equal(prompt[PROMPT_BEFORE:], one, err_msg=f"inside a prompt pass: {msg}")
