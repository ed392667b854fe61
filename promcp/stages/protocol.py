"""MCP traffic outside the six stages: ``resources/*``, ``prompts/*``, ``ping``, ``completion/*``, ``logging/*``,
notifications, and the server's own requests (``sampling/createMessage``, ``elicitation/create``, ``roots/list``) —
stage ``MCP``, phase ``protocol``, so a source that sees the whole wire (the MCP proxy) keeps it without putting it
in a stage it does not belong to.

* a request answered: ``latency_ms`` = the request's start → its response's arrival (monotonic);
  ``footprint_bytes`` = the response's bytes on the wire, ``attrs.request_bytes`` the request's;
* a notification, or a message nobody answers: ``t_start_ns`` = ``t_end_ns`` = its arrival, no latency,
  ``footprint_bytes`` = its bytes;
* ``direction``: ``client->server`` for what the client sent or asked, ``server->client`` for the server's own
  requests and notifications;
* a JSON-RPC error, a crash before the answer, a timeout or a line that is not JSON-RPC: ``status`` /
  ``error_type`` from the :class:`~promcp.stages.Failure`, its message as the preview.

No tokens are counted: what a client does with a resource or a prompt is not visible on the MCP wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promcp.events import Direction, Event, Stage, TimingQuality, Transport
from promcp.stages._common import Failure, outcome
from promcp.stages.clock import Instant

__all__ = ["message_event"]


def message_event(
    *,
    method: str | None,
    server: str | None,
    transport: Transport | None,
    direction: Direction,
    start: Instant,
    end: Instant | None = None,
    jsonrpc_id: str | None = None,
    protocol_version: str | None = None,
    request_bytes: int | None = None,
    response_bytes: int | None = None,
    failure: Failure | None = None,
    preview: str | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Event:
    """One MCP message (``end`` None) or one request with its outcome (``end`` = the answer's arrival, or when
    the source gave up on it)."""
    extra: dict[str, Any] = {}
    if end is not None and request_bytes is not None:
        extra["request_bytes"] = request_bytes
    if failure is not None:
        extra.update(failure.attrs)
    extra.update(attrs or {})
    finish = end or start
    return Event(
        stage=Stage.MCP,
        direction=direction,
        server=server,
        transport=transport,
        mcp_method=method,
        jsonrpc_id=jsonrpc_id,
        protocol_version=protocol_version,
        t_start_ns=start.wall_ns,
        t_end_ns=max(finish.wall_ns, start.wall_ns),
        latency_ms=max(start.ms_to(end), 0.0) if end is not None else None,
        timing_quality=TimingQuality.EXACT,
        footprint_bytes=response_bytes if end is not None else request_bytes,
        req_preview=preview,
        resp_preview=failure.message if failure is not None else None,
        attrs=extra or None,
        **outcome(failure),
    )
