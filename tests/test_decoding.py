"""Decoding strategies end to end: stop strings, KV-cache reuse across
turns, n-gram speculative decoding (identical to greedy) and grammars."""

import json
import re

import jsonschema
import pytest

import akunu
from tests.fixtures import random_gguf
from akunu.stop_strings import StopStringFilter


@pytest.fixture(scope="module", params=["llama", "qwen3", "gemma3"])
def model(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("d") / f"{request.param}.gguf")
    random_gguf.write_model(path, request.param, "F16", seed=21)
    return akunu.load(path, n_ctx=512)


# -- stop strings -----------------------------------------------------------------
def test_stop_filter_holds_back_partial_matches():
    f = StopStringFilter(["</answer>", "STOP"])
    out = [f.feed(p) for p in ["The result", " is 4</", "ans", "wer> and more"]]
    assert "".join(out) == "The result is 4" and f.stopped
    f = StopStringFilter(["###"])
    assert f.feed("a#") == "a" and f.feed("#b") == "##b" and f.flush() == "" and not f.stopped
    f = StopStringFilter(["xy"])
    assert f.feed("abc x") == "abc " and f.flush() == "x"


def test_stop_string_ends_generation_across_tokens(model):
    full = model.generate("once upon", max_tokens=40)
    text = full.text
    assert len(text) > 12
    stop = text[5:11]  # almost surely spans a token boundary
    res = model.generate("once upon", max_tokens=40, stop=[stop, "never-appears"])
    assert res.text == text[: text.find(stop)] and res.finish_reason == "stop"
    streamed = "".join(model.generate("once upon", max_tokens=40, stop=stop, stream=True))
    assert streamed == res.text


def test_max_tokens_and_finish_reason(model):
    res = model.generate("a", max_tokens=3, logit_bias={model.stop_ids[0]: -float("inf")})
    assert len(res.tokens) == 3 and res.finish_reason == "length"
    res = model.generate("a", max_tokens=3, logit_bias={model.stop_ids[0]: 100.0})
    assert res.tokens == [model.stop_ids[0]] and res.finish_reason == "stop" and res.text == ""


# -- multi-turn continuation -------------------------------------------------------
def test_continuation_reuses_the_kv_cache(model):
    model.reset()
    first = model.generate("The first turn says", max_tokens=12)
    assert first.stats.cached_tokens == 0
    prompt = model.tokenize("The first turn says") + first.tokens + model.tokenize(" and then", add_bos=False)
    second = model.generate(prompt, max_tokens=12)
    # everything but the last generated token (never fed) was reused
    assert second.stats.cached_tokens == len(prompt) - len(model.tokenize(" and then", add_bos=False)) - 1
    model.reset()
    fresh = model.generate(prompt, max_tokens=12)
    assert fresh.stats.cached_tokens == 0
    assert fresh.tokens == second.tokens


def test_shared_prefix_is_reused_and_divergence_recomputed(model):
    model.reset()
    a = model.generate("alpha beta gamma delta", max_tokens=4)
    b = model.generate("alpha beta omega", max_tokens=4)
    assert 0 < b.stats.cached_tokens < b.stats.prompt_tokens
    model.reset()
    assert model.generate("alpha beta omega", max_tokens=4).tokens == b.tokens
    same = model.generate("alpha beta omega", max_tokens=4)  # whole prompt cached: last token is refed
    assert same.tokens == b.tokens and same.stats.cached_tokens == same.stats.prompt_tokens - 1
    assert a.tokens


# -- speculative decoding -----------------------------------------------------------
REPETITIVE = "one two three four five six seven eight " * 6


@pytest.mark.parametrize("prompt", [REPETITIVE, "A short and ordinary prompt"])
def test_speculative_equals_greedy(model, prompt):
    model.reset()
    plain = model.generate(prompt, max_tokens=64)
    model.reset()
    spec = model.generate(prompt, max_tokens=64, speculative=True)
    assert spec.tokens == plain.tokens
    assert spec.finish_reason == plain.finish_reason and spec.text == plain.text
    print(f"{model.config['architecture']}: drafted {spec.stats.draft_tokens}, accepted "
          f"{spec.stats.accepted_tokens} ({spec.stats.acceptance_rate:.0%})")


