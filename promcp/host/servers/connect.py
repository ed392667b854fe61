"""Opening one MCP server connection, phase by phase, each phase an INIT event (docs/accounting.md "Session
start-up"): ``spawn`` (the process), ``ready`` (an HTTP server's port and transport, or a stdio server's answer to a
``ping`` probe), ``initialize``, and ``tools_discovery`` (every ``tools/list`` page). A phase that fails is recorded
with its ``error_type`` and raised as :class:`~promcp.errors.ServerError`.

Servers start with an explicit environment (:func:`server_env`): the SDK's inherited variables (HOME, LOGNAME, PATH,
SHELL, TERM, USER) are overridden with neutral values, so nothing of the user's environment reaches a server unless
the benchmark file names it in ``env``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

import anyio
from anyio.abc import Process
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PaginatedRequestParams, Tool

from promcp import stages
from promcp.errors import ServerError
from promcp.events import Phase
from promcp.host._reaper import Reaper
from promcp.host._stdio import stdio_transport
from promcp.host.config import Command, Policy, ServerConfig
from promcp.host.servers.connection import ServerConnection
from promcp.host.servers.failures import describe, startup_error_type
from promcp.host.servers.wire_log import Exchange, TimedReadStream, TimedWriteStream, WireLog
from promcp.recorder import Recorder
from promcp.stages import Clock, Failure, Instant
from promcp.tokenizers import CachedTokenizer
from promcp.wire import mcp

__all__ = ["Opening", "Settings", "server_env"]

#: a server that keeps handing out cursors stops being listed after this many pages
MAX_PAGES = 1000
T = TypeVar("T")


def server_env(extra: dict[str, str] | Any, home: Path) -> dict[str, str]:
    """The complete environment of a server process: neutral defaults + what the benchmark file names."""
    path_dirs = [str(Path(sys.executable).parent)]
    node = shutil.which("node")
    if node:
        path_dirs.append(str(Path(node).parent))
    path_dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(path_dirs)),
        "HOME": str(home),
        "USER": "promcp",
        "LOGNAME": "promcp",
        "SHELL": "/bin/sh",
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(dict(extra))
    return env


@dataclass
class Settings:
    """What every connection of a pool opens with."""

    recorder: Recorder
    policy: Policy
    home: Path
    render_tool: Callable[[str, Tool], tuple[str, str]]
    tokenizer: CachedTokenizer
    clock: Clock
    reaper: Reaper | None = None


@dataclass
class Opening:
    """One attempt at opening ``conn`` (attempt ``attempt``, from 0): :meth:`run` goes through the phases inside
    the connection's own task; ``stack`` holds the transport and session open until the connection stops."""

    settings: Settings
    conn: ServerConnection
    stack: AsyncExitStack
    errlog: IO[str]
    attempt: int
    attrs: dict[str, Any] = field(default_factory=dict)
    deadline: float = 0.0

    async def run(self) -> None:
        cfg = self.conn.config
        self.deadline = time.monotonic() + self.settings.policy.startup_timeout_s
        self.attrs = {"attempt": self.attempt + 1}
        if cfg.mode == "replay":
            self.attrs.update(mode="replay", catalog_server=cfg.replay_server)
        if cfg.transport == "stdio":
            read, write, ready_start = await self._spawn_stdio(cfg)
        else:
            read, write = await self._connect_http(cfg)
            ready_start = None
        self.conn.wire = log = WireLog(self.settings.clock)
        session = await self.stack.enter_async_context(
            ClientSession(TimedReadStream(read, log), TimedWriteStream(write, log))
        )
        self.conn.session = session
        if ready_start is not None and self.settings.policy.ready_probe:
            await self._probe(session, ready_start)
        await self._initialize(session)
        await self._discover(session)

    # -- the phases ----------------------------------------------------------------------------------------------

    async def _spawn_stdio(self, cfg: ServerConfig) -> tuple[Any, Any, Instant]:
        """``spawn``: the server process with its stdio transport (ready is the probe's answer, if any)."""
        start = self.settings.clock.now()
        cmd = self._command(cfg)
        transport = stdio_transport(
            cmd.command,
            cmd.args,
            env=server_env(cmd.env, self.settings.home),
            cwd=cmd.cwd,
            errlog=self.errlog,
            reaper=self.settings.reaper,
            state=self.conn.stdio,
        )
        try:
            read, write = await self.stack.enter_async_context(transport)
        except OSError as exc:
            raise self._fail(
                Phase.SPAWN, start, "spawn_failed", f"cannot start {cmd.command}: {exc}"
            ) from exc
        self._phase_done(Phase.SPAWN, start, attrs=self.attrs)
        return read, write, self.settings.clock.now()

    async def _connect_http(self, cfg: ServerConfig) -> tuple[Any, Any]:
        """``spawn`` (the ``start`` command, when there is one) and ``ready``: the port open and the transport
        entered (HTTP servers refuse requests before initialize)."""
        assert cfg.url is not None
        start = self.settings.clock.now()
        if cfg.start is not None:
            try:
                self.conn.process = await anyio.open_process(
                    [cfg.start.command, *cfg.start.args],
                    env=server_env(cfg.start.env, self.settings.home),
                    cwd=cfg.start.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=self.errlog,
                    stderr=self.errlog,
                    start_new_session=True,
                )
                if self.settings.reaper is not None:
                    self.settings.reaper.watch(self.conn.process.pid)
            except OSError as exc:
                raise self._fail(
                    Phase.SPAWN, start, "spawn_failed", f"cannot start {cfg.start.command}: {exc}"
                ) from exc
            self._phase_done(Phase.SPAWN, start, attrs=self.attrs)
        ready_start = self.settings.clock.now()
        try:
            await wait_port(cfg.url, self._left(), self.conn.process)
        except ServerError as exc:
            raise self._fail(Phase.READY, ready_start, exc.error_type, str(exc)) from None
        factory = streamable_http_client if cfg.transport == "streamable_http" else sse_client
        # (no cancel scope around entering the transport: its task group must outlive this block)
        try:
            streams = await self.stack.enter_async_context(factory(cfg.url))
        except Exception as exc:
            raise self._fail(Phase.READY, ready_start, "connect_failed", describe(exc)) from exc
        self._phase_done(Phase.READY, ready_start, attrs=self.attrs)
        return streams[0], streams[1]

    async def _probe(self, session: ClientSession, ready_start: Instant) -> None:
        """``ready`` of a stdio server: it answered a ``ping`` (the answer's arrival)."""
        _, _, ping = await self._step(Phase.READY, "ping", session.send_ping, self._left())
        self._phase_done(
            Phase.READY,
            ready_start,
            ping.received if ping else None,
            mcp_method="ping",
            jsonrpc_id=ping.jsonrpc_id if ping else None,
            attrs=self.attrs,
        )

    async def _initialize(self, session: ClientSession) -> None:
        conn, clock = self.conn, self.settings.clock
        t0, init, exchange = await self._step(
            Phase.INITIALIZE, "initialize", session.initialize, self._left()
        )
        shake = mcp.handshake(init)
        conn.protocol_version = shake.protocol_version
        request_bytes, response_bytes = exchange.wire_bytes(conn.transport) if exchange else (None, None)
        self.settings.recorder.emit(
            stages.initialize_event(
                server=conn.name,
                transport=conn.transport,
                start=t0,
                end=(exchange.received if exchange else None) or clock.now(),
                handshake=shake,
                jsonrpc_id=exchange.jsonrpc_id if exchange else None,
                request_bytes=request_bytes,
                response_bytes=response_bytes,
                attrs=self.attrs,
            )
        )

    async def _discover(self, session: ClientSession) -> None:
        """``tools/list``, every page: one tools_discovery event per page (tokens counted off the agent's path)."""
        conn, settings = self.conn, self.settings
        conn.tools = []
        cursor: str | None = None
        for _page in range(MAX_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            t0, listed, exchange = await self._step(
                Phase.TOOLS_DISCOVERY,
                "tools/list",
                functools.partial(session.list_tools, params=params),
                settings.policy.discovery_timeout_s,
            )
            end = (exchange.received if exchange else None) or settings.clock.now()
            page = list(listed.tools)
            conn.tools += page
            rendered = [settings.render_tool(conn.name, t) for t in page]
            next_cursor = mcp.next_cursor(listed)
            settings.recorder.emit_later(
                functools.partial(
                    stages.tools_discovery_event,
                    server=conn.name,
                    transport=conn.transport,
                    start=t0,
                    end=end,
                    tools=rendered,
                    tokenizer=settings.tokenizer,
                    put_text=settings.recorder.put_text,
                    jsonrpc_id=exchange.jsonrpc_id if exchange else None,
                    protocol_version=conn.protocol_version,
                    response_bytes=exchange.wire_bytes(conn.transport)[1] if exchange else None,
                    cursor=cursor,
                    next_cursor=next_cursor,
                )
            )
            if next_cursor is None or next_cursor == cursor:
                return
            cursor = next_cursor

    # -- helpers -------------------------------------------------------------------------------------------------

    def _left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    async def _step(
        self, phase: Phase, method: str, fn: Callable[[], Awaitable[T]], timeout: float
    ) -> tuple[Instant, T, Exchange | None]:
        """One request of the start-up: its start, its result and its exchange; a failure recorded and raised."""
        assert self.conn.wire is not None
        log = self.conn.wire
        t0 = self.settings.clock.now()
        log.begin()
        try:
            with anyio.fail_after(timeout):
                value = await fn()
        except TimeoutError:
            raise self._fail(
                phase,
                t0,
                "startup_timeout" if phase is not Phase.TOOLS_DISCOVERY else "discovery_timeout",
                f"{method}: no answer within {timeout:.3g} s",
            ) from None
        except Exception as exc:
            raise self._fail(phase, t0, startup_error_type(exc), f"{method}: {describe(exc)}") from exc
        return t0, value, log.take(method)

    def _phase_done(self, phase: Phase, start: Instant, end: Instant | None = None, **fields: Any) -> None:
        """An INIT start-up phase that began at ``start`` has ended (at ``end``, default now)."""
        self.settings.recorder.emit(
            stages.startup_event(
                phase=phase,
                server=self.conn.name,
                transport=self.conn.transport,
                start=start,
                end=end or self.settings.clock.now(),
                **fields,
            )
        )

    def _fail(self, phase: Phase, start: Instant, error_type: str, err: str) -> ServerError:
        self._phase_done(
            phase, start, failure=Failure.of(error_type, err), attrs={"attempt": self.attempt + 1}
        )
        return ServerError(err, server=self.conn.name, error_type=error_type)

    @staticmethod
    def _command(cfg: ServerConfig) -> Command:
        if cfg.mode == "replay" and cfg.command is None:
            args = [
                "-m",
                "promcp.servers.replay",
                "--catalog",
                str(cfg.catalog),
                "--server",
                str(cfg.replay_server),
            ]
            if cfg.responses:
                args += ["--responses", cfg.responses]
            return Command(command=sys.executable, args=tuple(args))
        assert cfg.command is not None
        return cfg.command


async def wait_port(url: str, timeout: float, process: Process | None) -> None:
    """Until ``url``'s port accepts a connection (``startup_timeout`` after ``timeout`` s; ``server_exited`` when
    the start command ended first)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.returncode is not None:
            raise ServerError(
                f"start command exited with status {process.returncode}", error_type="server_exited"
            )
        try:
            _r, w = await asyncio.open_connection(host, port)
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise ServerError(
                    f"{host}:{port} did not accept connections within {timeout:.3g} s",
                    error_type="startup_timeout",
                ) from None
            await asyncio.sleep(0.05)
