"""The state the MCP hooks keep per client connection and per tracked request (read by the span helpers too)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promcp.events import Transport
from promcp.recorder import Recorder, current_scope
from promcp.shims._config import settings
from promcp.stages import Instant
from promcp.wire import mcp


def _now() -> Instant:
    return settings.clock.now()


@dataclass
class SessionInfo:
    """One client connection: its transport and start-up clocks (shared by the transport and the dispatcher)."""

    transport: Transport
    label: str  # server name until the server tells its own
    recorder: Recorder | None = None  # set by promcp.shims.record_session(); else the current recorder
    opened: Instant = field(default_factory=_now)
    spawn_start: Instant | None = None
    spawn_end: Instant | None = None
    pid: int | None = None
    transport_open: Instant | None = None  # HTTP/SSE: the transport context entered
    first_byte: Instant | None = None
    startup_emitted: bool = False
    server: str | None = None
    protocol_version: str | None = None
    pending: dict[str, Call] = field(default_factory=dict)

    def name(self) -> str:
        return current_scope().server or self.server or self.label


@dataclass
class Call:
    """One tracked request, from send_raw_request entry to its outcome."""

    info: SessionInfo
    method: str
    params: Mapping[str, Any] | None
    start: Instant
    request_id: str | None = None
    sent: Instant | None = None
    received: Instant | None = None
    span: Any = None
    own_span: bool = False
    # the messages as sent/received; their wire size is computed when first asked for (on the recorder's worker
    # or the span exporter's thread), not on the call's path: serializing a 10 KB response costs ~30 µs
    request_msg: Any = None
    response_msg: Any = None
    _sizes: dict[str, int | None] = field(default_factory=dict)

    def _wire_size(self, key: str, message: Any) -> int | None:
        if key not in self._sizes:
            self._sizes[key] = mcp.message_bytes(message, self.info.transport)
        return self._sizes[key]

    @property
    def request_bytes(self) -> int | None:
        """The JSON-RPC request's bytes on the wire (stdio: plus the newline)."""
        return self._wire_size("request", self.request_msg)

    @property
    def response_bytes(self) -> int | None:
        """The JSON-RPC response's bytes on the wire (stdio: plus the newline)."""
        return self._wire_size("response", self.response_msg)

    def wire_attrs(self) -> dict[str, Any]:
        """Span attributes computed at export time."""
        return {
            "promcp.request.bytes": self.request_bytes or 0,
            "promcp.response.bytes": self.response_bytes or 0,
        }
