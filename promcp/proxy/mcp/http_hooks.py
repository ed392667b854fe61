"""The loop's side of the HTTP MCP proxy: :class:`HttpExchange`, the reverse-proxy core's observer for one exchange,
turns each hook into a typed record (:data:`Hook`) for the recording worker (:mod:`.http_exchanges`).

Its hooks only queue what they were given (a request, a response head, a body chunk, the outcome). They hold it on
the loop until the exchange ends, or for at most ``HOLD_S`` (50 ms) or ``HOLD_BYTES`` (1 MiB), then queue it in one
piece (:class:`Held`): a worker woken mid-exchange would take the interpreter lock and a CPU from the bytes in flight
(measured, docs/proxy.md "Overhead"); instants are taken when the bytes pass, so holding changes no figure. An SSE
response's chunks are queued within a bound (the worker's backlog of stream bytes): past it the last chunks are kept
and the rest counted (:class:`promcp.proxy._bounded.HeadTail`), so an endless stream costs flat memory. A hook the
worker's queue refuses (full: promcp/bounded_worker.py) marks the exchange lost: it is relayed whole, and only its
end reaches the worker, which reports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from promcp.proxy._bounded import HeadTail
from promcp.proxy._http import ExchangeObserver, Outcome, ProxyRequest, ProxyResponse
from promcp.proxy.mcp.sse_endpoint import (
    SESSION_HEADER,
    EndpointRewriter,
    event_end,
    is_event_stream,
    session_query,
    straddled_end,
)
from promcp.stages import Instant

if TYPE_CHECKING:
    from promcp.proxy.mcp.http_exchanges import ExchangeState

__all__ = ["HOLD_BYTES", "HOLD_S", "Body", "Ended", "Forwarded", "Head", "Held", "Hook", "HttpExchange", "Opened",
           "StreamChunks"]  # fmt: skip

#: the longest an exchange's hooks are held on the proxy's loop before the worker sees them (a long tool call, a
#: GET stream); and the body bytes past which they are handed on at once
HOLD_S = 0.05
HOLD_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Opened:
    """The exchange's request arrived (its body read)."""

    exchange: HttpExchange


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The request was handed to the server at ``at``."""

    exchange: HttpExchange
    at: Instant


@dataclass(frozen=True, slots=True)
class Head:
    """The response's status line and headers."""

    exchange: HttpExchange
    head: ProxyResponse


@dataclass(frozen=True, slots=True)
class Body:
    """A chunk of a response that is no event stream (kept whole up to the message limit)."""

    exchange: HttpExchange
    data: bytes
    at: Instant


@dataclass(frozen=True, slots=True)
class StreamChunks:
    """An event stream's chunks, in order; ``gap``: chunks before the first were dropped (counted, not read)."""

    exchange: HttpExchange
    chunks: list[tuple[bytes, Instant]]
    gap: bool


@dataclass(frozen=True, slots=True)
class Ended:
    """The exchange ended; ``lost``: the worker's queue refused some of its hooks (its recording is reported lost)."""

    exchange: HttpExchange
    outcome: Outcome
    lost: bool = False


Hook = Opened | Forwarded | Head | Body | StreamChunks | Ended


@dataclass(frozen=True, slots=True)
class Held:
    """Hooks held on the loop and queued in one piece."""

    hooks: list[Hook]


