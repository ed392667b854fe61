"""``promcp record --strategy topk:K:bm25``: real clients whose tool lists the LLM proxy cuts in flight — the real
Claude Code CLI (Anthropic Messages, its built-in tools plus the real memory MCP server's, offline against a
scripted loopback upstream), an openai SDK agent (Chat Completions) and the real Codex CLI (Responses, the MCP
server's tools in a namespace). Each must still complete its task through
the MCP tool, the upstream must have received only the routed tools (plus any the conversation used), and the run
must hold, per call, the client's and the upstream's input split with what was saved."""

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
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
MEMORY = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
ARGS = {"entities": [{"name": "promcp", "entityType": "project", "observations": ["records every stage"]}]}
PROMPT = "Create the entity promcp in the knowledge graph memory."

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(
        not CLAUDE.exists() or not MEMORY.exists(), reason="npm packages not installed (npm ci)"
    ),
]


def check_calls(out: Path, k: int, client_tools: int) -> None:
    """Every task call carried K routed tools (plus kept ones) out of the client's, with both splits."""
    df = pa.load(out)
    calls = df[df.stage.isin(["S1", "S5"]) & (df.source == "proxy:llm")].sort_values("seq")
    task_calls = [json.loads(a) for a in calls["attrs"] if json.loads(a).get("client_tools")]
    assert len(task_calls) >= 2
    for attrs in task_calls:
        assert attrs["strategy"] == f"topk:{k}:bm25" and attrs["client_tools"] == client_tools
        assert k <= attrs["strategy_tools"] <= k + attrs.get("strategy_kept", 0)
        assert (
            attrs["saved_tokens"]
            == attrs["client_origins"]["schemas"] - attrs["upstream_origins"]["schemas"]
            > 0
        )


