"""``promcp footprint`` against real servers — the npm everything, memory and filesystem servers and promcp's own —
over stdio, streamable HTTP and SSE: its totals must equal an independent count of the same ``tools/list`` (the test
asks the server itself, over its own JSON-RPC, and counts the rendered tools with the tiktoken encoding directly);
the budget and baseline gates exit 1, a server that fails to start or never answers exits 2 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from promcp.cli import main
from promcp.footprint import Target, measure
from promcp.servers.dataset import DatasetTools
from promcp.tokenizers._tiktoken import build_encoding
from tests.stubs.ports import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "node_modules" / ".bin"
PY = sys.executable

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(
        not (BIN / "mcp-server-everything").exists(), reason="npm packages not installed (npm ci)"
    ),
]

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "independent-count", "version": "1"},
}


def _stdio_tools(argv: list[str], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every page of tools/list, asked over the server's own stdio by hand."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdin is not None and proc.stdout is not None

    def ask(msg_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode() + b"\n"
        )
        proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == msg_id:
                return dict(msg["result"])

    try:
        ask(1, "initialize", INIT)
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        tools: list[dict[str, Any]] = []
        cursor, n = None, 2
        while True:
            page = ask(n, "tools/list", {"cursor": cursor} if cursor else {})
            tools += page["tools"]
            cursor, n = page.get("nextCursor"), n + 1
            if not cursor:
                return tools
    finally:
        proc.kill()
        proc.wait()


def _http_json(resp: httpx.Response) -> dict[str, Any]:
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in resp.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(resp.json())


def _http_tools(url: str) -> list[dict[str, Any]]:
    """tools/list over streamable HTTP, by hand."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with httpx.Client(timeout=30) as client:
        r = client.post(
            url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
        )
        session = r.headers.get("mcp-session-id")
        if session:
            headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = _http_json(r)["result"]["protocolVersion"]
        client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict[str, Any]] = []
        cursor, n = None, 2
        while True:
            params = {"cursor": cursor} if cursor else {}
            page = _http_json(
                client.post(
                    url,
                    headers=headers,
                    json={"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": params},
                )
            )["result"]
            tools += page["tools"]
            cursor, n = page.get("nextCursor"), n + 1
            if not cursor:
                return tools


