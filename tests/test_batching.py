"""Continuous batching (akunu/batching.py over the C++ BatchEngine): many
requests at once, each getting exactly the tokens it gets alone on the
single-stream path, whatever else is in the batch and in whatever order the
requests arrive; shared prefixes computed once; a tiny KV budget preempting
and resuming without changing a token; cancelled requests freeing their
blocks. AKUNU_BATCH_DEVICE=cuda runs the same checks on a GPU."""

import asyncio
import os
import threading
import time

import numpy as np
import pytest

import akunu
from akunu.batching import QueueFullError
from tests.fixtures import random_gguf

DEVICE = os.environ.get("AKUNU_BATCH_DEVICE", "cpu")
TIMEOUT = 300  # seconds any one wait may take before the test fails
SEED = int(os.environ["AKUNU_TEST_SEED"])
DTYPES = {"llama": "Q4_K_M-blocks", "qwen2": "Q8_0", "qwen3": "F16", "gemma": "Q4_0", "gemma3": "Q8_0"}

SETTINGS = [
    dict(),
    dict(temperature=0.8, seed=11),
    dict(temperature=1.0, top_k=20, seed=3, repeat_penalty=1.3, penalty_last_n=32),
    dict(temperature=0.6, top_p=0.9, seed=9, logit_bias={5: 4.0, 6: float("-inf")}),
    dict(presence_penalty=0.7, frequency_penalty=0.2),
    dict(temperature=0.9, min_p=0.05, seed=1),
    dict(stop=["a"]),
    dict(temperature=1.2, seed=77, top_k=5),
]


def load(path, **kw):
    try:
        return akunu.load(path, device=DEVICE, **kw)
    except akunu.AkunuError as e:
        if DEVICE != "cpu" and "not available" in str(e):
            pytest.skip(f"device {DEVICE} unavailable: {e}")
        raise


@pytest.fixture(scope="module", params=random_gguf.ARCHS)
def arch_model(request, tmp_path_factory):
    arch = request.param
    shape = random_gguf.default_shape(arch)
    shape.ctx = 4096
    path = str(tmp_path_factory.mktemp("b") / f"{arch}.gguf")
    random_gguf.write_model(path, arch, DTYPES[arch], seed=5, shape=shape)
    return path


def mixed_requests(vocab, n, rng, max_len=2000):
    """n prompts of mixed lengths (1 to max_len tokens) with the settings above in turn."""
    lens = [1, max_len] + list(rng.integers(2, 300, size=n - 2))
    return [([int(t) for t in rng.integers(3, vocab, size=int(k))], SETTINGS[i % len(SETTINGS)])
            for i, k in enumerate(lens)]


def alone(path, reqs, max_tokens, batch_engine=DEVICE != "cpu", **load_kw):
    """Each request by itself: on the CPU on the single-stream path (whose kernels the batch's
    equal bit for bit there); on a GPU, whose single-stream decode runs fused kernels of other
    rounding, through a batched model serving one request at a time."""
    m = load(path, parallel=1, **load_kw)
    if batch_engine:
        m.enable_batching(1)
    try:
        out = []
        for p, kw in reqs:
            m.reset()
            out.append(m.generate(p, max_tokens=max_tokens, **kw).tokens)
        return out
    finally:
        m.close()


def expected(path, reqs, max_tokens, parallel, **load_kw):
    """(tokens, whole) per request: what it gets alone. With parallel=None on a GPU a
    generation may start on the single-stream path and go on in the batch; where the two
    paths alone agree that is its result, where they part (a near-tie between kernels of
    other rounding) only their common start is fixed (whole=False)."""
    want = alone(path, reqs, max_tokens, **load_kw)
    if parallel is not None or DEVICE == "cpu":
        return [(w, True) for w in want]
    single = alone(path, reqs, max_tokens, batch_engine=False, **load_kw)
    out = []
    for a, b in zip(want, single):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        out.append((a, True) if a == b else (a[:n], False))
    return out


def matches(got, want) -> bool:
    tokens, whole = want
    return got == tokens if whole else got[:len(tokens)] == tokens


