"""LLM backend interface pieces: origin scaling, retries, registry, the tool-call grammar schema, validation."""

from __future__ import annotations

import asyncio
import json

import pytest

from promcp.errors import ConfigError, LLMError
from promcp.events import Origin, Part
from promcp.host.llm.base import RetryPolicy, ToolSpec, call_with_retries, get_backend, scale_parts

SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


def test_scale_parts_largest_remainder_sums_exactly() -> None:
    parts = [Part(Origin.SYSTEM, "s", 10), Part(Origin.SCHEMAS, "a/b", 7), Part(Origin.USER, "prompt", 5)]
    for total in (0, 1, 22, 23, 30, 1000):
        scaled = scale_parts(parts, total)
        assert sum(p.tokens for p in scaled) == total
        assert [p.key for p in scaled] == ["s", "a/b", "prompt"]
    assert scale_parts(parts, 22) == parts


def test_retries_follow_policy() -> None:
    delays: list[float] = []
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise LLMError("busy", status_code=429)
        return "ok"

    async def sleep(d: float) -> None:
        delays.append(d)

    assert asyncio.run(call_with_retries(flaky, RetryPolicy(3, (1.0, 2.0)), sleep=sleep)) == "ok"
    assert delays == [1.0, 2.0]

    async def fatal() -> str:
        raise LLMError("bad request", status_code=400)

    with pytest.raises(LLMError):
        asyncio.run(call_with_retries(fatal, RetryPolicy(3, (1.0, 2.0)), sleep=sleep))
    assert delays == [1.0, 2.0]  # a 400 is not retried


def test_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown LLM backend"):
        get_backend("gpt-in-a-box")


def test_grammar_schema_allows_exactly_calls_or_answer() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from promcp.host.llm.llama_cpp import response_schema

    tools = [ToolSpec("calculate", "calc", SCHEMA, "scicalc", "calculate")]
    auto = response_schema(tools, "auto")
    jsonschema.validate({"tool": "calculate", "arguments": {"expression": "1+1"}}, auto)
    jsonschema.validate({"answer": "2"}, auto)
    for bad in (
        {"tool": "other", "arguments": {}},
        {"tool": "calculate", "arguments": {"x": 1}},
        {"answer": 2},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, auto)
    required = response_schema(tools, "required")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "2"}, required)
    llama_cpp = pytest.importorskip("llama_cpp")
    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(auto), verbose=False)
    assert grammar is not None
