"""Grammar-constrained generation through the C API (include/akunu/grammar.h):
libakunu driven through ctypes, and a C program (tests/c_api/grammar_check.c),
compared token for token with the Python API's Model.generate(grammar= /
json_schema=) on a random-weight model and the real Gemma 3 270M. Outputs are
also checked on their own: xgrammar's matcher accepts GBNF output, JSON output
parses and validates against its schema."""

import ctypes
import glob
import json
import os
import shutil
import subprocess

import pytest

import akunu
from tests.fixtures import random_gguf

xgr = pytest.importorskip("xgrammar")
jsonschema = pytest.importorskip("jsonschema")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_INCLUDE = os.path.join(os.path.dirname(HERE), "include")
N_CTX = 256

# -- libakunu through ctypes ---------------------------------------------------


class LoadParams(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("n_ctx", ctypes.c_int32), ("n_threads", ctypes.c_int32)]


class Sampling(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float),
                ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                ("penalty_window", ctypes.c_int32), ("seed", ctypes.c_uint64),
                ("logit_bias_ids", ctypes.POINTER(ctypes.c_int32)),
                ("logit_bias_values", ctypes.POINTER(ctypes.c_float)), ("n_logit_bias", ctypes.c_int32)]


class Stats(ctypes.Structure):
    _fields_ = [("prompt_tokens", ctypes.c_int32), ("generated_tokens", ctypes.c_int32),
                ("prefill_time_ms", ctypes.c_float), ("decode_time_ms", ctypes.c_float),
                ("prefill_tokens_per_sec", ctypes.c_float), ("decode_tokens_per_sec", ctypes.c_float)]


CALLBACK = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)
P = ctypes.c_void_p
I32P = ctypes.POINTER(ctypes.c_int32)


def _lib_dir():
    pkg = os.path.dirname(akunu.__file__)
    for d in (os.path.join(pkg, "lib"), os.path.dirname(os.path.realpath(akunu._core.__file__))):
        if glob.glob(os.path.join(d, "libakunu.so*")) or glob.glob(os.path.join(d, "libakunu*.dylib")):
            return d
    pytest.fail("libakunu is missing from the akunu package (akunu/lib) and the build tree")


def _include_dir():
    installed = os.path.join(os.path.dirname(akunu.__file__), "include")
    return installed if os.path.exists(os.path.join(installed, "akunu", "grammar.h")) else REPO_INCLUDE


@pytest.fixture(scope="module")
def lib():
    path = (glob.glob(os.path.join(_lib_dir(), "libakunu.so*")) or glob.glob(os.path.join(_lib_dir(), "libakunu*.dylib")))[0]
    L = ctypes.CDLL(path)
    L.akunu_last_error.restype = ctypes.c_char_p
    L.akunu_load_model.argtypes = [ctypes.c_char_p, ctypes.POINTER(LoadParams), ctypes.POINTER(P)]
    L.akunu_free_model.argtypes = [P]
    L.akunu_get_position.argtypes = [P]
    L.akunu_default_sampling.restype = Sampling
    for name in ("akunu_grammar_create", "akunu_grammar_create_from_schema"):
        getattr(L, name).argtypes = [P, ctypes.c_char_p, ctypes.POINTER(P)]
    L.akunu_grammar_create_json.argtypes = [P, ctypes.POINTER(P)]
    L.akunu_grammar_free.argtypes = [P]
    for name in ("akunu_generate_grammar", "akunu_generate_grammar_continue"):
        getattr(L, name).argtypes = [P, I32P, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(Sampling), P, I32P,
                                     ctypes.c_int32, CALLBACK, P, ctypes.POINTER(Stats)]
    return L


def _error(L):
    return L.akunu_last_error().decode()


def _load(L, path, device="cpu"):
    h = P()
    params = LoadParams(device.encode(), N_CTX, 0)
    assert L.akunu_load_model(path.encode(), ctypes.byref(params), ctypes.byref(h)) == 0, _error(L)
    return h


def _ids(values):
    return (ctypes.c_int32 * max(len(values), 1))(*values)


