"""The Gemini API wire format (promcp/wire/gemini.py) on bodies shaped as the Gemini CLI 0.61 sends them and as the
API answers: pieces by origin, usage, streams, side calls, MCP tool names."""

from __future__ import annotations

import json
from typing import Any

from promcp import wire
from promcp.events import Origin
from promcp.wire import gemini
from promcp.wire.framing import SSEDecoder
from tests.stubs.llm_streams import sse

INSTRUCTIONS = (
    "The following are instructions provided by the tool server 'everything':\n"
    "---[start of server instructions]---\n"
    "# Everything Server – Server Instructions\n\nUse `get-roots-list` first.\n"
    "---[end of server instructions]---\n"
)
SESSION_CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
    "Today's date is Thursday, November 26, 2026.\nMy operating system is: linux\n"
    "- **Workspace Directories:**\n  - /home/user/work\n\n<loaded_context>\n<project_context>\n"
    f"{INSTRUCTIONS}</project_context>\n</loaded_context>\n</session_context>"
)
ECHO = {
    "name": "mcp_everything_echo",
    "description": "Echoes back the input string",
    "parametersJsonSchema": {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Message to echo"}},
        "required": ["message"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
}
READ_FILE = {
    "name": "read_file",
    "description": "Reads a file.",
    "parametersJsonSchema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}
CALL_ID = "mcp_everything_echo_1795729572787_0"


def main_body(*, answered: bool) -> dict[str, Any]:
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": SESSION_CONTEXT}, {"text": "Echo hello promcp"}]}
    ]
    if answered:
        contents += [
            {
                "role": "model",
                "parts": [
                    {"text": "Calling the tool."},
                    {
                        "functionCall": {"id": CALL_ID, "args": {"message": "hi"}, "name": ECHO["name"]},
                        "thoughtSignature": "c2ln",
                    },
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": ECHO["name"],
                            "response": {"output": "Echo: hi"},
                            "id": CALL_ID,
                        }
                    }
                ],
            },
        ]
    return {
        "contents": contents,
        "systemInstruction": {
            "role": "user",
            "parts": [{"text": "You are Gemini CLI, an autonomous CLI agent."}],
        },
        "tools": [{"functionDeclarations": [READ_FILE, ECHO]}, {"googleSearch": {}}],
        "generationConfig": {
            "temperature": 1,
            "thinkingConfig": {"includeThoughts": True, "thinkingLevel": "HIGH"},
        },
    }


def test_request_pieces_by_origin_in_prompt_order() -> None:
    req = wire.parse_request("gemini", main_body(answered=True))
    got = [(p.origin, p.key) for p in req.pieces]
    assert got == [
        (Origin.SYSTEM, "system"),
        (Origin.SCHEMAS, "read_file"),
        (Origin.SCHEMAS, "mcp_everything_echo"),
        (Origin.SCHEMAS, "googleSearch"),
        (Origin.SYSTEM, "instructions:everything"),
        (Origin.SYSTEM, "session_context"),
        (Origin.USER, "prompt"),
        (Origin.HISTORY, "msg:1"),
        (Origin.TOOL_RESULTS, CALL_ID),
    ]
    by_key = {p.key: p.text for p in req.pieces}
    assert by_key["instructions:everything"] == INSTRUCTIONS
    assert (
        "server instructions" not in by_key["session_context"]
        and "<loaded_context>" in by_key["session_context"]
    )
    assert by_key["prompt"] == "Echo hello promcp"
    assert json.loads(by_key["mcp_everything_echo"])["parametersJsonSchema"]["required"] == ["message"]
    assert json.loads(by_key["msg:1"].split("\n")[1]) == {
        "name": "mcp_everything_echo",
        "args": {"message": "hi"},
    }
    assert by_key[CALL_ID] == '{"output":"Echo: hi"}'
    assert req.assistant_turns == 1 and req.result_names == {CALL_ID: "mcp_everything_echo"}
    assert req.tool_names == ["read_file", "mcp_everything_echo", "googleSearch"] and req.side_call is None


def test_json_helper_calls_are_side_calls_and_failed_responses_are_marked() -> None:
    routing = {
        "contents": [{"role": "user", "parts": [{"text": "Echo hello"}]}],
        "systemInstruction": {"parts": [{"text": "You are a specialized Task Routing AI."}]},
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "OBJECT"},
        },
    }
    assert wire.parse_request("gemini", routing).side_call == "json_mode"
    body = main_body(answered=True)
    body["contents"][2]["parts"][0]["functionResponse"]["response"] = {"error": "MCP error -32602"}
    req = wire.parse_request("gemini", body)
    assert req.failed_results == [CALL_ID]


