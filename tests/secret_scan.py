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
#: credentials a client sends in headers and an MCP server gets in its environment: never stored, in any mode
CREDENTIALS = {
    "x-api-key": "sk-ant-api03-qW3rTy8uIoP1aSdF5gHjK9lZxCvB2nM4-7QwErTyUiOp0AsDfGhJkLzXcVbNm6QwErTyUiOpA-z1x2c3v4AA",
    "authorization": "Bearer tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "cookie": "sessionid=c00k1e5ecretV4lue9a8b7c6d5e4f",
    "env": "envSECRETtoken5f4e3d2c1b0a99887766",
}


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


def record_session(out: Path, mode: str, tmp: Path) -> None:
    """One ``promcp record --content MODE`` session (tests/stubs/scripted_agent.py): an LLM call through the LLM proxy
    with an API key, an ``authorization`` header and a cookie, the text in the prompt and in the model's answer,
    then the echo tool called with it through ``promcp proxy mcp``, the MCP server started with a secret in its
    environment (``SERVICE_TOKEN``)."""
    from tests.stubs.llm_http import Reply, StubServer, anthropic_reply

    answer = anthropic_reply([{"type": "text", "text": "Noted: " + TEXT}], stop="end_turn")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENT_API_KEY": CREDENTIALS["x-api-key"],
           "AGENT_AUTHORIZATION": CREDENTIALS["authorization"], "AGENT_COOKIE": CREDENTIALS["cookie"],
           "SERVICE_TOKEN": CREDENTIALS["env"]}  # fmt: skip
    with StubServer(lambda _req: Reply(200, answer)) as upstream:
        agent = [sys.executable, str(ROOT / "tests" / "stubs" / "scripted_agent.py"), str(tmp / "answered.txt"),
                 str(EVERYTHING), "1", TEXT]  # fmt: skip
        cmd = [sys.executable, "-m", "promcp.cli", "record", "--out", str(out), "--run-id", f"record-{mode}",
               "--api", "anthropic", "--upstream", upstream.url, "--content", mode, "--no-summary", "--", *agent]  # fmt: skip
        done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        (request,) = upstream.requests
    assert (
        request.headers["x-api-key"] == CREDENTIALS["x-api-key"]
    )  # relayed: the credentials were really there
    assert (tmp / "answered.txt").read_text().split() == ["1"]


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
    but content) and ``content`` (``_content/``); ``credentials``: the planted headers and environment secret
    anywhere; ``detect-secrets``: what detect-secrets' detectors find in any file (its regex detectors: keys,
    tokens, private keys, basic auth — the entropy rule flags every hash and id, so it is not applied here)."""
    found: dict[str, list[str]] = {
        "events": [],
        "content": [],
        "credentials": [],
        "detect-secrets": [],
        "files": [],
    }
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        kind = "content" if "_content" in path.parts else "events"
        text = _text_of(path)
        found["files"].append(str(path.relative_to(out)))
        found[kind] += [name for name, secret in SECRETS.items() if secret in text]
        found["credentials"] += [name for name, secret in CREDENTIALS.items() if secret in text]
        if kind == "events":  # content files under ``full`` hold the planted text verbatim, by definition
            found["detect-secrets"] += [f"{path.relative_to(out)}: {kind}" for kind in _detected(text)]
    return found


def _detected(text: str) -> list[str]:
    """The secret types detect-secrets' regex detectors find in ``text``."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    with default_settings() as settings:
        for entropy in ("Base64HighEntropyString", "HexHighEntropyString"):
            settings.disable_plugins(entropy)
        return sorted({s.type for line in text.splitlines() for s in scan_line(line)})


def wait_merged(out: Path, timeout: float = 60.0) -> None:
    """Until no journal part is left (the proxy's detached merge has run)."""
    import time

    deadline = time.monotonic() + timeout
    while list(out.glob("_journal/*.parts/*")) and time.monotonic() < deadline:
        time.sleep(0.1)
