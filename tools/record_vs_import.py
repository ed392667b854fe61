"""One Claude Code (or Gemini CLI) session seen two ways: ``promcp record`` (proxies on its LLM API and MCP server)
and ``promcp import`` of the session log the client itself wrote — the tables in docs/record.md. The Gemini CLI's
session is seen a third way at the same time: its telemetry (log events and spans) through ``promcp collect``.

Runs offline: the real Claude Code CLI (node_modules) against the scripted loopback Anthropic upstream of the
tests (ToolSearch → the memory server's create_entities → answer), with the real memory MCP server configured in
a throw-away ``~/.claude.json``; with ``gemini``, the real Gemini CLI against the scripted Gemini upstream
(server-everything's echo → answer), the server in a throw-away ``~/.gemini/settings.json``. Prints a Markdown
table.

    .venv/bin/python tools/record_vs_import.py [claude|gemini]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

import promcp.analysis as pa  # noqa: E402
from tests.stubs.llm_http import StubServer  # noqa: E402
from tests.stubs.scripted_llm import Scripted, ScriptedGemini  # noqa: E402

CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
MEMORY = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
TOOL = "mcp__memory__create_entities"
ARGS = {"entities": [{"name": "promcp", "entityType": "project", "observations": ["records every stage"]}]}
ORIGINS = ["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]


def run(tmp: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    work.mkdir()
    servers = {
        "memory": {
            "command": "node",
            "args": [str(MEMORY)],
            "env": {"MEMORY_FILE_PATH": str(tmp / "m.jsonl")},
        }
    }
    (home / ".claude.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        "PATH": f"{CLAUDE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    script = Scripted(TOOL, ARGS, answer="Saved: ")
    with StubServer(script.anthropic) as stub:
        subprocess.run(
            [
                *(
                    str(PROMCP),
                    "record",
                    "--out",
                    str(tmp / "record"),
                    "--upstream",
                    stub.url,
                    "--no-summary",
                ),
                *("--", "claude", "-p", "Remember that promcp records every stage.", "--allowedTools", TOOL),
            ],
            env=env,
            cwd=work,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    [log] = (home / ".claude" / "projects").glob("*/*.jsonl")
    subprocess.run(
        [str(PROMCP), "import", str(log), "--out", str(tmp / "import")], check=True, stdout=subprocess.DEVNULL
    )
    return pa.load(tmp / "record"), pa.load(tmp / "import")


GEMINI = ROOT / "node_modules" / ".bin" / "gemini"
EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def run_gemini(tmp: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One real session, seen three ways at once: ``promcp record`` around it, its telemetry (logs and spans)
    into ``promcp collect``, its session log through ``promcp import``."""
    from tests.stubs.ports import free_port, wait_port

    home, work = tmp / "home", tmp / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    port = free_port()
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "mcpServers": {"everything": {"command": "node", "args": [str(EVERYTHING)]}},
        "telemetry": {
            "enabled": True,
            "target": "local",
            "otlpEndpoint": f"http://127.0.0.1:{port}",
            "otlpProtocol": "http",
            "logPrompts": True,
        },
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = {
        "PATH": f"{GEMINI.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "GEMINI_API_KEY": "dummy",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    script = ScriptedGemini("mcp_everything_echo", {"message": "promcp records every stage"})
    collect = subprocess.Popen(
        [str(PROMCP), "collect", "--listen", f"127.0.0.1:{port}", "--out", str(tmp / "collect")],
        stderr=subprocess.DEVNULL,
    )
    wait_port(port)
    with StubServer(script.gemini) as stub:
        subprocess.run(
            [
                *(
                    str(PROMCP),
                    "record",
                    "--out",
                    str(tmp / "record"),
                    "--upstream",
                    stub.url,
                    "--no-summary",
                ),
                *(
                    "--",
                    "gemini",
                    "-p",
                    "Echo: promcp records every stage",
                    "--approval-mode",
                    "yolo",
                    "-o",
                    "json",
                ),
            ],
            env=env,
            cwd=work,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    collect.send_signal(signal.SIGINT)
    collect.wait(timeout=120)
    [log] = (home / ".gemini" / "tmp").rglob("session-*.jsonl")
    subprocess.run(
        [str(PROMCP), "import", str(log), "--out", str(tmp / "import")], check=True, stdout=subprocess.DEVNULL
    )
    return pa.load(tmp / "record"), pa.load(tmp / "collect"), pa.load(tmp / "import")


def facts(df: pd.DataFrame) -> dict[str, Any]:
    side = df[df.task_id.isna() & df.stage.isin(["S1", "S6"])]
    df = df[df.task_id.notna() | (df.stage == "INIT")]
    calls = df[df.stage.isin(["S1", "S5"])]
    outs = df[df.stage.isin(["S2", "S6"])]
    tools = df[df.stage.isin(["S3", "S4"])]
    init = df[df.stage == "INIT"]
    unobserved = sum(p["tokens"] for parts in calls.parts for p in parts if p["key"] == "unobserved")

    def quality(frame: pd.DataFrame) -> str:
        counts = frame.timing_quality.astype(str).value_counts()
        return ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "—"

    return {
        "events": len(df),
        "tasks": df.task_id.nunique(),
        "LLM calls (S1/S5)": len(calls),
        "input tokens (provider usage)": f"{int(calls.tokens_in.sum()):,}",
        "system tokens observed / unobserved": f"{int(calls.in_system.sum()) - unobserved:,} / {unobserved:,}",
        "schema tokens (tool definitions)": f"{int(calls.in_schemas.sum()):,}",
        "tool-result tokens re-read": f"{int(calls.in_tool_results.sum()):,}",
        "prefill / generation split (S1/S5, S2/S6 timing)": f"{quality(calls)} / {quality(outs)}",
        "tool calls S3/S4 (timing)": f"{len(tools) // 2} ({quality(tools)})",
        "MCP server start-up (INIT events)": f"{len(init)} ({', '.join(sorted(set(init.phase)))})"
        if len(init)
        else "0",
        "tools/list footprint tokens": f"{int(init.footprint_tokens.fillna(0).sum()):,}"
        if len(init)
        else "—",
        "deferred tools seen": _deferred(calls),
        "side calls (model routing…), outside the task": f"{len(side) // 2}",
    }


def _deferred(calls: pd.DataFrame) -> str:
    first = calls["attrs"].iloc[0] if len(calls) else None
    attrs = json.loads(first) if isinstance(first, str) else {}
    names = attrs.get("deferred_mcp_tools") or []
    return (
        f"{len(names)} MCP + {len(attrs.get('deferred_not_loaded') or [])} placeholder"
        if attrs.get("tool_search")
        else "—"
    )


def main() -> None:
    if sys.argv[1:] == ["gemini"]:
        with tempfile.TemporaryDirectory(prefix="promcp-rvi-") as tmp:
            seen = [facts(df) for df in run_gemini(Path(tmp))]
        print(
            "| one Gemini CLI session | `promcp record` | `promcp collect` (its telemetry: logs + spans) "
            "| `promcp import` (its session log) |"
        )
        print("|---|---|---|---|")
        for key in seen[0]:
            print(f"| {key} | {' | '.join(str(f[key]) for f in seen)} |")
        return
    with tempfile.TemporaryDirectory(prefix="promcp-rvi-") as tmp:
        record, imported = run(Path(tmp))
        a, b = facts(record), facts(imported)
    print("| one Claude Code session | `promcp record` | `promcp import` (its session log) |")
    print("|---|---|---|")
    for key in a:
        print(f"| {key} | {a[key]} | {b[key]} |")


if __name__ == "__main__":
    main()
