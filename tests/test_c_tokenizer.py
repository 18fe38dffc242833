"""The C++ tokenizer (src/text/tokenizer) and the C API's text functions
(include/akunu/text.h: akunu_encode, akunu_token_count, akunu_decode_token,
akunu_decode, akunu_embed_text) against the Python package, whose tokenizers
are Hugging Face `tokenizers`: llama.cpp's vocabulary cases, tokenizer.json
files of every supported kind, the random-weight test models, the real
Gemma 3 270M and all-MiniLM-L6-v2, and bad input."""

import ctypes
import glob
import json
import os
import random
import time

import numpy as np
import pytest

import akunu
from akunu import _core, _testing
from akunu.hf_tokenizer import HFTokenizer
from akunu.tokenizer import GGUFTokenizer
from tests.fixtures import random_gguf
from tests.fixtures.vocab_cases import WANTED, fetch

SEPARATOR = "\n__ggml_vocab_test__\n"
_UNUSED = 5

# varied text: scripts, emoji (with modifiers, flags, ZWJ), digits of several
# scripts, whitespace runs of every kind, contractions in both cases, control
# characters, combining marks, special-token text
TEXTS = [
    "", " ", "  ", "\n", "\n\n\n", "\t", " \t \n ", "Hello", " Hello", "Hello world", "hello  world   ",
    "The capital of France is Paris.", "I'm sure you'll see they've done it, haven't they? 'S 'LL 'Re",
    "IT'S HE'D WE'LL ſ 'ſ", "3.14159 and 1234567890, ٣٤٥ Ⅻ ½ x² 1,000,000", "日本語のテキスト、中文文本。한국어 텍스트",
    "Ünïcödé àçcéñts: café naïve résumé Ångström İstanbul ΣΑΣ ς", "e\u0301 a\u0308 \u1e9b\u0323 ﬁ ﬆ Ǆ ǅ",
    "emoji 🥰👍🏽🇩🇪 👨‍👩‍👧 ❤️", "mixed\u00a0spaces\u3000and\u2028lines\u0085nel\x0bvt",
    "tabs\tand\r\nwindows\r\nlines\n\n\nend", "null \x00 byte, del \x7f, bom \ufeff, soft\u00adhyphen, zw\u200bsp",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos><eos><pad>[CLS] [SEP] [MASK] <s></s><unk>",
    "<|endoftext|><|im_start|>system<|im_end|>", "    def f(x):\n        return x ** 2  # code\n",
    "www.example.com/path?q=1&r=2 user@mail.org", "!!!??? ... --- *** ### $$$ %%% ((( )))", "\u1c89\U00010d40\U0002b81f\u0890",
    "a" * 300, "ab " * 100, "The quick brown fox " * 20,
]


def _rand_texts(n, seed):
    rng = random.Random(seed)
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"()-_/\\<>[]{}|@#$%^&*+=~`")
            + list(" \t\n\r\u00a0\u3000\u2028\x0b\x85\x1c") * 3
            + list("éüßİıſǅΣσς日本語中文한국어ﬆﬁ\u0301\u0308\u200d\u00ad\ufffd\x00\x7fⅫ½²٣")
            + ["🥰", "👍🏽", "🇩🇪", "'s", "'S", "'ll", "<start_of_turn>", "<bos>", "[CLS]", "[SEP]", "<|endoftext|>", "  ",
               "\n\n", "123456"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(n)]


ALL_TEXTS = TEXTS + _rand_texts(150, 7)


def _same_as_python(cpp, py, texts, bos_key="add_bos"):
    """ids with and without special tokens, and decoding with and without skipping them."""
    for text in texts:
        for add in (True, False):
            want = py.encode(text, **{bos_key: add})
            assert cpp.encode(text, add) == want, (text, add)
        for skip in (True, False):
            assert cpp.decode(want, skip) == py.decode(want, skip), (text, skip)


