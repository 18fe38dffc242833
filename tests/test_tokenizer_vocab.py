"""Tokenizers against llama.cpp's own vocabulary test cases (ggml-vocab-*.gguf
with .inp/.out, from the llama-cpp-python sdist)."""

import os

import pytest

from akunu import _core
from akunu.tokenizer import GGUFTokenizer
from tests.fixtures.vocab_cases import WANTED, fetch

SEPARATOR = "\n__ggml_vocab_test__\n"


@pytest.fixture(scope="module")
def vocab_dir():
    try:
        return fetch()
    except Exception as e:  # no network: say so instead of failing obscurely
        pytest.skip(f"cannot fetch llama.cpp vocab cases (offline?): {e}")


@pytest.mark.parametrize("name", WANTED)
def test_vocab_cases(vocab_dir, name):
    path = os.path.join(vocab_dir, f"ggml-vocab-{name}.gguf")
    tok = GGUFTokenizer(_core.read_gguf(path)["metadata"])
    with open(path + ".inp", encoding="utf-8") as f:
        inputs = f.read().split(SEPARATOR)
    with open(path + ".out", encoding="utf-8") as f:
        outputs = f.read().split("\n")
    assert len(inputs) >= 40
    failures = []
    for text, expected in zip(inputs, outputs):
        want = [int(x) for x in expected.split()]
        got = tok.encode(text, add_bos=False)
        if got != want:
            failures.append((text, got, want))
    assert not failures, f"{len(failures)} cases differ, first: {failures[0]!r}"
    # the batch call (the texts spread over the cores) gives each text's encode()
    assert tok.encode_batch(inputs, add_bos=False) == [tok.encode(t, add_bos=False) for t in inputs]
    assert tok.encode_batch(inputs[:8]) == [tok.encode(t) for t in inputs[:8]]


def test_token_bytes_of_an_id_past_the_vocabulary_is_empty():
    """A model may pad its output head past the tokenizer's vocabulary; a
    sampled padding id decodes to no text instead of an IndexError."""
    from akunu.tokenizer import TokenizerBase
    t = TokenizerBase()
    t.kind, t.tokens, t.token_types = "llama", ["a", "\u2581b"], [1, 1]
    assert t.token_bytes(1) == b" b"
    assert t.token_bytes(2) == b"" and t.token_bytes(10**6) == b"" and t.token_bytes(-1) == b""


@pytest.mark.parametrize("name", WANTED[:3])
def test_saved_tokenizer_json_loads_in_transformers(vocab_dir, name, tmp_path):
    """save_tokenizer_json: a folder transformers' AutoTokenizer loads and that
    encodes the vocabulary's cases as the GGUF tokenizer does (load generators
    build their prompts through it)."""
    transformers = pytest.importorskip("transformers")
    path = os.path.join(vocab_dir, f"ggml-vocab-{name}.gguf")
    tok = GGUFTokenizer(_core.read_gguf(path)["metadata"])
    tok.save_tokenizer_json(str(tmp_path))
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    with open(path + ".inp", encoding="utf-8") as f:
        inputs = f.read().split(SEPARATOR)[:30]
    assert [hf.encode(t, add_special_tokens=False) for t in inputs] == [tok.encode(t, add_bos=False) for t in inputs]
