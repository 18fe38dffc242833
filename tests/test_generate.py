"""Generation API: streaming, stats, stop tokens, UTF-8, C API."""

import ctypes
import glob
import os

import numpy as np
import pytest

import akunu
from tests.fixtures import random_gguf


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("g") / "qwen3.gguf")
    random_gguf.write_model(path, "qwen3", "F16", seed=5)
    return akunu.load(path, n_ctx=128)


def test_config(model):
    c = model.config
    assert c["architecture"] == "qwen3" and c["dim"] == 256 and c["n_layers"] == 2
    assert c["n_heads"] == 4 and c["n_kv_heads"] == 2 and c["vocab_size"] == 512 and c["n_ctx"] == 128
    assert model.memory_bytes > 0 and model.device == "cpu"


def test_generate_result_and_stats(model):
    res = model.generate("hello there", max_tokens=10)
    assert len(res.tokens) <= 10 and res.tokens
    s = res.stats
    assert s.prompt_tokens == len(model.tokenize("hello there")) and s.generated_tokens == len(res.tokens)
    assert s.prefill_tok_s > 0


def test_greedy_equals_argmax_of_logits(model):
    """Chain decode (argmax on the device) agrees with full-prefill logits."""
    prompt = model.tokenize("the rain in spain")
    res = model.generate(prompt, max_tokens=12)
    logits = model.logits(prompt + res.tokens[:-1])
    assert [int(r.argmax()) for r in logits[len(prompt) - 1 :]] == res.tokens


@pytest.mark.parametrize("n_batch", [1, 7, 100])
def test_prefill_pass_size_does_not_change_results(model, n_batch):
    """n_batch (prompt tokens per prefill pass; CPU default 64) splits a
    90-token prompt differently: same logits, same greedy tokens."""
    other = akunu.load(model.path, n_ctx=128, n_batch=n_batch)
    ids = np.random.default_rng(n_batch).integers(0, 512, 90).tolist()
    np.testing.assert_allclose(other.logits(ids), model.logits(ids), rtol=1e-5, atol=1e-5)
    assert other.generate(ids, max_tokens=8).tokens == model.generate(ids, max_tokens=8).tokens


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, 1 << 20])
def test_bad_n_batch_is_a_clear_error(model, bad):
    with pytest.raises(akunu.AkunuError, match="n_batch"):
        akunu.load(model.path, n_ctx=128, n_batch=bad)


def test_stream_joins_to_text(model):
    pieces = list(model.generate("hello", max_tokens=12, stream=True))
    res = model.generate("hello", max_tokens=12)
    assert "".join(pieces) == res.text


def test_stream_keeps_utf8_whole(model):
    """Byte tokens of a multi-byte character stream out as whole characters."""
    tok = model.tokenizer
    ids = [tok.tokens.index(f"<0x{b:02X}>") for b in "é✓".encode()]
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")()
    pieces = [dec.decode(tok.token_bytes(i)) for i in ids]
    assert "".join(pieces) == "é✓" and all(p in ("", "é", "✓") for p in pieces)


def test_stop_token_ends_generation(model):
    prompt = model.tokenize("hello")
    first = model.generate(prompt, max_tokens=6).tokens
    model.stop_ids = [first[2]]
    try:
        res = model.generate(prompt, max_tokens=6)
    finally:
        model.stop_ids = model._end_of_generation_ids()
    assert res.tokens == first[:3] and res.finish_reason == "stop"


def test_sampling_is_seeded(model):
    a = model.generate("hello", max_tokens=8, temperature=0.8, seed=42).tokens
    b = model.generate("hello", max_tokens=8, temperature=0.8, seed=42).tokens
    assert a == b


def test_detokenize_roundtrip(model):
    text = "the rain in spain"
    assert model.detokenize(model.tokenize(text, add_bos=False)) == text