def _same_vocabulary(cpp, py):
    assert cpp.vocab_size == py.vocab_size
    assert cpp.kind == py.kind
    assert cpp.bos_id == (-1 if py.bos_id is None else py.bos_id)
    assert cpp.eos_id == (-1 if py.eos_id is None else py.eos_id)
    for i in range(py.vocab_size):
        ty = py.token_types[i]
        assert cpp.token_bytes(i) == (b"" if ty == _UNUSED else py.token_bytes(i)), i
        assert cpp.is_text_token(i) == (ty in (1, 4, 6)), i
        assert cpp.token_text(i) == py.tokens[i], i


# -- llama.cpp's vocabulary cases ---------------------------------------------------------------

@pytest.fixture(scope="module")
def vocab_dir():
    try:
        return fetch()
    except Exception as e:  # no network: say so instead of failing obscurely
        pytest.skip(f"cannot fetch llama.cpp vocab cases (offline?): {e}")


@pytest.mark.parametrize("name", WANTED)
def test_vocab_cases(vocab_dir, name):
    path = os.path.join(vocab_dir, f"ggml-vocab-{name}.gguf")
    py = GGUFTokenizer(_core.read_gguf(path)["metadata"])
    cpp = _testing.cpp_tokenizer(path)
    with open(path + ".inp", encoding="utf-8") as f:
        inputs = f.read().split(SEPARATOR)
    with open(path + ".out", encoding="utf-8") as f:
        outputs = f.read().split("\n")
    assert len(inputs) >= 40
    for text, expected in zip(inputs, outputs):
        got = cpp.encode(text, False)
        assert got == [int(x) for x in expected.split()], text
        assert got == py.encode(text, add_bos=False), text
        ids = py.encode(text, add_bos=True)
        assert cpp.encode(text, True) == ids
        for skip in (True, False):
            assert cpp.decode(ids, skip) == py.decode(ids, skip), text
    _same_as_python(cpp, py, ALL_TEXTS)
    _same_vocabulary(cpp, py)


# -- tokenizer.json of every supported kind ------------------------------------------------------

def _save(tok, directory, config=None):
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    if config is not None:
        with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
            json.dump(config, f)
    return directory


