"""``promcp mcp DATASET`` driven by the real Claude Code CLI (npm, native binary), offline: the server is registered
with the documented line (``claude mcp add promcp -- promcp mcp DATASET``), a scripted loopback Anthropic upstream
plays a model whose first response calls ``top_schemas``, and the tool's result must reach the upstream in the next
request and agree with ``promcp report`` on the same dataset. The dataset is the committed example, read only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.stubs.llm_http import StubServer
from tests.stubs.scripted_llm import Scripted

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
PROMCP = Path(sys.executable).parent / "promcp"
EXAMPLE = ROOT / "examples" / "default-run"
SECRET = "sk-ant-api03-promcp-test-secret-0123456789abcdef"
TOOL = "mcp__promcp__top_schemas"

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not CLAUDE.exists(), reason="npm packages not installed (npm ci)"),
]


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _tool_result(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the (only) tool_result of a Messages request."""
    for msg in body.get("messages") or ():
        content = msg.get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result":
                inner = block.get("content")
                return inner if isinstance(inner, list) else [{"type": "text", "text": inner}]
    raise AssertionError("no tool_result in the request")


def test_claude_code_calls_top_schemas(tmp_path: Path) -> None:
    home, work, dataset = tmp_path / "home", tmp_path / "work", tmp_path / "dataset"
    home.mkdir()
    work.mkdir()
    shutil.copytree(EXAMPLE, dataset)
    os.chmod(dataset, 0o500)  # read only: the server must never need to write
    before = _snapshot(dataset)
    env = {
        "PATH": f"{CLAUDE.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "ANTHROPIC_API_KEY": SECRET,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",  # the tool inline, so the first response can call it
        "MCP_CONNECTION_NONBLOCKING": "false",  # the first request waits for the server's tools
        "PROMCP_OUT": str(dataset),  # as under `promcp record`: the server must not record into it
    }
    added = subprocess.run(
        [str(CLAUDE), "mcp", "add", "promcp", "--", str(PROMCP), "mcp", str(dataset)],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    script = Scripted(TOOL, {"limit": 5}, answer="Costliest: ")
    try:
        with StubServer(script.anthropic) as stub:
            proc = subprocess.run(
                [
                    str(CLAUDE),
                    "-p",
                    "Which tool definitions cost the most?",
                    "--allowedTools",
                    TOOL,
                    "--output-format",
                    "json",
                ],
                env={**env, "ANTHROPIC_BASE_URL": stub.url},
                cwd=work,
                capture_output=True,
                text=True,
                timeout=240,
            )
            requests = list(stub.requests)
    finally:
        os.chmod(dataset, 0o700)
    assert proc.returncode == 0, proc.stderr
    assert script.steps == ["tool", "answer"], script.steps
    assert json.loads(proc.stdout)["result"].startswith("Costliest: ")

    # the first request offered the tool; the next one carried its result
    calls = [r for r in requests if r.body.get("messages")]
    assert TOOL in {t.get("name") for t in calls[0].body.get("tools") or ()}
    blocks = _tool_result(calls[-1].body)
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    data = json.loads(texts[-1])
    assert "costliest" in data["summary"] and "never called" in data["summary"]
    top, servers = data["tables"]["top"], data["tables"]["servers"]
    assert len(top) == 5 and [t["schema_tokens"] for t in top] == sorted(
        (t["schema_tokens"] for t in top), reverse=True
    )

    # it agrees with `promcp report` on the same dataset
    rep = subprocess.run(
        [
            str(PROMCP),
            "report",
            str(dataset),
            "--latest",
            "--format",
            "json",
            "--section",
            "init",
            "--section",
            "resend",
            "--top",
            "1000",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rep.returncode == 0, rep.stderr
    tables = json.loads(rep.stdout)["tables"]
    init = {r["server"]: r for r in tables["init"]}
    assert {s["server"]: s["schema_tokens"] for s in servers} == {
        s: r["schema_tokens"] for s, r in init.items()
    }
    assert {s["server"]: s["tools"] for s in servers} == {s: r["tools"] for s, r in init.items()}
    resend = {(r["server"], r["tool"]): r for r in tables["resend"] if r.get("origin") == "schemas"}
    for row in top:
        assert row["tokens_total"] == resend[(row["server"], row["tool"])]["tokens_total"]
    assert data["never_called_count"] == sum(s["never_called"] for s in servers) > 0

    # read only, and nothing of the session recorded into the dataset
    assert _snapshot(dataset) == before
    assert not (work / "traces").exists()


def test_not_recorded_even_under_instrument(tmp_path: Path) -> None:
    """``promcp mcp`` run under ``python -m promcp.shims.auto`` with ``PROMCP_OUT`` at the dataset it reads: the
    instrumentation is undone before it serves, so no run (not even an empty one, which would become "the
    latest") lands in the dataset."""
    import anyio
    from mcp import Client, StdioServerParameters

    dataset = tmp_path / "dataset"
    shutil.copytree(EXAMPLE, dataset)
    files = sorted(p for p in dataset.rglob("*") if p.is_file())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMCP_OUT": str(dataset)}
    argv = ["-m", "promcp.shims.auto", "-m", "promcp.cli", "mcp", str(dataset)]

    async def ask() -> dict[str, Any]:
        async with Client(StdioServerParameters(command=sys.executable, args=argv, env=env)) as client:
            result = await client.call_tool("top_schemas", {"limit": 2})
            return dict(result.structured_content or {})

    data = anyio.run(ask)
    assert data["runs"] == ["20261124T000728Z-857808"] and len(data["tables"]["top"]) == 2
    assert sorted(p for p in dataset.rglob("*") if p.is_file()) == files
