"""Tool calling: each family's call syntax parsed from real-format replies
(several calls, text before them, malformed JSON left as content), stream
deltas that add up to the same calls, tools rendered by real chat templates
as transformers renders them, and required / named calls constrained by the
grammar so that even random weights produce calls that validate against the
function's schema, through the Python API and the openai client."""

import glob
import json
import os
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import httpx
import jsonschema
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import akunu
from akunu.tool_call_formats import FORMATS, parse
from akunu.tool_calls import DeltaStream, ToolRequest, prepare, supports_tools, tool_format
from tests.fixtures import random_gguf

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}}, "required": ["zone"],
        "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
NAMES = ["get_weather", "get_time"]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]

# Qwen2.5-Instruct's chat template (Hermes-style <tool_call> blocks), as its tokenizer_config.json has it
QWEN25 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""


def calls_of(parsed):
    return [(c.name, json.loads(c.arguments)) for c in parsed.calls if c.complete]


# -- parsers on each family's real output ---------------------------------------------------
def test_hermes_qwen_calls():
    text = ('I will look both up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
            '"unit": "celsius"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n'
            '</tool_call>')
    p = parse(text, FORMATS["hermes"], NAMES)
    assert p.content == "I will look both up."
    assert calls_of(p) == [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {"zone": "CET"})]
    # the arguments are the model's own JSON text, a valid JSON object
    assert p.calls[0].arguments == '{"city": "Paris", "unit": "celsius"}'
    # no text before, no closing tag at the very end (models sometimes stop there)
    p = parse('<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n', FORMATS["hermes"], NAMES)
    assert p.content == "" and calls_of(p) == [("get_time", {"zone": "UTC"})]
    # malformed JSON stays content, and so does the whole reply
    for bad in ('Sure.\n<tool_call>\n{"name": "get_time", "arguments": {"zone": }}\n</tool_call>',
                '<tool_call>\n{"arguments": {"zone": "UTC"}}\n</tool_call>',
                '<tool_call>\n{"name": "get_time", "arguments": [1, 2]}\n</tool_call>',
                '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}'):
        p = parse(bad, FORMATS["hermes"], NAMES)
        assert p.calls == [] and p.content == bad
    # one malformed block among good ones: the good call is a call, the bad one text
    mixed = ('<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>\n'
             '<tool_call>{"name": oops}</tool_call>')
    p = parse(mixed, FORMATS["hermes"], NAMES)
    assert calls_of(p) == [("get_time", {"zone": "UTC"})] and p.content == '<tool_call>{"name": oops}</tool_call>'
    # the tag hidden (a control token): the call JSON alone, naming an offered tool
    p = parse('{"name": "get_time", "arguments": {"zone": "UTC"}}', FORMATS["hermes"], NAMES)
    assert calls_of(p) == [("get_time", {"zone": "UTC"})]
    assert parse('{"name": "Bob", "arguments": {}}', FORMATS["hermes"], NAMES).calls == []
    # plain text is untouched
    assert parse("No tools needed: 2 + 2 = 4.\n", FORMATS["hermes"], NAMES).content == "No tools needed: 2 + 2 = 4.\n"


def test_llama3_calls():
    f = FORMATS["llama3"]
    p = parse('{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "celsius", "days": 3}}', f, NAMES)
    assert p.content == "" and calls_of(p) == [("get_weather", {"city": "Oslo", "unit": "celsius", "days": 3})]
    # <|python_tag|> when the tokenizer shows it; several calls separated by ';'
    p = parse('<|python_tag|>{"name": "get_time", "parameters": {"zone": "PST"}}; '
              '{"name": "get_weather", "parameters": {"city": "Rome", "unit": "celsius"}}', f, NAMES)
    assert [c[0] for c in calls_of(p)] == ["get_time", "get_weather"]
    # JSON that names no offered tool is an answer, not a call
    for answer in ('{"name": "Ada Lovelace", "parameters": {"born": 1815}}', '{"result": 4}', '[1, 2, 3]'):
        p = parse(answer, f, NAMES)
        assert p.calls == [] and p.content == answer
    # untagged JSON must name the function first; then a JSON answer streams as content at once
    args_first = '{"parameters": {"zone": "UTC"}, "name": "get_time"}'
    assert parse(args_first, f, NAMES).calls == []
    ds = DeltaStream(ToolRequest(TOOLS, "auto", None, True, f, True))
    assert ds.feed('{"answer": "the weather is') == [{"content": '{"answer": "the weather is'}]
    # behind the family's own tag, any key order
    p = parse('<tool_call>{"arguments": {"zone": "UTC"}, "name": "get_time"}</tool_call>', FORMATS["hermes"], NAMES)
    assert calls_of(p) == [("get_time", {"zone": "UTC"})]
    # a call is only recognised at the start of the reply
    text = 'Here is how: {"name": "get_time", "parameters": {"zone": "UTC"}}'
    assert parse(text, f, NAMES).content == text


