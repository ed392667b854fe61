"""``promcp record -- claude``: the real Claude Code CLI (npm, native binary), offline, against a scripted loopback
Anthropic-compatible upstream, with the real memory MCP server configured in its own ``~/.claude.json``.

The model first searches the deferred tools (ToolSearch), then calls the MCP server's tool, then answers — and
with ``ENABLE_TOOL_SEARCH=false`` calls the inline tool at once. One run must hold the whole chain: INIT of the
server, then S1 → S2 → S3 → S4 → S5 → S6 in one task, the MCP call joined to its tool_use id, input origins that
sum to the usage the upstream reported, the deferred tools counted as deferred, and exactly the bytes the upstream
sent reaching the client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import promcp.analysis as pa
from promcp.collectors import events_of
from tests.stubs.llm_http import StubServer
from tests.stubs.scripted_llm import Delegating, Scripted

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
#: older Claude Code releases, installed as npm aliases (package.json)
OLDER_CLAUDE = {
    v: ROOT / "node_modules" / f"claude-code-{v.replace('.', '-')}" / "bin" / "claude.exe"
    for v in ("2.1.150", "2.1.328")
}
MEMORY = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
SECRET = "sk-ant-api03-promcp-test-secret-0123456789abcdef"
TOOL = "mcp__memory__create_entities"
ARGS = {"entities": [{"name": "promcp", "entityType": "project", "observations": ["records every stage"]}]}

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(
        not CLAUDE.exists() or not MEMORY.exists(), reason="npm packages not installed (npm ci)"
    ),
]


def run_claude(
    tmp_path: Path, script: Scripted, *, tool_search: bool, claude: Path = CLAUDE
) -> tuple[dict[str, Any], Path, str]:
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "traces"
    home.mkdir()
    work.mkdir()
    bin_dir = CLAUDE.parent
    if claude != CLAUDE:  # an older release: `claude` on PATH is that one
        assert claude.exists(), f"{claude} is missing: npm ci installs every version package.json names"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "claude").symlink_to(claude)
    memory_env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    servers = {"memory": {"command": "node", "args": [str(MEMORY)], "env": memory_env}}
    (home / ".claude.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "ANTHROPIC_API_KEY": SECRET,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "MCP_CONNECTION_NONBLOCKING": "false",  # older releases: the first call waits for the MCP server
    }
    if not tool_search:
        env["ENABLE_TOOL_SEARCH"] = "false"
    with StubServer(script.anthropic) as stub:
        proc = subprocess.run(
            [
                *(str(PROMCP), "record", "--out", str(out), "--upstream", stub.url, "--"),
                *("claude", "-p", "Remember that promcp records every stage.", "--allowedTools", TOOL),
                *("--output-format", "json"),
            ],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert proc.returncode == 0, proc.stderr
    assert stub.violations == []
    return json.loads(proc.stdout), out, proc.stderr


@pytest.mark.parametrize(
    ("tool_search", "claude"),
    [
        pytest.param(True, CLAUDE, id="tool-search"),
        pytest.param(False, CLAUDE, id="inline-tools"),
        *(pytest.param(False, path, id=f"inline-tools-{v}") for v, path in OLDER_CLAUDE.items()),
    ],
)
def test_claude_code_end_to_end(tmp_path: Path, tool_search: bool, claude: Path) -> None:
    script = Scripted(TOOL, ARGS, answer="Saved: ")
    result, out, stderr = run_claude(tmp_path, script, tool_search=tool_search, claude=claude)
    assert "MCP servers recorded: memory" in stderr
    # the client got exactly what the upstream said: its final text and the usage it added up
    assert result["is_error"] is False
    assert result["result"].startswith("Saved: ")
    assert result["usage"]["input_tokens"] == sum(u["input_tokens"] for u in script.usage)
    assert result["usage"]["cache_read_input_tokens"] == sum(
        u["cache_read_input_tokens"] for u in script.usage
    )
    assert (tmp_path / "memory.jsonl").exists()  # the real server did the work

    df = pa.load(out)
    assert df["run_id"].nunique() == 1 and set(df["topology"]) == {"c-ots"}
    init = df[(df.stage == "INIT") & (df.server == "memory")]
    assert {"spawn", "ready", "initialize", "tools_discovery"} <= set(init.phase)

    llm = df[df.source == "proxy:llm"].sort_values("seq")
    calls = llm[llm.stage.isin(["S1", "S5"])]
    assert llm.task_id.nunique() == 1 and calls["round"].tolist() == list(range(1, len(script.usage) + 1))
    expected_steps = ["search", "tool", "answer"] if tool_search else ["tool", "answer"]
    assert script.steps == expected_steps

    # the stage chain of the task, in order
    task = df[df.task_id == llm.task_id.iloc[0]].sort_values("seq")
    chain = task.stage.tolist()
    tool_part = ["S2", "S3", "S4", "S5"]
    assert chain == ["S1", *tool_part * (len(expected_steps) - 1), "S6"], chain

    # the MCP call is the MCP proxy's exact pair, joined to the model's tool_use id on the arguments
    tool_id = f"toolu_{len(expected_steps) - 1:04d}"
    joined = task[task.tool_call_id == tool_id]
    assert joined.stage.tolist() == ["S2", "S3", "S4"]
    mcp = joined[joined.stage.isin(["S3", "S4"])]
    assert (
        set(mcp.source) == {"proxy:mcp"}
        and set(mcp.server) == {"memory"}
        and set(mcp.tool) == {"create_entities"}
    )
    assert set(mcp.timing_quality) == {"exact"}
    for attrs in mcp["attrs"]:
        assert json.loads(attrs)["join"]["quality"] == "arguments"
    if tool_search:  # ToolSearch is Claude Code's own tool: S3/S4 derived from the next request, marked
        search = task[task.tool_call_id == "toolu_0001"]
        assert search.stage.tolist() == ["S2", "S3", "S4"]
        derived = [json.loads(a) for a in search[search.stage.isin(["S3", "S4"])]["attrs"]]
        assert all(a["derived"] == "next_request" and a["client_tool"] for a in derived)

    # input by origin sums to what the upstream reported (its usage is the ground truth)
    for (_, row), usage in zip(calls.iterrows(), script.usage, strict=True):
        reported = (
            usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        )
        origins = row[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum()
        assert row.tokens_in == reported == origins
        attrs = json.loads(row["attrs"])
        assert row.cache_read_tokens == usage["cache_read_input_tokens"]
        assert row.cache_write_tokens == usage["cache_creation_input_tokens"]
        assert attrs["tokens_in_estimate"] > 0 and row.token_source == "provider"

    # deferred tools: outside the prompt until ToolSearch loads one
    first = json.loads(calls["attrs"].iloc[0])
    schema_keys = [p["key"] for p in calls.parts.iloc[0] if p["origin"] == "schemas"]
    if tool_search:
        assert first["tool_search"] == ["ToolSearch"]
        assert first["deferred_not_loaded"] == ["DeferredToolPlaceholder"]  # sent with defer_loading
        assert len(first["deferred_mcp_tools"]) == 9 and TOOL in first["deferred_mcp_tools"]  # named only
        assert first["deferred_schema_tokens"] > 0 and not any(k.startswith("memory/") for k in schema_keys)
        second = json.loads(calls["attrs"].iloc[1])
        assert second["loaded_tools"] == [TOOL] and TOOL not in second.get("deferred_mcp_tools", [])
        assert "memory/create_entities" in [p["key"] for p in calls.parts.iloc[1] if p["origin"] == "schemas"]
    else:
        assert "deferred_not_loaded" not in first and "deferred_mcp_tools" not in first
        assert {"memory/create_entities", "memory/read_graph"} <= set(schema_keys)

    # every response reached the client byte for byte
    outputs = llm[llm.stage.isin(["S2", "S6"])]
    assert [json.loads(a)["response_bytes"] for a in outputs["attrs"]] == [len(b) for b in script.sent]

    # the API key went to the upstream and nowhere else
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    # `promcp import` of the session file this Claude Code release wrote: the same provider usage per call
    sessions = list((tmp_path / "home" / ".claude" / "projects").rglob("*.jsonl"))
    assert len(sessions) == 1, sessions
    imported = [e for e in events_of(sessions[0]) if e.stage.value in ("S1", "S5")]
    assert [e.tokens_in for e in imported] == calls.tokens_in.tolist()
    assert [e.cache_read_tokens for e in imported] == calls.cache_read_tokens.tolist()


def test_claude_code_parallel_subagents_are_tasks_of_their_own(tmp_path: Path) -> None:
    """Two Agent calls in one answer: Claude Code runs two subagent conversations in parallel against the same
    upstream; each becomes its own task under the parent's, and the parent's rounds stay its own."""
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "traces"
    home.mkdir()
    work.mkdir()
    env = {
        "PATH": f"{CLAUDE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "ANTHROPIC_API_KEY": SECRET,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    script = Delegating()
    with StubServer(script.anthropic) as stub:
        proc = subprocess.run(
            [
                str(PROMCP),
                "record",
                "--out",
                str(out),
                "--upstream",
                stub.url,
                "--no-mcp",
                "--",
                "claude",
                "-p",
                "Do the two subtasks.",
                "--output-format",
                "json",
            ],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == "All subtasks are done."
    assert sorted(script.steps) == ["answer", "delegate", "sub:SUBTASK A", "sub:SUBTASK B"]
    df = pa.load(out).sort_values("seq")
    tasks = sorted(df.task_id.dropna().unique())
    parent = tasks[0]
    assert tasks == [parent, f"{parent}/sub1", f"{parent}/sub2"]
    main = df[df.task_id == parent]
    assert main.stage.tolist() == ["S1", "S2", "S3", "S4", "S3", "S4", "S5", "S6"]
    assert set(main[main.stage == "S3"].tool) == {"Agent"}
    prompts = set()
    for sub in tasks[1:]:
        rows = df[df.task_id == sub]
        assert rows.stage.tolist() == ["S1", "S6"] and rows["round"].tolist() == [1, 1]
        attrs = json.loads(rows["attrs"].iloc[0])
        assert attrs["parent_task"] == parent
        prompts.add(rows.resp_preview.iloc[1][:9])
    assert prompts == {"SUBTASK A", "SUBTASK B"}