class CModel:
    """A model loaded through the C API, with the grammar calls as methods."""

    def __init__(self, L, path, device="cpu"):
        self.L, self.h = L, _load(L, path, device)

    def grammar(self, kind, source=None):
        g = P()
        if kind == "json":
            status = self.L.akunu_grammar_create_json(self.h, ctypes.byref(g))
        else:
            fn = self.L.akunu_grammar_create if kind == "gbnf" else self.L.akunu_grammar_create_from_schema
            status = fn(self.h, None if source is None else source.encode(), ctypes.byref(g))
        return status, g

    def make(self, kind, source=None):
        status, g = self.grammar(kind, source)
        assert status == 0, _error(self.L)
        return g

    def generate(self, grammar, prompt, max_tokens, stop, sampling=None, stop_after=0, cont=False):
        """(status, tokens handed to the callback, stats)."""
        seen, self.texts = [], []

        def on_token(token, text, _):
            seen.append(token)
            self.texts.append(text)
            return stop_after <= 0 or len(seen) < stop_after

        st = Stats()
        fn = self.L.akunu_generate_grammar_continue if cont else self.L.akunu_generate_grammar
        status = fn(self.h, _ids(prompt), len(prompt), max_tokens, None if sampling is None else ctypes.byref(sampling),
                    grammar, _ids(stop), len(stop), CALLBACK(on_token), None, ctypes.byref(st))
        return status, seen, st

    def position(self):
        return self.L.akunu_get_position(self.h)

    def free(self):
        self.L.akunu_free_model(self.h)


def _sampling(L, temperature, seed, top_p=1.0):
    s = L.akunu_default_sampling()
    s.temperature, s.seed, s.top_p = temperature, seed, top_p
    return s


# -- models ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def random_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cgrammar") / "llama.gguf")
    random_gguf.write_model(path, "llama", "F16", seed=11)
    return path


@pytest.fixture(scope="module")
def random_py(random_path):
    return akunu.load(random_path, n_ctx=N_CTX)


@pytest.fixture(scope="module")
def random_c(lib, random_path):
    m = CModel(lib, random_path)
    yield m
    m.free()


@pytest.fixture(scope="module")
def gemma_c(lib, gemma_path, gemma):
    m = CModel(lib, gemma_path, os.environ.get("AKUNU_GEMMA_DEVICE", "cpu"))  # where the `gemma` fixture runs
    yield m
    m.free()


@pytest.fixture(scope="module", params=["random", "gemma"])
def pair(request):
    """(Python model, C model) of the same file."""
    if request.param == "random":
        return request.getfixturevalue("random_py"), request.getfixturevalue("random_c")
    return request.getfixturevalue("gemma"), request.getfixturevalue("gemma_c")


def _prompt(py, text):
    return py.tokenize(text) if py.config["architecture"] == "gemma3" else [1, 5, 9, 300, 301]


def _check_text(c, want):
    """Where the callback is handed text (as akunu_generate_stream's is), the pieces
    are the generation's text, whole UTF-8 characters each."""
    if any(t is not None for t in c.texts):
        assert all(t is not None for t in c.texts)
        assert "".join(t.decode() for t in c.texts) == want.text


def _body(py, tokens):
    """The text of generated tokens without their final stop token."""
    if tokens and tokens[-1] in py.stop_ids:
        tokens = tokens[:-1]
    return py.detokenize(tokens)


# bounded so that even random weights reach the end within max_tokens
GBNF = r'''root ::= answer "." | "(" item ("," item){0,2} ")"
answer ::= "yes" | "no" | "maybe"
item ::= [a-z]{1,3} | [0-9]
'''
SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
        "color": {"enum": ["red", "green", "blue"]},
    },
    "required": ["ok", "count", "color"],
    "additionalProperties": False,
}


# -- same tokens as the Python API ------------------------------------------------

