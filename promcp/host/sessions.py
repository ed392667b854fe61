"""MCP server connections of the host: start, connect, discover, call, and fail as events instead of crashes.

Each connection lives in its own asyncio task (:class:`ServerConnection`): the mcp SDK's transports are anyio
context managers whose task groups must be entered and left in the same task, and a connection outlives the
agent-loop task that first needed it. The :class:`ServerPool` starts servers on first use (with the policy's
retries and backoff), keeps them for the run, replaces one that crashed or hung, and stops them all at the end.

Servers start with an explicit environment: the SDK's inherited variables (HOME, LOGNAME, PATH, SHELL, TERM,
USER) are overridden with neutral values, so nothing of the user's environment reaches a server unless the
benchmark file names it in ``env``. Server stderr goes to ``<out>.scratch/logs/<run_id>/<server>.log`` (with stdout lines
that are not JSON-RPC, and the mcp SDK's own log records in ``mcp-sdk.log``), owner-only.

Every server process (stdio servers through :mod:`promcp.host._stdio`, the ``start`` command of an HTTP/SSE server)
runs in its own process group, stopped as a group on every exit path; the pool's
:class:`~promcp.host._reaper.Reaper` stops them when ``promcp run`` itself is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    PaginatedRequestParams,
    Tool,
)

from promcp import stages
from promcp.errors import ServerError
from promcp.events import Phase, Status, Transport
from promcp.host._reaper import Reaper
from promcp.host._stdio import StdioState, stdio_transport, stop_process
from promcp.host.config import Command, Policy, ServerConfig
from promcp.recorder import Recorder, scope
from promcp.stages import SYSTEM_CLOCK, Clock, Failure, Instant, PutText, ToolsCall
from promcp.store.files import make_dirs, open_private
from promcp.tokenizers import CachedTokenizer
from promcp.wire import mcp

_TRANSPORTS = {"stdio": Transport.STDIO, "streamable_http": Transport.STREAMABLE_HTTP, "sse": Transport.SSE}
#: a server that keeps handing out cursors stops being listed after this many pages
_MAX_PAGES = 1000


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
class Exchange:
    """One request as the host's transport streams saw it: the messages and the instants they crossed."""

    method: str
    jsonrpc_id: str
    request: Any
    sent: Instant | None = None  # handed to the transport
    response: Any = None
    received: Instant | None = None  # the response (or error) for this id arrived

    def wire_bytes(self, transport: Transport) -> tuple[int | None, int | None]:
        """(request, response) bytes on the wire."""
        return mcp.message_bytes(self.request, transport), mcp.message_bytes(self.response, transport)


class _WireLog:
    """The requests sent on a connection since the host's current step began, and their responses (the host makes
    one call at a time, but the SDK may send requests of its own meanwhile, e.g. a ``tools/list`` to validate a
    result against the tool's output schema)."""

    MAX = 64

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.pending: dict[str, Exchange] = {}
        self.sent: list[Exchange] = []

    def begin(self) -> None:
        """Forget earlier exchanges: a new step starts."""
        self.sent.clear()
        self.pending.clear()

    def note(self, exchange: Exchange) -> None:
        if len(self.sent) < self.MAX:
            self.sent.append(exchange)
            self.pending[exchange.jsonrpc_id] = exchange

    def take(self, method: str) -> Exchange | None:
        """The first request of ``method`` since :meth:`begin` (then forget them all)."""
        found = next((e for e in self.sent if e.method == method), None)
        self.begin()
        return found


class _StreamWrapper:
    """A transport stream with every attribute and the context manager forwarded to the wrapped one."""

    def __init__(self, inner: Any, log: _WireLog) -> None:
        self._inner = inner
        self._log = log

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TimedWriteStream(_StreamWrapper):
    """Wraps the transport's write stream: notes each outbound request and when it was handed over."""

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        exchange = None
        if isinstance(message, JSONRPCRequest):
            exchange = Exchange(message.method, str(message.id), message)
            self._log.note(exchange)
        await self._inner.send(item)
        if exchange is not None:
            exchange.sent = self._log.clock.now()


