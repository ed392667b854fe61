"""``promcp footprint --tokenizers anthropic:count_tokens`` / ``gemini:count_tokens``: the provider's own count of a
real server's tools (the npm memory server) — Anthropic's through the anthropic SDK, against a loopback stub of
``POST /v1/messages/count_tokens``, and the Gemini API's ``:countTokens`` (the real APIs are not reachable offline). The stub computes its count from the request body it receives — a fixed cost for
the message, a fixed tool-use prompt when any tool is offered, and each tool's JSON length / 4 — so a wrong
request, a wrong subtraction or a tool left out changes the figures the test expects. No key, or an API that
refuses, is one line and exit 2 with the other tokenizers still printed; the key is in no file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promcp.cli import main
from tests.integration.test_footprint import BIN, _stdio_tools
from tests.stubs.llm_http import Reply, Request, StubServer

KEY = "sk-ant-PROMCP-test-0123456789abcdef"
TOOL_PROMPT = 346  # what the stub adds once when tools are offered (Anthropic's tool-use system prompt)
MESSAGE = 8

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(
        not (BIN / "mcp-server-memory").exists(), reason="npm packages not installed (npm ci)"
    ),
]


def tool_cost(tool: dict[str, Any]) -> int:
    return len(json.dumps(tool, separators=(",", ":"), sort_keys=True)) // 4


def count_tokens(req: Request) -> Reply:
    if req.path != "/v1/messages/count_tokens":
        return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": req.path}})
    if req.headers.get("x-api-key") != KEY:
        return Reply(
            401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
        )
    tools = req.body.get("tools") or []
    if any(set(t) - {"name", "description", "input_schema"} or "input_schema" not in t for t in tools):
        return Reply(
            400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad tool"}}
        )
    tokens = MESSAGE + (TOOL_PROMPT if tools else 0) + sum(tool_cost(t) for t in tools)
    return Reply(200, {"input_tokens": tokens})


def expected(tools: list[dict[str, Any]]) -> dict[str, int]:
    """Each listed tool as Anthropic takes it, costed the stub's way — computed from the server's own listing."""
    out = {}
    for t in tools:
        shaped = {"name": t["name"], "input_schema": t.get("inputSchema") or {"type": "object"}}
        if t.get("description"):
            shaped["description"] = t["description"]
        out[t["name"]] = tool_cost(shaped)
    return out


def test_anthropic_count_tokens_per_tool_and_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    server = ["--env", f"MEMORY_FILE_PATH={env['MEMORY_FILE_PATH']}", "--", str(BIN / "mcp-server-memory")]
    want = expected(_stdio_tools([str(BIN / "mcp-server-memory")], env))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with StubServer(count_tokens) as stub:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
        code = main(
            ["footprint", "--format", "json", "--tokenizers", "anthropic:count_tokens,o200k_base", *server]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        doc = json.loads(out)
        rows = {
            r["tool"]: r["tokens"]
            for r in doc["tables"]["tools"]
            if r["tokenizer"] == "anthropic:count_tokens"
        }
        assert rows == want  # count(all tools) − count(all but this one), per tool
        assert doc["totals"]["anthropic:count_tokens"] == sum(want.values()) + TOOL_PROMPT
        assert doc["exact"]["anthropic:count_tokens"] == {
            "model": "claude-sonnet-4-5",
            "overhead": TOOL_PROMPT,
        }
        assert (
            doc["tokenizers"] == ["anthropic:count_tokens", "o200k_base"] and doc["totals"]["o200k_base"] > 0
        )
        assert len(stub.requests) == len(want) + 2  # without tools, with all, and one without each
        assert {r.body["model"] for r in stub.requests} == {"claude-sonnet-4-5"}

        # a budget on the exact count (the first tokenizer), and another model by name
        code = main(
            [
                "footprint",
                "--budget",
                str(sum(want.values())),
                "--tokenizers",
                "anthropic:count_tokens:claude-haiku-4-5",
                *server,
            ]
        )
        _, err = capsys.readouterr()
        assert code == 1 and "over budget" in err and "anthropic:count_tokens:claude-haiku-4-5" in err
        assert stub.requests[-1].body["model"] == "claude-haiku-4-5"

        # the API refuses the key: one line, exit 2, the local tokenizer still printed
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
        code = main(
            ["footprint", "--format", "json", "--tokenizers", "o200k_base,anthropic:count_tokens", *server]
        )
        out, err = capsys.readouterr()
        assert code == 2 and json.loads(out)["totals"].keys() == {"o200k_base"}
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "count_tokens failed: HTTP 401" in lines[0] and "Traceback" not in err
        assert "sk-ant-wrong" not in err

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    code = main(["footprint", "--tokenizers", "anthropic:count_tokens", *server])
    out, err = capsys.readouterr()
    assert code == 2 and "o200k_base" in out  # counted locally all the same
    assert err.strip() == (
        "promcp footprint: anthropic:count_tokens: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a gateway) "
        "to count with Anthropic"
    )
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes()


def gemini_count(req: Request) -> Reply:
    """``models/{model}:countTokens``: the request's function declarations costed like the Anthropic stub's tools."""
    if not req.path.startswith("/v1beta/models/") or not req.path.endswith(":countTokens"):
        return Reply(404, {"error": {"code": 404, "message": req.path, "status": "NOT_FOUND"}})
    if req.headers.get("x-goog-api-key") != KEY:
        return Reply(
            400, {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}
        )
    request = req.body.get("generateContentRequest") or {}
    declared = [d for t in request.get("tools") or [] for d in t.get("functionDeclarations") or []]
    if request.get("model") != "models/" + req.path.split("/models/")[1].split(":")[0] or not request.get(
        "contents"
    ):
        return Reply(400, {"error": {"code": 400, "message": "bad request", "status": "INVALID_ARGUMENT"}})
    tokens = MESSAGE + (TOOL_PROMPT if declared else 0) + sum(tool_cost(d) for d in declared)
    return Reply(200, {"totalTokens": tokens})


def test_gemini_count_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    server = ["--env", f"MEMORY_FILE_PATH={env['MEMORY_FILE_PATH']}", "--", str(BIN / "mcp-server-memory")]
    listed = _stdio_tools([str(BIN / "mcp-server-memory")], env)
    want = {
        t["name"]: tool_cost(
            {
                "name": t["name"],
                "description": t.get("description") or "",
                "parametersJsonSchema": t["inputSchema"],
            }
        )
        for t in listed
    }
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with StubServer(gemini_count) as stub:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", stub.url)
        code = main(["footprint", "--format", "json", "--tokenizers", "gemini:count_tokens", *server])
        out, err = capsys.readouterr()
        assert code == 0, err
        doc = json.loads(out)
        rows = {
            r["tool"]: r["tokens"] for r in doc["tables"]["tools"] if r["tokenizer"] == "gemini:count_tokens"
        }
        assert rows == want and doc["totals"]["gemini:count_tokens"] == sum(want.values()) + TOOL_PROMPT
        assert doc["tokenizers"] == ["gemini:count_tokens", "o200k_base"]  # a local one for the fields
        assert {r.path for r in stub.requests} == {"/v1beta/models/gemini-2.5-flash:countTokens"}
        assert len(stub.requests) == len(want) + 2

        monkeypatch.setenv("GEMINI_API_KEY", "wrong")
        code = main(["footprint", "--tokenizers", "gemini:count_tokens", *server])
        out, err = capsys.readouterr()
        assert code == 2 and "o200k_base" in out
        assert err.strip() == (
            "promcp footprint: gemini:count_tokens: the Gemini API's countTokens failed: HTTP 400: API key not valid."
        )