def test_gbnf_greedy_matches_python_and_the_grammar(pair):
    py, c = pair
    prompt = _prompt(py, "Question: is the sky blue? Answer with yes, no or maybe.\nAnswer:")
    want = py.generate(prompt, max_tokens=24, grammar=GBNF)
    g = c.make("gbnf", GBNF)
    status, got, st = c.generate(g, prompt, 24, py.stop_ids)
    assert status == 0, _error(c.L)
    assert got == want.tokens
    _check_text(c, want)
    assert got[-1] in py.stop_ids  # the grammar finished and only a stop token was left
    assert xgr.testing._is_grammar_accept_string(GBNF, _body(py, got))
    assert (st.prompt_tokens, st.generated_tokens) == (len(prompt), len(got))
    # the same handle again: the grammar starts over, and the result repeats
    status, again, _ = c.generate(g, prompt, 24, py.stop_ids)
    assert status == 0 and again == got
    c.L.akunu_grammar_free(g)


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "seeded"])
def test_json_schema_matches_python_and_validates(pair, sampled):
    py, c = pair
    prompt = _prompt(py, "Give a JSON object with a boolean ok, an integer count and a color.\n")
    kw = dict(temperature=0.8, top_p=0.95, seed=1234) if sampled else {}
    want = py.generate(prompt, max_tokens=40, json_schema=SCHEMA, **kw)
    g = c.make("schema", json.dumps(SCHEMA))
    sampling = _sampling(c.L, 0.8, 1234, 0.95) if sampled else None
    status, got, _ = c.generate(g, prompt, 40, py.stop_ids, sampling)
    assert status == 0, _error(c.L)
    assert got == want.tokens
    _check_text(c, want)
    assert got[-1] in py.stop_ids
    value = json.loads(_body(py, got))
    jsonschema.validate(value, SCHEMA)
    c.L.akunu_grammar_free(g)


def test_any_json_matches_python(pair):
    py, c = pair
    prompt = _prompt(py, "Describe a cat as a JSON object.\n")
    want = py.generate(prompt, max_tokens=20, json_schema="any")
    g = c.make("json")
    status, got, _ = c.generate(g, prompt, 20, py.stop_ids)
    assert status == 0, _error(c.L)
    assert got == want.tokens
    text = _body(py, got)
    assert text.startswith("{") and "\n" not in text  # compact: no control characters
    if got[-1] in py.stop_ids:
        assert isinstance(json.loads(text), dict)
    c.L.akunu_grammar_free(g)


def test_padded_vocabulary_never_yields_ids_past_the_tokenizer(lib, tmp_path, monkeypatch):
    """Logits wider than the tokenizer's vocabulary (padded embeddings): the mask
    covers the model's width and leaves the extra ids out, as Python's does, even
    when a logit bias makes them the likeliest."""
    short = random_gguf.spm_vocab

    def fewer_tokens(n):
        return tuple(column[: n - 40] for column in short(n))

    monkeypatch.setattr(random_gguf, "spm_vocab", fewer_tokens)
    path = str(tmp_path / "padded.gguf")
    random_gguf.write_model(path, "llama", "F16", seed=11)
    py = akunu.load(path, n_ctx=N_CTX)
    width, n_text = py.config["vocab_size"], py.tokenizer.vocab_size
    assert n_text < width
    bias = {i: 50.0 for i in range(n_text, width)}
    prompt = [1, 5, 9]
    core = py._core()  # unconstrained, the sampler picks a padding id
    core.truncate(0)
    core.set_sampling(logit_bias=list(bias.items()))
    core.prefill(prompt)
    assert core.sample_next() >= n_text
    core.set_sampling()
    want = py.generate(prompt, max_tokens=48, json_schema=SCHEMA, logit_bias=bias)
    c = CModel(lib, path)
    try:
        s = lib.akunu_default_sampling()
        ids, values = _ids(list(bias)), (ctypes.c_float * len(bias))(*bias.values())
        s.logit_bias_ids, s.logit_bias_values, s.n_logit_bias = ids, values, len(bias)
        g = c.make("schema", json.dumps(SCHEMA))
        status, got, _ = c.generate(g, prompt, 48, py.stop_ids, s)
        assert status == 0, _error(lib)
        assert got == want.tokens and max(got) < n_text and got[-1] in py.stop_ids
        jsonschema.validate(json.loads(_body(py, got)), SCHEMA)
        lib.akunu_grammar_free(g)
    finally:
        c.free()
        py.close()


# -- stopping, continuing, stop ids -------------------------------------------------