def test_mistral_calls():
    f = FORMATS["mistral"]
    # [TOOL_CALLS] is a control token: the visible reply is the list
    p = parse('[{"name": "get_weather", "arguments": {"city": "Lyon", "unit": "celsius"}}, '
              '{"name": "get_time", "arguments": {"zone": "CET"}, "id": "abcDEF123"}]', f, NAMES)
    assert calls_of(p) == [("get_weather", {"city": "Lyon", "unit": "celsius"}), ("get_time", {"zone": "CET"})]
    p = parse('Checking.[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "UTC"}}]', f, NAMES)
    assert p.content == "Checking." and calls_of(p) == [("get_time", {"zone": "UTC"})]
    # the newer name[ARGS]{...} form
    p = parse('[TOOL_CALLS]get_time[ARGS]{"zone": "PST"}', f, NAMES)
    assert calls_of(p) == [("get_time", {"zone": "PST"})]
    # arguments given as a JSON string are decoded
    p = parse('[{"name": "get_time", "arguments": "{\\"zone\\": \\"UTC\\"}"}]', f, NAMES)
    assert p.calls[0].arguments == '{"zone": "UTC"}'
    bad = '[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "UTC"}'
    assert parse(bad, f, NAMES).content == bad


def test_generic_and_gemma_json_calls():
    f = FORMATS["generic"]
    p = parse('{"name": "get_time", "arguments": {"zone": "UTC"}}', f, NAMES)
    assert calls_of(p) == [("get_time", {"zone": "UTC"})]
    p = parse('Let me check.\n```json\n[{"name": "get_time", "arguments": {"zone": "UTC"}}, '
              '{"name": "get_weather", "arguments": {"city": "Bern", "unit": "celsius"}}]\n```', f, NAMES)
    assert p.content == "Let me check." and [c[0] for c in calls_of(p)] == ["get_time", "get_weather"]
    code = "Use this:\n```python\nprint(1)\n```\n"
    assert parse(code, f, NAMES).content == code and parse(code, f, NAMES).calls == []
    assert parse('```json\n{"city": "Paris"}\n```', f, NAMES).calls == []


STREAM_CASES = [
    ("hermes", 'Let me look.\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": '
               '"celsius", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": '
               '{"zone": "CET"}}\n</tool_call>'),
    ("hermes", 'Text with a < sign, <tool and <tool_cal but no call.'),
    ("hermes", 'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC", "x": "}]\\"{"}}\n</tool_call>'),
    ("llama3", '{"name": "get_time", "parameters": {"zone": "UTC"}}; {"name": "get_weather", "parameters": '
               '{"city": "Oslo", "unit": "celsius"}}'),
    ("llama3", '{"answer": 42}'),
    ("mistral", '[{"name": "get_time", "arguments": {"zone": "PST"}}, {"name": "get_weather", "arguments": '
                '"{\\"city\\": \\"Rome\\", \\"unit\\": \\"celsius\\"}"}]'),
    ("mistral", 'Ok.[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}'),
    ("generic", 'Calling:\n```json\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n```'),
    ("generic", '  {"name": "get_weather", "arguments": {"city": "Lima", "unit": "fahrenheit"}}  '),
]


@pytest.mark.parametrize("fmt,text", STREAM_CASES)
def test_stream_deltas_reassemble_to_the_calls(fmt, text):
    req = ToolRequest(TOOLS, "auto", None, True, FORMATS[fmt], True)
    whole = req.parse(text)
    for step in (1, 2, 5, 16, len(text)):
        ds = DeltaStream(req)
        deltas = []
        for i in range(0, len(text), step):
            deltas += ds.feed(text[i:i + step])
        deltas += ds.finish()
        content = "".join(d.get("content", "") for d in deltas)
        assert content == whole.content, step
        if whole.calls:
            # never a piece of the call syntax in the content
            assert "<tool_call>" not in content and '"name"' not in content
        calls = {}
        for d in deltas:
            assert set(d) <= {"content", "tool_calls"}
            for tc in d.get("tool_calls", []):
                if tc["index"] not in calls:
                    # the first delta of a call: index, id, type, name, empty arguments
                    assert tc["id"] and tc["type"] == "function" and tc["function"]["arguments"] == ""
                    calls[tc["index"]] = [tc["function"]["name"], ""]
                else:
                    assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
                    calls[tc["index"]][1] += tc["function"]["arguments"]
        assert [tuple(calls[i]) for i in sorted(calls)] == [(c.name, c.arguments) for c in whole.calls], step
        assert ds.called == bool(whole.calls)


