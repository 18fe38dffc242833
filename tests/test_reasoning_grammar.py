"""Reasoning and constraints together: with thinking on, a constrained reply
(response_format, a forced tool call) is free text up to "</think>" and
constrained after it, through one grammar (Grammar.after_thinking). The
grammar's language is checked with xgrammar's matcher on hand-written
strings; random weights under it give reasoning, then JSON valid for the
schema or a call valid for the function, whole and streamed."""

import json

import jsonschema
import pytest
import xgrammar as xgr
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import akunu
from akunu.grammar import Grammar
from akunu.reasoning import ReasoningSyntax, split
from akunu.tool_call_formats import FORMATS
from akunu.tool_calls import ToolRequest, constraint
from tests.fixtures import random_gguf
from tests.test_tool_calls import QWEN25, SCHEMAS, TOOLS, WEATHER

ITEM = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "count": {"type": "integer", "minimum": 0, "maximum": 99},
    "ok": {"type": "boolean"}},
    "required": ["name", "count", "ok"], "additionalProperties": False}
JSON_OK = '{"name": "pen", "count": 3, "ok": true}'


# -- the grammar's language -------------------------------------------------------------
class Matcher:
    """xgrammar's matcher over a vocabulary of single characters (plus "</think>" as one
    token, as reasoning models have it): whether a string is a whole sentence, a proper
    start of one, or neither."""

    VOCAB = [bytes([c]) for c in range(1, 128)] + ["</think>".encode(), "<think>".encode(), "é".encode()]
    STOP = len(VOCAB)

    def __init__(self, grammar: Grammar):
        info = xgr.TokenizerInfo(self.VOCAB + [b""], xgr.VocabType.RAW, vocab_size=len(self.VOCAB) + 1,
                                 stop_token_ids=[self.STOP])
        self.compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar(grammar.source)

    def status(self, text: str) -> str:
        m = xgr.GrammarMatcher(self.compiled)
        if not m.accept_string(text):
            return "rejected"
        return "whole" if m.accept_token(self.STOP) else "start"

    def tokens(self, pieces):
        """A matcher fed `pieces` (vocabulary entries) one token each, and whether each was accepted."""
        m = xgr.GrammarMatcher(self.compiled)
        return m, [m.accept_token(self.VOCAB.index(p.encode())) for p in pieces]


@pytest.fixture(scope="module")
def inside():
    """The prompt opened <think>: the reply starts in the block."""
    return Matcher(Grammar.after_thinking(Grammar.json_schema(ITEM), opened=True))


@pytest.fixture(scope="module")
def may_open():
    """The reply may open a block itself."""
    return Matcher(Grammar.after_thinking(Grammar.json_schema(ITEM), opened=False))


@pytest.mark.parametrize("text,want", [
    ("Let me count.\n</think>\n\n" + JSON_OK, "whole"),
    ("</think>" + JSON_OK, "whole"),                         # an empty block
    ("a < b, and <think> is text here</think>" + JSON_OK, "whole"),
    ("x </thin k> y</think> " + JSON_OK, "whole"),           # near misses of the marker are reasoning
    ("reasoning without end", "start"),
    ("Let me count.\n</think>\n\n", "start"),
    ("Let me count.\n</think>\n\n{\"name\": \"pen\"", "start"),
    ("first</think>second</think>" + JSON_OK, "rejected"),  # "</think>" twice
    ("first</think></think>" + JSON_OK, "rejected"),
    ("done</think>\n\n\n\n\n" + JSON_OK, "rejected"),        # at most 4 blank characters before the answer
    ("done</think>prose", "rejected"),
    ("done</think>" + JSON_OK + " ", "rejected"),            # nothing after the answer
    ("done</think>{\"name\": \"pencils!!\", \"count\": 3, \"ok\": true}", "rejected"),  # maxLength 8
    ("done</think>{\"name\": \"pé\", \"count\": 3, \"ok\": true}", "whole"),
    ("done</think>{\"name\": \"p\x01\", \"count\": 3, \"ok\": true}", "rejected"),     # raw control character
    ("done</think>{\"name\": \"pen\", \"count\": 100, \"ok\": true}", "rejected"),     # maximum 99
])
def test_reply_inside_the_block(inside, text, want):
    assert inside.status(text) == want


@pytest.mark.parametrize("text,want", [
    ("<think>Let me count.</think>\n" + JSON_OK, "whole"),
    (JSON_OK, "whole"),                                      # the block is optional
    ("<think>open", "start"),
    ("reasoning without a block</think>" + JSON_OK, "rejected"),
    ("<think>a</think><think>b</think>" + JSON_OK, "rejected"),
    ("<think>a</think>b</think>" + JSON_OK, "rejected"),
    (" <think>a</think>" + JSON_OK, "rejected"),
])
def test_reply_that_may_open_the_block(may_open, text, want):
    assert may_open.status(text) == want