def _json_tokenizers(vocab_dir, tmp):
    """tokenizer.json files written by `tokenizers` itself: the GGUF vocabularies' pipelines (SentencePiece BPE
    with byte fallback, byte-level BPE behind the Llama 3 / Qwen2 / GPT-2 regexes, BERT's WordPiece), and
    hand-made ones for the components those do not use (Metaspace, NFC / NFD / Lowercase / StripAccents,
    Digits, Punctuation, ByteLevel's own regex, added tokens with lstrip / rstrip / single_word)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    out = {}
    for name in ("llama-spm", "llama-bpe", "qwen2", "gpt-2", "starcoder", "bert-bge"):
        py = GGUFTokenizer(_core.read_gguf(os.path.join(vocab_dir, f"ggml-vocab-{name}.gguf"))["metadata"])
        out[name] = _save(py._tok, os.path.join(tmp, name), {"bos_token": "<s>", "eos_token": {"content": "</s>"}})

    spm = GGUFTokenizer(_core.read_gguf(os.path.join(vocab_dir, "ggml-vocab-llama-spm.gguf"))["metadata"])._tok
    bpe = json.loads(spm.to_str())["model"]
    tok = Tokenizer(models.BPE(vocab=bpe["vocab"], merges=[tuple(m) for m in bpe["merges"]], byte_fallback=True,
                               unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                 pre_tokenizers.Metaspace(prepend_scheme="first", split=False)])
    tok.decoder = decoders.Sequence([decoders.Metaspace(prepend_scheme="first"), decoders.ByteFallback(),
                                     decoders.Fuse()])
    tok.add_tokens([AddedToken("<start_of_turn>", special=True, normalized=False),
                    AddedToken("<end_of_turn>", special=True, normalized=False, lstrip=True, rstrip=True),
                    AddedToken("hello", single_word=True, normalized=True)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    out["metaspace-first"] = _save(tok, os.path.join(tmp, "metaspace-first"), {"bos_token": "<s>"})

    tok = Tokenizer(models.BPE(vocab=bpe["vocab"], merges=[tuple(m) for m in bpe["merges"]], byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Punctuation(),
                                                 pre_tokenizers.Metaspace(prepend_scheme="always", split=True)])
    tok.decoder = decoders.Sequence([decoders.Metaspace(), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    out["metaspace-nfd"] = _save(tok, os.path.join(tmp, "metaspace-nfd"))

    gpt2 = json.loads(GGUFTokenizer(_core.read_gguf(os.path.join(vocab_dir, "ggml-vocab-gpt-2.gguf"))["metadata"])
                      ._tok.to_str())["model"]
    tok = Tokenizer(models.BPE(vocab=gpt2["vocab"], merges=[tuple(m) for m in gpt2["merges"]]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.add_special_tokens(["<|endoftext|>"])
    out["gpt2-bytelevel"] = _save(tok, os.path.join(tmp, "gpt2-bytelevel"), {"eos_token": "<|endoftext|>"})

    words = {w: i for i, w in enumerate(["[UNK]", "[CLS]", "[SEP]", "hello", "world", "the", "cat", "##s", "##ing", "a",
                                         "b", "##b", "##a", "!", ",", "."])}
    tok = Tokenizer(models.WordPiece(words, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    tok.decoder = decoders.WordPiece()
    out["wordpiece-bert-processing"] = _save(tok, os.path.join(tmp, "wordpiece-bert-processing"))
    return out


@pytest.fixture(scope="module")
def json_dirs(vocab_dir, tmp_path_factory):
    return _json_tokenizers(vocab_dir, str(tmp_path_factory.mktemp("tokjson")))


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe", "qwen2", "gpt-2", "starcoder", "bert-bge",
                                  "metaspace-first", "metaspace-nfd", "gpt2-bytelevel", "wordpiece-bert-processing"])
def test_tokenizer_json(json_dirs, name):
    d = json_dirs[name]
    py, cpp = HFTokenizer(d), _testing.cpp_tokenizer(d)
    _same_as_python(cpp, py, ALL_TEXTS + ["hello world", "say hello, hellothere", "a <end_of_turn>  b",
                                          "<start_of_turn>x", "x<start_of_turn>", "12345 67 8"])
    _same_vocabulary(cpp, py)


def test_whisper_tokenizer_json(whisper_tiny_en_dir):
    """A real byte-level BPE tokenizer.json with many added tokens (Whisper tiny.en's)."""
    py, cpp = HFTokenizer(whisper_tiny_en_dir), _testing.cpp_tokenizer(whisper_tiny_en_dir)
    _same_as_python(cpp, py, ALL_TEXTS + ["<|startoftranscript|><|notimestamps|> Hello there.<|endoftext|>"])
    _same_vocabulary(cpp, py)


def test_unsupported_tokenizer_json_names_the_component(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=akunu_regex_not_known(), behavior="isolated")
    _save(tok, str(tmp_path / "split"))
    with pytest.raises(akunu.UnsupportedModelError, match="Split regex"):
        _testing.cpp_tokenizer(str(tmp_path / "split"))
    tok = Tokenizer(models.Unigram([("a", -1.0), ("<unk>", -2.0)], unk_id=1))
    _save(tok, str(tmp_path / "unigram"))
    with pytest.raises(akunu.UnsupportedModelError, match="Unigram"):
        _testing.cpp_tokenizer(str(tmp_path / "unigram"))


def test_invalid_utf8_is_an_error(vocab_dir):
    cpp = _testing.cpp_tokenizer(os.path.join(vocab_dir, "ggml-vocab-gpt-2.gguf"))
    with pytest.raises(akunu.AkunuError, match="not valid UTF-8"):
        cpp.encode_bytes(b"ab\xffcd", True)


def test_malformed_tokenizer_json_is_a_format_error(tmp_path):
    good = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None,
            "decoder": None, "model": {"type": "WordLevel", "vocab": {"a": 0, "<unk>": 1}, "unk_token": "<unk>"}}
    cases = {
        "id-not-a-number": json.dumps(dict(good, model=dict(good["model"], vocab={"a": "zero"}))).encode(),
        "id-negative": json.dumps(dict(good, model=dict(good["model"], vocab={"a": -3}))).encode(),
        "not-utf8": json.dumps(good).encode().replace(b'"a": 0', b'"a\xff": 0'),
        "truncated": json.dumps(good).encode()[:-20],
        "bad-merge": json.dumps(dict(good, model={"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]})).encode(),
    }
    for name, raw in cases.items():
        d = tmp_path / name
        d.mkdir()
        (d / "tokenizer.json").write_bytes(raw)
        with pytest.raises(akunu.ModelFormatError):
            _testing.cpp_tokenizer(str(d))
    d = tmp_path / "good"
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(good))
    assert _testing.cpp_tokenizer(str(d)).encode("a", True) == [0]


def akunu_regex_not_known():
    from tokenizers import Regex

    return Regex(r"\p{Lu}+")


def test_encode_is_fast(vocab_dir):
    """A few KB of text tokenizes in milliseconds (hash-mapped merges, a priority-queue merge loop)."""
    text = (" ".join(TEXTS) * 2)[:6000]
    for name in ("llama-spm", "llama-bpe", "bert-bge"):
        cpp = _testing.cpp_tokenizer(os.path.join(vocab_dir, f"ggml-vocab-{name}.gguf"))
        cpp.encode(text, True)
        t0 = time.perf_counter()
        for _ in range(5):
            cpp.encode(text, True)
        assert (time.perf_counter() - t0) / 5 < 0.05, name


# -- the C API (libakunu through ctypes) ------------------------------------------------------

N_CTX = 128
_i32p = ctypes.POINTER(ctypes.c_int32)


@pytest.fixture(scope="module")
def lib():
    pkg = os.path.dirname(akunu.__file__)
    for d in (os.path.join(pkg, "lib"), os.path.dirname(os.path.realpath(akunu._core.__file__))):
        found = glob.glob(os.path.join(d, "libakunu.so*")) + glob.glob(os.path.join(d, "libakunu*.dylib"))
        if found:
            break
    else:
        pytest.fail("libakunu is missing from the akunu package (akunu/lib) and the build tree")
    L = ctypes.CDLL(found[0])
    L.akunu_last_error.restype = ctypes.c_char_p
    L.akunu_load_model.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    L.akunu_free_model.argtypes = [ctypes.c_void_p]
    L.akunu_free_model.restype = None
    L.akunu_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_bool, _i32p, ctypes.c_int32, _i32p]
    L.akunu_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_bool, _i32p]
    L.akunu_decode_token.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), _i32p]
    L.akunu_decode.argtypes = [ctypes.c_void_p, _i32p, ctypes.c_int32, ctypes.c_bool, ctypes.c_char_p, ctypes.c_int32,
                               _i32p]
    L.akunu_embed_text.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_bool, ctypes.POINTER(ctypes.c_float),
                                   ctypes.c_int32]
    L.akunu_embedding_dim.argtypes = [ctypes.c_void_p]
    return L