# -- requests and templates -------------------------------------------------------------------
def test_tool_choice_and_tools_are_checked():
    from akunu.chat_template import BUILTIN, ChatTemplate

    t = ChatTemplate(QWEN25, "qwen")
    assert prepare(t, None, None) is None and prepare(t, TOOLS, "none") is None
    assert prepare(t, TOOLS, None).choice == "auto" and prepare(t, TOOLS).fmt.name == "hermes"
    r = prepare(t, TOOLS, {"type": "function", "function": {"name": "get_time"}}, False)
    assert (r.choice, r.forced, r.parallel, r.constrained) == ("named", "get_time", False, True)
    for tools, choice, match in [
            (TOOLS, "sometimes", "tool_choice must be"), (None, "required", "needs a non-empty tools"),
            (TOOLS, {"type": "function", "function": {"name": "nope"}}, "not among the tools"),
            (TOOLS, {"type": "function"}, "tool_choice must be"), ("get_time", None, "tools must be a list"),
            ([{"type": "function", "function": {"name": "bad name!"}}], None, "function.name"),
            ([{"type": "retrieval"}], None, r"tools\[0\]"), (TOOLS + TOOLS[:1], None, "appears twice"),
            ([{"type": "function", "function": {"name": "f", "parameters": {"type": "strange"}}}], None,
             "not a valid JSON schema")]:
        with pytest.raises(akunu.AkunuError, match=match):
            prepare(t, tools, choice)
    with pytest.raises(akunu.AkunuError, match="parallel_tool_calls"):
        prepare(t, TOOLS, "auto", "yes")
    assert not supports_tools(ChatTemplate(BUILTIN["gemma"], "gemma"))
    assert tool_format(ChatTemplate(BUILTIN["gemma"], "gemma")).name == "generic"


@pytest.fixture(scope="module")
def real_templates(cache_dir):
    from tests.fixtures import vocab_cases

    dest = os.path.join(cache_dir, "vocab")
    try:
        vocab_cases.fetch(dest)
    except Exception as e:  # pragma: no cover - offline
        pytest.skip(f"cannot fetch llama.cpp's templates (offline?): {e}")
    return {os.path.basename(p)[:-6]: open(p, encoding="utf-8").read()
            for p in glob.glob(os.path.join(vocab_cases.templates_dir(dest), "*.jinja"))}


