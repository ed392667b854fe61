"""INIT, S3 and S4 events of the host's MCP sessions, measured around mcp SDK calls.

This is the host's only source of MCP-side events (the ``promcp.instrument()`` shims of promcp.shims are not used
by the host, so nothing is recorded twice). Timing comes from ``time.perf_counter_ns`` (latency) and
``time.time_ns`` (wall clock); token counts are computed on the recorder's worker thread (``emit_later``) so the
agent loop does not wait for the tokenizer.

* INIT ``spawn``: process creation (stdio: the SDK's ``stdio_client`` entry; HTTP: the ``start`` command);
* INIT ``ready``: spawn end → the server answers (a ``ping`` sent before ``initialize`` when ``policy.ready_probe``;
  HTTP: the port accepts connections, then the transport opens);
* INIT ``initialize``: the ``initialize`` handshake; INIT ``tools_discovery``: ``tools/list`` with the footprint of
  the whole list as the model sees it (``attrs.tools`` per tool);
* S3: one ``tools/call`` request, from the call until the request is handed to the transport (footprint = the
  arguments JSON as sent); S4: from then until the result arrives (footprint = the result text forwarded to the
  model; ``footprint_bytes`` = the result's JSON bytes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from promcp.events import Event, Phase, Stage, Status, TimingQuality, TokenSource, Transport
from promcp.recorder import Recorder
from promcp.tokenizers import CachedTokenizer


@dataclass
class Clock:
    """A start point on both clocks."""

    wall_ns: int
    mono_ns: int

    @classmethod
    def now(cls) -> Clock:
        return cls(time.time_ns(), time.perf_counter_ns())

    def ms_to(self, end: Clock) -> float:
        return (end.mono_ns - self.mono_ns) / 1e6


def init_event(
    rec: Recorder,
    *,
    server: str,
    transport: Transport,
    phase: Phase,
    start: Clock,
    end: Clock,
    status: Status = Status.OK,
    error_type: str | None = None,
    error: str | None = None,
    protocol_version: str | None = None,
    mcp_method: str | None = None,
    attrs: dict[str, Any] | None = None,
) -> None:
    rec.emit(
        Event(
            stage=Stage.INIT,
            phase=phase,
            server=server,
            transport=transport,
            t_start_ns=start.wall_ns,
            t_end_ns=max(end.wall_ns, start.wall_ns),
            latency_ms=start.ms_to(end),
            status=status,
            error_type=error_type,
            resp_preview=error,
            protocol_version=protocol_version,
            mcp_method=mcp_method,
            attrs=attrs,
        )
    )


def discovery_event(
    rec: Recorder,
    *,
    server: str,
    transport: Transport,
    start: Clock,
    end: Clock,
    tools: list[tuple[str, str]],
    tokenizer: CachedTokenizer,
    protocol_version: str | None,
) -> None:
    """INIT tools_discovery; ``tools`` = (name, text as rendered into the prompt). Tokens counted off the hot path."""

    def build() -> Event:
        per_tool: dict[str, dict[str, Any]] = {}
        for name, text in tools:
            per_tool[name] = {
                "tokens": tokenizer.count(text),
                "bytes": len(text.encode()),
                "content": rec.put_text("schema", text),  # hash of the captured schema text
            }
        return Event(
            stage=Stage.INIT,
            phase=Phase.TOOLS_DISCOVERY,
            server=server,
            transport=transport,
            mcp_method="tools/list",
            t_start_ns=start.wall_ns,
            t_end_ns=max(end.wall_ns, start.wall_ns),
            latency_ms=start.ms_to(end),
            footprint_tokens=sum(v["tokens"] for v in per_tool.values()),
            footprint_bytes=sum(v["bytes"] for v in per_tool.values()),
            token_source=tokenizer.source,
            tokenizer=tokenizer.name,
            protocol_version=protocol_version,
            attrs={"n_tools": len(tools), "tools": per_tool},
        )

    rec.emit_later(build)


@dataclass
class CallMeasure:
    """What the host measured around one tools/call."""

    start: Clock
    sent: Clock | None  # request handed to the transport (None: never sent)
    end: Clock
    request_bytes: int | None
    jsonrpc_id: str | None
    args_text: str
    result_text: str | None
    result_bytes: int | None
    status: Status
    error_type: str | None = None
    is_error: bool = False
    synthetic: bool = False  # the result's _meta says "promcp/synthetic" (a replay server made it up)


def call_events(
    rec: Recorder,
    *,
    server: str | None,
    tool: str,
    tool_call_id: str,
    transport: Transport | None,
    m: CallMeasure,
    tokenizer: CachedTokenizer,
    extra_attrs: dict[str, Any] | None = None,
) -> None:
    """Emit S3 (request) and, when it was sent, S4 (response) for one tools/call."""
    common: dict[str, Any] = {
        "server": server,
        "tool": tool,
        "tool_call_id": tool_call_id,
        "transport": transport,
        "mcp_method": "tools/call",
        "jsonrpc_id": m.jsonrpc_id,
        "tokenizer": tokenizer.name,
        "token_source": tokenizer.source,
    }
    sent = m.sent
    args_text, result_text = m.args_text, m.result_text
    s3_status = m.status if sent is None else Status.OK
    s3_attrs = dict(extra_attrs or {}) if sent is None else None

    def build_s3() -> Event:
        return Event(
            stage=Stage.S3,
            **common,
            t_start_ns=m.start.wall_ns,
            t_end_ns=(sent or m.start).wall_ns,
            latency_ms=m.start.ms_to(sent) if sent else None,
            timing_quality=TimingQuality.EXACT if sent else TimingQuality.NONE,
            footprint_tokens=tokenizer.count(args_text),
            footprint_bytes=m.request_bytes if m.request_bytes is not None else len(args_text.encode()),
            status=s3_status,
            error_type=m.error_type if sent is None else None,
            req_preview=args_text,
            attrs=s3_attrs,
        )

    rec.emit_later(build_s3)
    if sent is None:
        return

    attrs: dict[str, Any] = dict(extra_attrs or {})
    if m.is_error:
        attrs["is_error"] = True
    if m.synthetic:
        attrs["synthetic"] = True

    def build_s4() -> Event:
        if result_text is not None:
            attrs["content"] = rec.put_text("result", result_text)
        return Event(
            stage=Stage.S4,
            **common,
            t_start_ns=sent.wall_ns,
            t_end_ns=max(m.end.wall_ns, sent.wall_ns),
            latency_ms=sent.ms_to(m.end),
            footprint_tokens=tokenizer.count(result_text) if result_text is not None else None,
            footprint_bytes=m.result_bytes,
            status=m.status,
            error_type=m.error_type,
            resp_preview=result_text,
            attrs=attrs or None,
        )

    rec.emit_later(build_s4)


def no_tokens(_: str) -> int:  # pragma: no cover - placeholder for typed callables
    return 0


Counter = Callable[[str], int]
_ = TokenSource  # re-exported for callers building events by hand