def test_the_marker_split_over_tokens_closes_the_block(inside):
    """Tokens may span the boundary: "</" + "think>" closes it as "</think>" does."""
    m, ok = inside.tokens(list("hm<") + list("/think>") + list(JSON_OK))
    assert all(ok) and m.accept_token(Matcher.STOP)
    m, ok = inside.tokens(["h", "</think>", "\n"] + list(JSON_OK))
    assert all(ok) and m.accept_token(Matcher.STOP)


def test_reasoning_token_budget_forces_the_end_of_the_block():
    g = Matcher(Grammar.after_thinking(Grammar.json_schema(ITEM), opened=True, max_tokens=5))
    m, ok = g.tokens(list("abcde"))
    assert all(ok)
    mask = xgr.allocate_token_bitmask(1, len(Matcher.VOCAB) + 1)
    m.fill_next_token_bitmask(mask)
    allowed = {Matcher.VOCAB[i] for i in range(len(Matcher.VOCAB)) if mask[0, i // 32] >> (i % 32) & 1}
    assert allowed == {b"<", b"</think>"}  # only the closing marker may come
    assert g.status("abcd</think>" + JSON_OK) == "whole"
    with pytest.raises(akunu.AkunuError, match="positive integer"):
        Grammar.after_thinking(None, opened=True, max_tokens=0)


def test_free_answer_after_the_block():
    """No constraint (only the reasoning budget): any text after the block, and the reply may end."""
    g = Matcher(Grammar.after_thinking(None, opened=True, max_tokens=50))
    assert g.status("why</think>\n\nBecause.") == "whole"
    assert g.status("why</think>") == "whole"
    assert g.status("why") == "start"


def test_forced_call_after_the_block():
    req = ToolRequest(TOOLS, "named", "get_time", False, FORMATS["hermes"], True)
    g = Matcher(Grammar.after_thinking(constraint(req), opened=True))
    call = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'
    assert g.status("The user wants the time.</think>\n\n" + call) == "whole"
    assert g.status("</think>" + call.replace("get_time", "get_weather")) == "rejected"
    assert g.status("</think>" + call.replace("UTC", "EST")) == "rejected"
    assert g.status("a</think>b</think>" + call) == "rejected"


# -- on a random-weight model -------------------------------------------------------------
# Qwen2.5's template (tools as <tool_call> blocks) whose generation prompt opens the block,
# as DeepSeek-R1's does
OPENS = QWEN25.replace("'<|im_start|>assistant\\n' }}", "'<|im_start|>assistant\\n<think>\\n' }}")
# the same template without the open block, mentioning </think> (as Qwen3's, which strips it
# from history): the model may open a block itself
MAY_OPEN = "{#- earlier replies' <think>...</think> blocks are not replayed -#}\n" + QWEN25
ASK = [{"role": "user", "content": "Count the pens."}]
JSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "item", "schema": ITEM}}


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("think-grammar") / "qwen2.gguf")
    random_gguf.write_model(p, "qwen2", "F16", seed=21)
    return p


@pytest.fixture(scope="module")
def opens(gguf):
    assert OPENS != QWEN25
    return akunu.load(gguf, n_ctx=2048, chat_template=OPENS)


@pytest.fixture(scope="module")
def may(gguf):
    return akunu.load(gguf, n_ctx=2048, chat_template=MAY_OPEN)


def test_reasoning_then_json_that_validates(opens):
    for seed in range(3):
        r = opens.create_chat_completion(ASK, response_format=JSON_FORMAT, max_reasoning_tokens=6,
                                         max_tokens=80, temperature=1.0, seed=seed)
        ChatCompletion.model_validate(r)
        choice = r["choices"][0]
        msg = choice["message"]
        assert choice["finish_reason"] == "stop", r
        assert msg["reasoning_content"] and "</think>" not in msg["reasoning_content"]
        jsonschema.validate(json.loads(msg["content"]), ITEM)
    # the same without the budget: the reasoning runs on (random weights seldom close the block)
    # and the reply is cut off inside it, all reasoning, never unconstrained content
    r = opens.create_chat_completion(ASK, response_format=JSON_FORMAT, max_tokens=12, temperature=1.0, seed=0)
    msg = r["choices"][0]["message"]
    if r["choices"][0]["finish_reason"] == "length":
        assert msg["content"] == "" and msg["reasoning_content"]
    else:
        jsonschema.validate(json.loads(msg["content"]), ITEM)


def test_thinking_off_keeps_the_constraint_from_the_first_token(opens):
    r = opens.create_chat_completion(ASK, response_format=JSON_FORMAT, max_tokens=80, temperature=1.0, seed=1,
                                     reasoning_format="none", max_reasoning_tokens=6)
    msg = r["choices"][0]["message"]
    assert "reasoning_content" not in msg
    jsonschema.validate(json.loads(msg["content"]), ITEM)


