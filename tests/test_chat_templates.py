"""Chat templates render exactly as transformers' apply_chat_template does,
for the templates llama.cpp ships (models/templates in the llama-cpp-python
sdist), on multi-turn conversations; built-in fallbacks for files without one."""

import glob
import os

import pytest

from akunu.chat_template import BUILTIN, ChatTemplate, TemplateError

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"},
     {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Name a prime."}],
    [{"role": "user", "content": "Two\nlines, unicode: café ✓"}, {"role": "assistant", "content": " padded "},
     {"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"},
     {"role": "user", "content": "last"}],
]


@pytest.fixture(scope="module")
def templates(cache_dir):
    from tests.fixtures import vocab_cases as fetch_vocab_cases

    dest = os.path.join(cache_dir, "vocab")
    try:
        fetch_vocab_cases.fetch(dest)
    except Exception as e:  # pragma: no cover - offline
        pytest.skip(f"cannot fetch llama.cpp's templates (offline?): {e}")
    files = sorted(glob.glob(os.path.join(fetch_vocab_cases.templates_dir(dest), "*.jinja")))
    assert len(files) > 20
    return files


def reference(src, conv, add_generation_prompt):
    from transformers.utils.chat_template_utils import render_jinja_template

    out = render_jinja_template(conversations=[conv], chat_template=src, add_generation_prompt=add_generation_prompt,
                                bos_token="<s>", eos_token="</s>")
    return out[0][0] if isinstance(out, tuple) else out[0]


def test_templates_render_like_transformers(templates):
    compared = 0
    for path in templates:
        src = open(path, encoding="utf-8").read()
        for conv in CONVERSATIONS:
            for agp in (True, False):
                try:
                    want = reference(src, conv, agp)
                except Exception:
                    want = None
                try:
                    got = ChatTemplate(src, "t", "<s>", "</s>").render(conv, add_generation_prompt=agp)
                except TemplateError:
                    got = None
                assert got == want, f"{os.path.basename(path)} differs (generation prompt {agp}, {len(conv)} msgs)"
                compared += want is not None
    assert compared > 150


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_templates_render_like_transformers(name):
    for conv in CONVERSATIONS[1:]:
        conv = conv if name != "gemma" else conv  # Gemma folds the system message into the first turn
        want = reference(BUILTIN[name], conv, True)
        assert ChatTemplate(BUILTIN[name], name, "<s>", "</s>").render(conv) == want


def test_gemma_fallback_and_role_errors(gemma):
    assert gemma.chat_template.name == "gemma"  # the real file carries no template
    text = gemma.apply_chat_template([{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "Hi"}])
    assert text == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    with pytest.raises(TemplateError, match="alternate"):
        gemma.apply_chat_template([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_bad_messages_are_clear_errors(gemma):
    import akunu

    for bad, match in [([], "non-empty"), ([{"content": "x"}], "role"), ("hello", "non-empty list"),
                       ([{"role": "user", "content": 5}], "content must be")]:
        with pytest.raises(akunu.AkunuError, match=match):
            gemma.apply_chat_template(bad)