def test_c_api(model):
    libs = glob.glob(os.path.join(os.path.dirname(akunu.__file__), "lib", "libakunu*.so*")) or glob.glob(
        os.path.join(os.path.dirname(os.path.realpath(akunu._core.__file__)), "libakunu.so"))
    if not libs:
        pytest.skip("libakunu shared library not found next to the package")
    lib = ctypes.CDLL(libs[0])
    lib.akunu_last_error.restype = ctypes.c_char_p
    handle = ctypes.c_void_p()

    class LoadParams(ctypes.Structure):
        _fields_ = [("device", ctypes.c_char_p), ("n_ctx", ctypes.c_int32), ("n_threads", ctypes.c_int32)]

    rc = lib.akunu_load_model(b"/nonexistent.gguf", ctypes.byref(LoadParams(b"cpu", 64, 0)), ctypes.byref(handle))
    assert rc != 0 and b"cannot open" in lib.akunu_last_error()
    rc = lib.akunu_load_model(model.path.encode(), ctypes.byref(LoadParams(b"cpu", 64, 0)), ctypes.byref(handle))
    assert rc == 0, lib.akunu_last_error()
    prompt = model.tokenize("hello")
    arr = (ctypes.c_int32 * len(prompt))(*prompt)
    out = (ctypes.c_int32 * 8)()
    n = ctypes.c_int32()
    rc = lib.akunu_generate_greedy(handle, arr, len(prompt), 8, None, 0, out, ctypes.byref(n))
    assert rc == 0 and list(out[: n.value]) == model.generate(prompt, max_tokens=8).tokens

    class Sampling(ctypes.Structure):
        _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float),
                    ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float),
                    ("presence_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                    ("penalty_window", ctypes.c_int32), ("seed", ctypes.c_uint64),
                    ("logit_bias_ids", ctypes.POINTER(ctypes.c_int32)),
                    ("logit_bias_values", ctypes.POINTER(ctypes.c_float)), ("n_logit_bias", ctypes.c_int32)]

    lib.akunu_default_sampling.restype = Sampling
    s = lib.akunu_default_sampling()
    assert (s.temperature, s.top_p, s.repeat_penalty, s.penalty_window) == (0.0, 1.0, 1.0, 64)
    s.temperature, s.top_k, s.top_p, s.seed = 0.8, 40, 0.9, 77
    lib.akunu_reset(handle)
    rc = lib.akunu_generate(handle, arr, len(prompt), 8, ctypes.byref(s), None, 0, out, ctypes.byref(n))
    assert rc == 0, lib.akunu_last_error()
    model.reset()
    assert list(out[: n.value]) == model.generate(prompt, max_tokens=8, temperature=0.8, top_k=40, top_p=0.9,
                                                  seed=77).tokens
    s.top_p = 1.5
    rc = lib.akunu_generate(handle, arr, len(prompt), 8, ctypes.byref(s), None, 0, out, ctypes.byref(n))
    assert rc != 0 and b"top_p" in lib.akunu_last_error()
    lib.akunu_free_model(handle)


def test_closed_model_is_a_clear_error(tmp_path):
    path = str(tmp_path / "c.gguf")
    random_gguf.write_model(path, "llama", "F16", seed=2, shape=random_gguf.Shape(n_layers=1, vocab=300))
    with akunu.load(path, n_ctx=32) as m:
        assert m.generate("hi", max_tokens=2).tokens
    with pytest.raises(akunu.AkunuError, match="closed"):
        m.generate("hi", max_tokens=2)


def test_one_model_from_two_threads_never_corrupts(model):
    """Concurrent use of one model either serializes or raises a clear error."""
    import threading

    prompt = model.tokenize("the rain in spain")
    want = model.generate(prompt, max_tokens=8).tokens
    results, errors = [], []

    def work():
        for _ in range(5):
            try:
                results.append(model._core().logits(prompt + want[:-1]))
            except akunu.AkunuError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results and all(e.startswith("this model is already generating") for e in errors)
    ref = results[0]
    for r in results:
        np.testing.assert_array_equal(r, ref)


def test_different_models_in_different_threads(tmp_path):
    """Two models generating at once in two threads give the same tokens as alone."""
    import threading

    paths = []
    for arch in ("llama", "qwen3"):
        p = str(tmp_path / f"{arch}.gguf")
        random_gguf.write_model(p, arch, "F16", seed=8)
        paths.append(p)
    models = [akunu.load(p, n_ctx=256) for p in paths]
    want = [m.generate("parallel worlds", max_tokens=48, temperature=0.7, seed=3).tokens for m in models]
    got = [[], []]

    def run(i):
        for _ in range(3):
            got[i].append(models[i].generate("parallel worlds", max_tokens=48, temperature=0.7, seed=3).tokens)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [[want[0]] * 3, [want[1]] * 3]
