"""The host's stdio transport against real MCP servers: noise on stdout goes to the server log, a message over the
bound ends the connection with a named error, a big result is measured from the wire. No LLM: the pool is driven
directly, as the agent loop drives it."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from promcp import analysis, tokenizers
from promcp.host import _stdio
from promcp.host.config import Command, Policy, ServerConfig
from promcp.host.servers.pool import ServerPool
from promcp.recorder import Recorder

REPO = Path(__file__).resolve().parents[2]
FAULTY = REPO / "tests" / "fault_servers" / "faulty.py"

BIG = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    mcp = MCPServer("big", log_level="WARNING")

    @mcp.tool()
    def blob(kb: int) -> str:
        """kb kilobytes of text."""
        return "0123456789abcdef" * (kb * 64)

    mcp.run("stdio")
''')


def _call(tmp_path: Path, cfg: ServerConfig, tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        with Recorder(tmp_path / "out", run_id="stdio", fsync="never") as rec, rec.activate():
            pool = ServerPool(
                {cfg.name: cfg},
                recorder=rec,
                policy=Policy(retries=0),
                log_dir=tmp_path / "logs",
                home=tmp_path,
                render_tool=lambda server, t: (t.name, t.name),
                tokenizer=tokenizers.get("o200k_base"),
            )
            try:
                conn = await pool.get(cfg.name)
                outcome, measure = await conn.call(tool, args, 60, tokenizer=tokenizers.get("o200k_base"))
            finally:
                await pool.close()
        return outcome, measure

    return asyncio.run(go())


@pytest.mark.servers
def test_noise_on_stdout_is_logged_not_shown(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # the mcp SDK's own servers divert stray writes away from stdout: this one writes before it starts
    script = f"echo 'this is not JSON-RPC'; echo '{{broken json'; exec '{sys.executable}' '{FAULTY}' garbage"
    cfg = ServerConfig("garbage", command=Command("/bin/sh", ("-c", script)))
    outcome, _ = _call(tmp_path, cfg, "lookup", {"key": "k"})
    assert outcome.text == "value of k"
    log = (tmp_path / "logs" / "garbage.log").read_text()
    assert "is not a JSON-RPC message; skipped: 'this is not JSON-RPC'" in log
    assert "'{broken json'" in log
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "JSONRPC" not in captured.err


@pytest.mark.servers
def test_a_message_over_the_bound_ends_the_connection_with_a_named_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = tmp_path / "big.py"
    server.write_text(BIG)
    monkeypatch.setattr(_stdio, "MAX_MESSAGE_BYTES", 1 << 20)
    cfg = ServerConfig("big", command=Command(sys.executable, (str(server),)))
    outcome, measure = _call(tmp_path, cfg, "blob", {"kb": 4096})
    assert outcome.is_error and measure.failure is not None
    assert measure.failure.error_type == "message_too_large"
    assert "exceeds 1 MiB" in (tmp_path / "logs" / "big.log").read_text()


@pytest.mark.servers
def test_a_big_result_is_measured_from_the_wire(tmp_path: Path) -> None:
    server = tmp_path / "big.py"
    server.write_text(BIG)
    cfg = ServerConfig("big", command=Command(sys.executable, (str(server),)))
    outcome, measure = _call(tmp_path, cfg, "blob", {"kb": 2048})
    assert len(outcome.text) == 2048 * 1024
    # the response line holds the text twice (content and structuredContent) plus the JSON-RPC envelope
    assert measure.response_bytes is not None
    assert 2 * 2048 * 1024 < measure.response_bytes < 2 * 2048 * 1024 + 400
    df = analysis.load(tmp_path / "out")
    assert df.empty or "S4" not in set(df["stage"].astype(str))  # the pool alone records INIT only