class CModel:
    """A model loaded through the C API, its text functions as Python calls (errors raise with the C message)."""

    class Failed(Exception):
        pass

    def __init__(self, lib, path):
        self.lib = lib

        class Params(ctypes.Structure):
            _fields_ = [("device", ctypes.c_char_p), ("n_ctx", ctypes.c_int32), ("n_threads", ctypes.c_int32)]

        self.h = ctypes.c_void_p()
        p = Params(b"cpu", N_CTX, 0)
        assert lib.akunu_load_model(path.encode(), ctypes.byref(p), ctypes.byref(self.h)) == 0, lib.akunu_last_error()

    def _ok(self, status):
        if status != 0:
            raise CModel.Failed(self.lib.akunu_last_error().decode())

    def encode(self, text, add_special=True, max_tokens=None):
        raw = text.encode("utf-8") if isinstance(text, str) else text
        n = ctypes.c_int32(-1)
        cap = max_tokens if max_tokens is not None else 4 * len(raw) + 8
        buf = (ctypes.c_int32 * max(cap, 1))()
        st = self.lib.akunu_encode(self.h, raw, add_special, buf, cap, ctypes.byref(n))
        self.last_n = n.value
        self._ok(st)
        return list(buf[: n.value])

    def token_count(self, text, add_special=True):
        n = ctypes.c_int32(-1)
        self._ok(self.lib.akunu_token_count(self.h, text.encode("utf-8"), add_special, ctypes.byref(n)))
        return n.value

    def decode_token(self, i):
        p, n = ctypes.c_void_p(), ctypes.c_int32(-1)
        self._ok(self.lib.akunu_decode_token(self.h, i, ctypes.byref(p), ctypes.byref(n)))
        assert ctypes.string_at(p.value, n.value + 1)[-1:] == b"\0"  # NUL-terminated as well
        return ctypes.string_at(p.value, n.value)

    def decode(self, ids, skip_special=True, out_size=None):
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        n = ctypes.c_int32(-1)
        size = out_size if out_size is not None else 16 * len(ids) + 64
        out = ctypes.create_string_buffer(max(size, 1))
        st = self.lib.akunu_decode(self.h, arr, len(ids), skip_special, out, size, ctypes.byref(n))
        self.last_n = n.value
        self._ok(st)
        assert out.raw[n.value] == 0
        return out.raw[: n.value].decode("utf-8")

    def embed_text(self, text, truncate=True, max_dims=None):
        dim = self.lib.akunu_embedding_dim(self.h)
        out = (ctypes.c_float * max(dim, 1))()
        self._ok(self.lib.akunu_embed_text(self.h, text.encode("utf-8"), truncate, out,
                                           dim if max_dims is None else max_dims))
        return np.array(out[:dim], dtype=np.float32)

    def free(self):
        self.lib.akunu_free_model(self.h)