def test_model_from_the_path_and_mcp_tool_names() -> None:
    assert gemini.model_of_path("/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse") == (
        "gemini-3.1-pro-preview"
    )
    assert gemini.model_of_path("/proxy/v1beta/models/gemini-2.5-flash:generateContent") == "gemini-2.5-flash"
    assert gemini.model_of_path("/v1beta/models") is None
    assert gemini.tool_name("everything", "get-sum") == "mcp_everything_get-sum"
    assert gemini.tool_name("my server", "a/b") == "mcp_my_server_a_b"
    assert gemini.mcp_tool_of("mcp_everything_get-sum") == ("everything", "get-sum")
    assert gemini.mcp_tool_of("mcp_my_srv_tool_x", ["my_srv", "my"]) == ("my_srv", "tool_x")
    assert gemini.mcp_tool_of("read_file") is None
    long = gemini.tool_name("a" * 40, "b" * 40)
    assert len(long) == 63 and "..." in long


USAGE = {
    "promptTokenCount": 14621,
    "candidatesTokenCount": 12,
    "totalTokenCount": 14640,
    "cachedContentTokenCount": 14555,
    "thoughtsTokenCount": 7,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 14621}],
}


def test_usage_counts_thoughts_as_output_and_cached_content_as_cache_reads() -> None:
    usage = gemini.parse_usage(USAGE)
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (
        14621,
        19,
        14555,
        7,
    )
    assert usage.uncached_input_tokens == 66 and usage.reported == USAGE
    assert usage.input_tokens + usage.output_tokens == USAGE["totalTokenCount"]


def chunks() -> list[dict[str, Any]]:
    def chunk(part: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0, **extra}],
            "modelVersion": "gemini-3.1-pro-preview",
            "responseId": "resp-0001",
            "usageMetadata": {"promptTokenCount": 14621, "trafficType": "ON_DEMAND"},
        }

    last = chunk(
        {"functionCall": {"name": "mcp_everything_echo", "args": {"message": "hi"}}}, finishReason="STOP"
    )
    last["usageMetadata"] = USAGE
    return [
        chunk({"text": "Let me think.", "thought": True}),
        chunk({"text": "Calling "}),
        chunk({"text": "it."}),
        last,
    ]


def test_stream_from_sse_bytes_split_anywhere() -> None:
    data = sse([(None, c) for c in chunks()])
    for split in (1, 7, 100, len(data) - 3):
        decoder, stream = SSEDecoder(), wire.stream_accumulator("gemini")
        for piece in (data[:split], data[split:]):
            for frame in decoder.feed(piece):
                stream.feed(frame.json())
        out = stream.result()
        assert out.text == "Calling it." and out.thinking == "Let me think."
        [call] = out.tool_calls
        assert (call.name, call.arguments) == (
            "mcp_everything_echo",
            {"message": "hi"},
        ) and call.id.startswith("call_")
        assert (out.finish_reason, out.model, out.response_id) == (
            "STOP",
            "gemini-3.1-pro-preview",
            "resp-0001",
        )
        assert out.usage is not None and out.usage.output_tokens == 19


def test_non_streamed_response_error_and_blocked_prompt() -> None:
    body = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": '{"model_choice": "flash"}'}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 5, "totalTokenCount": 45},
        "modelVersion": "gemini-3.5-flash-lite",
    }
    out = wire.parse_response("gemini", body)
    assert out.text == '{"model_choice": "flash"}' and out.usage is not None and out.usage.output_tokens == 5
    assert out.usage.reasoning_tokens is None and out.error is None
    err = wire.parse_response("gemini", {"error": {"code": 500, "message": "Internal", "status": "INTERNAL"}})
    assert err.error is not None and "INTERNAL" in err.error
    blocked = wire.parse_response("gemini", {"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked.error == "prompt blocked: SAFETY"
    assert wire.error_message(
        b'{"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}}'
    ) == ("RESOURCE_EXHAUSTED: Quota")


def test_conversation_blocks_continue_across_content_shapes() -> None:
    """The CLI sends the session context and the prompt as two contents to its router and as one content to the
    model: the blocks are per part, so a later request continues either."""
    first = wire.conversation_blocks("gemini", main_body(answered=False))
    later = wire.conversation_blocks("gemini", main_body(answered=True))
    split = {
        "contents": [
            {"role": "user", "parts": [{"text": SESSION_CONTEXT}]},
            {"role": "user", "parts": [{"text": "Echo hello promcp"}]},
        ]
    }
    assert wire.conversation_blocks("gemini", split) == first
    assert wire.is_subsequence(first, later) and len(later) == len(first) + 3
