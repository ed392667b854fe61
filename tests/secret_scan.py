"""Plant secrets in what promcp records, then scan every file it wrote for them (issue 23, item 12; used by
tests/integration/test_secret_scan.py and tests/perf/bench_reliability.py).

The secrets are written in free text, the way a user or a tool result carries them — no ``KEY=`` beside them —
through two sources: ``promcp proxy mcp`` (stdio) in front of the npm ``everything`` server, whose ``echo`` tool
sends the text back (tool arguments and result), and ``promcp import`` of a Claude.ai export. The scan reads every
file under the dataset — Parquet files as tables (their pages are compressed), journals and the rest as text — and
reports which planted secrets it finds, in the event files and in the content files apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"

#: fake credentials in the formats of real ones (AWS's documented example key pair, among others)
SECRETS = {
    "password": "hunter2",
    "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "sendgrid": "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",
    "url_password": "s3cr3tPw9",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
TEXT = (
    f"my password {SECRETS['password']} and the aws creds {SECRETS['aws_access_key_id']} "
    f"{SECRETS['aws_secret_access_key']}; ci uses {SECRETS['github']}, alerts go through {SECRETS['slack']}, "
    f"mail through {SECRETS['sendgrid']}, the db is postgres://app:{SECRETS['url_password']}@db/x and the "
    f"session {SECRETS['jwt']}"
)
MODES = ("redacted", "full", "none")


def _export() -> list[dict[str, Any]]:
    return [
        {
            "uuid": "conv-secrets",
            "name": "",
            "created_at": "2026-03-20T13:04:15Z",
            "updated_at": "2026-03-20T13:05:15Z",
            "chat_messages": [
                {
                    "uuid": "h1",
                    "sender": "human",
                    "created_at": "2026-03-20T13:04:16Z",
                    "content": [{"type": "text", "text": TEXT}],
                },
                {
                    "uuid": "a1",
                    "parent_message_uuid": "h1",
                    "sender": "assistant",
                    "created_at": "2026-03-20T13:04:26Z",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "note", "input": {"text": TEXT}},
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "name": "note",
                            "content": [{"type": "text", "text": "saved: " + TEXT}],
                        },
                        {"type": "text", "text": "Noted: " + TEXT},
                    ],
                },
            ],
        }
    ]


def record_proxy(out: Path, mode: str) -> None:
    """One stdio session through ``promcp proxy mcp --content MODE``: the echo tool called with the text."""
    command = [sys.executable, "-m", "promcp.cli", "proxy", "mcp", "--out", str(out), "--content", mode]
    proxy = subprocess.Popen(
        [*command, "--name", "everything", "--run-id", f"proxy-{mode}", "--", "node", str(EVERYTHING)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proxy.stdin is not None and proxy.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proxy.stdin is not None
        proxy.stdin.write(json.dumps(message).encode() + b"\n")
        proxy.stdin.flush()

    def answer(jsonrpc_id: int) -> dict[str, Any]:
        assert proxy.stdout is not None
        while (message := json.loads(proxy.stdout.readline())).get("id") != jsonrpc_id:
            pass
        return message

    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    answer(2)
    call = {"name": "echo", "arguments": {"message": TEXT}}
    send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
    got = answer(3)
    assert SECRETS["password"] in json.dumps(got)  # the client got the text unchanged
    proxy.stdin.close()
    proxy.wait(60)


def record_import(out: Path, mode: str, tmp: Path) -> None:
    from promcp.collectors import import_path

    export = tmp / f"conversations-{mode}.json"
    export.write_text(json.dumps(_export()))
    assert import_path(export, out, content=mode).imported == 1


def _text_of(path: Path) -> str:
    if path.suffix in (".parquet", ".pq"):
        return str(pq.read_table(path).to_pylist())
    return path.read_text(errors="replace")


def scan(out: Path) -> dict[str, list[str]]:
    """The planted secrets found in each kind of file under ``out``: ``events`` (run files, journals, everything
    but content) and ``content`` (``_content/``)."""
    found: dict[str, list[str]] = {"events": [], "content": [], "files": []}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        kind = "content" if "_content" in path.parts else "events"
        text = _text_of(path)
        found["files"].append(str(path.relative_to(out)))
        found[kind] += [name for name, secret in SECRETS.items() if secret in text]
    return found


def wait_merged(out: Path, timeout: float = 60.0) -> None:
    """Until no journal part is left (the proxy's detached merge has run)."""
    import time

    deadline = time.monotonic() + timeout
    while list(out.glob("_journal/*.parts/*")) and time.monotonic() < deadline:
        time.sleep(0.1)
