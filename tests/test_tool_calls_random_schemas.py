"""Forced tool calls against random function schemas: 200 calls from the real
Gemma 3 270M, each with a function whose parameters are drawn from a seeded
RNG (strings with maxLength / enum / pattern, bounded integers, numbers,
booleans, nested objects, bounded arrays, required and optional fields).
Every call must name the forced function and carry arguments that parse as
JSON and validate against the schema. The calls run as concurrent callers of
one batched model (grammar requests join the batch). A quicker variant runs
through the official openai client against akunu-serve on random weights."""

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

import akunu
from tests.test_tool_calls import qwen_path, tool_server  # noqa: F401 (random weights behind akunu-serve)

N_CALLS = 200
PARALLEL = 8
WORDS = ["red", "blue", "cat", "dog", "sun", "moon", "tea", "box", "map", "key"]
PATTERNS = [("^[a-z]{1,6}$", "a word"), ("^[0-9]{3}-[0-9]{2}$", "like 123-45"), ("^(yes|no|maybe)$", "an answer")]


def random_schema(rng: random.Random, depth: int = 0) -> dict:
    """An object schema of 1-3 fields (a nested one: 1-2), every value bounded so that a call
    stays short: the prompt lists the schema, and each token of the call is a decode step of
    its own (names are single words, one token each)."""
    props, required = {}, []
    for name in rng.sample(WORDS, rng.randint(1, 3 if depth == 0 else 2)):
        kinds = ["string", "enum", "pattern", "integer", "number", "boolean", "array"]
        if depth == 0:
            kinds.append("object")
        kind = rng.choice(kinds)
        if kind == "string":
            s = {"type": "string", "maxLength": rng.randint(1, 6)}
            if rng.random() < 0.3:
                s["minLength"] = 1
        elif kind == "enum":
            s = {"type": "string", "enum": rng.sample(WORDS, rng.randint(1, 3))}
        elif kind == "pattern":
            pat, desc = rng.choice(PATTERNS)
            s = {"type": "string", "pattern": pat, "description": desc}
        elif kind == "integer":
            lo = rng.randint(-9, 9)
            s = {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 40)}
        elif kind == "number":
            s = {"type": "number", "minimum": 0, "maximum": rng.choice([1, 10, 100])}
        elif kind == "boolean":
            s = {"type": "boolean"}
        elif kind == "array":
            item = rng.choice([{"type": "integer", "minimum": 0, "maximum": 9},
                               {"type": "string", "enum": rng.sample(WORDS, 2)},
                               {"type": "boolean"}])
            s = {"type": "array", "items": item, "maxItems": rng.randint(1, 2)}
        else:
            s = random_schema(rng, depth + 1)
        props[name] = s
        if rng.random() < 0.6:
            required.append(name)
    out = {"type": "object", "properties": props}
    if rng.random() < 0.5:
        out["additionalProperties"] = False
    if required:
        out["required"] = required
    return out


def random_tool(rng: random.Random, i: int) -> dict:
    return {"type": "function", "function": {"name": f"f{i}", "parameters": random_schema(rng)}}


def check_call(message: dict, tool: dict) -> None:
    fn = tool["function"]
    calls = message.get("tool_calls") or []
    assert len(calls) == 1, message
    assert calls[0]["function"]["name"] == fn["name"]
    jsonschema.validate(json.loads(calls[0]["function"]["arguments"]), fn["parameters"])


def test_random_schemas_are_valid_json_schemas():
    rng = random.Random(0)
    for i in range(N_CALLS):
        schema = random_tool(rng, i)["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.fixture(scope="module")
def batched_gemma(gemma_path):
    return akunu.load(gemma_path, n_ctx=4096, parallel=PARALLEL)


def test_200_forced_calls_with_random_schemas(batched_gemma):
    rng = random.Random(2026)
    tools = [random_tool(rng, i) for i in range(N_CALLS)]

    def call(i):
        tool = tools[i]
        choice = {"type": "function", "function": {"name": tool["function"]["name"]}}
        r = batched_gemma.create_chat_completion([{"role": "user", "content": "Call the tool."}], tools=[tool],
                                                 tool_choice=choice, max_tokens=120, temperature=0.7, seed=i)
        return r["choices"][0]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(PARALLEL) as pool:
        choices = list(pool.map(call, range(N_CALLS)))
    elapsed = time.perf_counter() - t0
    bad = []
    for i, (tool, choice) in enumerate(zip(tools, choices)):
        try:
            assert choice["finish_reason"] == "tool_calls", choice
            check_call(choice["message"], tool)
        except (AssertionError, ValueError, jsonschema.ValidationError) as e:
            bad.append(f"{i}: {e}"[:300])
    print(f"{N_CALLS} forced calls in {elapsed:.1f} s")
    assert not bad, f"{len(bad)} of {N_CALLS} calls failed ({elapsed:.0f} s):\n" + "\n".join(bad[:5])


def test_random_schemas_through_the_openai_client(tool_server):
    """The same kind of calls from random weights behind akunu-serve, through the official
    client: chat completions and the Responses API, several at once."""
    from openai import OpenAI

    client = OpenAI(base_url=tool_server + "/v1", api_key="none", max_retries=0)
    rng = random.Random(7)
    tools = [random_tool(rng, i) for i in range(24)]

    def call(i):
        tool = tools[i]
        fn = tool["function"]
        if i % 2:
            r = client.responses.create(model="q", input="Call the tool.", max_output_tokens=200, temperature=0.9,
                                        tools=[{"type": "function", **fn}],
                                        tool_choice={"type": "function", "name": fn["name"]}, extra_body={"seed": i})
            (item,) = r.output
            assert r.status == "completed" and item.type == "function_call"
            return {"tool_calls": [{"function": {"name": item.name, "arguments": item.arguments}}]}
        r = client.chat.completions.create(model="q", messages=[{"role": "user", "content": "Call the tool."}],
                                           tools=[tool], max_tokens=200, temperature=0.9, seed=i,
                                           tool_choice={"type": "function", "function": {"name": fn["name"]}})
        assert r.choices[0].finish_reason == "tool_calls"
        return r.choices[0].message.model_dump()

    with ThreadPoolExecutor(4) as pool:
        messages = list(pool.map(call, range(len(tools))))
    for tool, message in zip(tools, messages):
        check_call(message, tool)
