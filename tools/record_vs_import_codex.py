"""One Codex CLI session seen two ways: ``promcp record -- codex exec …`` (proxies on its Responses API and its MCP
server) and ``promcp import`` of the rollout Codex itself wrote (``$CODEX_HOME/sessions/…/rollout-*.jsonl``) — the
Codex table in docs/record.md.

Runs offline: the real Codex CLI (node_modules) against the scripted loopback Responses upstream of the tests
(server-everything's echo in the ``mcp__everything`` namespace → answer), custom provider, the server in a
throw-away ``config.toml`` (tests/integration/test_record_codex.py's ``run_codex``). Prints a Markdown table with
the rows of tools/record_vs_import.py.

    .venv/bin/python tools/record_vs_import_codex.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import promcp.analysis as pa  # noqa: E402
from tests.integration.test_record_codex import run_codex  # noqa: E402
from tools.record_vs_import import PROMCP, facts  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="promcp-rvi-codex-") as name:
        tmp = Path(name)
        _out, _script, recorded, _err = run_codex(tmp, "custom", record=True)
        [rollout] = (tmp / "recorded" / "codex-home" / "sessions").rglob("rollout-*.jsonl")
        subprocess.run(
            [str(PROMCP), "import", str(rollout), "--out", str(tmp / "import")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        a, b = facts(pa.load(recorded)), facts(pa.load(tmp / "import"))
    print("| one Codex CLI session | `promcp record` | `promcp import` (its rollout file) |")
    print("|---|---|---|")
    for key in a:
        print(f"| {key} | {a[key]} | {b[key]} |")


if __name__ == "__main__":
    main()
