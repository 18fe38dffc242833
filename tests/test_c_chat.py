"""Chat formatting in C++ (src/text/chat, the vendored llama.cpp Jinja engine,
include/akunu/chat.h) gives the Python package's string (akunu.chat_template,
jinja2 as transformers renders it) for the same input:

- every template of llama.cpp's set (tests/fixtures/vocab_cases.py) on several
  conversations, with and without the generation prompt, with tools and
  enable_thinking where the template takes them (akunu._testing hook);
- through the C API (ctypes on libakunu) for the real Gemma 3 270M, random
  GGUF models with and without a template, and Hugging Face directories,
  against Model.apply_chat_template / ChatTemplate.render;
- NULL pointers, bad handles, invalid UTF-8, broken templates and
  raise_exception are error statuses with messages."""

import ctypes
import glob
import json
import os

import pytest

import akunu
from akunu import _testing
from akunu.chat_template import BUILTIN, ChatTemplate, TemplateError
from tests.fixtures import random_gguf

SYSTEM_USER = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime."}]
MULTI_TURN = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"},
              {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Name a prime."}]
NO_SYSTEM = [{"role": "user", "content": "Two\nlines, unicode: café ✓ 🙂"}, {"role": "assistant", "content": " padded "},
             {"role": "user", "content": [{"type": "text", "text": "in "}, {"type": "text", "text": "parts"}]}]
THINK_TURNS = [{"role": "user", "content": "2+2?"},
               {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4", "reasoning_content": "Add them."},
               {"role": "user", "content": "And 3+3?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "days": {"type": "integer", "description": "Days ahead"}},
                   "required": ["city"]}}}]
TOOL_TURNS = [{"role": "system", "content": "Use tools when useful."},
              {"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
                  "name": "get_weather", "arguments": {"city": "Paris", "days": 1}}}]},
              {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
              {"role": "user", "content": "Thanks"}]