def together(m, reqs, order, max_tokens):
    """The requests submitted at once in `order`, read by one thread each."""
    got, errors = [None] * len(reqs), []
    streams = {i: m.generate(reqs[i][0], max_tokens=max_tokens, stream=True, **reqs[i][1]) for i in order}

    def read(i):
        try:
            for _ in streams[i]:
                pass
            got[i] = streams[i].result.tokens
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f"request {i}: {e!r}")

    threads = [threading.Thread(target=read, args=(i,)) for i in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a batched request never finished"
    assert not errors, errors
    return got


def test_batch_invariance_every_architecture(arch_model):
    rng = np.random.default_rng([SEED, 1])
    m = load(arch_model, n_ctx=2100, parallel=8, kv_tokens=8 * 2100)
    try:
        reqs = mixed_requests(m.config["vocab_size"], 32, rng)
        want = alone(arch_model, reqs, 12, n_ctx=2100)
        for order in (list(range(32)), list(rng.permutation(32))):
            got = together(m, reqs, order, 12)
            for i in range(32):
                assert got[i] == want[i], (f"request {i} (prompt {len(reqs[i][0])} tokens, {reqs[i][1]}) differs "
                                           f"in a batch (AKUNU_TEST_SEED={SEED})")
        st = m.batching.stats()
        assert st["running"] == 0 and st["waiting"] == 0 and st["blocks_used"] == 0
    finally:
        m.close()


def test_real_gemma3_batched_equals_alone(gemma_path):
    rng = np.random.default_rng([SEED, 2])
    m = load(gemma_path, n_ctx=1024, parallel=6)
    try:
        words = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex".split()
        reqs = []
        for i in range(12):
            text = " ".join(rng.choice(words, size=int(rng.integers(3, 250))))
            reqs.append((m.tokenize(text), SETTINGS[i % len(SETTINGS)]))
        want = alone(gemma_path, reqs, 16, n_ctx=1024)
        got = together(m, reqs, list(rng.permutation(len(reqs))), 16)
        assert got == want
    finally:
        m.close()


@pytest.fixture(scope="module")
def llama_path(tmp_path_factory):
    shape = random_gguf.default_shape("llama")
    shape.ctx = 4096
    path = str(tmp_path_factory.mktemp("l") / "llama.gguf")
    random_gguf.write_model(path, "llama", "Q8_0", seed=9, shape=shape)
    return path


def test_shared_prefix_is_computed_once(llama_path):
    m = load(llama_path, n_ctx=1024, parallel=4)
    try:
        vocab = m.config["vocab_size"]
        system = [(13 * k + 7) % vocab for k in range(200)]
        a = system + [11, 12, 13]
        b = system + [21, 22, 23, 24, 25]
        bs = m.batching.engine.block_size
        ra = m.generate(a, max_tokens=6)
        before = m.batching.stats()
        rb = m.generate(b, max_tokens=6)
        after = m.batching.stats()
        shared = (len(system) // bs) * bs
        assert rb.stats.cached_tokens == shared
        # the second prompt computes only what follows the shared blocks (+ its decode rows)
        assert after["computed_tokens"] - before["computed_tokens"] == len(b) - shared + 5
        assert after["prefix_hit_tokens"] - before["prefix_hit_tokens"] == shared
        want = alone(llama_path, [(a, {}), (b, {})], 6, n_ctx=1024)
        assert [ra.tokens, rb.tokens] == want
    finally:
        m.close()


def test_tiny_kv_budget_preempts_and_every_stream_completes(llama_path):
    rng = np.random.default_rng([SEED, 3])
    vocab = 512
    reqs = [([int(t) for t in rng.integers(3, vocab, size=int(rng.integers(20, 60)))], SETTINGS[i % len(SETTINGS)])
            for i in range(24)]
    want = alone(llama_path, reqs, 40, n_ctx=512)
    # 12 blocks of 16 tokens: two or three of the requests at a time, of eight allowed
    m = load(llama_path, n_ctx=512, parallel=8, kv_tokens=192)
    try:
        got = together(m, reqs, list(range(len(reqs))), 40)
        assert got == want
        st = m.batching.stats()
        assert st["preemptions"] > 0, "the budget was meant to force preemption"
        assert st["blocks_used"] == 0 and st["running"] == 0 and st["waiting"] == 0
        assert st["blocks_total"] == 12
    finally:
        m.close()


def test_request_larger_than_the_budget_fails_clearly(llama_path):
    m = load(llama_path, n_ctx=512, parallel=2, kv_tokens=64)
    try:
        with pytest.raises(akunu.AkunuError, match="KV cache"):
            m.generate(list(range(3, 200)), max_tokens=4)
        # the model still serves requests that fit
        assert len(m.generate([5, 6, 7], max_tokens=4).tokens) == 4
        assert m.batching.stats()["blocks_used"] == 0
    finally:
        m.close()


def test_closing_a_stream_frees_its_blocks(llama_path):
    m = load(llama_path, n_ctx=512, parallel=2)
    try:
        s = m.generate([5, 6, 7, 8], max_tokens=400, stream=True)
        next(s)
        s.close()
        m.generate([9, 10], max_tokens=2)  # the scheduler has dropped the closed one before serving this
        st = m.batching.stats()
        assert st["blocks_used"] == 0 and st["sequences"] == 0
        dropped = m.generate([5, 6, 7, 8], max_tokens=400, stream=True)
        next(dropped)
        del dropped  # garbage-collected: cancelled as closed
        m.generate([9, 10], max_tokens=2)
        assert m.batching.stats()["blocks_used"] == 0
    finally:
        m.close()


def test_max_queue_refuses_clearly(llama_path):
    m = load(llama_path, n_ctx=4096)
    m.enable_batching(1, max_queue=1)  # one running, one waiting
    try:
        long = m.generate([5, 6, 7], max_tokens=4000, stream=True)
        next(long)  # running: the one slot is taken
        waiting = m.generate([8, 9], max_tokens=2, stream=True)  # waits (queue of one)
        with pytest.raises(QueueFullError, match="max_queue"):
            m.generate([10, 11], max_tokens=2)
        long.close()
        "".join(waiting)  # served once the slot is free
        assert 1 <= len(waiting.result.tokens) <= 2
    finally:
        m.close()


@pytest.mark.parametrize("parallel", [8, None], ids=["parallel=8", "default"])
def test_threads_and_asyncio_tasks_share_a_batched_model(llama_path, parallel):
    """parallel=None (the default): the first caller starts alone on the single-stream path and
    the others, overlapping it, batch; it joins them between two decode chunks."""
    rng = np.random.default_rng([SEED, 4])
    reqs = [([int(t) for t in rng.integers(3, 512, size=int(rng.integers(1, 80)))], SETTINGS[i % len(SETTINGS)])
            for i in range(32)]
    want = expected(llama_path, reqs, 10, parallel, n_ctx=512)
    m = load(llama_path, n_ctx=512, parallel=parallel)
    try:
        got, errors = [None] * 32, []

        def thread_call(i):
            try:
                if i % 4 == 3:  # a stream read halfway, then dropped
                    s = m.generate(reqs[i][0], max_tokens=10, stream=True, **reqs[i][1])
                    next(s, None)
                    s.close()
                    got[i] = "dropped"
                else:
                    got[i] = m.generate(reqs[i][0], max_tokens=10, **reqs[i][1]).tokens
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(f"thread {i}: {e!r}")

        async def tasks():
            async def one(i):
                if i % 4 == 1:
                    pieces = [p async for p in m.astream(reqs[i][0], max_tokens=10, **reqs[i][1])]
                    assert pieces is not None
                    return (await m.agenerate(reqs[i][0], max_tokens=10, **reqs[i][1])).tokens
                return (await m.agenerate(reqs[i][0], max_tokens=10, **reqs[i][1])).tokens

            return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(16, 32))), TIMEOUT)

        threads = [threading.Thread(target=thread_call, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        got[16:] = asyncio.run(tasks())
        for t in threads:
            t.join(TIMEOUT)
            assert not t.is_alive()
        assert not errors, errors
        for i in range(32):
            if got[i] != "dropped":
                assert matches(got[i], want[i]), f"request {i} ({reqs[i][1]})"
        assert m.batching is not None, "the overlapping calls were never batched"
        m.generate_batch([[1, 2]], max_tokens=1)  # through the batch, which drops closed streams first
        assert m.batching.stats()["blocks_used"] == 0
    finally:
        m.close()


def same_logits(got, want):
    """Bit for bit on the CPU, whose single-stream kernels are the batch's; on a GPU the
    taken-over rows come from single-stream kernels of other rounding."""
    if DEVICE == "cpu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-2 * max(1.0, float(np.abs(want).max())))


def engine_logits(e, seq, tokens):
    """Feeds `tokens` to batch sequence `seq` a pass at a time; the last one's logits."""
    n = e.max_pass_tokens
    for i in range(0, len(tokens), n):
        e.step([(seq, tokens[i:i + n], i + n >= len(tokens), False)])
    return e.last_logits(1)[0]


def test_a_sequence_takes_over_the_single_stream_rows(llama_path):
    """adopt_into_batch copies the single-stream cache's rows of a context into a batch
    sequence's blocks: what it computes next equals a sequence that computed them all."""
    rng = np.random.default_rng([SEED, 6])
    p = [int(t) for t in rng.integers(3, 512, size=70)]
    m = load(llama_path, n_ctx=512)
    ref = load(llama_path, n_ctx=512, parallel=2)
    try:
        ctx = p + m.generate(p, max_tokens=25).tokens  # single-stream: the cache holds ctx[:-1]
        e = m._overlap_batch().engine  # its scheduler is idle: the engine is the test's
        seq, cached = e.open(ctx)
        assert cached == 0
        assert m._core().adopt_into_batch(seq, ctx, len(m._cached)) == len(ctx) - 1 == e.length(seq)
        got = engine_logits(e, seq, ctx[-1:])
        r = ref.batching.engine
        rseq, _ = r.open(ctx)
        same_logits(got, engine_logits(r, rseq, ctx))
        # its full blocks are published: a new sequence of the same context shares them
        bs = e.block_size
        assert e.open(ctx)[1] == (len(ctx) - 1) // bs * bs
        with pytest.raises(akunu.AkunuError, match="vocabulary"):
            m._core().adopt_into_batch(seq, [10 ** 6], 1)
    finally:
        m.close()
        ref.close()


def test_wrapped_sliding_window_rings_are_not_taken_over(tmp_path):
    """Gemma 3's local layers keep a ring of window + slack rows on the CPU's single-stream
    path: before it wraps the rows are positions and are taken over; after, nothing is."""
    shape = random_gguf.default_shape("gemma3")
    path = str(tmp_path / "gemma3.gguf")
    random_gguf.write_model(path, "gemma3", "Q8_0", seed=5, shape=shape)
    m = load(path, n_ctx=1024)
    ref = load(path, n_ctx=1024, parallel=2)
    try:
        e = m._overlap_batch().engine
        for length, taken in ((40, True), (600, False)):
            m.reset()
            p = [int(t) for t in np.random.default_rng([SEED, length]).integers(3, 256, size=length)]
            ctx = p + m.generate(p, max_tokens=4).tokens
            seq, _ = e.open(ctx)
            n = m._core().adopt_into_batch(seq, ctx, len(m._cached))
            # (the CPU keeps the rings; a backend that keeps every row may hand them all over)
            assert n == len(ctx) - 1 if taken else n in ((0,) if DEVICE == "cpu" else (0, len(ctx) - 1))
            got = engine_logits(e, seq, ctx[n:])
            rseq, _ = ref.batching.engine.open(ctx)
            same_logits(got, engine_logits(ref.batching.engine, rseq, ctx))
            e.close(seq)
            ref.batching.engine.close(rseq)
    finally:
        m.close()
        ref.close()


def test_two_at_once_take_turns_where_three_are_needed_to_batch(llama_path):
    """With a minimum overlap of three (a GPU's), a second generation waits for the turn;
    a third starts the batch, which the first joins; every one gets what it gets alone."""
    rng = np.random.default_rng([SEED, 7])
    reqs = [([int(t) for t in rng.integers(3, 512, size=30)], SETTINGS[i]) for i in (0, 1, 2)]
    want = expected(llama_path, reqs, 150, None, n_ctx=512)
    m = load(llama_path, n_ctx=512)
    m._min_overlap = 3
    try:
        first = m.generate(reqs[0][0], max_tokens=150, stream=True, **reqs[0][1])
        text = next(first)
        second = {}
        t = threading.Thread(target=lambda: second.update(r=m.generate(reqs[1][0], max_tokens=150, **reqs[1][1])))
        t.start()
        deadline = time.monotonic() + TIMEOUT
        while m._turns.callers() != 2 and time.monotonic() < deadline:
            pass  # until the second waits for the turn (a condition, not a sleep)
        assert m._turns.callers() == 2 and m.batching is None
        third = m.generate(reqs[2][0], max_tokens=150, stream=True, **reqs[2][1])
        assert m.batching is not None
        text += "".join(first)
        "".join(third)
        t.join(TIMEOUT)
        assert not t.is_alive()
        assert text == first.result.text and first._batched is not None
        for i, tokens in enumerate([first.result.tokens, second["r"].tokens, third.result.tokens]):
            assert matches(tokens, want[i]), f"request {i}"
    finally:
        m.close()


def test_a_lone_generation_hands_over_to_the_batch(llama_path):
    """By default a generation alone runs on the single-stream path; when another arrives
    it goes on in the batch from the tokens it has (prompt + drawn, re-read through the
    paged cache), as the same stream; neither's tokens change."""
    rng = np.random.default_rng([SEED, 5])
    reqs = [([int(t) for t in rng.integers(3, 512, size=40)], SETTINGS[i]) for i in (0, 1, 2)]
    want = expected(llama_path, reqs, 200, None, n_ctx=512)
    m = load(llama_path, n_ctx=512)
    try:
        first = m.generate(reqs[0][0], max_tokens=200, stream=True, **reqs[0][1])
        text = next(first)
        assert m.batching is None  # alone so far
        others = [m.generate(p, max_tokens=200, stream=True, **kw) for p, kw in reqs[1:]]
        text += "".join(first)  # joins the others at its next chunk
        assert first._batched is not None, "the first generation never joined the batch"
        assert text == first.result.text
        got = [first.result.tokens] + [(("".join(o)), o.result.tokens)[1] for o in others]
        for i in range(3):
            assert matches(got[i], want[i]), f"request {i} ({reqs[i][1]})"
        assert first.result.stats.generated_tokens == len(first.result.tokens)
        # alone again: back on the single-stream path (from an empty cache, as alone() runs it)
        m.reset()
        again = m.generate(reqs[0][0], max_tokens=200, stream=True, **reqs[0][1])
        "".join(again)
        assert again._batched is None and matches(again.result.tokens, want[0])
    finally:
        m.close()


@pytest.mark.parametrize("parallel", [None, 1], ids=["default", "parallel=1"])
def test_generate_batch_returns_each_prompts_solo_result(llama_path, parallel):
    m = load(llama_path, n_ctx=512, parallel=parallel)
    try:
        ps = [[3 + i, 4 + i, 5 + i] * (i + 1) for i in range(6)]
        want = alone(llama_path, [(p, {}) for p in ps], 8, n_ctx=512)
        got = m.generate_batch(ps, max_tokens=8)
        assert [r.tokens for r in got] == want
        assert m.batching is not None and m.batching.parallel == (16 if parallel is None else 6)
    finally:
        m.close()


def test_engine_refuses_bad_steps(llama_path):
    m = load(llama_path, n_ctx=64, parallel=2)
    try:
        e = m.batching.engine
        with pytest.raises(akunu.AkunuError, match="no open batch sequence"):
            e.step([(1, [3], True, False)])
        with pytest.raises(akunu.AkunuError, match="outside the vocabulary"):
            e.open([3, 100000])
        with pytest.raises(akunu.AkunuError, match="does not fit the context"):
            e.open(list(range(3, 70)))
        with pytest.raises(akunu.AkunuError, match="parallel"):
            akunu.load(llama_path, device=DEVICE, n_ctx=64, parallel=0)
        with pytest.raises(akunu.AkunuError, match="kv_tokens"):
            akunu.load(llama_path, device=DEVICE, n_ctx=64, parallel=2, kv_tokens=-5)
    finally:
        m.close()
