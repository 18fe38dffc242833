"""One loaded model called from many threads and asyncio tasks at once, as
loaded by default (overlapping generations batched together) and with
parallel=1 (every call waits for its turn in arrival order): each call gets
what it gets alone; a cancelled asyncio task frees the model for the callers
behind it. (Batching itself, on every architecture: test_batching.py.)"""

import asyncio
import threading

import pytest

import akunu
from akunu.turns import TurnLock

TIMEOUT = 120  # seconds any one wait may take before the test fails (never a sleep)


@pytest.fixture(scope="module", params=[None, 1], ids=["default", "parallel=1"])
def model(small_model, request):
    m = akunu.load(small_model, n_ctx=512, parallel=request.param)
    yield m
    m.close()


@pytest.fixture(scope="module")
def turns_model(small_model):
    m = akunu.load(small_model, n_ctx=512, parallel=1)
    yield m
    m.close()


def prompts(model, n):
    vocab = model.config["vocab_size"]
    return [[(7 * i + 3 * k + 5) % vocab for k in range(6 + i)] for i in range(n)]


def alone(model, ps, max_tokens):
    return [model.generate(p, max_tokens=max_tokens).tokens for p in ps]


def test_threads_take_turns_and_get_what_they_get_alone(model):
    ps = prompts(model, 4)
    want = alone(model, ps, 12)
    got, errors = [None] * len(ps), []

    def work(i):
        try:
            got[i] = model.generate(ps[i], max_tokens=12).tokens
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(ps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a caller never got its turn"
    assert not errors, errors
    assert got == want


def test_threads_mixing_streams_logits_and_generate(model):
    ps = prompts(model, 3)
    want_tokens = alone(model, ps, 8)
    want_logits = model.logits(ps[0])
    out, errors = {}, []

    def streamer():
        s = model.generate(ps[1], max_tokens=8, stream=True)
        "".join(s)
        out["stream"] = s.result.tokens

    def work(name, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            errors.append(f"{name}: {e!r}")

    jobs = {"stream": streamer,
            "logits": lambda: out.__setitem__("logits", model.logits(ps[0])),
            "generate": lambda: out.__setitem__("generate", model.generate(ps[2], max_tokens=8).tokens)}
    threads = [threading.Thread(target=work, args=(k, f)) for k, f in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive()
    assert not errors, errors
    assert out["stream"] == want_tokens[1] and out["generate"] == want_tokens[2]
    assert (out["logits"] == want_logits).all()


def test_a_thread_with_an_open_stream_gets_an_error_not_a_deadlock(turns_model):
    model = turns_model
    p = prompts(model, 1)[0]
    s = model.generate(p, max_tokens=8, stream=True)
    next(s)
    with pytest.raises(akunu.AkunuError, match="already has a generation open"):
        model.generate(p, max_tokens=2)
    s.close()
    assert model.generate(p, max_tokens=2).tokens  # the turn was given back


def test_a_thread_with_an_open_stream_may_start_another_generation(small_model):
    """By default the second generation joins a batch (the open stream hands over to it
    when read on); both get what they get alone."""
    model = akunu.load(small_model, n_ctx=512)
    try:
        p, q = prompts(model, 2)
        want = alone(model, [p, q], 24)
        s = model.generate(p, max_tokens=24, stream=True)
        first = next(s)
        assert model.generate(q, max_tokens=24).tokens == want[1]
        assert first + "".join(s) == s.result.text
        assert s.result.tokens == want[0]
    finally:
        model.close()


def test_turns_are_served_in_arrival_order():
    lock = TurnLock()
    lock.acquire()
    order, threads = [], []

    def waiter(i):
        lock.acquire()
        order.append(i)
        lock.release()

    for i in range(5):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        for _ in range(10000):  # until this thread holds its ticket (a condition, not a sleep)
            with lock._cond:
                if lock._next_ticket == i + 2:
                    break
        else:
            pytest.fail("a waiter never queued")
    lock.release()
    for t in threads:
        t.join(TIMEOUT)
    assert order == list(range(5))


def test_asyncio_tasks_share_the_model(model):
    ps = prompts(model, 3)
    want = alone(model, ps, 10)

    async def main():
        results = await asyncio.wait_for(
            asyncio.gather(*(model.agenerate(p, max_tokens=10) for p in ps)), TIMEOUT)
        pieces = []
        async for piece in model.astream(ps[0], max_tokens=10):
            pieces.append(piece)
        # a stream left early gives its turn back once closed
        early = model.astream(ps[1], max_tokens=400)
        async for _ in early:
            break
        await early.aclose()
        again = await asyncio.wait_for(model.agenerate(ps[2], max_tokens=10), TIMEOUT)
        return [r.tokens for r in results] + [again.tokens], "".join(pieces)

    tokens, text = asyncio.run(main())
    assert tokens == want + [want[2]]
    assert text == model.generate(ps[0], max_tokens=10).text


def test_async_completion_shapes(model):
    p = prompts(model, 1)[0]

    async def main():
        full = await model.acreate_completion(p, max_tokens=6, temperature=0.0)
        chunks = [c async for c in await model.acreate_completion(p, max_tokens=6, temperature=0.0, stream=True)]
        return full, chunks

    full, chunks = asyncio.run(main())
    assert full["object"] == "text_completion"
    assert "".join(c["choices"][0]["text"] for c in chunks) == full["choices"][0]["text"]
    with pytest.raises(akunu.AkunuError, match="astream"):
        asyncio.run(model.agenerate(p, stream=True))


async def until(condition):
    while not condition():
        await asyncio.sleep(0.001)


def test_cancelled_tasks_free_the_model(model):
    ps = prompts(model, 2)
    want = alone(model, ps[1:], 6)[0]

    async def main():
        # a long streamed generation, cancelled after two pieces
        started = asyncio.Event()

        async def reader():
            n = 0
            async for _ in model.astream(ps[0], max_tokens=400):
                n += 1
                if n == 2:
                    started.set()

        task = asyncio.create_task(reader())
        await asyncio.wait_for(started.wait(), TIMEOUT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(until(lambda: model._turns._owner is None), TIMEOUT)  # the turn comes back
        stopped_stream = model._core().n_past
        first = await asyncio.wait_for(model.agenerate(ps[1], max_tokens=6), TIMEOUT)

        # a long generation that is not streamed, cancelled while it runs
        long = asyncio.create_task(model.agenerate(ps[0], max_tokens=400))
        await asyncio.wait_for(until(lambda: model._turns._owner is not None), TIMEOUT)  # it runs
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
        await asyncio.wait_for(until(lambda: model._turns._owner is None), TIMEOUT)
        stopped_call = model._core().n_past
        second = await asyncio.wait_for(model.agenerate(ps[1], max_tokens=6), TIMEOUT)
        return first.tokens, second.tokens, stopped_stream, stopped_call

    first, second, stopped_stream, stopped_call = asyncio.run(main())
    assert first == want and second == want
    # both long generations stopped early (alone they run all 400 tokens)
    full = len(ps[0]) + 399
    assert stopped_stream < full and stopped_call < full, (stopped_stream, stopped_call, full)


def test_whisper_callers_take_turns(whisper_tiny_en_dir, speech):
    """Threads and asyncio tasks transcribing with one Whisper model: each gets
    what it gets alone; a stream read halfway and closed gives its turn back;
    a thread with an open stream gets an error, not a deadlock."""
    asr = akunu.load(whisper_tiny_en_dir)
    names = ["fox", "weather", "kitchen", "numbers"]
    want = {n: asr.transcribe(speech[n][0], language="en", temperature=0.0).text for n in names}
    got, errors = {}, []

    def work(n):
        try:
            got[n] = asr.transcribe(speech[n][0], language="en", temperature=0.0).text
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a transcription never got its turn"
    assert not errors and got == want, errors

    async def main():
        results = await asyncio.wait_for(asyncio.gather(
            *(asr.atranscribe(speech[n][0], language="en", temperature=0.0) for n in names[:2])), TIMEOUT)
        return [r.text for r in results]

    assert asyncio.run(main()) == [want[n] for n in names[:2]]
    stream = asr.transcribe_stream(speech["long"][0], language="en", temperature=0.0)
    next(stream)
    with pytest.raises(akunu.AkunuError, match="already has a generation open"):
        asr.transcribe(speech["fox"][0], language="en", temperature=0.0)
    stream.close()
    assert asr.transcribe(speech["fox"][0], language="en", temperature=0.0).text == want["fox"]
