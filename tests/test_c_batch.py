"""akunu_generate_batch (include/akunu/akunu.h): many requests through the
continuous-batching engine from C give each request the tokens the Python
API's Model.generate_batch gives it (greedy and seeded sampling), whatever
else runs beside it and however many wait for a sequence slot."""

import ctypes

import numpy as np
import pytest

import akunu
from tests.fixtures import libakunu
from tests.fixtures.libakunu import AKUNU_OK, ids, last_error


@pytest.fixture(scope="module")
def lib():
    try:
        return libakunu.load_library()
    except FileNotFoundError as e:
        pytest.fail(str(e))


def batch(lib, h, prompts, max_tokens, sampling=None, stop=()):
    n = len(prompts)
    arrays = [ids(p) for p in prompts]
    ptrs = (ctypes.POINTER(ctypes.c_int32) * max(n, 1))(*[ctypes.cast(a, ctypes.POINTER(ctypes.c_int32))
                                                         for a in arrays])
    lens = ids([len(p) for p in prompts])
    out = (ctypes.c_int32 * max(n * max_tokens, 1))()
    n_out = (ctypes.c_int32 * max(n, 1))()
    status = lib.akunu_generate_batch(h, ptrs, lens, n, max_tokens, ctypes.byref(sampling) if sampling else None,
                                      ids(list(stop)), len(stop), out, n_out)
    return status, [list(out[i * max_tokens: i * max_tokens + n_out[i]]) for i in range(n)]


def prompts(seed, n, vocab=300):
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(3, vocab, size=int(rng.integers(1, 40)))] for _ in range(n)]


@pytest.mark.parametrize("settings", [dict(), dict(temperature=0.8, top_k=40, seed=5)])
def test_batch_equals_the_python_batch(lib, small_model, settings):
    ps = prompts(1, 20, 300)  # more requests than the 16 sequence slots
    m = akunu.load(small_model, n_ctx=256)
    want = [r.tokens for r in m.generate_batch(ps, max_tokens=12, **settings)]
    stop = list(m.stop_ids)
    m.close()
    sampling = None
    if settings:
        sampling = lib.akunu_default_sampling()
        sampling.temperature, sampling.top_k, sampling.seed = 0.8, 40, 5
    h = libakunu.load_model(lib, small_model, n_ctx=256)
    try:
        status, got = batch(lib, h, ps, 12, sampling, stop)
        assert status == AKUNU_OK, last_error(lib)
        assert got == want
        # a request alone gets what it gets beside the others
        for i in (0, 7, 19):
            status, alone = batch(lib, h, [ps[i]], 12, sampling, stop)
            assert status == AKUNU_OK and alone == [want[i]], last_error(lib)
        # the single-stream context is untouched and still works
        assert lib.akunu_get_position(h) == 0
    finally:
        lib.akunu_free_model(h)


def test_batch_errors_are_clear(lib, small_model):
    h = libakunu.load_model(lib, small_model, n_ctx=64)
    try:
        status, _ = batch(lib, h, [[1, 2, 3], [4, 999999]], 4)
        assert status != AKUNU_OK and "outside the vocabulary" in last_error(lib)
        status, _ = batch(lib, h, [[1] * 60], 10)
        assert status != AKUNU_OK and "n_ctx" in last_error(lib)
        status, _ = batch(lib, h, [[]], 4)
        assert status != AKUNU_OK and "no prompt" in last_error(lib)
        assert lib.akunu_generate_batch(None, None, None, 0, 4, None, None, 0, None, None) != AKUNU_OK
        status, got = batch(lib, h, [], 4)
        assert status == AKUNU_OK and got == []
        status, got = batch(lib, h, [[1, 2, 3]], 4)  # still serves after the errors
        assert status == AKUNU_OK and len(got[0]) >= 1
    finally:
        lib.akunu_free_model(h)
