"""The host's MCP servers for one run (:class:`ServerPool`): started on first use (with the policy's retries and
backoff), kept for the run, one that crashed or hung replaced, all stopped at the end.

Each connection lives in its own asyncio task (:class:`~promcp.host.servers.connection.ServerConnection`): the mcp
SDK's transports are anyio context managers whose task groups must be entered and left in the same task, and a
connection outlives the agent-loop task that first needed it. Opening one is
:class:`~promcp.host.servers.connect.Opening`. Server stderr goes to ``<out>.scratch/logs/<run_id>/<server>.log``
(with stdout lines that are not JSON-RPC, and the mcp SDK's own log records in ``mcp-sdk.log``), owner-only.

Every server process (stdio servers through :mod:`promcp.host._stdio`, the ``start`` command of an HTTP/SSE server)
runs in its own process group, stopped as a group on every exit path; the pool's
:class:`~promcp.host._reaper.Reaper` stops them when ``promcp run`` itself is killed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any

from mcp.types import Tool

from promcp.errors import ServerError
from promcp.events import Transport
from promcp.host._reaper import Reaper
from promcp.host.config import Policy, ServerConfig
from promcp.host.servers.connect import Opening, Settings
from promcp.host.servers.connection import ServerConnection
from promcp.host.servers.failures import describe
from promcp.recorder import Recorder, scope
from promcp.stages import SYSTEM_CLOCK, Clock
from promcp.store.files import make_dirs, open_private
from promcp.tokenizers import CachedTokenizer

__all__ = ["ServerPool"]

#: the pool's progress (a server starting, a start retried) as INFO records: ``promcp run`` prints them as lines
log = logging.getLogger(__name__)

_TRANSPORTS = {"stdio": Transport.STDIO, "streamable_http": Transport.STREAMABLE_HTTP, "sse": Transport.SSE}


class _SdkLogRoute:
    """Sends the mcp SDK's log records (parse errors, tracebacks of its transports) to ``mcp-sdk.log`` in the run's
    log folder instead of the user's terminal, for as long as the pool lives."""

    def __init__(self, stream: IO[str]) -> None:
        self.logger = logging.getLogger("mcp")
        self.handler = logging.StreamHandler(stream)
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        self.propagate = self.logger.propagate
        self.logger.addHandler(self.handler)
        self.logger.propagate = False

    def close(self) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.propagate = self.propagate


def _tail(path: Path, limit: int = 400) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return ""
    return data.decode("utf-8", "replace").strip()


class ServerPool:
    """Starts servers on demand and keeps them for the run. Emits INIT events; raises ServerError when a server
    cannot be started within the policy's retries (the INIT events of every attempt are recorded)."""

    def __init__(
        self,
        servers: dict[str, ServerConfig] | Any,
        *,
        recorder: Recorder,
        policy: Policy,
        log_dir: Path,
        home: Path,
        render_tool: Callable[[str, Tool], tuple[str, str]],
        tokenizer: CachedTokenizer,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.configs = dict(servers)
        self.clock = clock
        self.rec = recorder
        self.policy = policy
        self.log_dir = log_dir
        self.home = home
        self.render_tool = render_tool
        self.tokenizer = tokenizer
        self.live: dict[str, ServerConnection] = {}
        self.failed: dict[str, ServerError] = {}
        self._logs: list[IO[str]] = []
        self.reaper: Reaper | None = None
        self._sdk_log: _SdkLogRoute | None = None

    def _settings(self) -> Settings:
        return Settings(
            recorder=self.rec,
            policy=self.policy,
            home=self.home,
            render_tool=self.render_tool,
            tokenizer=self.tokenizer,
            clock=self.clock,
            reaper=self.reaper,
        )

    async def get(self, name: str) -> ServerConnection:
        conn = self.live.get(name)
        if conn is not None and conn.alive:
            return conn
        if conn is not None:  # crashed or hung earlier: replace it
            await conn.stop()
            del self.live[name]
        attempt = 0
        while True:
            try:
                conn = await self._start(self.configs[name], attempt)
                self.live[name] = conn
                return conn
            except ServerError as exc:
                if attempt >= self.policy.retries:
                    raise
                attempt += 1
                log.info("server %s: %s, retry %d/%d", name, exc.error_type, attempt, self.policy.retries)
                await asyncio.sleep(self.policy.retry.delay(attempt))

    async def close(self) -> None:
        try:
            for conn in list(self.live.values()):
                await conn.stop()
            self.live.clear()
        finally:
            if self.reaper is not None:
                self.reaper.close()  # stops any group a failed stop left behind
                self.reaper = None
            if self._sdk_log is not None:
                self._sdk_log.close()
                self._sdk_log = None
            for f in self._logs:
                f.close()
            self._logs.clear()

    # -- start-up ---------------------------------------------------------------------------------------------

    def _log(self, name: str) -> tuple[IO[str], Path]:
        make_dirs(self.log_dir)
        path = self.log_dir / f"{name}.log"
        f = open(open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8")  # noqa: SIM115
        self._logs.append(f)
        return f, path

    async def _start(self, cfg: ServerConfig, attempt: int) -> ServerConnection:
        log.info("starting %s", cfg.name)
        if self.reaper is None:
            self.reaper = Reaper()
        if self._sdk_log is None:
            self._sdk_log = _SdkLogRoute(self._log("mcp-sdk")[0])
        conn = ServerConnection(cfg, _TRANSPORTS[cfg.transport], clock=self.clock, reaper=self.reaper)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        errlog, log_path = self._log(cfg.name)
        # session events belong to no task (docs/accounting.md): the connection's task starts outside the task scope
        with scope(task_id=None, round=None, tool_call_id=None, server=None, tool=None):
            conn.run_in_task(self._own(conn, ready, errlog, attempt))
        try:
            await ready
        except ServerError as exc:
            await conn.stop()
            tail = _tail(log_path)
            if tail:
                last = tail.splitlines()[-1][-200:]
                wrapped = ServerError(f"{exc} (stderr: …{last})", error_type=exc.error_type)
                wrapped.server = cfg.name
                raise wrapped from None
            raise
        return conn

    async def _own(
        self, conn: ServerConnection, ready: asyncio.Future[None], errlog: IO[str], attempt: int
    ) -> None:
        """Body of the connection's task: open transport + session, report ready, wait for stop, close."""
        try:
            async with AsyncExitStack() as stack:
                await Opening(self._settings(), conn, stack, errlog, attempt).run()
                conn.alive = True
                ready.set_result(None)
                await conn.until_stopped()
        except ServerError as exc:
            if not ready.done():
                ready.set_exception(exc)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServerError(describe(exc), server=conn.name, error_type="server_error"))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            conn.alive = False
