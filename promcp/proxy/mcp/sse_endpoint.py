"""The legacy SSE transport's pieces the HTTP MCP proxy needs: the session id in a URL, where an SSE event ends, and
the one place the proxy changes traffic — :class:`EndpointRewriter`, which points a legacy server's ``endpoint``
event back at the proxy."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from promcp.proxy._http import ProxyResponse

__all__ = [
    "SESSION_HEADER",
    "EndpointRewriter",
    "event_end",
    "is_event_stream",
    "session_query",
    "straddled_end",
]

SESSION_HEADER = "mcp-session-id"
_SESSION_PARAMS = ("sessionId", "session_id")


def session_query(target: str) -> str | None:
    """The legacy SSE session id in a URL's query (``sessionId`` or ``session_id``), or None."""
    query = urlsplit(target).query
    if not query:
        return None
    params = parse_qs(query)
    return next((params[k][0] for k in _SESSION_PARAMS if params.get(k)), None)


class EndpointRewriter:
    """Points a legacy SSE server's ``endpoint`` event back at the proxy (the core's ``rewrite`` hook).

    The client POSTs its messages to the URL that event names. A path (what the mcp SDKs send) already reaches the
    proxy; an absolute URL would send the client straight to the server, so its origin (scheme, host, port) is
    replaced by the one the client used to reach the proxy. The start of the stream is held until its first event
    is complete (at most 64 KiB); every byte after it, and every event but an absolute ``endpoint``, passes
    unchanged."""

    LIMIT = 64 * 1024
    _ENDPOINT = re.compile(rb"^event:[ ]?endpoint\r?$", re.M)
    _ABSOLUTE = re.compile(rb"^(data:[ ]?)https?://[^/?#\r\n]*", re.M | re.I)

    def __init__(self, origin: str) -> None:
        self.origin = origin.encode()
        self.held = bytearray()
        self.done = False
        self.rewrote = False

    def __call__(self, data: bytes) -> bytes:
        if self.done:
            return data
        if not data:  # the body ended: whatever is held goes out as it was
            self.done = True
            return bytes(self.held)
        self.held += data
        end = event_end(self.held)
        if end is None and len(self.held) <= self.LIMIT:
            return b""
        self.done = True
        held = bytes(self.held)
        self.held = bytearray()
        if end is None:
            return held
        first, rest = held[:end], held[end:]
        if self._ENDPOINT.search(first):
            fixed = self._ABSOLUTE.sub(lambda m: m.group(1) + self.origin, first, count=1)
            self.rewrote = fixed != first
            first = fixed
        return first + rest


def is_event_stream(head: ProxyResponse) -> bool:
    """Whether a response is an SSE stream of JSON-RPC messages (a POST's answer, a GET stream)."""
    kind = (head.header("content-type") or "").split(";")[0].strip().lower()
    return kind == "text/event-stream" and head.status < 300


def straddled_end(before: bytes, data: bytes) -> int | None:
    """Where in ``data`` an event ends whose blank line began in the bytes ``before`` it (None: none does)."""
    for tail, head in ((b"\r\n\r", b"\n"), (b"\r\n", b"\r\n"), (b"\n", b"\n"), (b"\r", b"\r")):
        if before.endswith(tail) and data.startswith(head):
            return len(head)
    return None


def event_end(buffer: bytearray) -> int | None:
    """The index just past the blank line that ends the first SSE event in ``buffer``, or None."""
    ends = [i + len(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if (i := buffer.find(sep)) != -1]
    return min(ends) if ends else None