def test_model_may_open_the_block(may):
    """Whether or not the reply opens a block, the answer after it is valid JSON."""
    for seed in range(4):
        r = may.create_chat_completion(ASK, response_format=JSON_FORMAT, max_reasoning_tokens=4,
                                       max_tokens=80, temperature=1.0, seed=seed)
        msg = r["choices"][0]["message"]
        assert r["choices"][0]["finish_reason"] == "stop", r
        assert "</think>" not in msg.get("reasoning_content", "") and "<think>" not in msg["content"]
        jsonschema.validate(json.loads(msg["content"]), ITEM)


def test_reasoning_then_forced_tool_call(opens):
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = opens.create_chat_completion(ASK, tools=TOOLS, tool_choice=named, max_reasoning_tokens=5,
                                     max_tokens=120, temperature=0.8, seed=4)
    ChatCompletion.model_validate(r)
    choice = r["choices"][0]
    assert choice["finish_reason"] == "tool_calls", r
    msg = choice["message"]
    assert msg["reasoning_content"] and msg["content"] is None
    (call,) = msg["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER)


def test_streamed_reasoning_and_content_deltas(opens):
    kw = dict(response_format=JSON_FORMAT, max_reasoning_tokens=6, max_tokens=80, temperature=1.0, seed=2)
    whole = opens.create_chat_completion(ASK, **kw)["choices"][0]["message"]
    chunks = list(opens.create_chat_completion(ASK, stream=True, **kw))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    kinds = [k for d in deltas for k in ("reasoning_content", "content") if d.get(k)]
    assert kinds[0] == "reasoning_content" and kinds[-1] == "content"
    assert kinds == sorted(kinds, key=lambda k: k == "content")  # all reasoning, then all content
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == whole["reasoning_content"]
    assert "".join(d.get("content") or "" for d in deltas) == whole["content"]
    jsonschema.validate(json.loads(whole["content"]), ITEM)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_streamed_reasoning_then_call(opens):
    kw = dict(tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_reasoning_tokens=5,
              max_tokens=120, temperature=0.8, seed=6)
    chunks = list(opens.create_chat_completion(ASK, stream=True, **kw))
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content") or "" for d in deltas)
    assert not "".join(d.get("content") or "" for d in deltas)  # no <tool_call> text leaks
    parts = [tc for d in deltas for tc in d.get("tool_calls") or []]
    name = parts[0]["function"]["name"]
    args = "".join(tc["function"]["arguments"] for tc in parts)
    jsonschema.validate(json.loads(args), SCHEMAS[name])
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_budget_without_a_constraint_ends_the_reasoning(opens):
    """max_reasoning_tokens alone: the block closes within the budget, the answer after it is free."""
    free = opens.create_chat_completion(ASK, max_tokens=30, temperature=1.0, seed=3)["choices"][0]
    assert free["finish_reason"] == "length" and free["message"]["content"] == ""  # all reasoning
    r = opens.create_chat_completion(ASK, max_reasoning_tokens=4, max_tokens=30, temperature=1.0, seed=3)
    msg = r["choices"][0]["message"]
    assert msg["reasoning_content"] and len(msg["reasoning_content"]) < len(free["message"]["reasoning_content"])
    # the raw reply (reasoning_format "none"): the marker the budget forced, and the same split
    raw = opens.create_chat_completion(ASK, max_reasoning_tokens=4, max_tokens=30, temperature=1.0, seed=3,
                                       reasoning_format="none")["choices"][0]["message"]["content"]
    assert raw.count("</think>") == 1
    assert split(raw, ReasoningSyntax("think", True))[:2] == (msg["reasoning_content"], msg["content"])


def test_bad_budget_is_a_clear_error(opens):
    for bad in (0, -3, "8", True):
        with pytest.raises(akunu.AkunuError, match="max_reasoning_tokens"):
            opens.create_chat_completion(ASK, max_reasoning_tokens=bad, max_tokens=4)


def test_server_chat_route_takes_the_budget(opens):
    from fastapi.testclient import TestClient

    from akunu.server import create_app

    body = {"model": "t", "messages": ASK, "response_format": JSON_FORMAT, "max_reasoning_tokens": 6,
            "max_tokens": 80, "temperature": 1.0, "seed": 0}
    with TestClient(create_app({"t": opens})) as c:
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        msg = r.json()["choices"][0]["message"]
        assert msg["reasoning_content"]
        jsonschema.validate(json.loads(msg["content"]), ITEM)
        assert msg == opens.create_chat_completion(**{k: v for k, v in body.items() if k != "model"}
                                                   )["choices"][0]["message"]
        for bad in ("6", 0, True):
            r = c.post("/v1/chat/completions", json={**body, "max_reasoning_tokens": bad})
            assert r.status_code == 400 and "max_reasoning_tokens" in r.json()["error"]["message"], r.text