def test_speculative_is_greedy_only(model):
    with pytest.raises(akunu.AkunuError, match="greedy only"):
        model.generate("x", max_tokens=4, speculative=True, temperature=0.7)


def test_speculative_on_real_model(gemma):
    prompt = gemma.tokenize(gemma.apply_chat_template([{"role": "user", "content": (
        "Repeat this list exactly, twice: apple, banana, cherry, date, elderberry, fig, grape.")}]), add_bos=False)
    gemma.reset()
    plain = gemma.generate(prompt, max_tokens=48)
    gemma.reset()
    spec = gemma.generate(prompt, max_tokens=48, speculative=True)
    assert spec.tokens == plain.tokens
    print(f"gemma3-270m repetitive: accepted {spec.stats.accepted_tokens}/{spec.stats.draft_tokens} drafts; "
          f"{len(spec.tokens)} tokens")
    assert spec.stats.accepted_tokens > 0


# -- grammars -----------------------------------------------------------------------
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
POINT = {
    "type": "object",
    # bounded: a random-weight model would otherwise write digits forever
    "properties": {"x": {"type": "integer", "minimum": -50, "maximum": 50},
                   "y": {"type": "integer", "minimum": 0, "maximum": 1000}, "label": {"enum": ["a", "b"]},
                   "ok": {"type": "boolean"}},
    "required": ["x", "y", "label", "ok"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("schema", [PERSON, POINT], ids=["person", "point"])
def test_json_schema_outputs_validate_random_models(model, schema):
    for i in range(50):
        r = model.generate("Answer in JSON:", max_tokens=200, json_schema=schema,
                           temperature=0.0 if i == 0 else 1.0, seed=i)
        assert r.finish_reason == "stop", r.text
        jsonschema.validate(json.loads(r.text), schema)


@pytest.mark.parametrize("schema", [PERSON, POINT], ids=["person", "point"])
def test_json_schema_outputs_validate_real_model(gemma, schema):
    prompt = gemma.apply_chat_template([{"role": "user", "content": "Describe a person as JSON."}])
    ids = gemma.tokenize(prompt, add_bos=False)
    for i in range(50):
        r = gemma.generate(ids, max_tokens=80, json_schema=schema, temperature=0.0 if i == 0 else 0.9, seed=i)
        assert r.finish_reason == "stop", r.text
        jsonschema.validate(json.loads(r.text), schema)


def test_any_json_object(model):
    r = model.generate("{", max_tokens=200, json_schema="any", temperature=0.0)
    if r.finish_reason == "stop":
        assert isinstance(json.loads(r.text), dict)
    else:  # unbounded object from a random model: every prefix is still valid JSON so far
        assert r.text.startswith("{")


ARITH = r"""
root ::= expr
expr ::= term (("+" | "-") term){0,3}
term ::= num | "(" expr ")"
num ::= [1-9] [0-9]{0,2}
"""


def test_gbnf_grammar_is_obeyed(model, gemma):
    pattern = re.compile(r"^[0-9()+\-]+$")
    for m in (model, gemma):
        for i in range(10):
            r = m.generate("2+2=", max_tokens=60, grammar=ARITH, temperature=1.0, seed=i)
            assert r.finish_reason == "stop", r.text
            assert pattern.match(r.text) and r.text.count("(") == r.text.count(")"), r.text
            eval(r.text)  # a well-formed arithmetic expression (digits, +, -, parentheses only)


@pytest.mark.parametrize("kwargs,match", [
    (dict(grammar="root ::= ("), "invalid gbnf"), (dict(json_schema="{not json"), "not valid JSON"),
    (dict(json_schema={"type": "object"}, grammar="root ::= \"a\""), "either"),
    (dict(json_schema=42), "dict or a JSON string"),
])
def test_bad_grammars_fail_before_work(model, kwargs, match):
    model.reset()
    with pytest.raises(akunu.AkunuError, match=match):
        model.generate("x", max_tokens=4, **kwargs)
    assert model._core().n_past == 0
