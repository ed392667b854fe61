"""The Responses API shapes Codex sends (promcp/wire/openai_responses.py): MCP servers as ``namespace`` tools, tools
in an ``additional_tools`` input item, namespaced function calls, and Codex's own context messages."""

from __future__ import annotations

from typing import Any

from promcp.events import Origin
from promcp.wire import parse_request, parse_response, stream_accumulator

ECHO = {
    "type": "function",
    "name": "echo",
    "description": "Echoes back the input string",
    "strict": False,
    "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
}
NAMESPACE = {
    "type": "namespace",
    "name": "mcp__everything",
    "description": "# Everything Server - Server Instructions\nUse echo to echo.",
    "tools": [ECHO, {**ECHO, "name": "get_sum"}],
}
ENV = "<environment_context>\n  <cwd>/w</cwd>\n  <shell>bash</shell>\n</environment_context>"


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-scripted",
        "stream": True,
        "input": [_msg("developer", "You are Codex."), _msg("user", ENV), _msg("user", "Echo hello")],
        **extra,
    }


def test_a_namespace_is_one_schema_part_per_tool_plus_its_instructions() -> None:
    request = parse_request("openai-responses", _body(tools=[{**ECHO, "name": "exec_command"}, NAMESPACE]))
    schemas = [(p.key, p.text) for p in request.pieces if p.origin is Origin.SCHEMAS]
    assert [k for k, _ in schemas] == [
        "exec_command",
        "mcp__everything#instructions",
        "everything/echo",
        "everything/get_sum",
    ]
    assert dict(schemas)["mcp__everything#instructions"] == NAMESPACE["description"]
    assert '"name":"echo"' in dict(schemas)["everything/echo"]
    assert request.tool_names == ["exec_command", "everything/echo", "everything/get_sum"]
    assert request.n_tools == 3  # callable tools: the instructions are not one


def test_codex_context_messages_are_system_not_the_prompt() -> None:
    request = parse_request("openai-responses", _body(tools=[NAMESPACE]))
    rest = [(p.origin, p.key, p.text) for p in request.pieces if p.origin is not Origin.SCHEMAS]
    assert rest == [
        (Origin.SYSTEM, "system", "You are Codex."),
        (Origin.SYSTEM, "environment_context", ENV),
        (Origin.USER, "prompt", "Echo hello"),
    ]


def test_tools_in_an_additional_tools_item_are_schemas() -> None:
    body = _body()
    body["input"].insert(0, {"type": "additional_tools", "role": "developer", "tools": [NAMESPACE]})
    request = parse_request("openai-responses", body)
    assert request.n_tools == 2 and request.tool_names[0] == "everything/echo"
    assert [p.origin for p in request.pieces][:2] == [Origin.SYSTEM, Origin.SCHEMAS]
    assert not any("omitted" in p.text for p in request.pieces)


def test_a_namespaced_call_keeps_its_namespace_in_output_stream_and_history() -> None:
    call = {
        "type": "function_call",
        "call_id": "call_1",
        "namespace": "mcp__everything",
        "name": "echo",
        "arguments": '{"message": "hi"}',
    }
    out = parse_response("openai-responses", {"id": "r1", "status": "completed", "output": [call]})
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("call_1", "everything/echo", {"message": "hi"})
    ]
    stream = stream_accumulator("openai-responses")
    stream.feed({"type": "response.output_item.done", "output_index": 0, "item": call})
    assert not stream.complete
    assert stream.result().tool_calls[0].name == "everything/echo"
    stream.feed(
        {"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": [call]}}
    )
    assert stream.complete
    answered = _body(tools=[NAMESPACE])
    answered["input"] += [call, {"type": "function_call_output", "call_id": "call_1", "output": "Echo: hi"}]
    pieces = parse_request("openai-responses", answered).pieces
    assert any(p.origin is Origin.HISTORY and "everything/echo" in p.text for p in pieces)
    assert [p.key for p in pieces if p.origin is Origin.TOOL_RESULTS] == ["call_1"]