HISTORY = [
    {"role": "user", "content": "Weather in Paris and the time in CET?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "abcDEF123", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
    {"role": "tool", "tool_call_id": "abcDEF123", "content": '{"temperature": 21}'},
    {"role": "assistant", "content": "It is 21 degrees."},
    {"role": "user", "content": "Thanks. And tomorrow?"},
]


@pytest.mark.parametrize("name,family", [
    ("Qwen-Qwen2.5-7B-Instruct", "hermes"), ("Qwen-Qwen3-0.6B", "hermes"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes"), ("meta-llama-Llama-3.1-8B-Instruct", "llama3"),
    ("meta-llama-Llama-3.2-3B-Instruct", "llama3"), ("mistralai-Mistral-Nemo-Instruct-2407", "mistral"),
    ("Mistral-Small-3.2-24B-Instruct-2506", "mistral"), ("google-gemma-2-2b-it", "generic")])
def test_real_templates_render_tools_as_transformers(real_templates, name, family):
    """tools and a history with a call and its result render as transformers' apply_chat_template
    renders them (which takes a call's arguments as a dict)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    from akunu.chat_template import ChatTemplate
    from akunu.openai_api import _chat_prompt

    src = real_templates[name]
    t = ChatTemplate(src, name, "<s>", "</s>")
    assert tool_format(t).name == family
    if family == "generic":
        assert not supports_tools(t)
        return
    req = prepare(t, TOOLS)
    reference_history = json.loads(json.dumps(HISTORY))
    for m in reference_history:
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        if m["content"] is None:
            m["content"] = ""
    out = render_jinja_template(conversations=[reference_history], tools=TOOLS, chat_template=src,
                                add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
    want = out[0][0] if isinstance(out, tuple) else out[0]

    class FakeModel:  # _chat_prompt's view of a model: its template and tokenizer
        chat_template = t
        tokenizer = SimpleNamespace(tokens=["<s>", "</s>"])

        @staticmethod
        def tokenize(text, add_bos):
            return text

    assert _chat_prompt(FakeModel, HISTORY, req) == want
    assert "get_weather" in want and "Paris" in want and "21" in want


def test_templates_without_tools_get_them_in_the_system_message():
    from akunu.chat_template import BUILTIN, ChatTemplate
    from akunu.tool_calls import template_messages

    t = ChatTemplate(BUILTIN["gemma"], "gemma", "<bos>")
    req = prepare(t, TOOLS, "required")
    text = t.render(template_messages(HISTORY, req, t))
    # the tools and the call format in the first turn; the call and its result as plain turns
    assert text.count("<start_of_turn>user") == 3 and '"name": "get_weather"' in text
    assert '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}' in text
    assert "Result of abcDEF123:\n{\"temperature\": 21}<end_of_turn>" in text


def test_family_from_the_vocabulary_when_the_template_has_no_tools():
    """A Qwen GGUF without its template (the built-in ChatML is used) still gets its own
    <tool_call> syntax: the tokenizer has the token."""
    from akunu.chat_template import BUILTIN, ChatTemplate
    from akunu.tool_calls import template_messages

    t = ChatTemplate(BUILTIN["chatml"], "chatml")
    vocab = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
    req = prepare(t, TOOLS, "auto", vocab=vocab)
    assert req.fmt.name == "hermes" and not req.native
    text = t.render(template_messages(HISTORY, req, t, vocab))
    assert text.startswith("<|im_start|>system\nYou can call these functions:")
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>' \
        in text
    assert prepare(ChatTemplate(BUILTIN["chatml"], "chatml"), TOOLS, vocab=["<s>"]).fmt.name == "generic"


# -- constrained calls from models that cannot make them on their own ------------------------------
@pytest.fixture(scope="module")
def qwen_path(tmp_path_factory):
    """A random-weight qwen2 GGUF carrying Qwen2.5's chat template (its own, as a real file would)."""
    d = tmp_path_factory.mktemp("tools")
    plain = str(d / "plain.gguf")
    random_gguf.write_model(plain, "qwen2", "F16", seed=5, shape=random_gguf.Shape(ctx=4096))
    tmpl = d / "qwen.jinja"
    tmpl.write_text(QWEN25)
    path = str(d / "qwen-tools.gguf")
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", plain, path, "--chat-template-file",
                    str(tmpl), "--force"], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def qwen(qwen_path):
    return akunu.load(qwen_path, n_ctx=4096)


def check_calls(message, allowed=NAMES):
    assert message["tool_calls"], message
    for c in message["tool_calls"]:
        assert c["type"] == "function" and c["id"].startswith("call_") and c["function"]["name"] in allowed
        jsonschema.validate(json.loads(c["function"]["arguments"]), SCHEMAS[c["function"]["name"]])


def test_required_and_named_calls_validate_from_random_weights(qwen):
    assert qwen.chat_template.name == "gguf" and tool_format(qwen.chat_template).name == "hermes"
    for seed in range(3):
        r = qwen.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                                        max_tokens=160, temperature=1.0, seed=seed)
        ChatCompletion.model_validate(r)
        choice = r["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
        check_calls(choice["message"])
        assert len(choice["message"]["tool_calls"]) == 1
    named = {"type": "function", "function": {"name": "get_time"}}
    r = qwen.create_chat_completion(ASK, tools=TOOLS, tool_choice=named, max_tokens=120, temperature=0.8, seed=7, n=2)
    assert [c["index"] for c in r["choices"]] == [0, 1]
    for choice in r["choices"]:
        check_calls(choice["message"], ["get_time"])
    assert r["usage"]["completion_tokens"] == r["usage"]["total_tokens"] - r["usage"]["prompt_tokens"]


def test_streamed_constrained_call_equals_the_whole_one(qwen):
    kw = dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
              max_tokens=160, temperature=0.9, seed=11)
    whole = qwen.create_chat_completion(ASK, **kw)["choices"][0]
    chunks = list(qwen.create_chat_completion(ASK, stream=True, **kw))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert not "".join(d.get("content") or "" for d in deltas)  # no <tool_call> text leaks into content
    parts = [tc for d in deltas for tc in d.get("tool_calls") or []]
    assert parts[0]["function"]["name"] == "get_weather" and parts[0]["function"]["arguments"] == ""
    args = "".join(tc["function"]["arguments"] for tc in parts)
    assert args == whole["message"]["tool_calls"][0]["function"]["arguments"]
    assert len(parts) > 2  # the arguments came in fragments
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_auto_and_none_leave_plain_replies_alone(qwen):
    plain = qwen.create_chat_completion(ASK, max_tokens=12, temperature=0)
    none = qwen.create_chat_completion(ASK, tools=TOOLS, tool_choice="none", max_tokens=12, temperature=0)
    # "none": the model is not offered the tools, so the prompt is the one without them
    assert none["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert none["choices"][0]["message"] == plain["choices"][0]["message"]
    auto = qwen.create_chat_completion(ASK, tools=TOOLS, max_tokens=12, temperature=0)
    assert auto["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]  # the tools are in the prompt
    msg = auto["choices"][0]["message"]
    assert msg.get("tool_calls") is None and isinstance(msg["content"], str)  # random text: no call
    with pytest.raises(akunu.AkunuError, match="grammar"):
        qwen.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", response_format={"type": "json_object"})


def test_named_call_from_gemma_in_the_generic_format(gemma):
    """The real Gemma 3 270M: its template has no tools, so they go into the system message and
    the call is the generic JSON object, constrained to the function's schema."""
    r = gemma.create_chat_completion(ASK, tools=TOOLS, tool_choice={"type": "function",
                                                                    "function": {"name": "get_weather"}},
                                     max_tokens=60, temperature=0)
    choice = r["choices"][0]
    check_calls(choice["message"], ["get_weather"])
    assert choice["finish_reason"] == "tool_calls"
    args = json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"])
    assert set(args) >= {"city", "unit"}


# -- through the openai client against akunu-serve -------------------------------------------------
@pytest.fixture(scope="module")
def tool_server(qwen_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "akunu.cli.serve", f"q={qwen_path}", "--port", str(port),
                             "-c", "4096"], env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
        if proc.poll() is not None:
            pytest.fail("server exited: " + proc.stdout.read())
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_openai_client_tool_calls(tool_server):
    import openai
    from openai import OpenAI

    c = OpenAI(base_url=tool_server + "/v1", api_key="none")
    r = c.chat.completions.create(model="q", messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=160,
                                  temperature=0.7, seed=2, parallel_tool_calls=False)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.type == "function"
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    # the call and its result go back into the conversation
    history = ASK + [r.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'}]
    again = c.chat.completions.create(model="q", messages=history, tools=TOOLS, max_tokens=8, temperature=0)
    assert again.usage.prompt_tokens > r.usage.prompt_tokens
    # streaming: the openai client reassembles the same kind of call from the deltas
    stream = c.chat.completions.create(model="q", messages=ASK, tools=TOOLS, max_tokens=160, temperature=0.7,
                                       seed=3, tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       stream=True)
    name, args, finish = None, "", None
    for chunk in stream:
        d = chunk.choices[0].delta
        assert not d.content
        for tc in d.tool_calls or []:
            name = name or tc.function.name
            args += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "get_time" and finish == "tool_calls"
    jsonschema.validate(json.loads(args), TIME)
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        c.chat.completions.create(model="q", messages=ASK, tools=TOOLS,
                                  tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(openai.BadRequestError, match="tools"):
        c.chat.completions.create(model="q", messages=ASK, tools="get_time")


@pytest.mark.parametrize("family", sorted(FORMATS))
@pytest.mark.parametrize("parallel", [False, True])
def test_the_constraint_of_every_family_parses_and_validates(qwen, family, parallel):
    """Random weights under each family's grammar: the text always parses into calls of the
    offered functions whose arguments validate against their schemas."""
    from akunu.tool_calls import constraint

    req = ToolRequest(TOOLS, "required", None, parallel, FORMATS[family], True)
    grammar = constraint(req)
    for seed in range(2):
        r = qwen.generate("Call a tool:", max_tokens=300, temperature=1.0, seed=seed, grammar=grammar)
        assert r.finish_reason == "stop", r.text
        parsed = req.parse(r.text)
        assert parsed.calls and all(c.complete for c in parsed.calls) and not parsed.content, r.text
        if not parallel:
            assert len(parsed.calls) == 1
        for c in parsed.calls:
            jsonschema.validate(json.loads(c.arguments), SCHEMAS[c.name])
