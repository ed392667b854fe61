"""``promcp record`` with the real Claude Code CLI (the pinned release and the oldest alias) and the real Gemini CLI:
the MCP configuration it generates for the client holds no secret of the servers' environment, even when
``record`` is killed with SIGKILL mid-session and its temporary folder outlives it — and the server still gets
every value, exactly as the client would have given it without promcp.

The server (tests/stubs/env_check_server.py) refuses to start unless its environment holds the planted secret and
a value that mixes text with the user's own ``${VAR}`` reference, and no ``PROMCP_MCP_ENV_*`` variable. The
upstream LLM accepts the connection and never answers, so the session is mid-call when ``record`` is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "node_modules" / ".bin"
OLDEST = ROOT / "node_modules" / "claude-code-2-1-150" / "bin" / "claude.exe"
SERVER = ROOT / "tests" / "stubs" / "env_check_server.py"
PROMCP = Path(sys.executable).parent / "promcp"
#: Claude Code keeps a literal ``$``; the Gemini CLI expands ``$NAME`` in server env values (twice: an unset name
#: becomes empty), with or without promcp, so its secret has none
SECRETS = {
    "claude": "ghp_promcpPlanted$ecret0123456789abcdefXYZ",
    "gemini": "ghp_promcpPlantedSecret0123456789abcdefXYZ",
}
SECRET_TAIL = b"0123456789abcdefXYZ"
USER_VAR_VALUE = "from-the-user-env"
#: what the Gemini CLI needs to run headless and offline (as in test_record_gemini.py)
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not (BIN / "claude").exists(), reason="npm packages not installed (npm ci)"),
]


def _files(*folders: Path) -> list[Path]:
    return [p for folder in folders for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.mark.parametrize(
    ("client", "binary"),
    [
        pytest.param("claude", BIN / "claude", id="claude-pinned"),
        pytest.param("claude", OLDEST, id="claude-2.1.150"),
        pytest.param("gemini", BIN / "gemini", id="gemini"),
    ],
)
def test_sigkill_leaves_no_secret_in_temp(tmp_path: Path, client: str, binary: Path) -> None:
    assert binary.exists(), f"{binary} is missing: npm ci installs every version package.json names"
    home, work, out, tmp, bin_dir = (tmp_path / n for n in ("home", "work", "traces", "tmp", "bin"))
    for folder in (home, work, tmp, bin_dir):
        folder.mkdir()
    (bin_dir / client).symlink_to(binary)
    secret = SECRETS[client]
    report, expected = tmp_path / "report.txt", tmp_path / "expected.json"
    expected.write_text(
        json.dumps({"PROBE_TOKEN": secret, "PROBE_MIXED": f"Bearer {USER_VAR_VALUE} {secret}"})
    )
    server = {
        "command": sys.executable,
        "args": [str(SERVER), str(report), str(expected)],
        "env": {"PROBE_TOKEN": secret, "PROBE_MIXED": "Bearer ${PROBE_USER_VAR} " + secret},
    }
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PROBE_USER_VAR": USER_VAR_VALUE,
    }
    if os.environ.get("PYTHONPATH"):  # the promcp under test
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if client == "claude":
        (home / ".claude.json").write_text(json.dumps({"mcpServers": {"probe": server}}))
        env |= {
            "ANTHROPIC_API_KEY": "sk-ant-api03-promcp-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "MCP_CONNECTION_NONBLOCKING": "false",
        }
        args = [client, "-p", "hello", "--output-format", "json"]
        config_glob = "promcp-record-*/mcp-config.json"
    else:
        (home / ".gemini").mkdir()
        settings = {**GEMINI_SETTINGS, "mcpServers": {"probe": server}}
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        env |= {"GEMINI_API_KEY": "AIzaSy-promcp-dummy", "NO_COLOR": "1"}
        args = [client, "-p", "hello", "-o", "json"]
        config_glob = "promcp-record-*/gemini-home/.gemini/settings.json"
    with socket.socket() as silent:  # an upstream that accepts and never answers: the session stays mid-call
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        upstream = f"http://127.0.0.1:{silent.getsockname()[1]}"
        proc = subprocess.Popen(
            [str(PROMCP), "record", "--out", str(out), "--upstream", upstream, "--", *args],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 90
            while not report.exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            time.sleep(0.5)  # the server answers initialize; the client goes on to the LLM call
            alive = proc.poll() is None
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the client record started (its session)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert alive, stderr
    # the server got every value exactly (the user's own reference expanded by the client)
    assert report.read_text().splitlines() == ["ok"], stderr
    # the temporary folder a SIGKILL left behind: a configuration of references, no secret in any file
    configs = list(tmp.glob(config_glob))
    assert len(configs) == 1, _files(tmp)
    entry = json.loads(configs[0].read_text())["mcpServers"]["probe"]
    assert entry["env"]["PROBE_TOKEN"].startswith("${PROMCP_MCP_ENV_")
    assert "${PROBE_USER_VAR}" in entry["env"]["PROBE_MIXED"]
    written = _files(tmp, out)
    assert any(p.suffix == ".jsonl" for p in written)  # the run's journal parts are there to scan
    for path in written:
        data = path.read_bytes()
        assert secret.encode() not in data and SECRET_TAIL not in data, path