class _TimedReadStream(_StreamWrapper):
    """Wraps the transport's read stream: notes when the response to each pending request arrives (before the SDK
    parses it), and the message itself."""

    def _seen(self, item: Any) -> Any:
        message = getattr(item, "message", None)
        if self._log.pending and isinstance(message, JSONRPCResponse | JSONRPCError):
            exchange = self._log.pending.pop(str(message.id), None)
            if exchange is not None:
                exchange.received, exchange.response = self._log.clock.now(), message
        return item

    async def receive(self) -> Any:
        return self._seen(await self._inner.receive())

    def __aiter__(self) -> _TimedReadStream:
        return self

    async def __anext__(self) -> Any:
        return self._seen(await self._inner.__anext__())


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
    clock: Clock = SYSTEM_CLOCK
    session: ClientSession | None = None
    tools: list[Tool] = field(default_factory=list)
    protocol_version: str | None = None
    alive: bool = False
    wire: _WireLog | None = None
    reaper: Reaper | None = None
    stdio: StdioState = field(default_factory=StdioState)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _process: Process | None = None

    @property
    def name(self) -> str:
        return self.config.name

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        *,
        tokenizer: CachedTokenizer,
        tool_call_id: str | None = None,
        put_text: PutText | None = None,
    ) -> tuple[CallOutcome, ToolsCall]:
        """Run one tools/call; every failure becomes an outcome (never raises except for cancellation). Returns what
        goes back to the model and the measurement for the S3/S4 builders."""
        assert self.session is not None and self.wire is not None
        start = self.clock.now()
        self.wire.begin()
        result: CallToolResult | None = None
        failure: Failure | None = None
        try:
            with anyio.fail_after(timeout_s):
                result = await self.session.call_tool(tool, arguments)
        except TimeoutError:
            failure = Failure(
                Status.TIMEOUT,
                "tool_timeout",
                f"tool {tool!r} on server {self.name!r} did not answer within {timeout_s:g} s",
            )
            self.alive = False
        except Exception as exc:  # connection closed, protocol error, JSON-RPC error
            failure = _failure(exc, self)
        end = self.clock.now()
        exchange = self.wire.take("tools/call")
        if (
            self.stdio.error_type is not None and result is None
        ):  # the transport ended the connection (too large…)
            message = self.stdio.error or (failure.message if failure is not None else "")
            failure = Failure(Status.ERROR, self.stdio.error_type, message)
        if result is not None:
            is_error = mcp.is_error(result)
            outcome = CallOutcome(
                mcp.result_text(result),
                Status.ERROR if is_error else Status.OK,
                "tool_error" if is_error else None,
                is_error,
            )
        else:
            assert failure is not None
            outcome = CallOutcome(f"Error: {failure.message}", failure.status, failure.error_type, True)
        sent = exchange.sent if exchange is not None else None
        request_bytes = response_bytes = None
        if exchange is not None:
            request_bytes = mcp.message_bytes(exchange.request, self.transport)
            # stdio: the response line as the transport read it (a 50 MB result is not serialized again)
            response_bytes = self.stdio.response_bytes.pop(exchange.jsonrpc_id, None)
            if response_bytes is None:
                response_bytes = mcp.message_bytes(exchange.response, self.transport)
        synthetic = result is not None and bool((result.meta or {}).get("promcp/synthetic"))
        measure = ToolsCall(
            tool=tool,
            start=start,
            sent=sent,
            received=exchange.received if exchange is not None else None,
            end=end,
            tokenizer=tokenizer,
            server=self.name,
            transport=self.transport,
            tool_call_id=tool_call_id,
            jsonrpc_id=exchange.jsonrpc_id if sent is not None and exchange is not None else None,
            protocol_version=self.protocol_version,
            arguments=arguments,
            request_bytes=request_bytes if sent is not None else None,
            result=result,
            forwarded_text=None if result is not None else outcome.text,
            response_bytes=response_bytes,
            failure=failure,
            put_text=put_text,
            attrs={"synthetic": True} if synthetic else {},
        )
        return outcome, measure

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


