"""Reasoning apart from the answer: <think> blocks (Qwen3, DeepSeek-R1) and
harmony channels (gpt-oss) split from recorded replies, on the real chat
templates of llama.cpp's set (which decide whether the reply starts inside
the block), streamed deltas that join to the whole reply's fields, the
thinking switch passed to the template, and constrained replies with thinking
turned off."""

import json
import random

import pytest
from fastapi.testclient import TestClient
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import akunu
from akunu.chat_template import ChatTemplate
from akunu.reasoning import DeltaSplitter, ReasoningSyntax, split, syntax_for, template_kwargs
from tests.fixtures import random_gguf
from tests.test_tool_calls import real_templates  # noqa: F401 (llama.cpp's templates, fetched once)

THINK = ReasoningSyntax("think", False)
INSIDE = ReasoningSyntax("think", True)
HARMONY = ReasoningSyntax("harmony", False)

# (syntax, reply as the model wrote it, reasoning, content, reasoning seen)
RECORDED = [
    # Qwen3, thinking on: the model opens the block itself
    (THINK, "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello! How can I help?",
     "The user greets me. I should greet back.", "Hello! How can I help?", True),
    # Qwen3 with enable_thinking false: the template wrote an empty block, the reply is the answer
    (THINK, "Hello! How can I help?", "", "Hello! How can I help?", False),
    # DeepSeek-R1: the generation prompt ends with "<think>\n", the reply starts inside
    (INSIDE, "Okay, 2 + 2 is 4.\n</think>\n\nThe answer is **4**.", "Okay, 2 + 2 is 4.", "The answer is **4**.", True),
    # cut off by max_tokens inside the block: all reasoning
    (INSIDE, "Let me think about this carefully. First", "Let me think about this carefully. First", "", True),
    (THINK, "<think>\nHmm, the user wants", "Hmm, the user wants", "", True),
    (THINK, "  <think>x < y and </thin", "x < y and </thin", "", True),
    # an empty block; text with "<think>" later on is content
    (THINK, "<think>\n\n</think>\n\nDone.", "", "Done.", True),
    (THINK, "Use the <think> tag.", "", "Use the <think> tag.", False),
    # gpt-oss: analysis channel, then the final one
    (HARMONY, "<|channel|>analysis<|message|>User asks the time. No tool needed.<|end|>"
              "<|start|>assistant<|channel|>final<|message|>It is noon.<|return|>",
     "User asks the time. No tool needed.", "It is noon.", True),
    (HARMONY, "<|channel|>analysis<|message|>Still going", "Still going", "", True),
    (HARMONY, "Plain text", "", "Plain text", False),
    (None, "<think>kept</think> as is", "", "<think>kept</think> as is", False),
]


@pytest.mark.parametrize("syntax,text,reasoning,content,seen", RECORDED)
def test_recorded_replies_split(syntax, text, reasoning, content, seen):
    assert split(text, syntax) == (reasoning, content, seen)


@pytest.mark.parametrize("syntax,text,reasoning,content,seen", RECORDED)
def test_stream_deltas_join_to_the_whole_reply(syntax, text, reasoning, content, seen):
    rng = random.Random(len(text))
    for trial in range(20):
        s = DeltaSplitter(syntax)
        got_r, got_c, i = [], [], 0
        while i < len(text):
            n = 1 if trial == 0 else rng.randint(1, 6)
            r, c = s.feed(text[i:i + n])
            got_r.append(r)
            got_c.append(c)
            i += n
        r, c = s.finish()
        assert ("".join(got_r) + r, "".join(got_c) + c) == (reasoning, content)


def test_real_templates_decide_where_the_reply_starts(real_templates):
    msgs = [{"role": "user", "content": "Hi"}]

    def prompt(name, **kw):
        src = real_templates[name]
        text = ChatTemplate(src, name, "<s>", "</s>").render(msgs, **kw)
        return text, syntax_for(src, text)

    # Qwen3: the model opens <think> itself; enable_thinking false writes an empty block
    text, syn = prompt("Qwen-Qwen3-0.6B")
    assert text.endswith("<|im_start|>assistant\n") and syn == THINK
    text, syn = prompt("Qwen-Qwen3-0.6B", **template_kwargs({"enable_thinking": False}))
    assert text.endswith("<think>\n\n</think>\n\n") and syn == THINK
    qwen3_reply = "<think>\nThe user said hi.\n</think>\n\nHi! How can I help you today?"
    assert split(qwen3_reply, syn)[:2] == ("The user said hi.", "Hi! How can I help you today?")
    # DeepSeek-R1 (llama.cpp's template): the generation prompt opens the block
    text, syn = prompt("llama-cpp-deepseek-r1")
    assert text.endswith("<think>\n") and syn == INSIDE
    r1_reply = "Greeting. Reply politely.\n</think>\n\nHello! How can I assist you today?"
    assert split(r1_reply, syn)[:2] == ("Greeting. Reply politely.", "Hello! How can I assist you today?")
    # the R1 distill's template in llama.cpp's set opens it only with enable_thinking
    assert prompt("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")[1] == THINK
    assert prompt("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", enable_thinking=True)[1] == INSIDE
    # gpt-oss: harmony channels, reasoning_effort reaches the system message
    text, syn = prompt("openai-gpt-oss-120b", **template_kwargs(reasoning_effort="high"))
    assert syn == HARMONY and "Reasoning: high" in text
    # a template without reasoning
    assert prompt("google-gemma-2-2b-it")[1] is None


