"""How ``promcp record -- gemini`` starts the Gemini CLI (promcp/proxy/gemini_cli.py, promcp/proxy/record.py) and
``promcp proxy config --client gemini`` — the settings layers, workspace trust, the private home — without running
the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from promcp.proxy.gemini_cli import gemini_settings, trusted
from promcp.proxy.record import RecordOptions, plan_launch
from promcp.recorder import Recorder


def _write(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)


def _setup(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir(parents=True)
    user = (
        "{ // the user's settings, with a comment as the CLI allows\n"
        '  "security": {"auth": {"selectedType": "gemini-api-key"}},\n'
        '  "ui": {"theme": "Dracula"},\n'
        '  "mcpServers": {"everything": {"command": "node", "args": ["e.js"], "env": {"K": "$HOME"}},\n'
        '                 "remote": {"httpUrl": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "x"}},\n'
        '                 "both": {"command": "user-version"}}\n}'
    )
    _write(home / ".gemini" / "settings.json", user)
    _write(home / ".gemini" / "oauth_creds.json", {"token": "t"})
    _write(home / ".env", "GEMINI_API_KEY=from-the-env-file\n")
    _write(work / ".gemini" / "settings.json", {"mcpServers": {"both": {"command": "workspace-version"}}})
    system = tmp_path / "etc" / "settings.json"
    _write(system, {"mcpServers": {"admin": {"command": "admin-server"}}})
    env = {"HOME": str(home), "PATH": "/usr/bin", "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system)}
    return env, home, work


def test_layers_and_trust(tmp_path: Path) -> None:
    env, home, work = _setup(tmp_path)
    untrusted = gemini_settings(env, work)  # folder trust on, no rule: the workspace's servers do not count
    assert not untrusted.workspace_trusted
    assert set(untrusted.servers) == {"everything", "remote", "both"} and set(untrusted.fixed) == {"admin"}
    trusting = gemini_settings({**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}, work)
    assert set(trusting.servers) == {"everything", "remote"} and set(trusting.fixed) == {"admin", "both"}
    assert trusting.fixed["both"] == work / ".gemini" / "settings.json"
    rules = home / ".gemini" / "trustedFolders.json"
    _write(rules, {str(tmp_path): "TRUST_FOLDER", str(work): "DO_NOT_TRUST"})
    assert not trusted(env, work, folder_trust=True)  # the longest rule wins
    _write(rules, {str(work / "sub"): "TRUST_PARENT"})
    assert trusted(env, work, folder_trust=True) and trusted(env, work, folder_trust=False)
    assert not trusted({**env, "GEMINI_CLI_TRUST_WORKSPACE": "false"}, work, folder_trust=False)


def test_launch_uses_a_private_home_and_edits_nothing(tmp_path: Path) -> None:
    env, home, work = _setup(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with Recorder(tmp_path / "traces", run_id="run-g", part="llm") as rec:
        opts = RecordOptions(["gemini", "-p", "hi"], rec, environ=env, cwd=work)
        launch = plan_launch(opts, {"gemini": "http://127.0.0.1:5555"}, tmp_path / "tmp" / "mcp.json")
    assert (
        launch.argv == ["gemini", "-p", "hi"]
        and launch.env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:5555"
    )
    assert launch.wrapped == ["everything", "both"]  # no HTTP proxy can be started while planning
    assert any(u.startswith("remote (an HTTP server") for u in launch.unwrapped)
    assert any(u.startswith("admin (defined in") for u in launch.unwrapped)
    private = Path(launch.env["GEMINI_CLI_HOME"]) / ".gemini"
    settings = json.loads((private / "settings.json").read_text())
    assert (
        settings["ui"] == {"theme": "Dracula"}
        and settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    )
    args = settings["mcpServers"]["everything"]["args"]
    assert args[args.index("proxy") : args.index("proxy") + 2] == ["proxy", "mcp"] and args[-2:] == [
        "node",
        "e.js",
    ]
    assert args[args.index("--run-id") + 1] == "run-g" and settings["mcpServers"]["everything"]["env"] == {
        "K": "$HOME"
    }
    assert (private / "oauth_creds.json").resolve() == (home / ".gemini" / "oauth_creds.json").resolve()
    assert (private / "tmp").resolve() == (
        home / ".gemini" / "tmp"
    ).resolve()  # session logs land in the real place
    assert oct((private / "settings.json").stat().st_mode & 0o777) == "0o600"
    after = {p: p.read_bytes() for p in before}
    assert after == before  # no file of the user's changed


def test_proxy_config_client_gemini(tmp_path: Path) -> None:
    env, _, _ = _setup(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "proxy",
            "config",
            "--client",
            "gemini",
            "--out",
            str(tmp_path / "t"),
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ui"] == {"theme": "Dracula"}
    servers = doc["mcpServers"]
    assert servers["everything"]["args"][-2:] == ["node", "e.js"] and "proxy" in servers["everything"]["args"]
    assert servers["remote"]["httpUrl"] == "http://127.0.0.1:8750/mcp" and "url" not in servers["remote"]
    assert servers["remote"]["headers"] == {"Authorization": "x"}
    assert "--upstream http://127.0.0.1:3001/mcp --listen 127.0.0.1:8750" in proc.stderr
