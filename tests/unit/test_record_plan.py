"""How ``promcp record`` starts a client (promcp/proxy/record.py): the MCP servers Claude Code would start, the
generated --mcp-config, the environment — without running anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp.errors import ConfigError
from promcp.proxy._group import ENV_OUT, ENV_RUN_ID
from promcp.proxy.record import RecordOptions, claude_code_servers, plan_launch
from promcp.recorder import Recorder


def _write(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _setup(tmp_path: Path) -> tuple[dict[str, str], Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir(parents=True)
    _write(
        home / ".claude.json",
        {
            "mcpServers": {
                "user-srv": {"command": "node", "args": ["u.js"]},
                "both": {"command": "user-version"},
            },
            "projects": {
                str(work): {
                    "mcpServers": {
                        "local-srv": {"command": "uvx", "args": ["l"]},
                        "both": {"command": "local-version"},
                    },
                    "enabledMcpjsonServers": ["approved"],
                    "disabledMcpjsonServers": ["denied"],
                }
            },
        },
    )
    _write(
        work / ".mcp.json",
        {
            "mcpServers": {
                "approved": {"command": "python", "args": ["-m", "a"]},
                "denied": {"command": "python", "args": ["-m", "d"]},
                "unapproved": {"command": "python", "args": ["-m", "x"]},
            }
        },
    )
    return {"HOME": str(home), "PATH": "/usr/bin"}, work


def test_servers_claude_code_would_start(tmp_path: Path) -> None:
    env, work = _setup(tmp_path)
    servers = claude_code_servers(env, work)
    assert set(servers) == {"user-srv", "both", "local-srv", "approved"}
    assert servers["both"]["command"] == "local-version"  # local scope wins over user scope
    _write(work / ".claude" / "settings.local.json", {"enableAllProjectMcpServers": True})
    assert set(claude_code_servers(env, work)) == {"user-srv", "both", "local-srv", "approved", "unapproved"}
    other = {"HOME": str(tmp_path / "nobody"), "CLAUDE_CONFIG_DIR": str(tmp_path / "home")}
    assert "user-srv" in claude_code_servers(other, tmp_path)  # $CLAUDE_CONFIG_DIR/.claude.json


def test_launch_wraps_every_server_in_a_generated_strict_config(tmp_path: Path) -> None:
    env, work = _setup(tmp_path)
    with Recorder(tmp_path / "traces", run_id="run-1", part="llm") as rec:
        opts = RecordOptions(["claude", "-p", "hi"], rec, environ=env, cwd=work)
        launch = plan_launch(opts, {"anthropic": "http://127.0.0.1:5555"}, tmp_path / "mcp.json")
    assert launch.argv == [
        "claude",
        "--mcp-config",
        str(tmp_path / "mcp.json"),
        "--strict-mcp-config",
        "-p",
        "hi",
    ]
    assert launch.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:5555"
    assert launch.env[ENV_RUN_ID] == "run-1" and Path(launch.env[ENV_OUT]) == (tmp_path / "traces").absolute()
    config = json.loads((tmp_path / "mcp.json").read_text())["mcpServers"]
    assert set(config) == set(launch.wrapped) == {"user-srv", "both", "local-srv", "approved"}
    args = config["approved"]["args"]
    assert args[args.index("proxy") : args.index("proxy") + 2] == ["proxy", "mcp"]
    assert args[args.index("--run-id") + 1] == "run-1" and args[-3:] == ["python", "-m", "a"]
    assert args[args.index("--name") + 1] == "approved"


def test_given_mcp_configs_replace_the_users_and_strict_keeps_only_them(tmp_path: Path) -> None:
    env, work = _setup(tmp_path)
    _write(work / "extra.json", {"mcpServers": {"extra": {"command": "node", "args": ["e.js"]}}})
    inline = json.dumps({"mcpServers": {"inline": {"command": "echo"}}})
    with Recorder(tmp_path / "traces", run_id="run-2", part="llm") as rec:
        loose = RecordOptions(
            ["claude", "--mcp-config", "extra.json", inline, "-p", "x"], rec, environ=env, cwd=work
        )
        launch = plan_launch(loose, {}, tmp_path / "a.json")
        assert {"extra", "inline", "user-srv"} <= set(launch.wrapped)
        assert launch.argv[4:] == ["-p", "x"]
        strict = RecordOptions(
            ["claude", "--strict-mcp-config", "--mcp-config=extra.json"], rec, environ=env, cwd=work
        )
        assert plan_launch(strict, {}, tmp_path / "b.json").wrapped == ["extra"]
        bad = RecordOptions(["claude", "--mcp-config", "{not json"], rec, environ=env, cwd=work)
        with pytest.raises(ConfigError, match="not JSON"):
            plan_launch(bad, {}, tmp_path / "c.json")


def test_other_clients_get_base_urls_and_the_run_but_no_config(tmp_path: Path) -> None:
    with Recorder(tmp_path / "traces", run_id="run-3", part="llm") as rec:
        opts = RecordOptions(["python", "agent.py"], rec, environ={"PATH": "/usr/bin"})
        urls = {"anthropic": "http://127.0.0.1:1", "openai": "http://127.0.0.1:2/v1"}
        launch = plan_launch(opts, urls, tmp_path / "unused.json")
    assert launch.argv == ["python", "agent.py"] and launch.wrapped == []
    assert launch.env["OPENAI_BASE_URL"] == "http://127.0.0.1:2/v1" and launch.env[ENV_RUN_ID] == "run-3"
    assert not (tmp_path / "unused.json").exists()


def test_cli_usage_errors_are_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    base = [sys.executable, "-m", "promcp.cli", "record", "--out", str(tmp_path), "--no-summary"]
    for extra, message in (([], "no client"), (["--", "no-such-client-xyz"], "no such program")):
        proc = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [*base, "--", sys.executable, "-c", "raise SystemExit(7)"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 7 and "0 LLM call(s)" in proc.stderr  # the client's exit status is record's
