"""``promcp record --api openai -- <an openai SDK agent>``: the same flow as the Claude Code test with the openai
Python SDK as the client (streaming Chat Completions) and the real memory MCP server wrapped by ``promcp proxy
mcp``, against a scripted loopback OpenAI-compatible upstream that checks each request as the API does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import promcp.analysis as pa
from tests.stubs.llm_http import StubServer
from tests.stubs.scripted_llm import Scripted

ROOT = Path(__file__).resolve().parents[2]
MEMORY = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
SECRET = "sk-proj-promcp-test-secret-0123456789abcdef"
ARGS = {"entities": [{"name": "promcp", "entityType": "project", "observations": ["records every stage"]}]}

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not MEMORY.exists(), reason="npm packages not installed"),
]


def test_openai_sdk_agent_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    script = Scripted("create_entities", ARGS, answer="Saved: ")
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    env.pop("OPENAI_BASE_URL", None)
    server = [str(PROMCP), "proxy", "mcp", "--name", "memory", "--", "node", str(MEMORY)]
    agent = [
        sys.executable,
        "-m",
        "tests.clients.openai_agent",
        "gpt-4o-mini",
        "Remember promcp.",
        "--",
        *server,
    ]
    with StubServer(script.openai, wire="openai") as stub:
        proc = subprocess.run(
            [
                str(PROMCP),
                "record",
                "--api",
                "openai",
                "--upstream",
                f"{stub.url}/v1",
                "--out",
                str(out),
                "--",
                *agent,
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert proc.returncode == 0, proc.stderr
    assert stub.violations == [] and script.steps == ["tool", "answer"]
    assert proc.stdout.startswith("Saved: ")
    assert (tmp_path / "memory.jsonl").exists()

    df = pa.load(out).sort_values("seq")
    assert df.run_id.nunique() == 1
    assert {"spawn", "initialize", "tools_discovery"} <= set(df[df.stage == "INIT"].phase)
    task = df[df.task_id.notna()]
    assert task.task_id.nunique() == 1
    assert task.stage.tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"]
    mcp = task[task.stage.isin(["S3", "S4"])]
    assert set(mcp.source) == {"proxy:mcp"} and set(mcp.tool_call_id) == {"call_0001"}
    assert all(json.loads(a)["join"]["quality"] == "arguments" for a in mcp["attrs"])
    calls = task[task.stage.isin(["S1", "S5"])]
    for (_, row), usage in zip(calls.iterrows(), script.usage, strict=True):
        origins = row[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum()
        assert row.tokens_in == usage["prompt_tokens"] == origins
    s5 = calls.iloc[1]
    assert [p["key"] for p in s5.parts if p["origin"] == "tool_results"] == ["call_0001"]
    assert {p["key"] for p in s5.parts if p["origin"] == "schemas"} >= {"create_entities", "read_graph"}
    outputs = task[task.stage.isin(["S2", "S6"])]
    assert [json.loads(a)["response_bytes"] for a in outputs["attrs"]] == [len(b) for b in script.sent]
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
