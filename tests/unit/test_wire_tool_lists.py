"""promcp.wire.tool_lists: each family's function tools read as MCP definitions and written back in place, other
tools and keys untouched, and the tools a conversation already called."""

from __future__ import annotations

from typing import Any

import pytest

from promcp.wire.openai_responses import namespaced
from promcp.wire.tool_lists import add_system_text, called_tools, read_tools, write_tools

SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "title": "Q"}}}
SLIM = {"type": "object", "properties": {"q": {"type": "string"}}}

BODIES: dict[str, dict[str, Any]] = {
    "anthropic": {
        "tools": [
            {"name": "a", "description": "A", "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}},
            {"type": "web_search_20250305", "name": "web_search"},
            {"name": "b", "description": "B", "input_schema": SCHEMA},
        ],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "b", "input": {}}]},
        ],
    },
    "openai": {
        "tools": [
            {
                "type": "function",
                "function": {"name": "a", "description": "A", "parameters": SCHEMA, "strict": True},
            },
            {"type": "function", "function": {"name": "b", "description": "B", "parameters": SCHEMA}},
        ],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "b"}}]},
        ],
    },
    "openai-responses": {
        "tools": [
            {"type": "function", "name": "a", "description": "A", "parameters": SCHEMA},
            {"type": "web_search"},
            {
                "type": "namespace",
                "name": "mcp__s",
                "description": "S",
                "tools": [{"type": "function", "name": "b", "description": "B", "parameters": SCHEMA}],
            },
        ],
        "input": [
            {"type": "function_call", "call_id": "c", "namespace": "mcp__s", "name": "b", "arguments": "{}"}
        ],
    },
    "gemini": {
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "a", "description": "A", "parametersJsonSchema": SCHEMA},
                    {"name": "b", "description": "B", "parameters": SCHEMA},
                ]
            },
            {"googleSearch": {}},
        ],
        "contents": [{"role": "model", "parts": [{"functionCall": {"name": "b", "args": {}}}]}],
    },
}
#: a namespaced tool is named as promcp.wire.openai_responses names it (the one rule)
SECOND = {"anthropic": "b", "openai": "b", "openai-responses": namespaced("mcp__s", "b"), "gemini": "b"}


@pytest.mark.parametrize("api", list(BODIES))
def test_function_tools_read_written_back_and_called(api: str) -> None:
    body = BODIES[api]
    tools = read_tools(api, body)
    assert [t.name for t in tools] == ["a", SECOND[api]]
    assert all(t.definition["inputSchema"] == SCHEMA for t in tools)
    assert called_tools(api, body) == [SECOND[api]]
    # keep the second, slimmed; drop the first: other tools and keys stay as sent
    second = tools[1]
    out = write_tools(api, body, {second.slot: {**second.definition, "inputSchema": SLIM}})
    again = read_tools(api, out)
    assert [t.name for t in again] == [SECOND[api]] and again[0].definition["inputSchema"] == SLIM
    assert body == BODIES[api] and read_tools(api, body)[0].definition["inputSchema"] == SCHEMA  # not mutated
    others = {"anthropic": 1, "openai": 0, "openai-responses": 1, "gemini": 1}[api]
    assert len(out["tools"]) == 1 + others  # the non-function tools are still there
    if api == "openai":
        assert (
            out["tools"][0]["function"].get("strict") is None and "parameters" in out["tools"][0]["function"]
        )
    if api == "gemini":  # the schema key the client used
        assert out["tools"][0]["functionDeclarations"][0]["parameters"] == SLIM


def test_system_text_goes_after_the_clients_own() -> None:
    text = '{"$defs":{}}'
    assert add_system_text("anthropic", {"system": "S"}, text)["system"] == [
        {"type": "text", "text": "S"},
        {"type": "text", "text": text},
    ]
    msgs = add_system_text(
        "openai", {"messages": [{"role": "system", "content": "S"}, {"role": "user"}]}, text
    )
    assert msgs["messages"][1] == {"role": "system", "content": text}
    assert add_system_text("openai-responses", {"instructions": "S"}, text)["instructions"] == f"S\n\n{text}"
    gem = add_system_text("gemini", {"systemInstruction": {"parts": [{"text": "S"}]}}, text)
    assert gem["systemInstruction"]["parts"][-1] == {"text": text}
