"""One running MCP server session of the host (:class:`ServerConnection`): its ``tools/call`` turned into an
outcome for the model and the measurement the S3/S4 builders take — every failure an outcome, never a crash — and
its stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process
from mcp import ClientSession
from mcp.types import CallToolResult, Tool

from promcp.events import Status, Transport
from promcp.host._reaper import Reaper
from promcp.host._stdio import StdioState, stop_process
from promcp.host.config import ServerConfig
from promcp.host.servers.failures import call_failure
from promcp.host.servers.wire_log import WireLog
from promcp.stages import SYSTEM_CLOCK, Clock, Failure, PutText, ToolsCall
from promcp.tokenizers import CachedTokenizer
from promcp.wire import mcp

__all__ = ["CallOutcome", "ServerConnection"]


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
    wire: WireLog | None = None
    reaper: Reaper | None = None
    stdio: StdioState = field(default_factory=StdioState)
    #: an HTTP/SSE server's ``start`` command, when the host started it (stopped with the connection)
    process: Process | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def run_in_task(self, body: Coroutine[Any, Any, None]) -> None:
        """Run ``body`` — open the session, wait for :meth:`stop`, close — as the connection's own task (the SDK's
        transports must be entered and left in one task, and a connection outlives the task that needed it)."""
        self._task = asyncio.create_task(body, name=f"mcp-{self.name}")

    async def until_stopped(self) -> None:
        """Wait for :meth:`stop` (the connection's task holds the session open meanwhile)."""
        await self._stop.wait()

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
            failure = call_failure(exc)
            if failure.error_type == "server_crashed":
                self.alive = False
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
        if self.process is not None:
            await stop_process(self.process, self.reaper)
            self.process = None
        self.alive = False
