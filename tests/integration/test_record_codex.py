"""``promcp record -- codex exec …``: the real OpenAI Codex CLI (npm ``@openai/codex``, native binary), offline,
against a scripted loopback Responses upstream, with the npm ``server-everything`` MCP server in its own
``config.toml`` — the built-in ``openai`` provider (``openai_base_url``) and a custom ``[model_providers.X]``.

The model calls ``echo`` of the server's ``mcp__everything`` namespace, then answers with its result. Every
response's chunked terminator comes 20 ms after ``response.completed`` (Codex hangs up on ``response.completed``):
no call may be lost. One run must hold, in one task, INIT of the server then S1 → S2 → S3 → S4 → S5 → S6, the MCP
call joined to the model's call, token figures equal to the upstream's usage with origins summing to it, one
schema part per MCP tool keyed ``everything/<tool>`` plus the server's instructions, Codex's environment context
as a system part, the same output as Codex without promcp, and the API key in no file.
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
from tests.stubs.llm_http import StubServer
from tests.stubs.scripted_llm import ScriptedResponses

ROOT = Path(__file__).resolve().parents[2]
CODEX = ROOT / "node_modules" / ".bin" / "codex"
EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
SECRET = "sk-proj-promcp-codex-secret-0123456789abcdef"
PROMPT = "Echo: promcp records every stage"
TERMINATOR_LAG_S = 0.02

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not CODEX.exists() or not EVERYTHING.exists(), reason="npm packages not installed"),
]


def _config(provider: str, upstream: str) -> str:
    server = (
        "[mcp_servers.everything]\n"
        'command = "node"\n'
        f"args = [{json.dumps(str(EVERYTHING))}]\n"
        "required = true\n"  # as a user who needs the server would: Codex waits for it before the first turn
        "startup_timeout_sec = 60\n"
        "tool_timeout_sec = 30\n"
    )
    if provider == "builtin":
        return f'model = "gpt-scripted"\nopenai_base_url = "{upstream}/v1"\n\n{server}'
    return (
        'model = "gpt-scripted"\nmodel_provider = "scripted"\n\n'
        "[model_providers.scripted]\n"
        'name = "Scripted"\n'
        f'base_url = "{upstream}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\n\n' + server
    )


def run_codex(tmp_path: Path, provider: str, *, record: bool) -> tuple[str, ScriptedResponses, Path, str]:
    """One ``codex exec`` (through ``promcp record`` or not) in a private HOME and CODEX_HOME."""
    base = tmp_path / ("recorded" if record else "bare")
    home, codex_home, work, out = base / "home", base / "codex-home", base / "work", base / "traces"
    for folder in (home, codex_home, work):
        folder.mkdir(parents=True)
    script = ScriptedResponses(
        "mcp__everything__echo", {"message": "promcp records every stage"}, answer="Echoed: "
    )
    script.end_delay_s = TERMINATOR_LAG_S
    env = {
        "PATH": f"{CODEX.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY" if provider == "builtin" else "SCRIPTED_API_KEY": SECRET,
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    command = ["codex", "exec", "--skip-git-repo-check", "--sandbox", "read-only", PROMPT]
    if record:
        command = [str(PROMCP), "record", "--out", str(out), "--", *command]
    with StubServer(script.responses) as stub:
        config = codex_home / "config.toml"
        config.write_text(_config(provider, stub.url))
        before = config.read_bytes()
        proc = subprocess.run(
            command,
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert config.read_bytes() == before  # the user's config is untouched on disk
    return proc.stdout, script, out, proc.stderr


@pytest.mark.parametrize("provider", ["builtin", "custom"])
def test_codex_end_to_end(tmp_path: Path, provider: str) -> None:
    bare_out, bare_script, _, _ = run_codex(tmp_path, provider, record=False)
    stdout, script, out, stderr = run_codex(tmp_path, provider, record=True)
    assert "MCP servers recorded: everything" in stderr
    assert script.steps == bare_script.steps == ["tool", "answer"]
    assert stdout == bare_out and stdout.startswith("Echoed: ")  # the CLI's output, as without promcp

    df = pa.load(out).sort_values("seq")
    assert df["run_id"].nunique() == 1 and set(df["topology"]) == {"c-ots"}
    init = df[(df.stage == "INIT") & (df.server == "everything")]
    assert {"spawn", "ready", "initialize", "tools_discovery"} <= set(init.phase)
    n_server_tools = int(json.loads(init[init.phase == "tools_discovery"]["attrs"].iloc[0])["n_tools"])

    llm = df[df.source == "proxy:llm"]
    calls = llm[llm.stage.isin(["S1", "S5"])]
    assert llm.task_id.nunique() == 1 and len(calls) == len(script.usage) == 2  # no call lost
    assert set(llm.status) == {"ok"}
    task = df[df.task_id == llm.task_id.iloc[0]]
    assert task.stage.tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"], task.stage.tolist()

    # the MCP call is the MCP proxy's exact pair, joined to the model's namespaced call on its arguments
    joined = task[task.tool_call_id == "call_0001"]
    assert joined.stage.tolist() == ["S2", "S3", "S4"]
    # S2 names the namespaced call server/tool like the MCP side, and the join matched on server and tool
    s2 = joined[joined.stage == "S2"].iloc[0]
    assert s2.tool == "everything/echo"
    assert [c["name"] for c in json.loads(s2["attrs"])["tool_calls"]] == ["everything/echo"]
    mcp = joined[joined.stage.isin(["S3", "S4"])]
    assert (
        set(mcp.source) == {"proxy:mcp"} and set(mcp.server) == {"everything"} and set(mcp.tool) == {"echo"}
    )
    assert set(mcp.timing_quality) == {"exact"}
    assert all(json.loads(a)["join"]["quality"] == "arguments" for a in mcp["attrs"])

    # tokens: the upstream's usage; origins sum to it
    for (_, row), usage in zip(calls.sort_values("seq").iterrows(), script.usage, strict=True):
        origins = row[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum()
        assert row.tokens_in == usage["input_tokens"] == origins
        assert row.cache_read_tokens == usage["input_tokens_details"]["cached_tokens"]
        attrs = json.loads(row["attrs"])
        keys = {p["key"]: p for p in row.parts}
        # one schema part per MCP tool, keyed like the MCP side, and the server's instructions of their own
        mcp_parts = [k for k in keys if k.startswith("everything/")]
        assert len(mcp_parts) == n_server_tools and "everything/echo" in mcp_parts
        assert keys["everything#instructions"]["origin"] == "schemas"
        assert attrs["n_tools"] == sum(1 for p in row.parts if p["origin"] == "schemas") - sum(
            1 for k in keys if "#instructions" in k
        )
        assert keys["environment_context"]["origin"] == "system"
        assert keys["prompt"]["origin"] == "user"
    outputs = llm[llm.stage.isin(["S2", "S6"])].sort_values("seq")
    for (_, row), usage in zip(outputs.iterrows(), script.usage, strict=True):
        assert row.tokens_out == usage["output_tokens"]
        assert row.reasoning_tokens == usage["output_tokens_details"]["reasoning_tokens"]
    assert [json.loads(a)["response_bytes"] for a in outputs["attrs"]] == [len(b) for b in script.sent]

    # the key went to the upstream and nowhere else
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def _summary(df: Any) -> str:  # pragma: no cover - a failure message
    return df[["stage", "source", "status", "error_type"]].to_string()