def test_callback_stop_and_continue(random_py, random_c):
    py, c = random_py, random_c
    prompt, stop = _prompt(py, ""), py.stop_ids
    g = c.make("gbnf", GBNF)
    status, full, _ = c.generate(g, prompt, 24, stop)
    assert status == 0 and len(full) > 3
    # the callback returning false after k tokens: exactly k, the context ends before the last
    k = 3
    status, cut, st = c.generate(g, prompt, 24, stop, stop_after=k)
    assert status == 0 and cut == full[:k] and st.generated_tokens == k
    assert c.position() == len(prompt) + k - 1
    # max_tokens ends it as well
    status, short, _ = c.generate(g, prompt, 2, stop)
    assert status == 0 and short == full[:2]
    # continuing keeps the context: a second constrained answer after the first,
    # as Python's generate over the whole context (reusing its cached prefix) gives it
    status, first, _ = c.generate(g, prompt, 24, stop)
    assert first[-1] in stop
    more = [5, 9]
    py.generate(prompt, max_tokens=24, grammar=GBNF)
    want = py.generate(prompt + first + more, max_tokens=24, grammar=GBNF)
    status, got, st = c.generate(g, [first[-1]] + more, 24, stop, cont=True)
    assert status == 0, _error(c.L)
    assert got == want.tokens and st.prompt_tokens == 1 + len(more)
    c.L.akunu_grammar_free(g)


def test_caller_stop_ids_and_grammar_end(random_py, random_c):
    py, c = random_py, random_c
    prompt = _prompt(py, "")
    g = c.make("gbnf", GBNF)
    status, full, _ = c.generate(g, prompt, 24, py.stop_ids)
    assert status == 0
    # a caller's stop id ends generation where it is drawn (emitted, not fed to the grammar)
    status, stopped, _ = c.generate(g, prompt, 24, [full[1]])
    assert status == 0 and stopped == full[:2]
    # without stop ids the grammar's own end (the model's end-of-generation token) still ends it
    status, own, _ = c.generate(g, prompt, 24, [])
    assert status == 0 and own == full
    c.L.akunu_grammar_free(g)


# -- errors --------------------------------------------------------------------------

def _expect_error(L, status, *words):
    assert status != 0
    message = _error(L)
    for w in words:
        assert w in message, message


def test_bad_grammars_and_arguments(random_py, random_c):
    c, L = random_c, random_c.L
    for kind, source, words in [
        ("gbnf", None, ["null grammar text"]),
        ("gbnf", "  \n", ["non-empty"]),
        ("gbnf", 'root ::= "a" | ', ["invalid gbnf grammar"]),
        ("gbnf", 'start ::= "a"', ["invalid gbnf grammar"]),
        ("schema", None, ["null schema"]),
        ("schema", '{"type": ', ["not valid JSON"]),
        ("schema", '{"type": "no-such-type"}', ["invalid json_schema grammar"]),
    ]:
        status, g = c.grammar(kind, source)
        _expect_error(L, status, *words)
        assert not g.value  # *out is NULL on failure
    assert L.akunu_grammar_create(None, b'root ::= "a"', ctypes.byref(P())) != 0
    assert "null model handle" in _error(L)
    assert L.akunu_grammar_create_json(c.h, None) != 0 and "null out" in _error(L)
    g = c.make("gbnf", GBNF)
    prompt, stop = [1, 2, 3], random_py.stop_ids
    cb = CALLBACK(lambda *a: True)
    _expect_error(L, L.akunu_generate_grammar(c.h, None, 3, 8, None, g, _ids(stop), 1, cb, None, None),
                  "bad argument")
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids(prompt), 3, 8, None, g, None, 2, cb, None, None),
                  "bad argument")
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids(prompt), 3, -1, None, g, None, 0, cb, None, None),
                  "bad argument")
    _expect_error(L, L.akunu_generate_grammar(None, _ids(prompt), 3, 8, None, g, None, 0, cb, None, None),
                  "null model handle")
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids(prompt), 3, 8, None, None, None, 0, cb, None, None),
                  "null grammar handle")
    bad = _sampling(L, -1.0, 0)
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids(prompt), 3, 8, ctypes.byref(bad), g, None, 0, cb, None,
                                              None), "temperature")
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids([1, 99999]), 2, 8, None, g, None, 0, cb, None, None),
                  "outside the vocabulary")
    # a pointer that was never a grammar, and one freed (freeing twice, or NULL, does nothing)
    foreign = ctypes.create_string_buffer(64)
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids(prompt), 3, 8, None, ctypes.cast(foreign, P), None, 0, cb,
                                              None, None), "not a live grammar handle")
    L.akunu_grammar_free(g)
    L.akunu_grammar_free(g)
    L.akunu_grammar_free(None)
    L.akunu_grammar_free(ctypes.cast(foreign, P))
    _expect_error(L, L.akunu_generate_grammar(c.h, _ids(prompt), 3, 8, None, g, None, 0, cb, None, None),
                  "not a live grammar handle")
    # after an error the model still generates under a grammar, and without one
    g = c.make("json")
    status, got, _ = c.generate(g, prompt, 4, stop)
    assert status == 0 and len(got) == 4
    L.akunu_grammar_free(g)


