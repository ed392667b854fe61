"""The timed log of one server connection's JSON-RPC exchanges: the transport's streams wrapped so that each request
the host sends and the response to it are noted with the instants they crossed (before the SDK parses them), and
their sizes on the wire."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from promcp.events import Transport
from promcp.stages import Clock, Instant
from promcp.wire import mcp

__all__ = ["Exchange", "TimedReadStream", "TimedWriteStream", "WireLog"]


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


class WireLog:
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

    def __init__(self, inner: Any, log: WireLog) -> None:
        self._inner = inner
        self._log = log

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TimedWriteStream(_StreamWrapper):
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


class TimedReadStream(_StreamWrapper):
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

    def __aiter__(self) -> TimedReadStream:
        return self

    async def __anext__(self) -> Any:
        return self._seen(await self._inner.__anext__())