def _expected(tools: list[dict[str, Any]], encoding: str) -> int:
    """The tools as a host renders them (name, description, input schema as parameters), counted directly."""
    enc = build_encoding(encoding)
    total = 0
    for t in tools:
        text = json.dumps(
            {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": t.get("inputSchema") or {},
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        total += len(enc.encode_ordinary(text))
    return total


@contextmanager
def _serving(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    try:
        wait_port(port)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)


TOKENIZERS = ["o200k_base", "cl100k_base", "approx:claude"]


def _check(fp: Any, tools: list[dict[str, Any]]) -> None:
    assert [t.name for t in fp.tools] == [t["name"] for t in tools]
    assert fp.total("o200k_base") == _expected(tools, "o200k_base")
    assert fp.total("cl100k_base") == _expected(tools, "cl100k_base") == fp.total("approx:claude")
    assert fp.startup_ms["initialize"] > 0 and fp.startup_ms["tools_discovery"] > 0
    slim = next(s for s in fp.strategies if s.strategy == "slim" and s.tokenizer == "o200k_base")
    assert slim.saving >= 0 and slim.tokens + slim.saving == next(
        s.tokens for s in fp.strategies if s.strategy == "full" and s.tokenizer == "o200k_base"
    )


@pytest.mark.parametrize(
    "argv",
    [
        [str(BIN / "mcp-server-everything"), "stdio"],
        [str(BIN / "mcp-server-memory")],
        [str(BIN / "mcp-server-filesystem"), str(ROOT / "docs")],
        [PY, "-m", "promcp.servers.scicalc"],
    ],
    ids=["everything", "memory", "filesystem", "scicalc"],
)
def test_stdio_totals_equal_an_independent_count(argv: list[str], tmp_path: Path) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    fp = measure(Target(command=tuple(argv), env=env), TOKENIZERS)
    _check(fp, _stdio_tools(argv, env))
    assert fp.transport == "stdio" and len(fp.tools) >= 4


def test_streamable_http_started_by_footprint_equals_an_independent_count() -> None:
    """--url with -- COMMAND: footprint starts the everything server on HTTP itself; the test then starts its own
    instance to ask it by hand."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [str(BIN / "mcp-server-everything"), "streamableHttp"]
    fp = measure(Target(command=tuple(argv), url=url, env={"PORT": str(port)}), TOKENIZERS)
    assert fp.transport == "streamable_http" and fp.startup_ms["ready"] is not None
    with _serving(argv, port, {"PORT": str(port)}):
        _check(fp, _http_tools(url))


def test_own_servers_over_http_and_sse() -> None:
    port = free_port()
    with _serving(
        [PY, "-m", "promcp.servers.dates", "--transport", "streamable-http", "--port", str(port)], port
    ):
        url = f"http://127.0.0.1:{port}/mcp"
        fp = measure(Target(url=url), TOKENIZERS)
        _check(fp, _http_tools(url))
        # promcp mcp's footprint tool: the same measurement, as structured content
        _, body = DatasetTools(ROOT / "examples" / "default-run").footprint(
            url=url, tokenizers=["o200k_base"]
        )
        assert body["totals"] == {"o200k_base": fp.total("o200k_base")} and body["server"] == "dates"
    port = free_port()
    with _serving([PY, "-m", "promcp.servers.dates", "--transport", "sse", "--port", str(port)], port):
        sse = measure(Target(url=f"http://127.0.0.1:{port}/sse"), TOKENIZERS)
    assert sse.transport == "sse" and sse.server == fp.server == "dates"
    assert [t.name for t in sse.tools] == [t.name for t in fp.tools] and sse.total("o200k_base") == fp.total(
        "o200k_base"
    )


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_budget_and_baseline_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the node memory server: the quickest of the real servers to start
    server = ["--env", f"MEMORY_FILE_PATH={tmp_path / 'memory.jsonl'}", "--", str(BIN / "mcp-server-memory")]
    code, out, _ = _cli(
        capsys, "footprint", "--format", "json", "--tokenizers", "o200k_base,cl100k_base", *server
    )
    assert code == 0
    saved = json.loads(out)
    total = saved["totals"]["o200k_base"]
    assert total == sum(r["tokens"] for r in saved["tables"]["tools"] if r["tokenizer"] == "o200k_base")
    baseline = tmp_path / "footprint.json"
    baseline.write_text(out)

    code, out, _ = _cli(
        capsys,
        "footprint",
        "--budget",
        str(total),
        "--baseline",
        str(baseline),
        "--format",
        "markdown",
        *server,
    )
    assert code == 0 and "gate: pass" in out
    code, _, err = _cli(capsys, "footprint", "--budget", str(total - 1), *server)
    assert code == 1 and "over budget" in err and f"{total:,}" in err

    # the baseline had fewer tokens: this run is a regression, unless the tolerance covers it
    shrunk = dict(saved, totals={"o200k_base": total - 10, "cl100k_base": saved["totals"]["cl100k_base"]})
    shrunk["tables"] = {
        "tools": [
            dict(r, tokens=r["tokens"] - 10) if r["tool"] == "read_graph" else r
            for r in saved["tables"]["tools"]
        ]
    }
    baseline.write_text(json.dumps(shrunk))
    code, out, err = _cli(capsys, "footprint", "--baseline", str(baseline), "--format", "json", *server)
    assert code == 1 and "regression" in err and "+10" in err
    changes = json.loads(out)["tables"]["changes"]
    assert {"tool": "read_graph", "change": 10, "status": "grew"}.items() <= next(
        c for c in changes if c["tool"] == "read_graph"
    ).items()
    assert _cli(capsys, "footprint", "--baseline", str(baseline), "--tolerance", "10", *server)[0] == 0

    baseline.write_text("{not json")
    code, _, err = _cli(capsys, "footprint", "--baseline", str(baseline), *server)
    assert code == 2 and "is not JSON" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (
            ["/nonexistent/server-binary"],
            "error: server server-binary did not start or list its tools: cannot start",
        ),
        ([PY, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], "boom"),
        ([PY, "-c", "import time; time.sleep(60)"], "no answer within"),
    ],
    ids=["missing", "exits", "silent"],
)
def test_a_server_that_does_not_start_is_one_line_and_exit_2(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.monotonic()
    code, out, err = _cli(capsys, "footprint", "--timeout", "2", "--", *argv)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: server ") and reason in lines[0], err
    assert "Traceback" not in err and out == ""
    assert time.monotonic() - t0 < 60


def test_a_url_nobody_serves(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(
        capsys, "footprint", "--timeout", "1", "--url", f"http://127.0.0.1:{free_port()}/mcp"
    )
    assert (
        code == 2
        and out == ""
        and "did not accept connections" in err
        and "did not start or list its tools" in err
    )
