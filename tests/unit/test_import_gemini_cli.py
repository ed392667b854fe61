"""promcp import of Gemini CLI session logs (collectors/gemini_cli.py): the append-only ``.jsonl`` with ``$set``
patches and re-written messages, the older ``.json`` document, and bad lines — on logs shaped as the CLI 0.61
writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promcp.collectors import import_path
from promcp.events import Event

SESSION = "4888dbe7-e231-4615-b14d-2c291b7bb41e"
CONTEXT = "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>"
CALL = "mcp_everything_echo__mcp_everything_echo_1795731296230_0"
RESPONSE = {"id": CALL, "name": "mcp_everything_echo", "response": {"output": "Echo: hello promcp"}}
TOKENS_1 = {"input": 14555, "output": 9, "cached": 0, "thoughts": 7, "tool": 0, "total": 14571}
TOKENS_2 = {"input": 14660, "output": 23, "cached": 14555, "thoughts": 7, "tool": 0, "total": 14690}


def messages() -> list[dict[str, Any]]:
    first = {
        "id": "m-model-1",
        "timestamp": "2026-11-26T22:14:56.879Z",
        "type": "gemini",
        "content": "Calling the tool.",
        "thoughts": [{"subject": "Echo", "description": "The user wants an echo."}],
        "tokens": TOKENS_1,
        "model": "gemini-3.8-flash",
    }
    return [
        {
            "id": "m-ctx",
            "timestamp": "2026-11-26T22:14:55.832Z",
            "type": "user",
            "content": [{"text": CONTEXT}],
        },
        {
            "id": "m-user",
            "timestamp": "2026-11-26T22:14:56.073Z",
            "type": "user",
            "content": [{"text": "Echo hello promcp"}],
        },
        first,
        {
            **first,
            "toolCalls": [
                {
                    "id": CALL,
                    "name": "mcp_everything_echo",
                    "args": {"message": "hello promcp"},
                    "result": [{"functionResponse": RESPONSE}],
                    "status": "success",
                    "timestamp": "2026-11-26T22:14:57.300Z",
                }
            ],
        },
        {
            "id": "m-results",
            "timestamp": "2026-11-26T22:14:57.314Z",
            "type": "user",
            "content": [{"functionResponse": RESPONSE}],
        },
        {
            "id": "m-info",
            "timestamp": "2026-11-26T22:14:57.315Z",
            "type": "info",
            "content": "Tool finished.",
        },
        {
            "id": "m-model-2",
            "timestamp": "2026-11-26T22:14:57.396Z",
            "type": "gemini",
            "content": "Echoed: hello promcp",
            "thoughts": [],
            "tokens": TOKENS_2,
            "model": "gemini-3.8-flash",
        },
    ]


def jsonl(path: Path) -> Path:
    header = {
        "sessionId": SESSION,
        "projectHash": "e523a13a",
        "startTime": "2026-11-26T22:14:55.831Z",
        "kind": "main",
    }
    msgs = messages()
    lines: list[Any] = [header, {"$set": {"messages": msgs[:1]}}]
    for msg in msgs[1:]:
        lines.append(msg)
        lines.append({"$set": {"lastUpdated": msg["timestamp"]}})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def events(path: Path) -> tuple[Any, list[Event]]:
    got: list[Event] = []
    summary = import_path(path, sink=got.append)
    return summary, got


def test_jsonl_patches_applied_duplicates_collapsed(tmp_path: Path) -> None:
    summary, got = events(jsonl(tmp_path / "session-2026-11-26T22-14-4888dbe7.jsonl"))
    assert (summary.format, summary.imported, summary.tasks) == ("gemini-cli", 1, 1)
    assert summary.problems.by_kind() == {}  # re-written messages are the format, not a problem
    assert [e.stage.value for e in got] == ["S1", "S2", "S3", "S4", "S5", "S6"]
    s1, s2, s3, s4, s5, s6 = got
    assert {e.task_id for e in got} == {f"{SESSION}#1"} and s1.provider == "google"
    assert (s1.tokens_in, s1.cache_read_tokens) == (14555, 0) and (s5.tokens_in, s5.cache_read_tokens) == (
        14660,
        14555,
    )
    assert (s2.tokens_out, s2.reasoning_tokens, s6.tokens_out) == (16, 7, 30)
    assert (s3.server, s3.tool, s3.tool_call_id) == ("everything", "echo", CALL)
    assert s4.timing_quality.value == "bounded" and s4.latency_ms == 435.0  # model message → results message
    assert s2.timing_quality.value == "bounded" and s2.latency_ms == 806.0  # prompt → model message
    parts = {p.key: p for p in s5.parts or ()}
    assert {"system", "prompt", CALL} <= set(parts) and parts[CALL].origin.value == "tool_results"
    assert sum(p.tokens for p in s5.parts or ()) == 14660  # the unobserved rest is a system part


def test_older_json_document(tmp_path: Path) -> None:
    doc = {
        "sessionId": SESSION,
        "projectHash": "e523a13a",
        "startTime": "2026-11-26T22:14:55.831Z",
        "messages": messages(),
    }
    path = tmp_path / "session-2026-11-26T22-14-4888dbe7.json"
    path.write_text(json.dumps(doc, indent=2))
    summary, got = events(path)
    assert summary.format == "gemini-cli" and [e.stage.value for e in got] == [
        "S1",
        "S2",
        "S3",
        "S4",
        "S5",
        "S6",
    ]
    assert got[0].tokens_in == 14555


def test_bad_lines_are_named_and_the_rest_kept(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "session-x.jsonl")
    text = path.read_text().splitlines()
    text.insert(3, "{not json")
    text.insert(5, "[1, 2]")
    path.write_text("\n".join(text) + "\n")
    summary, got = events(path)
    assert [e.stage.value for e in got] == ["S1", "S2", "S3", "S4", "S5", "S6"]
    assert summary.problems.by_kind() == {"bad_json": 1, "bad_line": 1}
    where = [str(p) for p in summary.problems.items]
    assert where[0].startswith("session-x.jsonl, line 4: bad_json") and where[1].startswith(
        "session-x.jsonl, line 6"
    )
    broken = tmp_path / "session-y.json"
    broken.write_text('{"sessionId": "s", "projectHash": "p", "messages": [')
    summary, got = events(broken)
    assert got == [] and "bad_json" in summary.problems.by_kind()