def _compare_model(cm, model, texts):
    """C API text functions equal Model.tokenize / detokenize / the tokenizer's token bytes (C text ends at its
    first NUL, so texts holding one are left out)."""
    for text in (t for t in texts if "\0" not in t):
        for add in (True, False):
            ids = model.tokenize(text, add_bos=add)
            assert cm.encode(text, add) == ids, (text, add)
            assert cm.token_count(text, add) == len(ids)
        for skip in (True, False):
            assert cm.decode(ids, skip) == model.detokenize(ids, skip_special=skip), (text, skip)
    tok = model.tokenizer
    step = max(1, tok.vocab_size // 20000)
    for i in range(0, tok.vocab_size, step):
        want = b"" if tok.token_types[i] == _UNUSED else tok.token_bytes(i)
        assert cm.decode_token(i) == want, i


@pytest.fixture(scope="module")
def random_models(tmp_path_factory):
    """The tests' random-weight models: GGUF llama / qwen3 / gemma3 shapes and a Hugging Face directory."""
    d = tmp_path_factory.mktemp("capi_tok")
    paths = []
    small = random_gguf.Shape(n_layers=1, dim=64, n_heads=2, n_kv_heads=1, head_dim=32, ffn_dim=64, vocab=300, ctx=256)
    for arch in ("llama", "qwen3", "gemma3"):
        p = str(d / f"{arch}.gguf")
        random_gguf.write_model(p, arch, "F32", seed=11, shape=small)
        paths.append(p)
    try:
        from tests.fixtures.hf_models import make_decoder

        hf = str(d / "hf-llama")
        make_decoder("llama", hf, seed=3)
        paths.append(hf)
    except ImportError as e:  # transformers / torch absent: the GGUF models still run
        print(f"no Hugging Face directory model: {e}")
    return paths


def test_c_api_random_models_match_python(lib, random_models):
    for path in random_models:
        model = akunu.load(path, n_ctx=N_CTX)
        cm = CModel(lib, path)
        try:
            texts = ALL_TEXTS[:60] + ["w1 w2 w3", " w10  w255\tw7\n", "w999 unknown w3"]
            _compare_model(cm, model, texts)
        finally:
            cm.free()


def test_c_api_gemma3(lib, gemma_path):
    model = akunu.load(gemma_path, n_ctx=N_CTX)
    cm = CModel(lib, gemma_path)
    try:
        _compare_model(cm, model, ALL_TEXTS)
        # a chat turn's special tokens are parsed and skipped or kept on the way back
        ids = cm.encode("<start_of_turn>user\nHi<end_of_turn>\n", True)
        assert ids[0] == model.tokenizer.bos_id and model.tokenizer.tokens[ids[1]] == "<start_of_turn>"
        # bytes of a multi-byte character spread over byte-fallback tokens join back into it
        for text in ("日本語", "🥰", "a\u0301"):
            ids = cm.encode(text, False)
            assert b"".join(cm.decode_token(i) for i in ids).decode("utf-8").strip() == text
    finally:
        cm.free()


@pytest.fixture(scope="module")
def minilm_path():
    from akunu.model_zoo import resolve_model_path

    try:
        return resolve_model_path("all-minilm-l6-v2")
    except akunu.AkunuError as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not available (offline?): {e}; run python -m tools.fetch_models")


def test_c_api_minilm_tokens_and_embeddings(lib, minilm_path):
    model = akunu.load(minilm_path, n_ctx=N_CTX)  # the C model loads with N_CTX: the same truncation
    cm = CModel(lib, minilm_path)
    try:
        _compare_model(cm, model, ALL_TEXTS)
        long_text = "The quick brown fox jumps over the lazy dog. " * 80  # past max_seq_length: truncated
        for text in ["first sentence", "A second, longer sentence about cats and dogs!", "", "日本語 🥰 Ünïcödé",
                     long_text]:
            np.testing.assert_allclose(cm.embed_text(text), model.embed(text), rtol=1e-5, atol=1e-6)
        with pytest.raises(CModel.Failed, match="exceeds the model's"):
            cm.embed_text(long_text, truncate=False)
        with pytest.raises(CModel.Failed, match="max_dims"):
            cm.embed_text("x", max_dims=3)
    finally:
        cm.free()


def test_c_api_errors(lib, random_models):
    path = random_models[0]
    cm = CModel(lib, path)
    vocab = akunu.load(path, n_ctx=N_CTX).tokenizer.vocab_size
    n = ctypes.c_int32(-1)
    buf = (ctypes.c_int32 * 4)()
    p = ctypes.c_void_p()

    def fails(status, *words):
        assert status != 0
        msg = lib.akunu_last_error().decode()
        for w in words:
            assert w in msg, msg

    # NULL and foreign handles
    fails(lib.akunu_encode(None, b"hi", True, buf, 4, ctypes.byref(n)), "null model handle")
    fails(lib.akunu_encode(ctypes.c_void_p(0x1234), b"hi", True, buf, 4, ctypes.byref(n)), "not a live model handle")
    fails(lib.akunu_token_count(None, b"hi", True, ctypes.byref(n)), "null model handle")
    fails(lib.akunu_decode_token(None, 0, ctypes.byref(p), ctypes.byref(n)), "null model handle")
    fails(lib.akunu_decode(None, buf, 1, True, ctypes.create_string_buffer(8), 8, ctypes.byref(n)), "null model handle")
    fails(lib.akunu_embed_text(None, b"hi", True, (ctypes.c_float * 4)(), 4), "null model handle")
    # NULL arguments
    fails(lib.akunu_encode(cm.h, None, True, buf, 4, ctypes.byref(n)), "null text")
    fails(lib.akunu_encode(cm.h, b"hi", True, buf, 4, None), "null n_tokens")
    fails(lib.akunu_encode(cm.h, b"hi", True, None, 4, ctypes.byref(n)), "bad output buffer")
    fails(lib.akunu_token_count(cm.h, None, True, ctypes.byref(n)), "null text")
    fails(lib.akunu_decode_token(cm.h, 0, None, ctypes.byref(n)), "null argument")
    fails(lib.akunu_decode(cm.h, None, 2, True, ctypes.create_string_buffer(8), 8, ctypes.byref(n)), "bad ids")
    fails(lib.akunu_embed_text(cm.h, b"hi", True, None, 4), "null output")
    # invalid UTF-8: a stray continuation byte, a truncated sequence, an overlong form, a surrogate
    for bad in (b"ab\x80cd", b"caf\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff"):
        fails(lib.akunu_encode(cm.h, bad, True, buf, 4, ctypes.byref(n)), "not valid UTF-8")
        fails(lib.akunu_token_count(cm.h, bad, True, ctypes.byref(n)), "not valid UTF-8")
    # buffers too small: the count needed comes back, nothing is truncated silently
    want = cm.encode("the quick brown fox jumps", True)
    with pytest.raises(CModel.Failed, match=f"is {len(want)} tokens, the buffer holds 2"):
        cm.encode("the quick brown fox jumps", True, max_tokens=2)
    assert cm.last_n == len(want)
    text = cm.decode(want)
    with pytest.raises(CModel.Failed, match="bytes, the buffer needs"):
        cm.decode(want, out_size=len(text.encode()))  # no room for the NUL
    assert cm.last_n == len(text.encode())
    # ids outside the vocabulary
    for bad_id in (-1, vocab, 1 << 30):
        with pytest.raises(CModel.Failed, match="outside the vocabulary"):
            cm.decode_token(bad_id)
        with pytest.raises(CModel.Failed, match="outside the vocabulary"):
            cm.decode([1, bad_id])
    # a generative model has no text embeddings
    with pytest.raises(CModel.Failed, match="generative model"):
        cm.embed_text("hi", max_dims=1 << 16)
    # a freed handle
    cm.free()
    fails(lib.akunu_encode(cm.h, b"hi", True, buf, 4, ctypes.byref(n)), "not a live model handle")
    fails(lib.akunu_decode_token(cm.h, 0, ctypes.byref(p), ctypes.byref(n)), "not a live model handle")


def test_c_program(lib, random_models, tmp_path):
    """tests/c_api/text_check.c, built with the system C compiler against libakunu, on the random models (a GGUF
    and, where transformers is there, a Hugging Face directory)."""
    import shutil
    import subprocess

    cc = next((shutil.which(c) for c in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]
               if shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang or $CC) found")
    lib_dir = os.path.dirname(lib._name)
    installed = os.path.join(os.path.dirname(akunu.__file__), "include")
    include = installed if os.path.exists(os.path.join(installed, "akunu", "text.h")) else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
    exe = str(tmp_path / "text_check")
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", include,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "c_api", "text_check.c"),
                    "-L", lib_dir, "-lakunu", f"-Wl,-rpath,{lib_dir}", "-o", exe], check=True)
    texts = [t for t in TEXTS if "\0" not in t]
    for path in {random_models[0], random_models[-1]}:
        model = akunu.load(path, n_ctx=N_CTX)
        p = subprocess.run([exe, path, *(t.encode().hex() for t in texts)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[-1] == "errors ok"
        for k, text in enumerate(texts):
            ids_line, plain_line, text_line, pieces_line = lines[4 * k: 4 * k + 4]
            ids = [int(x) for x in ids_line.split()[1:]]
            plain = [int(x) for x in plain_line.split()[1:]]
            assert ids == model.tokenize(text) and plain == model.tokenize(text, add_bos=False), text
            assert bytes.fromhex(text_line[5:]).decode() == model.detokenize(ids, skip_special=False), text
            tok = model.tokenizer
            assert bytes.fromhex(pieces_line[7:]) == b"".join(
                b"" if tok.token_types[i] == _UNUSED else tok.token_bytes(i) for i in plain), text