def _failure(exc: BaseException, conn: ServerConnection) -> Failure:
    """A failed tools/call: JSON-RPC errors by their code, a closed connection as a crash, else a protocol error."""
    if isinstance(exc, MCPError):
        status, error_type = mcp.jsonrpc_failure(exc.error.code)
        if error_type == "server_crashed":
            conn.alive = False
        return Failure(status, error_type, _describe(exc), {"jsonrpc_code": exc.error.code})
    text = f"{type(exc).__name__} {exc}".lower()
    if (
        isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream)
        or "closed" in text
    ):
        conn.alive = False
        return Failure(Status.ERROR, "server_crashed", _describe(exc))
    if "parse" in text or "json" in text or "validation" in text:
        return Failure(Status.ERROR, "protocol_error", _describe(exc))
    return Failure(Status.ERROR, "mcp_error", _describe(exc))


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
        conn = ServerConnection(cfg, _TRANSPORTS[cfg.transport], clock=self.clock, reaper=self.reaper)
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

    def _phase_done(
        self, conn: ServerConnection, phase: Phase, start: Instant, end: Instant | None = None, **fields: Any
    ) -> None:
        """An INIT start-up phase of ``conn`` that began at ``start`` has ended (at ``end``, default now)."""
        self.rec.emit(
            stages.startup_event(
                phase=phase,
                server=conn.name,
                transport=conn.transport,
                start=start,
                end=end or self.clock.now(),
                **fields,
            )
        )

    def _fail(
        self, conn: ServerConnection, phase: Phase, start: Instant, error_type: str, err: str, attempt: int
    ) -> ServerError:
        self._phase_done(
            conn, phase, start, failure=Failure.of(error_type, err), attrs={"attempt": attempt + 1}
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
        start = self.clock.now()
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
            ready_start = self.clock.now()
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
            ready_start = self.clock.now()
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
        conn.wire = log = _WireLog(self.clock)
        session = await stack.enter_async_context(
            ClientSession(_TimedReadStream(read, log), _TimedWriteStream(write, log))
        )
        conn.session = session

        async def step(phase: Phase, method: str, fn: Callable[[], Any], timeout: float) -> Any:
            t0 = self.clock.now()
            log.begin()
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
            return t0, value, log.take(method)

        if policy.ready_probe and cfg.transport == "stdio":
            _, _, ping = await step(Phase.READY, "ping", session.send_ping, left())
            self._phase_done(  # ready = the server answered the probe (the answer's arrival)
                conn,
                Phase.READY,
                ready_start,
                ping.received if ping else None,
                mcp_method="ping",
                jsonrpc_id=ping.jsonrpc_id if ping else None,
                attrs=attrs,
            )
        t0, init, exchange = await step(Phase.INITIALIZE, "initialize", session.initialize, left())
        shake = mcp.handshake(init)
        conn.protocol_version = shake.protocol_version
        request_bytes, response_bytes = exchange.wire_bytes(conn.transport) if exchange else (None, None)
        self.rec.emit(
            stages.initialize_event(
                server=conn.name,
                transport=conn.transport,
                start=t0,
                end=(exchange.received if exchange else None) or self.clock.now(),
                handshake=shake,
                jsonrpc_id=exchange.jsonrpc_id if exchange else None,
                request_bytes=request_bytes,
                response_bytes=response_bytes,
                attrs=attrs,
            )
        )
        await self._discover(conn, session, step)

    async def _discover(self, conn: ServerConnection, session: ClientSession, step: Any) -> None:
        """``tools/list``, every page: one tools_discovery event per page (tokens counted off the agent's path)."""
        conn.tools = []
        cursor: str | None = None
        for _page in range(_MAX_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            t0, listed, exchange = await step(
                Phase.TOOLS_DISCOVERY,
                "tools/list",
                lambda p=params: session.list_tools(params=p),
                self.policy.discovery_timeout_s,
            )
            end = (exchange.received if exchange else None) or self.clock.now()
            page = list(listed.tools)
            conn.tools += page
            rendered = [self.render_tool(conn.name, t) for t in page]
            next_cursor = mcp.next_cursor(listed)
            self.rec.emit_later(
                functools.partial(
                    stages.tools_discovery_event,
                    server=conn.name,
                    transport=conn.transport,
                    start=t0,
                    end=end,
                    tools=rendered,
                    tokenizer=self.tokenizer,
                    put_text=self.rec.put_text,
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
