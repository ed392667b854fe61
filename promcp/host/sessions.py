"""MCP server connections of the host: start, connect, discover, call, and fail as events instead of crashes.

Each connection lives in its own asyncio task (:class:`ServerConnection`): the mcp SDK's transports are anyio
context managers whose task groups must be entered and left in the same task, and a connection outlives the
agent-loop task that first needed it. The :class:`ServerPool` starts servers on first use (with the policy's
retries and backoff), keeps them for the run, replaces one that crashed or hung, and stops them all at the end.

Servers start with an explicit environment: the SDK's inherited variables (HOME, LOGNAME, PATH, SHELL, TERM,
USER) are overridden with neutral values, so nothing of the user's environment reaches a server unless the
benchmark file names it in ``env``. Server stderr goes to ``<out>/logs/<run_id>/<server>.log`` (with stdout lines
that are not JSON-RPC, and the mcp SDK's own log records in ``mcp-sdk.log``), owner-only.

Every server process (stdio servers through :mod:`promcp.host._stdio`, the ``start`` command of an HTTP/SSE server)
runs in its own process group, stopped as a group on every exit path; the pool's
:class:`~promcp.host._reaper.Reaper` stops them when ``promcp run`` itself is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import anyio
from anyio.abc import Process
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, JSONRPCRequest, TextContent, Tool

from promcp.errors import ServerError
from promcp.events import Phase, Status, Transport
from promcp.host import mcp_events
from promcp.host._reaper import Reaper
from promcp.host._stdio import StdioState, stdio_transport, stop_process
from promcp.host.config import Command, Policy, ServerConfig
from promcp.host.mcp_events import CallMeasure, Clock
from promcp.recorder import Recorder, scope
from promcp.store.files import make_dirs, open_private
from promcp.tokenizers import CachedTokenizer

_TRANSPORTS = {"stdio": Transport.STDIO, "streamable_http": Transport.STREAMABLE_HTTP, "sse": Transport.SSE}


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


class _TimedWriteStream:
    """Wraps the transport's write stream: notes when (and how big) each outbound request is handed over."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.last_method: str | None = None
        self.last_id: str | None = None
        self.last_clock: Clock | None = None
        self.last_bytes: int | None = None

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest):
            self.last_method = message.method
            self.last_id = str(message.id)
            self.last_bytes = len(message.model_dump_json(by_alias=True, exclude_unset=True)) + 1
            self.last_clock = Clock.now()
        await self._inner.send(item)

    async def __aenter__(self) -> _TimedWriteStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class CallOutcome:
    text: str  # what goes back to the model
    status: Status
    error_type: str | None
    is_error: bool


@dataclass
class ServerConnection:
    """One running, initialized MCP server session (owned by its own task)."""

    config: ServerConfig
    transport: Transport
    session: ClientSession | None = None
    tools: list[Tool] = field(default_factory=list)
    protocol_version: str | None = None
    alive: bool = False
    writer: _TimedWriteStream | None = None
    reaper: Reaper | None = None
    stdio: StdioState = field(default_factory=StdioState)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _process: Process | None = None

    @property
    def name(self) -> str:
        return self.config.name

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> tuple[CallOutcome, CallMeasure]:
        """Run one tools/call; every failure becomes an outcome (never raises except for cancellation)."""
        assert self.session is not None and self.writer is not None
        start = Clock.now()
        args_text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        self.writer.last_clock = None
        result: CallToolResult | None = None
        status, error_type, message = Status.OK, None, ""
        try:
            with anyio.fail_after(timeout_s):
                result = await self.session.call_tool(tool, arguments)
        except TimeoutError:
            status, error_type = Status.TIMEOUT, "tool_timeout"
            message = f"tool {tool!r} on server {self.name!r} did not answer within {timeout_s:g} s"
            self.alive = False
        except Exception as exc:  # connection closed, protocol error, JSON-RPC error
            status, error_type, message = Status.ERROR, _classify(exc, self), _describe(exc)
        end = Clock.now()
        sent = self.writer.last_clock if self.writer.last_method == "tools/call" else None
        if self.stdio.error_type is not None and result is None:
            status, error_type, message = Status.ERROR, self.stdio.error_type, self.stdio.error or message
        if result is not None:
            text = result_text(result)
            is_error = bool(result.is_error)
            outcome = CallOutcome(
                text, Status.ERROR if is_error else Status.OK, "tool_error" if is_error else None, is_error
            )
            result_bytes = self._result_bytes(result)
        else:
            outcome = CallOutcome(f"Error: {message}", status, error_type, True)
            result_bytes = None
            text = None
        measure = CallMeasure(
            start=start,
            sent=sent,
            end=end,
            request_bytes=self.writer.last_bytes if sent else None,
            jsonrpc_id=self.writer.last_id if sent else None,
            args_text=args_text,
            result_text=text if result is not None else outcome.text,
            result_bytes=result_bytes,
            status=outcome.status,
            error_type=outcome.error_type,
            is_error=outcome.is_error,
            synthetic=result is not None and bool((result.meta or {}).get("promcp/synthetic")),
        )
        return outcome, measure

    def _result_bytes(self, result: CallToolResult) -> int:
        """Bytes of the tools/call response message as it crossed the wire (as S3 counts the request message).

        stdio: the response line the transport read (nothing is re-serialized: a 50 MB result is not copied
        again); HTTP transports: the response message re-serialized as the SDK would send it.
        """
        assert self.writer is not None
        wire = self.stdio.response_bytes.pop(self.writer.last_id or "", None)
        if wire is not None:
            return wire
        envelope = len('{"jsonrpc":"2.0","id":,"result":}\n') + len(self.writer.last_id or "")
        return envelope + len(result.model_dump_json(by_alias=True, exclude_none=True))

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=10)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        if self._process is not None:
            await stop_process(self._process, self.reaper)
            self._process = None
        self.alive = False


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups (anyio task groups wrap the real error)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _classify(exc: BaseException, conn: ServerConnection) -> str:
    text = f"{type(exc).__name__} {exc}".lower()
    if (
        isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream)
        or "closed" in text
    ):
        conn.alive = False
        return "server_crashed"
    if "parse" in text or "json" in text or "validation" in text:
        return "protocol_error"
    return "mcp_error"


