"""INIT events: a server session's start-up — ``spawn``, ``ready``, ``initialize`` (or ``server/discover``) and
``tools_discovery`` (each ``tools/list`` page) — the rules of docs/accounting.md "Session start-up".

* every phase: ``latency_ms`` = start → end on the monotonic clock, ``t_*`` the same two instants' wall times;
  ``end`` is when the answer arrived (the caller picks the instant; a source that saw the response message passes
  that, not the moment its SDK finished parsing it);
* ``initialize``: ``protocol_version`` and ``attrs`` ``server_name`` / ``server_version`` / ``capabilities`` from the
  result (:func:`promcp.wire.mcp.handshake`), ``footprint_bytes`` = the response's bytes on the wire,
  ``attrs.request_bytes`` the request's;
* ``probe``: a ``server/discover`` (protocol 2026-07-28) the server *answered* with an error — a JSON-RPC error, or
  an HTTP 4xx — is no failed start-up: the client asked whether the server speaks the newer protocol, the server
  said no, and the client falls back to ``initialize`` (Claude Code and the mcp SDK's ``auto`` mode do this with
  every older server). Same columns as ``initialize``, phase ``probe``, its status and error kept; a discover that
  got no answer (crash, timeout, server unreachable) stays a failed ``initialize``;
* ``tools_discovery``: the footprint of the listed tools *as a host renders them into a prompt* (``tools``: one
  ``(name, text)`` per tool, e.g. :func:`promcp.wire.mcp.tool_text_of`) — ``footprint_tokens`` under the given
  tokenizer, ``footprint_bytes`` = UTF-8 bytes of those texts, ``attrs.tools`` per tool ``{tokens, bytes,
  content}``, ``attrs.n_tools``; the page's wire size in ``attrs.response_bytes`` and pagination in
  ``attrs.cursor`` (the cursor this page was asked for) / ``attrs.next_cursor``. Tokens are counted here, so call it
  inside ``Recorder.emit_later``.

A failed phase is the same event with ``status`` / ``error_type`` from the :class:`~promcp.stages.Failure` and its
message as the preview.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promcp.events import Event, Phase, Stage, Status, Transport
from promcp.stages._common import Failure, PutText, outcome
from promcp.stages.clock import Instant
from promcp.tokenizers import CachedTokenizer
from promcp.wire.mcp import Handshake

__all__ = ["initialize_event", "is_refused_probe", "startup_event", "tools_discovery_event"]


def _span(start: Instant, end: Instant) -> dict[str, Any]:
    return {
        "t_start_ns": start.wall_ns,
        "t_end_ns": max(end.wall_ns, start.wall_ns),
        "latency_ms": max(start.ms_to(end), 0.0),
    }


def _attrs(failure: Failure | None, attrs: Mapping[str, Any] | None, **extra: Any) -> dict[str, Any] | None:
    out = {k: v for k, v in extra.items() if v is not None}
    if failure is not None:
        out.update(failure.attrs)
    out.update(attrs or {})
    return out or None


def startup_event(
    *,
    phase: Phase,
    server: str | None,
    transport: Transport | None,
    start: Instant,
    end: Instant,
    failure: Failure | None = None,
    mcp_method: str | None = None,
    jsonrpc_id: str | None = None,
    protocol_version: str | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Event:
    """A ``spawn`` or ``ready`` phase (or any start-up phase that failed before it had a result)."""
    return Event(
        stage=Stage.INIT,
        phase=phase,
        server=server,
        transport=transport,
        mcp_method=mcp_method,
        jsonrpc_id=jsonrpc_id,
        protocol_version=protocol_version,
        resp_preview=failure.message if failure is not None else None,
        attrs=_attrs(failure, attrs),
        **outcome(failure),
        **_span(start, end),
    )


def is_refused_probe(method: str, failure: Failure | None) -> bool:
    """Whether a handshake is a ``server/discover`` the server answered with an error (phase ``probe``)."""
    if method != "server/discover" or failure is None or failure.status is not Status.ERROR:
        return False
    http_status = failure.attrs.get("http_status")
    return failure.error_type == "mcp_error" or (isinstance(http_status, int) and 400 <= http_status < 500)


def initialize_event(
    *,
    server: str | None,
    transport: Transport | None,
    start: Instant,
    end: Instant,
    handshake: Handshake | None,
    method: str = "initialize",
    jsonrpc_id: str | None = None,
    request_bytes: int | None = None,
    response_bytes: int | None = None,
    protocol_version: str | None = None,
    failure: Failure | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Event:
    """The handshake: ``method`` is ``initialize`` or ``server/discover``. ``protocol_version`` is the fallback
    when the result names none (a failed probe, or a version known from an earlier handshake)."""
    shake = handshake or Handshake()
    return Event(
        stage=Stage.INIT,
        phase=Phase.PROBE if is_refused_probe(method, failure) else Phase.INITIALIZE,
        server=server,
        transport=transport,
        mcp_method=method,
        jsonrpc_id=jsonrpc_id,
        protocol_version=shake.protocol_version or protocol_version,
        footprint_bytes=response_bytes,
        resp_preview=failure.message if failure is not None else None,
        attrs=_attrs(
            failure,
            attrs,
            server_name=shake.server_name,
            server_version=shake.server_version,
            capabilities=shake.capabilities or None,
            request_bytes=request_bytes,
        ),
        **outcome(failure),
        **_span(start, end),
    )


def tool_footprints(
    tools: Sequence[tuple[str, str]], tokenizer: CachedTokenizer, put_text: PutText | None = None
) -> dict[str, dict[str, Any]]:
    """Per tool ``{"tokens", "bytes"[, "content"]}`` of rendered tools ``[(name, text), …]``."""
    per_tool: dict[str, dict[str, Any]] = {}
    for name, text in tools:
        entry: dict[str, Any] = {"tokens": tokenizer.count(text), "bytes": len(text.encode())}
        if put_text is not None:
            entry["content"] = put_text("schema", text)
        per_tool[name] = entry
    return per_tool


def tools_discovery_event(
    *,
    server: str | None,
    transport: Transport | None,
    start: Instant,
    end: Instant,
    tools: Sequence[tuple[str, str]],
    tokenizer: CachedTokenizer,
    put_text: PutText | None = None,
    jsonrpc_id: str | None = None,
    protocol_version: str | None = None,
    response_bytes: int | None = None,
    cursor: str | None = None,
    next_cursor: str | None = None,
    failure: Failure | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Event:
    """One ``tools/list`` page (counts tokens: call it off the hot path)."""
    per_tool = tool_footprints(tools, tokenizer, put_text)
    ok = failure is None
    return Event(
        stage=Stage.INIT,
        phase=Phase.TOOLS_DISCOVERY,
        server=server,
        transport=transport,
        mcp_method="tools/list",
        jsonrpc_id=jsonrpc_id,
        protocol_version=protocol_version,
        footprint_tokens=sum(v["tokens"] for v in per_tool.values()) if ok else None,
        footprint_bytes=sum(v["bytes"] for v in per_tool.values()) if ok else None,
        token_source=tokenizer.source,
        tokenizer=tokenizer.name,
        resp_preview=failure.message if failure is not None else None,
        attrs=_attrs(
            failure,
            attrs,
            n_tools=len(tools),
            tools=per_tool,
            response_bytes=response_bytes,
            cursor=cursor,
            next_cursor=next_cursor,
        ),
        **outcome(failure),
        **_span(start, end),
    )