def test_claude_code_completes_with_the_routed_tools(tmp_path: Path) -> None:
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "traces"
    home.mkdir()
    work.mkdir()
    servers = {
        "memory": {
            "command": "node",
            "args": [str(MEMORY)],
            "env": {"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")},
        }
    }
    (home / ".claude.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        "PATH": f"{CLAUDE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
        "ANTHROPIC_API_KEY": "sk-ant-api03-promcp-test-secret-strategy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",  # every tool inline: the list the proxy routes
    }
    tool = "mcp__memory__create_entities"
    script = Scripted(tool, ARGS, answer="Saved: ")
    with StubServer(script.anthropic) as stub:
        proc = subprocess.run(
            [str(PROMCP), "record", "--out", str(out), "--upstream", stub.url, "--strategy", "topk:4:bm25", "--",
             "claude", "-p", PROMPT, "--allowedTools", tool, "--output-format", "json"],
            env=env, cwd=work, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert stub.violations == []
    assert json.loads(proc.stdout)["result"].startswith("Saved: ") and script.steps == ["tool", "answer"]
    assert (tmp_path / "m.jsonl").exists()  # the real server did the work
    offered = [[t["name"] for t in r.body.get("tools") or []] for r in stub.requests]
    task = [names for names in offered if tool in names]
    assert len(task) == 2 and all(len(names) == 4 for names in task)  # the used tool was among the 4 already
    df = pa.load(out)
    first = json.loads(
        df[(df.stage == "S1") & (df.source == "proxy:llm")].sort_values("seq")["attrs"].iloc[0]
    )
    assert first["client_tools"] > 20  # Claude Code's own tools and the memory server's 9
    check_calls(out, 4, first["client_tools"])


def test_openai_sdk_agent_completes_with_the_routed_tools(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    script = Scripted("create_entities", ARGS, answer="Saved: ")
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-proj-promcp-test-strategy",
        "MEMORY_FILE_PATH": str(tmp_path / "m.jsonl"),
    }
    env.pop("OPENAI_BASE_URL", None)
    server = [str(PROMCP), "proxy", "mcp", "--name", "memory", "--", "node", str(MEMORY)]
    agent = [sys.executable, "-m", "tests.clients.openai_agent", "gpt-4o-mini", PROMPT, "--", *server]
    with StubServer(script.openai, wire="openai") as stub:
        proc = subprocess.run(
            [str(PROMCP), "record", "--api", "openai", "--upstream", f"{stub.url}/v1", "--out", str(out),
             "--strategy", "topk:2:bm25", "--", *agent],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert stub.violations == [] and script.steps == ["tool", "answer"]
    assert proc.stdout.startswith("Saved: ")
    offered = [[t["function"]["name"] for t in r.body["tools"]] for r in stub.requests]
    assert offered == [["create_entities", "create_relations"]] * 2
    check_calls(out, 2, 9)


CODEX = ROOT / "node_modules" / ".bin" / "codex"
EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


@pytest.mark.skipif(not CODEX.exists() or not EVERYTHING.exists(), reason="npm packages not installed")
def test_codex_completes_with_the_routed_tools(tmp_path: Path) -> None:
    """The real Codex CLI (Responses API, the MCP server's tools in a namespace): the routed ones go upstream."""
    from tests.stubs.scripted_llm import ScriptedResponses

    home, codex_home, work, out = (
        tmp_path / "home",
        tmp_path / "codex-home",
        tmp_path / "work",
        tmp_path / "traces",
    )
    for folder in (home, codex_home, work):
        folder.mkdir()
    script = ScriptedResponses(
        "mcp__everything__echo", {"message": "promcp records every stage"}, answer="Echoed: "
    )
    env = {
        "PATH": f"{CODEX.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": "sk-proj-promcp-codex-strategy",
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
    }
    with StubServer(script.responses) as stub:
        (codex_home / "config.toml").write_text(
            f'model = "gpt-scripted"\nopenai_base_url = "{stub.url}/v1"\n\n[mcp_servers.everything]\n'
            f'command = "node"\nargs = [{json.dumps(str(EVERYTHING))}]\nrequired = true\nstartup_timeout_sec = 60\n'
        )
        proc = subprocess.run(
            [str(PROMCP), "record", "--out", str(out), "--strategy", "topk:3:bm25", "--",
             "codex", "exec", "--skip-git-repo-check", "--sandbox", "read-only", "Echo: promcp records every stage"],
            env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert script.steps == ["tool", "answer"] and "Echoed: " in proc.stdout
    offered = []  # function tools per request, namespaced ones as the model calls them
    for r in stub.requests:
        tools = r.body.get("tools") or []
        flat = [t["name"] for t in tools if t.get("type") == "function"]
        flat += [
            f"{t['name']}__{i['name']}" for t in tools if t.get("type") == "namespace" for i in t["tools"]
        ]
        offered.append(flat)
    assert len(offered) == 2 and all(len(n) == 3 and "mcp__everything__echo" in n for n in offered), offered
    df = pa.load(out)
    first = json.loads(df[(df.stage == "S1") & (df.source == "proxy:llm")]["attrs"].iloc[0])
    assert first["client_tools"] > 20  # Codex's own tools and the everything server's
    check_calls(out, 3, first["client_tools"])


@pytest.mark.skipif(
    not (ROOT / "node_modules" / ".bin" / "gemini").exists() or not EVERYTHING.exists(),
    reason="npm packages not installed",
)
def test_gemini_cli_completes_with_the_routed_tools(tmp_path: Path) -> None:
    """The real Gemini CLI (Gemini API, ``tools[].functionDeclarations``: its own tools and the everything
    server's ``mcp_everything_*``): the routed declarations go upstream, the CLI completes through the MCP tool."""
    from tests.integration.test_record_gemini import setup
    from tests.stubs.scripted_llm import ScriptedGemini

    env, _home, work = setup(tmp_path)
    out = tmp_path / "traces"
    tool = "mcp_everything_echo"
    script = ScriptedGemini(tool, {"message": "promcp records every stage"})
    with StubServer(script.gemini) as stub:
        proc = subprocess.run(
            [str(PROMCP), "record", "--out", str(out), "--upstream", stub.url, "--strategy", "topk:3:bm25", "--",
             "gemini", "-p", "Echo: promcp records every stage", "--approval-mode", "yolo", "-o", "json"],
            env=env, cwd=work, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert script.steps == ["tool", "answer"]
    result = json.loads(proc.stdout)
    assert result["response"].startswith("Echoed: ") and "promcp records every stage" in result["response"]
    assert result["stats"]["tools"]["byName"][tool]["success"] == 1  # the real server answered the call
    offered = [
        [d["name"] for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
        for body in script.bodies
    ]
    assert len(offered) == 2 and all(len(names) == 3 and tool in names for names in offered), offered
    df = pa.load(out)
    first = json.loads(
        df[(df.stage == "S1") & (df.source == "proxy:llm") & df.task_id.notna()]["attrs"].iloc[0]
    )
    assert first["client_tools"] > 15  # the CLI's own tools and the everything server's
    check_calls(out, 3, first["client_tools"])