def test_bad_switches_are_clear_errors():
    for kw, match in [({"chat_template_kwargs": []}, "object"), ({"enable_thinking": "no"}, "true or false"),
                      ({"reasoning_effort": "max"}, "low"), ({"chat_template_kwargs": {"tools": []}}, "tools"),
                      ({"chat_template_kwargs": {"enable_thinking": 1}}, "true or false")]:
        with pytest.raises(akunu.AkunuError, match=match):
            template_kwargs(**kw)


# -- end to end on random weights carrying the real templates -------------------------------------
@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("think") / "qwen2.gguf")
    random_gguf.write_model(p, "qwen2", "F16", seed=13)
    return p


@pytest.fixture(scope="module")
def r1(gguf, real_templates):
    return akunu.load(gguf, n_ctx=512, chat_template=real_templates["deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"])


@pytest.fixture(scope="module")
def qwen3(gguf, real_templates):
    return akunu.load(gguf, n_ctx=512, chat_template=real_templates["Qwen-Qwen3-0.6B"])


MSGS = [{"role": "user", "content": "What is 2 + 2?"}]


def test_reply_inside_an_open_block_is_reasoning(r1):
    on = {"chat_template_kwargs": {"enable_thinking": True}}
    r = r1.create_chat_completion(MSGS, max_tokens=12, temperature=0, **on)
    ChatCompletion.model_validate(r)
    raw = r1.create_chat_completion(MSGS, max_tokens=12, temperature=0, reasoning_format="none", **on)
    text = raw["choices"][0]["message"]["content"]
    assert "reasoning_content" not in raw["choices"][0]["message"]
    msg = r["choices"][0]["message"]
    if "</think>" not in text:  # random weights: the block never closes, the reply ran out of tokens
        assert msg["reasoning_content"] == text.strip() and msg["content"] == ""
        assert r["choices"][0]["finish_reason"] == "length"
    assert (msg["reasoning_content"], msg["content"]) == split(text, INSIDE)[:2]
    chunks = list(r1.create_chat_completion(MSGS, max_tokens=12, temperature=0, stream=True, **on))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == msg["reasoning_content"]
    assert "".join(d.get("content") or "" for d in deltas) == msg["content"]
    # thinking off (the template's default here): the block is closed in the prompt, all content
    off = r1.create_chat_completion(MSGS, max_tokens=12, temperature=0, enable_thinking=False)
    assert off["usage"]["prompt_tokens"] > r["usage"]["prompt_tokens"]  # "</think>" written after "<think>\n"
    assert "reasoning_content" not in off["choices"][0]["message"]


def test_constrained_reply_with_thinking_off_is_all_content(qwen3):
    """Thinking turned off by the caller: the constraint applies from the reply's first token
    (with thinking on it applies after the reasoning: tests/test_reasoning_grammar.py)."""
    plain = qwen3.create_chat_completion(MSGS, max_tokens=4, temperature=0)
    off = qwen3.create_chat_completion(MSGS, max_tokens=4, temperature=0, enable_thinking=False)
    assert off["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]  # the empty <think></think>
    r = qwen3.create_chat_completion(MSGS, max_tokens=40, temperature=0.7, seed=2, enable_thinking=False,
                                     response_format={"type": "json_object"})
    assert r["usage"]["prompt_tokens"] == off["usage"]["prompt_tokens"]
    msg = r["choices"][0]["message"]
    assert "reasoning_content" not in msg
    if r["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(msg["content"]), dict)


def test_server_passes_the_switches(r1):
    app = __import__("akunu.server", fromlist=["create_app"]).create_app({"r1": r1})
    base = {"model": "r1", "messages": MSGS, "max_tokens": 8, "temperature": 0}
    with TestClient(app) as c:
        got = c.post("/v1/chat/completions", json={**base, "chat_template_kwargs": {"enable_thinking": True}})
        assert got.status_code == 200, got.text
        want = r1.create_chat_completion(MSGS, max_tokens=8, temperature=0, enable_thinking=True)
        assert got.json()["choices"][0]["message"] == want["choices"][0]["message"]
        raw = c.post("/v1/chat/completions", json={**base, "enable_thinking": True, "reasoning_format": "none"})
        assert "reasoning_content" not in raw.json()["choices"][0]["message"]
        for bad, param in [({"enable_thinking": "yes"}, "enable_thinking"), ({"chat_template_kwargs": 3},
                                                                              "chat_template_kwargs"),
                           ({"reasoning_format": 1}, "reasoning_format")]:
            r = c.post("/v1/chat/completions", json={**base, **bad})
            assert r.status_code == 400 and r.json()["error"]["param"] == param
        for bad in ({"reasoning_format": "xml"}, {"chat_template_kwargs": {"messages": []}},
                    {"reasoning_effort": "extreme"}):
            r = c.post("/v1/chat/completions", json={**base, **bad})
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text
