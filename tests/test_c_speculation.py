"""akunu_set_speculation (include/akunu/akunu.h): greedy generation through
the C API with n-gram drafts verified in batched passes gives the tokens of
plain greedy decoding and of the Python API (speculative or not), through
akunu_generate_greedy and the streaming callback (whose text pieces join to
the Python API's text); a callback stop leaves the context where it says."""

import ctypes

import pytest

import akunu
from tests.fixtures import libakunu
from tests.fixtures.libakunu import AKUNU_OK, GenerationStats, TOKEN_CALLBACK, ids, last_error

REPEAT = [5, 6, 7, 8, 9, 10, 11, 12] * 6


@pytest.fixture(scope="module")
def lib():
    try:
        return libakunu.load_library()
    except FileNotFoundError as e:
        pytest.fail(str(e))


def greedy(lib, h, prompt, n, stop=()):
    out, n_out = (ctypes.c_int32 * n)(), ctypes.c_int32()
    lib.akunu_reset(h)
    status = lib.akunu_generate_greedy(h, ids(prompt), len(prompt), n, ids(list(stop)), len(stop), out,
                                       ctypes.byref(n_out))
    assert status == AKUNU_OK, last_error(lib)
    return list(out[: n_out.value])


def streamed(lib, h, prompt, n, stop_after=None):
    got, texts = [], []

    @TOKEN_CALLBACK
    def on_token(tok, text, _user):
        got.append(tok)
        texts.append(None if text is None else text)
        return stop_after is None or len(got) < stop_after

    stats = GenerationStats()
    status = lib.akunu_generate_stream(h, ids(prompt), len(prompt), n, None, None, 0, on_token, None,
                                       ctypes.byref(stats))
    assert status == AKUNU_OK, last_error(lib)
    assert stats.generated_tokens == len(got)
    return got, texts


@pytest.mark.parametrize("prompt", [REPEAT, [3, 17, 250, 41]])
def test_speculation_gives_the_greedy_tokens(lib, small_model, prompt):
    m = akunu.load(small_model, n_ctx=512)
    stop = list(m.stop_ids)  # the Python API ends at the model's end-of-generation ids
    h = libakunu.load_model(lib, small_model)
    try:
        plain = greedy(lib, h, prompt, 48, stop)
        lib.akunu_set_speculation(h, True)
        spec = greedy(lib, h, prompt, 48, stop)
        assert spec == plain
        drafted, accepted = ctypes.c_int32(), ctypes.c_int32()
        assert lib.akunu_speculation_stats(h, ctypes.byref(drafted), ctypes.byref(accepted)) == AKUNU_OK
        assert 0 <= accepted.value <= drafted.value
        if prompt is REPEAT:  # a repeating context drafts, and some drafts hold
            assert drafted.value > 0
        got, _ = streamed(lib, h, prompt, 48)
        assert got[: len(plain)] == plain
        assert greedy(lib, h, prompt, 48) == got
        assert lib.akunu_get_position(h) == len(prompt) + len(got) - 1  # the last token is not fed
    finally:
        lib.akunu_free_model(h)
    assert m.generate(prompt, max_tokens=48).tokens == plain
    m.reset()
    assert m.generate(prompt, max_tokens=48, speculative=True).tokens == plain


def test_a_stop_id_and_a_callback_stop_end_speculation_where_greedy_ends(lib, small_model):
    h = libakunu.load_model(lib, small_model)
    try:
        plain = greedy(lib, h, REPEAT, 40)
        lib.akunu_set_speculation(h, True)
        stop = plain[17]
        first = plain.index(stop)
        assert greedy(lib, h, REPEAT, 40, stop=[stop]) == plain[: first + 1]
        lib.akunu_reset(h)
        got, _ = streamed(lib, h, REPEAT, 40, stop_after=23)
        assert got == plain[:23]
        # the context ends just before the token the callback stopped at
        assert lib.akunu_get_position(h) == len(REPEAT) + 22
    finally:
        lib.akunu_free_model(h)


def test_speculation_on_a_bad_handle_is_an_error(lib):
    lib.akunu_set_speculation(None, True)
    assert "akunu_set_speculation" in last_error(lib)
    lib.akunu_set_speculation(ctypes.c_void_p(0x1234), True)
    assert "akunu_set_speculation" in last_error(lib)
    n = ctypes.c_int32()
    assert lib.akunu_speculation_stats(None, ctypes.byref(n), ctypes.byref(n)) != AKUNU_OK


def test_real_model_speculation_and_token_texts(lib, gemma_path, gemma):
    prompt = gemma.tokenize("one two three four five six seven eight one two three four five six seven eight one",
                            add_bos=True)
    want = gemma.generate(prompt, max_tokens=40)
    h = libakunu.load_model(lib, gemma_path, n_ctx=1024)
    try:
        lib.akunu_set_speculation(h, True)
        got, texts = streamed(lib, h, prompt, 40)
        drafted, accepted = ctypes.c_int32(), ctypes.c_int32()
        assert lib.akunu_speculation_stats(h, ctypes.byref(drafted), ctypes.byref(accepted)) == AKUNU_OK
        assert accepted.value > 0, (drafted.value, accepted.value)  # the counting text repeats
    finally:
        lib.akunu_free_model(h)
    assert got == want.tokens
    assert all(t is not None for t in texts)
    assert b"".join(texts).decode("utf-8") == gemma.detokenize(want.tokens)