def result_text(result: CallToolResult) -> str:
    """The text the host forwards to the model: text blocks joined; other blocks summarized."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(parts)


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
        on_status: Callable[[str], None] | None = None,
    ) -> None:
        self.configs = dict(servers)
        self.rec = recorder
        self.policy = policy
        self.log_dir = log_dir
        self.home = home
        self.render_tool = render_tool
        self.tokenizer = tokenizer
        self.on_status = on_status or (lambda _s: None)
        self.live: dict[str, ServerConnection] = {}
        self.failed: dict[str, ServerError] = {}
        self._logs: list[IO[str]] = []
        self.reaper: Reaper | None = None
        self._sdk_log: _SdkLogRoute | None = None

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
                self.on_status(f"server {name}: {exc.error_type}, retry {attempt}/{self.policy.retries}")
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
        self.on_status(f"starting {cfg.name}")
        if self.reaper is None:
            self.reaper = Reaper()
        if self._sdk_log is None:
            self._sdk_log = _SdkLogRoute(self._log("mcp-sdk")[0])
        conn = ServerConnection(cfg, _TRANSPORTS[cfg.transport], reaper=self.reaper)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        errlog, log_path = self._log(cfg.name)
        # session events belong to no task (docs/accounting.md): the connection's task starts outside the task scope
        with scope(task_id=None, round=None, tool_call_id=None, server=None, tool=None):
            conn._task = asyncio.create_task(self._own(conn, ready, errlog, attempt), name=f"mcp-{cfg.name}")
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

    def _phase_done(self, conn: ServerConnection, phase: Phase, start: Clock, **fields: Any) -> None:
        """An INIT start-up phase of ``conn`` that began at ``start`` has just ended."""
        mcp_events.init_event(
            self.rec,
            server=conn.name,
            transport=conn.transport,
            phase=phase,
            start=start,
            end=Clock.now(),
            **fields,
        )

    def _fail(
        self, conn: ServerConnection, phase: Phase, start: Clock, error_type: str, err: str, attempt: int
    ) -> ServerError:
        status = Status.TIMEOUT if error_type.endswith("timeout") else Status.ERROR
        mcp_events.init_event(
            self.rec,
            server=conn.name,
            transport=conn.transport,
            phase=phase,
            start=start,
            end=Clock.now(),
            status=status,
            error_type=error_type,
            error=err,
            attrs={"attempt": attempt + 1},
        )
        return ServerError(err, server=conn.name, error_type=error_type)

    async def _own(
        self, conn: ServerConnection, ready: asyncio.Future[None], errlog: IO[str], attempt: int
    ) -> None:
        """Body of the connection's task: open transport + session, report ready, wait for stop, close."""
        try:
            async with AsyncExitStack() as stack:
                await self._open(conn, stack, errlog, attempt)
                conn.alive = True
                ready.set_result(None)
                await conn._stop.wait()
        except ServerError as exc:
            if not ready.done():
                ready.set_exception(exc)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServerError(_describe(exc), server=conn.name, error_type="server_error"))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            conn.alive = False

    async def _open(
        self, conn: ServerConnection, stack: AsyncExitStack, errlog: IO[str], attempt: int
    ) -> None:
        cfg, policy = conn.config, self.policy
        deadline = time.monotonic() + policy.startup_timeout_s
        attrs: dict[str, Any] = {"attempt": attempt + 1}
        if cfg.mode == "replay":
            attrs.update(mode="replay", catalog_server=cfg.replay_server)

        def left() -> float:
            return max(deadline - time.monotonic(), 0.001)

        # spawn
        start = Clock.now()
        if cfg.transport == "stdio":
            cmd = self._command(cfg)
            transport = stdio_transport(
                cmd.command,
                cmd.args,
                env=server_env(cmd.env, self.home),
                cwd=cmd.cwd,
                errlog=errlog,
                reaper=self.reaper,
                state=conn.stdio,
            )
            try:
                read, write = await stack.enter_async_context(transport)
            except OSError as exc:
                raise self._fail(
                    conn, Phase.SPAWN, start, "spawn_failed", f"cannot start {cmd.command}: {exc}", attempt
                ) from exc
            self._phase_done(conn, Phase.SPAWN, start, attrs=attrs)
            ready_start = Clock.now()
        else:
            assert cfg.url is not None
            if cfg.start is not None:
                try:
                    conn._process = await anyio.open_process(
                        [cfg.start.command, *cfg.start.args],
                        env=server_env(cfg.start.env, self.home),
                        cwd=cfg.start.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=errlog,
                        stderr=errlog,
                        start_new_session=True,
                    )
                    if self.reaper is not None:
                        self.reaper.watch(conn._process.pid)
                except OSError as exc:
                    raise self._fail(
                        conn,
                        Phase.SPAWN,
                        start,
                        "spawn_failed",
                        f"cannot start {cfg.start.command}: {exc}",
                        attempt,
                    ) from exc
                self._phase_done(conn, Phase.SPAWN, start, attrs=attrs)
            ready_start = Clock.now()
            try:
                await _wait_port(cfg.url, left(), conn._process)
            except ServerError as exc:
                raise self._fail(conn, Phase.READY, ready_start, exc.error_type, str(exc), attempt) from None
            factory = streamable_http_client if cfg.transport == "streamable_http" else sse_client
            # (no cancel scope around entering the transport: its task group must outlive this block)
            try:
                streams = await stack.enter_async_context(factory(cfg.url))
            except Exception as exc:
                raise self._fail(
                    conn, Phase.READY, ready_start, "connect_failed", _describe(exc), attempt
                ) from exc
            read, write = streams[0], streams[1]
            # HTTP servers refuse requests before initialize: ready = port open + transport open
            self._phase_done(conn, Phase.READY, ready_start, attrs=attrs)
        conn.writer = _TimedWriteStream(write)
        session = await stack.enter_async_context(ClientSession(read, conn.writer))
        conn.session = session

        async def step(phase: Phase, method: str, fn: Callable[[], Any], timeout: float) -> Any:
            t0 = Clock.now()
            try:
                with anyio.fail_after(timeout):
                    value = await fn()
            except TimeoutError:
                raise self._fail(
                    conn,
                    phase,
                    t0,
                    "startup_timeout" if phase is not Phase.TOOLS_DISCOVERY else "discovery_timeout",
                    f"{method}: no answer within {timeout:.3g} s",
                    attempt,
                ) from None
            except Exception as exc:
                kind = (
                    "server_exited"
                    if "closed" in str(exc).lower()
                    or isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError)
                    else "protocol_error"
                )
                raise self._fail(conn, phase, t0, kind, f"{method}: {_describe(exc)}", attempt) from exc
            return t0, value

        if policy.ready_probe and cfg.transport == "stdio":
            await step(Phase.READY, "ping", session.send_ping, left())
            self._phase_done(conn, Phase.READY, ready_start, mcp_method="ping", attrs=attrs)
        t0, init = await step(Phase.INITIALIZE, "initialize", session.initialize, left())
        conn.protocol_version = str(init.protocol_version)
        server_info = getattr(init, "server_info", None)
        mcp_events.init_event(
            self.rec,
            server=conn.name,
            transport=conn.transport,
            phase=Phase.INITIALIZE,
            start=t0,
            end=Clock.now(),
            mcp_method="initialize",
            protocol_version=conn.protocol_version,
            attrs={
                **attrs,
                "server_name": getattr(server_info, "name", None),
                "server_version": getattr(server_info, "version", None),
            },
        )
        t0, listed = await step(
            Phase.TOOLS_DISCOVERY, "tools/list", session.list_tools, policy.discovery_timeout_s
        )
        end = Clock.now()
        conn.tools = list(listed.tools)
        rendered = [self.render_tool(conn.name, t) for t in conn.tools]
        mcp_events.discovery_event(
            self.rec,
            server=conn.name,
            transport=conn.transport,
            start=t0,
            end=end,
            tools=rendered,
            tokenizer=self.tokenizer,
            protocol_version=conn.protocol_version,
        )

    def _command(self, cfg: ServerConfig) -> Command:
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


async def _wait_port(url: str, timeout: float, process: Process | None) -> None:
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
