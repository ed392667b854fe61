"""Start one MCP server the way ``promcp run`` does, list every page of its tools, stop it.

The host's own server-session code (:class:`promcp.host.servers.pool.ServerPool`) does the work, so the start-up
phases are timed and built exactly as in a run (``spawn``, ``ready``, ``initialize``, ``tools_discovery`` through
the INIT stage builders). Its events go to a throw-away recorder in a temporary folder (no content captured) and
are read back from the recorder's journal listener; the folder, with the server's log, is removed afterwards.
Nothing is written anywhere else.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ConfigError, ServerError
from promcp.events import Event, Phase
from promcp.host.config import Command, Policy, ServerConfig

#: Transports a ``--url`` can name.
URL_TRANSPORTS = ("streamable_http", "sse")


@dataclass(frozen=True)
class Target:
    """The server to measure: a stdio ``command``, or a ``url`` (optionally served by ``command``)."""

    name: str | None = None  # default: the name the server gives itself in its handshake
    command: tuple[str, ...] = ()
    url: str | None = None
    transport: str | None = None  # streamable_http | sse (a URL's; default from its path)
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def config(self) -> ServerConfig:
        """The benchmark-file shape of this target (what :class:`ServerPool` starts)."""
        command = _command(self.command, self.env, self.cwd) if self.command else None
        if self.url is None:
            if command is None:
                raise ConfigError(
                    "name a server: `-- COMMAND [ARGS…]` (stdio) or --url URL", source="footprint"
                )
            return ServerConfig(name=self.label, transport="stdio", command=command)
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"{self.url!r} is not an http(s) URL", source="--url")
        transport = self.transport or ("sse" if self.url.rstrip("/").endswith("/sse") else "streamable_http")
        if transport not in URL_TRANSPORTS:
            raise ConfigError(
                f"unknown transport {transport!r}; choose {', '.join(URL_TRANSPORTS)}", source="--transport"
            )
        return ServerConfig(name=self.label, transport=transport, url=self.url, start=command)

    @property
    def label(self) -> str:
        return self.name or "server"

    @property
    def where(self) -> str:
        """How an error names the server: its name, else the command's program, else the URL."""
        if self.name:
            return f"server {self.name}"
        return f"server {os.path.basename(self.command[0])}" if self.command else f"server at {self.url}"

    def describe(self) -> str:
        return self.url if self.url and not self.command else " ".join(self.command)


def _command(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Command:
    """A server command with its executable resolved on the caller's PATH (the server itself gets a neutral one)."""
    exe = argv[0]
    if os.sep not in exe:
        exe = shutil.which(exe) or exe
    elif not os.path.isabs(exe):
        exe = os.path.abspath(os.path.join(cwd or os.getcwd(), exe))
    return Command(command=exe, args=tuple(argv[1:]), env=dict(env), cwd=cwd or os.getcwd())


@dataclass
class Listing:
    """What one start-up of the server showed: its tools (typed ``Tool`` models, every page in order) and the
    INIT events the host's session code built for it."""

    tools: list[Any]
    events: list[Event]
    wall_ms: float

    def phase_ms(self, phase: Phase) -> float | None:
        """Milliseconds of a start-up phase (``tools_discovery``: every page together); None if absent."""
        values = [e.latency_ms for e in self.events if e.phase == phase and e.latency_ms is not None]
        return float(sum(values)) if values else None

    @property
    def pages(self) -> int:
        return sum(1 for e in self.events if e.phase == Phase.TOOLS_DISCOVERY)

    @property
    def handshake(self) -> dict[str, Any]:
        init = next((e for e in self.events if e.phase == Phase.INITIALIZE), None)
        attrs = dict(init.attrs or {}) if init is not None else {}
        return {
            "protocol_version": init.protocol_version if init is not None else None,
            "server_name": attrs.get("server_name"),
            "server_version": attrs.get("server_version"),
        }


def list_tools(target: Target, *, timeout_s: float = 30.0, tokenizer: str = DEFAULT_TOKENIZER) -> Listing:
    """Start ``target``, list all its tools, stop it. Raises :class:`ServerError` (one line) when it cannot be
    started, does not answer within ``timeout_s`` (start-up and each ``tools/list`` page), or exits."""
    cfg = target.config()
    with tempfile.TemporaryDirectory(prefix="promcp-footprint-") as tmp:
        return asyncio.run(_list(cfg, Path(tmp), timeout_s, tokenizer, target.where))


def _reason(exc: ServerError, name: str) -> str:
    """The error's message without the prefixes the session code stacks on it."""
    text = str(exc)
    for prefix in (f"server {name!r}: ", "ServerError: "):
        while prefix in text:
            text = text.replace(prefix, "")
    return f"{text} ({exc.error_type})" if exc.error_type not in ("server_error", "") else text


async def _list(
    cfg: ServerConfig, scratch: Path, timeout_s: float, tokenizer_name: str, where: str
) -> Listing:
    from promcp import tokenizers
    from promcp.host.servers.pool import ServerPool
    from promcp.recorder import Recorder
    from promcp.wire.mcp import tool_text_of

    events: list[Event] = []
    policy = Policy(retries=0, startup_timeout_s=timeout_s, discovery_timeout_s=timeout_s)
    rec = Recorder(scratch / "data", topology="l-cust", source="footprint", fsync="never", content="none")
    rec.on_journal(events.append)
    home = scratch / "home"
    home.mkdir()
    pool = ServerPool(
        {cfg.name: cfg},
        recorder=rec,
        policy=policy,
        log_dir=scratch / "logs",
        home=home,
        render_tool=lambda _server, tool: tool_text_of(tool),
        tokenizer=tokenizers.get(tokenizer_name),
    )
    t0 = time.perf_counter()
    try:
        conn = await pool.get(cfg.name)
        tools = list(conn.tools)
        wall_ms = (time.perf_counter() - t0) * 1000.0
    except ServerError as exc:
        raise ServerError(f"{where} did not start or list its tools: {_reason(exc, cfg.name)}") from None
    finally:
        await pool.close()
        rec.flush()
        rec.discard()
    return Listing(tools=tools, events=events, wall_ms=wall_ms)
