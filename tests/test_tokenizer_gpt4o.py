"""The "gpt-4o" pre-tokenizer (OpenAI's o200k pattern, the tokenizer.ggml.pre of gpt-oss GGUF
files) in both tokenizers: the Python package's (Hugging Face `tokenizers`) and the C++ one of
the C API (src/text/tokenizer).

- llama.cpp's ids and pre-tokens, recorded in tests/golden/tokenizer-gpt-4o.json by
  python -m tools.make_tokenizer_golden, for llama.cpp's Llama 3 test vocabulary with
  tokenizer.ggml.pre = "gpt-4o" (rebuilt here from the cached ggml-vocab-llama-bpe.gguf);
- the C++ matchers of the pattern, llama.cpp's rewrite of it (GGUF) and the original
  (tokenizer.json), against Oniguruma as `tokenizers` runs them, cut by cut;
- a tokenizer.json laid out as gpt-oss's (the original pattern, then ByteLevel).
"""

import json
import os

import pytest
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from akunu import _core, _testing
from akunu.hf_tokenizer import HFTokenizer
from akunu.tokenizer import _GPT4O, GGUFTokenizer, _bytelevel_decode
from tests.fixtures.vocab_cases import fetch
from tools.make_tokenizer_golden import GOLDEN, SOURCE, gpt4o_vocab, random_texts

# the pattern as tokenizer.json files (gpt-oss's, tiktoken's o200k_base) hold it
O200K = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# varied text (random draws from the pool of the golden file's random cases) and long runs
TEXTS = random_texts(400, 4) + [
    "", " ", "\n", "A" * 2000, "a" * 2000, "\u00c9" * 2000, "\u0301" * 2000, "aA" * 1000, "1" * 2000,
    " \n" * 1000, "'s" * 1000, "The quick brown fox jumps over the lazy dog. " * 20,
]


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN, encoding="utf-8") as f:
        return json.load(f)["cases"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    try:
        src = os.path.join(fetch(), SOURCE)
    except Exception as e:  # no network: say so instead of failing obscurely
        pytest.skip(f"cannot fetch llama.cpp's {SOURCE} (offline?): {e}")
    return gpt4o_vocab(src, str(tmp_path_factory.mktemp("gpt4o") / "ggml-vocab-gpt-4o.gguf"))


@pytest.fixture(scope="module")
def gpt4o(vocab):
    """(Python, C++) tokenizers of the gpt-4o vocabulary."""
    return GGUFTokenizer(_core.read_gguf(vocab)["metadata"]), _testing.cpp_tokenizer(vocab)


def test_golden_file_covers_the_pattern(golden):
    assert len(golden) >= 100
    assert sum("pieces" in c for c in golden) >= 100
    texts = "".join(c["text"] for c in golden)
    for needle in ("CamelCase", "DON'T", "'S", "1234567", "./", "e\u0301", "\u00c9t\u00e9", "\r\n", "'\u017f"):
        assert needle in texts, needle


def test_llama_cpp_ids(golden, gpt4o):
    """Both tokenizers give llama.cpp's ids, and decoding them gives the text back."""
    py, cpp = gpt4o
    for case in golden:
        text, want = case["text"], case["ids"]
        assert py.encode(text, add_bos=False) == want, text
        assert cpp.encode(text, False) == want, text
        assert py.decode(want, skip_special=False) == text
        assert cpp.decode(want, False) == text


def _wordpiece_cutter(pattern, texts, folder):
    """A tokenizer.json that shows a Split pattern's cuts in its ids: WordPiece over single
    characters gives each piece's first character its own id and the rest their continuation
    ids (marked with a character no text holds, so that no piece starts like a continuation).
    Returns `tokenizers`' Tokenizer, the C++ tokenizer of the same file, and ids -> pieces."""
    mark = "\U0010fffd"
    chars = sorted({ch for t in texts for ch in t})
    assert mark not in chars
    vocab = {"[UNK]": 0}
    for ch in chars:
        vocab[ch] = len(vocab)
        vocab[mark + ch] = len(vocab)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix=mark,
                                     max_input_chars_per_word=1 << 30))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    continues = {i for t, i in vocab.items() if t.startswith(mark)}
    text_of = {i: t[len(mark):] if i in continues else t for t, i in vocab.items()}

    def pieces(ids):
        out = []
        for i in ids:
            if i in continues:
                out[-1] += text_of[i]
            else:
                out.append(text_of[i])
        return out

    return tok, _testing.cpp_tokenizer(folder), pieces