def test_grammar_of_another_or_a_freed_model(lib, random_path, random_c):
    other = CModel(lib, random_path)
    g = other.make("gbnf", GBNF)
    _expect_error(lib, random_c.generate(g, [1, 2, 3], 8, [])[0], "made for another model")
    other.free()
    # a freed model's grammar can be freed; used with any model it is an error, even
    # with one that the allocator placed at the freed model's address
    again = CModel(lib, random_path)
    status = again.generate(g, [1, 2, 3], 8, [])[0]
    _expect_error(lib, status, "grammar was made for")
    lib.akunu_grammar_free(g)
    fresh = again.make("gbnf", GBNF)
    assert again.generate(fresh, [1, 2, 3], 8, [])[0] == 0, _error(lib)
    lib.akunu_grammar_free(fresh)
    again.free()
    _expect_error(lib, lib.akunu_grammar_create_json(again.h, ctypes.byref(P())), "not a live model handle")


def test_mask_is_cleared_after_a_grammar_generation(random_py, random_c):
    """A sampled generation without a grammar after a constrained one draws from the
    whole vocabulary, as Python's does (the mask belongs to one generation)."""
    py, c, L = random_py, random_c, random_c.L
    prompt = [1, 5, 9]
    g = c.make("gbnf", 'root ::= "yes"')
    assert c.generate(g, prompt, 8, py.stop_ids)[0] == 0
    L.akunu_grammar_free(g)
    seen = []
    cb = CALLBACK(lambda t, _x, _u: seen.append(t) is None)
    s = _sampling(L, 0.9, 77)
    L.akunu_generate_stream.argtypes = [P, I32P, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(Sampling), I32P,
                                        ctypes.c_int32, CALLBACK, P, ctypes.POINTER(Stats)]
    stop = py.stop_ids
    assert L.akunu_generate_stream(c.h, _ids(prompt), 3, 12, ctypes.byref(s), _ids(stop), len(stop), cb, None,
                                   None) == 0
    want = py.generate(prompt, max_tokens=12, temperature=0.9, seed=77)
    assert seen == want.tokens


# -- a C program -----------------------------------------------------------------------

CC = next((shutil.which(n) for n in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]
           if shutil.which(n)), None)


@pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc, clang or $CC) found")
def test_c_program_json_schema_matches_python(tmp_path, random_py, random_path):
    lib_dir, exe = _lib_dir(), str(tmp_path / "grammar_check")
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", _include_dir(),
                    os.path.join(HERE, "c_api", "grammar_check.c"), "-L", lib_dir, "-lakunu",
                    f"-Wl,-rpath,{lib_dir}", "-o", exe], check=True)
    prompt = [1, 5, 9, 300]
    args = [exe, random_path, json.dumps(SCHEMA), "64", ",".join(map(str, random_py.stop_ids)), *map(str, prompt)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    want = random_py.generate(prompt, max_tokens=64, json_schema=SCHEMA)
    assert [int(t) for t in lines["tokens"].split()] == want.tokens and want.tokens[-1] in random_py.stop_ids
    assert lines["bad_schema"].startswith("1 invalid json_schema grammar")
    jsonschema.validate(json.loads(_body(random_py, want.tokens)), SCHEMA)