# OpenAI's shape: arguments as a JSON string
TOOL_TURNS_STR = [dict(m, tool_calls=[{"id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]) if "tool_calls" in m else m
    for m in TOOL_TURNS]

# Templates on which the vendored engine and jinja2 legitimately differ, with
# why. "python refuses": transformers' jinja2 setup raises on some of the inputs
# (so Python has no string to compare) while the vendored engine, more lenient,
# renders one; "markup": jinja2's Markup escaping, which the engine does not have.
KNOWN_DIFFERENCES = {
    "Kimi-K2-Instruct": ("python refuses", "calls list.append on tool-call turns: jinja2's ImmutableSandbox"
                         "Environment forbids mutating a list, the engine allows it"),
    "Kimi-K2-Thinking": ("python refuses", "as Kimi-K2-Instruct (list.append)"),
    "fireworks-ai-llama-3-firefunction-v2": ("python refuses", "uses the variable `functions`, which "
                                             "ChatTemplate.render does not set: jinja2 raises on the undefined "
                                             "name in an expression, the engine renders it empty"),
    "llama-cpp-deepseek-r1": ("python refuses", "tools | map(attribute='function') | tojson: jinja2's map gives "
                              "a generator that json.dumps (transformers' tojson) cannot serialize; the engine's "
                              "map gives a list"),
    "meetkai-functionary-medium-v3.2": ("python refuses", "concatenates tool-call arguments to a string: with "
                                        "arguments as a dict (transformers' convention) Python's + raises, the "
                                        "engine appends the dict's text"),
    "meetkai-functionary-medium-v3.1": ("markup", "'...'|safe + text + (x | tojson): jinja2's Markup escapes "
                                        "the plain strings added to a |safe string (&#34; for a quote); the "
                                        "engine's safe filter returns the string unchanged"),
}


def _cpp(src, conv, agp, tools=None, extra=None, bos="<s>", eos="</s>"):
    try:
        return _testing.render_chat_template(src, json.dumps(conv), bos, eos, agp,
                                             None if tools is None else json.dumps(tools),
                                             None if extra is None else json.dumps(extra))
    except TemplateError as e:
        return ("error", str(e))


def _py(src, conv, agp, tools=None, extra=None, bos="<s>", eos="</s>"):
    try:
        return ChatTemplate(src, "t", bos, eos).render(conv, add_generation_prompt=agp, tools=tools, **(extra or {}))
    except TemplateError as e:
        return ("error", str(e))


def _same(a, b):
    """Equal strings, or both refused (the messages are each engine's own)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple)
    return a == b


@pytest.fixture(scope="module")
def templates(cache_dir):
    from tests.fixtures import vocab_cases

    dest = os.path.join(cache_dir, "vocab")
    try:
        vocab_cases.fetch(dest)
    except Exception as e:  # pragma: no cover - offline
        pytest.skip(f"cannot fetch llama.cpp's templates (offline?): {e}")
    files = sorted(glob.glob(os.path.join(vocab_cases.templates_dir(dest), "*.jinja")))
    assert len(files) > 20
    return {os.path.basename(p)[:-len(".jinja")]: open(p, encoding="utf-8").read() for p in files}


def _cases(src):
    """(conversation, tools, extra) inputs for one template: the plain
    conversations, and tools / enable_thinking where the template reads them."""
    cases = [(SYSTEM_USER, None, None), (MULTI_TURN, None, None), (NO_SYSTEM, None, None), (THINK_TURNS, None, None)]
    if "tools" in src:
        cases += [(SYSTEM_USER, TOOLS, None), (TOOL_TURNS, TOOLS, None), (TOOL_TURNS_STR, TOOLS, None)]
    if "enable_thinking" in src:
        cases += [(MULTI_TURN, None, {"enable_thinking": False}), (SYSTEM_USER, None, {"enable_thinking": True})]
    if "reasoning_effort" in src:
        cases += [(SYSTEM_USER, None, {"reasoning_effort": "low"})]
    return cases


def _check_known_difference(name, got, want):
    """A listed difference is of its stated kind (and nothing else)."""
    import html

    kind = KNOWN_DIFFERENCES.get(name, (None,))[0]
    if kind == "python refuses":
        assert isinstance(want, tuple) and isinstance(got, str), (name, got, want)
    elif kind == "markup":
        assert isinstance(want, str) and isinstance(got, str) and html.unescape(want) == got, (name, got, want)


def test_builtin_templates_are_pythons():
    for name, src in BUILTIN.items():
        assert _testing.builtin_chat_template(name) == src
    assert _testing.builtin_chat_template("unknown") is None


def test_template_set_renders_like_jinja2(templates):
    rendered = refused = 0
    differing = {}
    for name, src in templates.items():
        for conv, tools, extra in _cases(src):
            for agp in (True, False):
                want = _py(src, conv, agp, tools, extra)
                got = _cpp(src, conv, agp, tools, extra)
                if not _same(got, want):
                    differing.setdefault(name, (len(conv), agp, tools is not None, extra, got, want))
                    _check_known_difference(name, got, want)
                elif isinstance(want, tuple):
                    refused += 1
                else:
                    rendered += 1
    unexpected = {k: v for k, v in differing.items() if k not in KNOWN_DIFFERENCES}
    assert not unexpected, "\n\n".join(f"{k}: {v}" for k, v in unexpected.items())
    stale = set(KNOWN_DIFFERENCES) - set(differing)
    assert not stale, f"listed as differing but equal now: {stale}"
    assert rendered > 400 and refused < rendered / 4


def test_builtin_templates_render_like_jinja2():
    for name, src in BUILTIN.items():
        for conv in (SYSTEM_USER, MULTI_TURN, NO_SYSTEM):
            for agp in (True, False):
                assert _cpp(src, conv, agp, bos="<bos>", eos="<eos>") == _py(src, conv, agp, bos="<bos>", eos="<eos>")


def test_jinja2_source_reading():
    # jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False)
    for src in ("a\r\nb{{ bos_token }}\rc\n", "x\n\n", "x\r", "x\r\r", "x\r\n\r\n",
                "{% if true %}\r\n  y\r\n{% endif %}\r\n", "z"):
        assert _cpp(src, SYSTEM_USER, True) == _py(src, SYSTEM_USER, True)


def test_template_errors_are_template_errors():
    msgs = json.dumps(SYSTEM_USER)
    with pytest.raises(TemplateError, match="does not parse"):
        _testing.render_chat_template("{% for m in messages %}{{ m.content }}", msgs)
    with pytest.raises(TemplateError, match="failed to render"):
        _testing.render_chat_template("{{ no_such_function(1) }}", msgs)
    # raise_exception's message is the error's message, as in Python
    with pytest.raises(TemplateError) as e:
        _testing.render_chat_template("{{ raise_exception('roles must alternate') }}", msgs)
    assert str(e.value) == "roles must alternate"
    # variables the renderer sets are refused, as ChatTemplate.render refuses them
    with pytest.raises(TemplateError, match="bos_token"):
        _testing.render_chat_template("x", msgs, extra_json='{"bos_token": "y"}')
    # malformed conversations get Python's messages
    for bad, match in [([], "non-empty"), ([{"content": "x"}], "role"), ([{"role": 1, "content": "x"}], "role must"),
                       ([{"role": "user", "content": 5}], "content must be"),
                       ([{"role": "user", "content": [{"type": "image"}]}], "only text")]:
        with pytest.raises(akunu.AkunuError, match=match):
            _testing.render_chat_template("x", json.dumps(bad))
        with pytest.raises(akunu.AkunuError, match=match):
            ChatTemplate("x", "t").render(bad)


def test_deep_templates_are_errors_or_render():
    # endless macro recursion: an error, as jinja2's RecursionError is one in Python
    endless = "{% macro f(n) %}{% for m in messages %}{{ f(n + 1) }}{% endfor %}{% endmacro %}{{ f(0) }}"
    with pytest.raises(TemplateError, match="recurses too deep"):
        _testing.render_chat_template(endless, json.dumps(SYSTEM_USER))
    with pytest.raises(TemplateError, match="recursion"):
        ChatTemplate(endless, "t").render(SYSTEM_USER)
    bounded = "{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(100) }}"
    assert _cpp(bounded, SYSTEM_USER, True) == _py(bounded, SYSTEM_USER, True)
    # a long left-deep expression and deep nesting: rendered on the deep stack, no crash
    chain = "{{ " + " + ".join(["'a'"] * 20000) + " }}"
    assert _testing.render_chat_template(chain, json.dumps(SYSTEM_USER)) == "a" * 20000
    nested = "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}"
    assert _testing.render_chat_template(nested, json.dumps(SYSTEM_USER)) == "1"
    with pytest.raises(akunu.AkunuError, match="nested deeper"):
        _testing.render_chat_template("x", "[" * 1000 + "]" * 1000)
    with pytest.raises(TemplateError, match="bytes, more than"):
        _testing.render_chat_template("x" * (256 * 1024 + 1), json.dumps(SYSTEM_USER))


# --- the C API (include/akunu/chat.h) through ctypes ----------------------------------

AKUNU_OK, AKUNU_ERROR = 0, 1
THINKING = {None: 0, True: 1, False: 2}


class LoadParams(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("n_ctx", ctypes.c_int32), ("n_threads", ctypes.c_int32)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class ChatParams(ctypes.Structure):
    _fields_ = [("add_generation_prompt", ctypes.c_bool), ("tools_json", ctypes.c_char_p),
                ("enable_thinking", ctypes.c_int), ("template_kwargs_json", ctypes.c_char_p),
                ("chat_template", ctypes.c_char_p)]


@pytest.fixture(scope="module")
def lib():
    pkg = os.path.dirname(akunu.__file__)
    paths = glob.glob(os.path.join(pkg, "lib", "libakunu.so*")) + glob.glob(os.path.join(pkg, "lib", "libakunu*.dylib"))
    if not paths:
        pytest.fail("libakunu is missing from the akunu package (akunu/lib)")
    L = ctypes.CDLL(paths[0])
    P = ctypes.POINTER
    L.akunu_last_error.restype = ctypes.c_char_p
    L.akunu_load_model.argtypes = [ctypes.c_char_p, P(LoadParams), P(ctypes.c_void_p)]
    L.akunu_free_model.argtypes = [ctypes.c_void_p]
    L.akunu_format_chat.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, P(ctypes.c_char_p),
                                    P(ctypes.c_size_t)]
    L.akunu_format_chat_messages.argtypes = [ctypes.c_void_p, P(ChatMessage), ctypes.c_int32, P(ChatParams),
                                             P(ctypes.c_char_p), P(ctypes.c_size_t)]
    L.akunu_default_chat_params.restype = ChatParams
    L.akunu_chat_template.argtypes = [ctypes.c_void_p]
    L.akunu_chat_template.restype = ctypes.c_char_p
    L.akunu_chat_template_info.argtypes = [ctypes.c_void_p, P(ctypes.c_char_p), P(ctypes.c_char_p)]
    for f in ("akunu_load_model", "akunu_format_chat", "akunu_format_chat_messages", "akunu_chat_template_info"):
        getattr(L, f).restype = ctypes.c_int
    return L


def _error(lib):
    return lib.akunu_last_error().decode()


class CModel:
    """A model loaded through the C API, with the chat entry points as Python calls."""

    def __init__(self, lib, path):
        self.lib, self.h = lib, ctypes.c_void_p()
        params = LoadParams(b"cpu", 64, 1)
        assert lib.akunu_load_model(path.encode(), ctypes.byref(params), ctypes.byref(self.h)) == AKUNU_OK, \
            _error(lib)

    def format_chat(self, system, user):
        out, n = ctypes.c_char_p(), ctypes.c_size_t()
        st = self.lib.akunu_format_chat(self.h, system, user, ctypes.byref(out), ctypes.byref(n))
        if st != AKUNU_OK:
            return ("error", _error(self.lib))
        assert len(out.value) == n.value
        return out.value.decode()

    def format_messages(self, msgs, agp=True, tools=None, thinking=None, kwargs=None, template=None, raw=None):
        arr = (ChatMessage * max(1, len(msgs)))(*[ChatMessage(m["role"].encode(), m["content"].encode())
                                                 for m in msgs])
        p = self.lib.akunu_default_chat_params()
        assert p.add_generation_prompt and p.enable_thinking == 0 and not p.tools_json
        p.add_generation_prompt = agp
        p.tools_json = None if tools is None else json.dumps(tools).encode()
        p.enable_thinking = THINKING[thinking] if raw is None else raw
        p.template_kwargs_json = None if kwargs is None else json.dumps(kwargs).encode()
        p.chat_template = None if template is None else template.encode()
        out, n = ctypes.c_char_p(), ctypes.c_size_t()
        st = self.lib.akunu_format_chat_messages(self.h, arr, len(msgs), ctypes.byref(p), ctypes.byref(out),
                                                 ctypes.byref(n))
        if st != AKUNU_OK:
            return ("error", _error(self.lib))
        return out.value.decode()

    def template(self):
        v = self.lib.akunu_chat_template(self.h)
        return None if v is None else v.decode()

    def template_info(self):
        name, src = ctypes.c_char_p(), ctypes.c_char_p()
        assert self.lib.akunu_chat_template_info(self.h, ctypes.byref(name), ctypes.byref(src)) == AKUNU_OK
        return name.value.decode(), src.value.decode()

    def close(self):
        self.lib.akunu_free_model(self.h)


def _py_messages(model, msgs, agp=True, tools=None, thinking=None, kwargs=None):
    extra = dict(kwargs or {})
    if thinking is not None:
        extra["enable_thinking"] = thinking
    try:
        return model.chat_template.render(msgs, add_generation_prompt=agp, tools=tools, **extra)
    except TemplateError as e:
        return ("error", str(e))


def _random_gguf(path, arch="llama", template=None):
    """A random-weight GGUF (tests.fixtures.random_gguf) with `template` as tokenizer.chat_template."""
    import gguf

    base = gguf.GGUFWriter

    class WithTemplate(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if template is not None:
                self.add_chat_template(template)

    gguf.GGUFWriter = WithTemplate
    try:
        shape = random_gguf.Shape(n_layers=1, dim=64, n_heads=2, n_kv_heads=1, head_dim=32, ffn_dim=64, vocab=300)
        random_gguf.write_model(path, arch, "F32", seed=1, shape=shape)
    finally:
        gguf.GGUFWriter = base
    return path


def _compare_model(lib, path, py_model, convs, tools_too=False, thinking_too=False):
    c = CModel(lib, path)
    try:
        for conv in convs:
            for agp in (True, False):
                assert c.format_messages(conv, agp) == _py_messages(py_model, conv, agp)
            if tools_too:
                assert c.format_messages(conv, tools=TOOLS) == _py_messages(py_model, conv, tools=TOOLS)
            if thinking_too:
                for t in (True, False):
                    assert c.format_messages(conv, thinking=t) == _py_messages(py_model, conv, thinking=t)
        # the book's form: system prompt + user message, generation prompt on
        want = py_model.apply_chat_template([{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": "Hi ✓"}])
        assert c.format_chat("Be brief.".encode(), "Hi ✓".encode()) == want
        assert c.format_chat(None, b"Hi") == py_model.apply_chat_template([{"role": "user", "content": "Hi"}])
        assert c.format_chat(b"", b"Hi") == py_model.apply_chat_template([{"role": "user", "content": "Hi"}])
        name, src = c.template_info()
        assert (name, src) == (py_model.chat_template.name, py_model.chat_template.source)
        assert c.template() == (src if name == "gguf" else name)
        return c
    except BaseException:
        c.close()
        raise


PLAIN_CONVS = [SYSTEM_USER, MULTI_TURN, [{"role": "user", "content": "Two\nlines ✓"},
                                         {"role": "assistant", "content": " padded "},
                                         {"role": "user", "content": "last"}]]


def test_c_api_gemma3_270m(lib, gemma_path):
    py = akunu.load(gemma_path, n_ctx=64)
    c = _compare_model(lib, gemma_path, py, PLAIN_CONVS[1:])
    try:
        assert c.template() == "gemma" and py.chat_template.name == "gemma"  # the file carries no template
        # Gemma's template folds a system message into the first user turn
        assert c.format_chat(b"Be brief.", b"Hi") == \
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
        # the template's raise_exception: same message as Python's TemplateError
        two_users = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        got = c.format_messages(two_users)
        assert got[0] == "error" and got == _py_messages(py, two_users)
        # an override, as akunu.load(..., chat_template="llama3") takes it
        want = ChatTemplate.for_model(py.metadata, py.tokenizer.tokens, py.tokenizer.bos_id, py.tokenizer.eos_id,
                                      "llama3").render(MULTI_TURN)
        assert c.format_messages(MULTI_TURN, template="llama3") == want
    finally:
        c.close()


def test_c_api_random_gguf_without_template(lib, tmp_path):
    path = _random_gguf(str(tmp_path / "plain.gguf"))
    py = akunu.load(path, n_ctx=64)
    assert py.chat_template.name == "chatml"
    c = _compare_model(lib, path, py, PLAIN_CONVS)
    try:
        assert c.template() == "chatml"
        src = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"
        want = akunu.load(path, n_ctx=64, chat_template=src).apply_chat_template(MULTI_TURN)
        assert c.format_messages(MULTI_TURN, template=src) == want == \
            "<s>[system]You are terse.[user]Hi there[assistant]Hello! How can I help?[user]Name a prime.</s>"
    finally:
        c.close()


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct"])
def test_c_api_random_gguf_with_template(lib, tmp_path, templates, name):
    path = _random_gguf(str(tmp_path / "t.gguf"), template=templates[name])
    py = akunu.load(path, n_ctx=64)
    assert py.chat_template.name == "gguf"
    c = _compare_model(lib, path, py, PLAIN_CONVS, tools_too=True, thinking_too="enable_thinking" in templates[name])
    try:
        assert c.template() == templates[name]
        kw = {"reasoning_effort": "low", "custom_flag": [1, "two", None]}
        assert c.format_messages(SYSTEM_USER, kwargs=kw) == _py_messages(py, SYSTEM_USER, kwargs=kw)
    finally:
        c.close()


def _hf_dir(path, tokenizer_config):
    from tests.fixtures import hf_models

    hf_models.make_decoder("qwen2", path)
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f)
    return path


def test_c_api_hugging_face_directory(lib, tmp_path, templates):
    src = templates["Qwen-Qwen2.5-7B-Instruct"] + "{{ bos_token }}|{{ eos_token }}"
    d = _hf_dir(str(tmp_path / "hf"), {"chat_template": src, "bos_token": "w5",
                                       "eos_token": {"content": "w7", "__type": "AddedToken"}})
    py = akunu.load(d, n_ctx=64)
    assert (py.chat_template.bos_token, py.chat_template.eos_token) == ("w5", "w7")
    _compare_model(lib, d, py, PLAIN_CONVS, tools_too=True).close()
    # no template: the built-in one the vocabulary picks, bos / eos from config.json's ids
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({}, f)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(bos_token_id=[3, 4], eos_token_id=9)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    py = akunu.load(d, n_ctx=64)
    assert (py.chat_template.name, py.chat_template.bos_token, py.chat_template.eos_token) == ("chatml", "w3", "w9")
    _compare_model(lib, d, py, PLAIN_CONVS).close()


def test_c_api_embedding_model_has_no_template(lib, tmp_path):
    from tests.fixtures import hf_models

    d = str(tmp_path / "bert")
    hf_models.make_bert(d)
    with pytest.raises(akunu.AkunuError, match="embedding model"):
        akunu.load(d).apply_chat_template(SYSTEM_USER)
    c = CModel(lib, d)
    try:
        got = c.format_chat(None, b"hi")
        assert got[0] == "error" and "embedding model: it has no chat template" in got[1]
        assert c.template() is None and "embedding model" in _error(lib)
    finally:
        c.close()


def test_c_api_errors(lib, tmp_path):
    path = _random_gguf(str(tmp_path / "e.gguf"))
    c = CModel(lib, path)
    out, n = ctypes.c_char_p(), ctypes.c_size_t()
    try:
        # NULL model, NULL arguments
        assert lib.akunu_format_chat(None, None, b"hi", ctypes.byref(out), None) == AKUNU_ERROR
        assert "null model handle" in _error(lib)
        assert lib.akunu_format_chat(c.h, None, None, ctypes.byref(out), None) == AKUNU_ERROR
        assert "user_message is NULL" in _error(lib)
        assert lib.akunu_format_chat(c.h, None, b"hi", None, None) == AKUNU_ERROR
        assert "out_text is NULL" in _error(lib)
        assert lib.akunu_format_chat_messages(c.h, None, 1, None, ctypes.byref(out), None) == AKUNU_ERROR
        assert "messages is NULL" in _error(lib)
        assert c.format_messages([]) == ("error", "akunu_format_chat_messages: n_messages must be at least 1")
        arr = (ChatMessage * 1)(ChatMessage(None, b"x"))
        assert lib.akunu_format_chat_messages(c.h, arr, 1, None, ctypes.byref(out), None) == AKUNU_ERROR
        assert "messages[0].role is NULL" in _error(lib)
        assert lib.akunu_chat_template(None) is None and "null model handle" in _error(lib)
        assert lib.akunu_chat_template_info(None, None, None) == AKUNU_ERROR
        # NULL content is an empty message, as content None is in Python
        arr = (ChatMessage * 1)(ChatMessage(b"user", None))
        assert lib.akunu_format_chat_messages(c.h, arr, 1, None, ctypes.byref(out), ctypes.byref(n)) == AKUNU_OK
        assert out.value.decode() == akunu.load(path, n_ctx=64).apply_chat_template([{"role": "user", "content": None}])
        # invalid UTF-8 anywhere
        assert lib.akunu_format_chat(c.h, None, b"ok \xff\xfe", ctypes.byref(out), None) == AKUNU_ERROR
        assert "user_message is not valid UTF-8 (byte 3)" in _error(lib)
        assert lib.akunu_format_chat(c.h, b"\xed\xa0\x80", b"hi", ctypes.byref(out), None) == AKUNU_ERROR
        assert "system_prompt is not valid UTF-8" in _error(lib)
        arr = (ChatMessage * 1)(ChatMessage(b"user", b"\xc0\xaf"))
        assert lib.akunu_format_chat_messages(c.h, arr, 1, None, ctypes.byref(out), None) == AKUNU_ERROR
        assert "messages[0].content is not valid UTF-8" in _error(lib)
        # malformed settings
        assert "params->tools_json is not valid JSON" in _bad_json(c)
        assert "JSON object" in c.format_messages(SYSTEM_USER, kwargs=[1, 2])[1]
        assert "bos_token" in c.format_messages(SYSTEM_USER, kwargs={"bos_token": "x"})[1]
        assert "tools" in c.format_messages(SYSTEM_USER, kwargs={"tools": []})[1]
        assert "enable_thinking must be" in c.format_messages(SYSTEM_USER, raw=7)[1]
        # broken templates and raise_exception
        assert "does not parse" in c.format_messages(SYSTEM_USER, template="{% if %}")[1]
        assert "failed to render" in c.format_messages(SYSTEM_USER, template="{{ no_such_function(1) }}")[1]
        assert c.format_messages(SYSTEM_USER, template="{{ raise_exception('no system role, ' + messages[0].role) }}") \
            == ("error", "no system role, system")
        # still usable after the errors; then a freed handle is an error, not a crash
        assert not isinstance(c.format_chat(None, b"hi"), tuple)
    finally:
        c.close()
    assert lib.akunu_format_chat(c.h, None, b"hi", ctypes.byref(out), None) == AKUNU_ERROR
    assert "not a live model handle" in _error(lib)
    assert lib.akunu_chat_template(c.h) is None
    never_loaded = ctypes.c_void_p(0x1000)
    assert lib.akunu_format_chat(never_loaded, None, b"hi", ctypes.byref(out), None) == AKUNU_ERROR
    assert "not a live model handle" in _error(lib)


def _bad_json(c):
    p = c.lib.akunu_default_chat_params()
    p.tools_json = b"[{\"type\": "
    arr = (ChatMessage * 1)(ChatMessage(b"user", b"x"))
    out = ctypes.c_char_p()
    assert c.lib.akunu_format_chat_messages(c.h, arr, 1, ctypes.byref(p), ctypes.byref(out), None) == AKUNU_ERROR
    return _error(c.lib)


# --- the same from a C program (tests/c_api/chat_check.c) ----------------------------

def _c_compiler():
    import shutil

    for name in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]:
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no C compiler (cc, gcc, clang or $CC) found")


@pytest.fixture(scope="module")
def chat_check(tmp_path_factory, lib):
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.path.dirname(akunu.__file__)
    libdir = os.path.join(pkg, "lib")
    include = os.path.join(pkg, "include")
    if not os.path.exists(os.path.join(include, "akunu", "chat.h")):
        include = os.path.join(os.path.dirname(here), "include")
    exe = str(tmp_path_factory.mktemp("chat_c") / "chat_check")
    subprocess.run([_c_compiler(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", include,
                    os.path.join(here, "c_api", "chat_check.c"), "-L", libdir, "-lakunu", f"-Wl,-rpath,{libdir}",
                    "-o", exe], check=True, capture_output=True, text=True)

    def run(*args):
        p = subprocess.run([exe, *args], capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        out, data = {}, p.stdout
        while data:  # "key length\n" + bytes + "\n"
            head, data = data.split(b"\n", 1)
            key, n = head.decode().split(" ")
            out[key], data = data[:int(n)].decode(), data[int(n) + 1:]
        return out

    return run


def test_c_program_formats_like_python(chat_check, gemma_path, tmp_path, templates):
    conv = [("system", "Be brief."), ("user", "Hi ✓"), ("assistant", "Hello."), ("user", "Bye\nnow")]
    flat = [x for pair in conv for x in pair]
    src = templates["meta-llama-Llama-3.1-8B-Instruct"]
    for path in (gemma_path, _random_gguf(str(tmp_path / "t.gguf"), template=src)):
        py = akunu.load(path, n_ctx=64)
        out = chat_check(path, "You are terse.", "Name a prime.", *flat)
        assert out["format"] == py.apply_chat_template([{"role": "system", "content": "You are terse."},
                                                        {"role": "user", "content": "Name a prime."}])
        assert out["messages"] == py.apply_chat_template([{"role": r, "content": c} for r, c in conv])
        assert out["template"] == ("gemma" if path == gemma_path else src)
    assert chat_check(gemma_path, "-", "Hi")["format"] == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