def test_llama_cpp_pieces(golden, gpt4o, tmp_path):
    """The pre-tokens themselves (which BPE's merges mostly hide in the ids) are llama.cpp's:
    the Python tokenizer's pre-tokenizer, and the C++ matcher its GGUF path uses (read through
    a tokenizer.json holding the same pattern)."""
    py, _ = gpt4o
    cases = [c for c in golden if "pieces" in c]
    for case in cases:
        got = [_bytelevel_decode(p).decode("utf-8") for p, _ in py._tok.pre_tokenizer.pre_tokenize_str(case["text"])]
        assert got == case["pieces"], case["text"]
    _, cpp, pieces = _wordpiece_cutter(_GPT4O, [c["text"] for c in cases], str(tmp_path / "cut"))
    for case in cases:
        assert pieces(cpp.encode(case["text"], False)) == case["pieces"], case["text"]


@pytest.mark.parametrize("pattern", [_GPT4O, O200K], ids=["llama.cpp-gguf", "tokenizer.json"])
def test_cpp_cuts_as_oniguruma(pattern, golden, tmp_path):
    """Both forms of the pattern cut every text where Oniguruma does."""
    texts = TEXTS + [c["text"] for c in golden]
    hf, cpp, pieces = _wordpiece_cutter(pattern, texts, str(tmp_path / "cut"))
    for text in texts:
        want = pieces(hf.encode(text, add_special_tokens=False).ids)
        assert "".join(want) == text
        assert pieces(cpp.encode(text, False)) == want, text


def test_forms_differ_outside_ascii():
    """llama.cpp's rewrite is not the original pattern: a letter outside ASCII sits in both of
    its letter runs, a combining mark in neither, and its contractions fold ASCII case only."""
    def cut(pattern, text):
        return [p for p, _ in pre_tokenizers.Split(Regex(pattern), behavior="isolated").pre_tokenize_str(text)]

    assert cut(O200K, "a\u00c9b") == ["a", "\u00c9b"] and cut(_GPT4O, "a\u00c9b") == ["a\u00c9b"]
    assert cut(O200K, "cafe\u0301s") == ["cafe\u0301s"] and cut(_GPT4O, "cafe\u0301s") == ["cafe", "\u0301s"]
    assert cut(O200K, "IT'\u017f") == ["IT'\u017f"] and cut(_GPT4O, "IT'\u017f") == ["IT", "'\u017f"]
    for pattern in (O200K, _GPT4O):
        assert cut(pattern, "getHTTPResponse DON'T x./y 12345") == \
            ["get", "HTTPResponse", " DON'T", " x", "./", "y", " ", "123", "45"]


def test_cpp_equals_python(gpt4o):
    """Ids (with and without BOS) and decoding of varied text; decode(encode(text)) == text."""
    py, cpp = gpt4o
    for text in TEXTS:
        assert cpp.encode(text, True) == py.encode(text, add_bos=True), text
        ids = py.encode(text, add_bos=False)
        assert cpp.encode(text, False) == ids, text
        for skip in (True, False):
            assert cpp.decode(ids, skip) == py.decode(ids, skip) == text, (text, skip)


def test_gpt_oss_tokenizer_json(gpt4o, tmp_path):
    """A tokenizer.json as gpt-oss ships one (the original pattern, then ByteLevel without its
    own regex) loads in the C++ tokenizer and encodes and decodes as `tokenizers` does."""
    py, _ = gpt4o
    tok = Tokenizer.from_str(py._tok.to_str())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(O200K), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    folder = tmp_path / "gpt-oss"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    with open(folder / "tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f)
    hf, cpp = HFTokenizer(str(folder)), _testing.cpp_tokenizer(str(folder))
    for text in TEXTS:
        assert cpp.encode(text, True) == hf.encode(text, add_bos=True), text
        ids = hf.encode(text, add_bos=False)
        assert cpp.encode(text, False) == ids, text
        for skip in (True, False):
            assert cpp.decode(ids, skip) == hf.decode(ids, skip) == text, (text, skip)