class HttpExchange(ExchangeObserver):
    """The core's observer for one exchange: queues what it sees, nothing more (runs on the proxy's loop)."""

    def __init__(
        self,
        put: Callable[[Hook | Held, int, bool], bool],
        request: ProxyRequest,
        body_done: Instant,
        *,
        room: Callable[[int], bool] | None = None,
        queued: Callable[[int], None] | None = None,
        max_message: int = 64 * 1024 * 1024,
    ) -> None:
        self.request = request
        self.body_done = body_done
        self.state: ExchangeState | None = None  # the worker's
        #: a hook the worker's queue refused (full): the exchange is relayed whole, its recording reported lost
        self.lost = False
        self._put = put
        #: an SSE response's chunks are queued within a bound (``room``: whether the worker's backlog can take that
        #: many more bytes; past it the last chunks are kept and the rest counted): an endless stream costs flat memory
        self._room, self._queued = room, queued
        self.bounds: HeadTail[tuple[bytes, Instant]] | None = None
        self._skipped_seen = 0
        self._max_message = max_message
        self._edge = b""  # the last bytes queued (an event's end may straddle two chunks)
        self._open = 0  # bytes of the event the worker is in the middle of (0: it is between events)
        self._held: list[Hook] | None = [Opened(self)]
        self._held_bytes = len(request.body)
        self._timer: asyncio.TimerHandle | None = None
        try:
            self._timer = asyncio.get_running_loop().call_later(HOLD_S, self._release)
        except RuntimeError:  # not on an event loop: nothing is held
            self._release()

    def _hand(self, item: Hook, size: int = 0) -> None:
        if self._held is None:
            self._queue(item, size)
            return
        self._held.append(item)
        self._held_bytes += size
        if self._held_bytes > HOLD_BYTES:
            self._release()

    def _release(self) -> None:
        """Queue what is held, in one piece; from now on every hook queues at once."""
        held, self._held = self._held, None
        held_bytes, self._held_bytes = self._held_bytes, 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if held:
            self._queue(Held(held), held_bytes)

    def _queue(self, item: Hook | Held, size: int) -> None:
        """Hand ``item`` to the worker. Once the worker's queue refused a hook of this exchange, the rest but its end
        are not queued (the worker could not follow the exchange): the end comes through, marked lost."""
        if not self.lost and self._put(item, size, False):
            return
        self.lost = True
        hooks = item.hooks if isinstance(item, Held) else [item]
        stream = sum(len(data) for h in hooks if isinstance(h, StreamChunks) for data, _ in h.chunks)
        if stream and self._queued is not None:
            self._queued(-stream)  # never reaches the worker: not in its backlog of stream bytes
        last = hooks[-1]
        if isinstance(last, Ended):
            self._put(Ended(self, last.outcome, lost=True), 0, True)  # a few bytes, past the bound

    def forwarded(self, at: Instant) -> None:
        self._hand(Forwarded(self, at))

    def response(self, response: ProxyResponse) -> None:
        if (  # a legacy SSE stream: its endpoint event must point back at the proxy
            self.request.method == "GET"
            and response.status == 200
            and (response.header("content-type") or "").startswith("text/event-stream")
            and self.request.header(SESSION_HEADER) is None
            and session_query(self.request.target) is None
        ):
            host = self.request.header("host")
            if host:
                self.rewrite = EndpointRewriter(f"http://{host}")
        if is_event_stream(response):
            self.bounds = HeadTail()
        self._hand(Head(self, response))

    def chunk(self, data: bytes, at: Instant) -> None:
        bounds = self.bounds
        if bounds is None:
            self._hand(Body(self, data, at), len(data))
            return
        room = self._room(len(data) + bounds.held) if self._room is not None else True
        if room or not self._open:
            self._chunks(bounds.take((data, at), len(data), room=room))
            return
        # no room, but the worker is in the middle of an event (one large answer, say): that event is queued to
        # its end, as far as the message limit — the bound drops whole events only
        cut = straddled_end(self._edge, data)
        if cut is None:
            cut = event_end(bytearray(data))
        if cut is None:
            if self._open + len(data) <= self._max_message:
                self._chunks([(data, at)])
            else:  # an event over the limit: the worker drops it anyway
                self._open = 0
                self._chunks(bounds.take((data, at), len(data), room=False))
            return
        if cut:
            self._chunks([(data[:cut], at)])
        self._open = 0
        if cut < len(data):
            self._chunks(bounds.take((data[cut:], at), len(data) - cut, room=False))

    def _chunks(self, ready: list[tuple[bytes, Instant]]) -> None:
        """Queue a stream's chunks, saying whether chunks before the first were dropped (a gap)."""
        if not ready or self.bounds is None:
            return
        gap = self.bounds.skipped_frames != self._skipped_seen
        self._skipped_seen = self.bounds.skipped_frames
        skipping = gap  # after a gap the worker skips to the next event's start: no event is open until then
        for data, _at in ready:  # where the worker's decoder will be: between events, or this far into one
            edge = self._edge + data
            last = max(edge.rfind(b"\n\n") + 2, edge.rfind(b"\r\r") + 2, edge.rfind(b"\r\n\r\n") + 4)
            if last >= 2:
                skipping, self._open = False, len(edge) - last
            else:
                self._open = 0 if skipping else self._open + len(data)
            self._edge = edge[-4:]
        size = sum(len(data) for data, _ in ready)
        if self._queued is not None:
            self._queued(size)
        self._hand(StreamChunks(self, ready, gap), size)

    def end(self, outcome: Outcome) -> None:
        if self.bounds is not None:
            self._chunks(self.bounds.rest())
        self._hand(Ended(self, outcome))
        self._release()
