"""One ``tools/call`` → S3 (request) and S4 (result): docs/accounting.md phases ``tool_call`` / ``tool_result``,
implemented once for every source.

* S3: ``start`` → ``sent`` (the request handed to the transport); ``footprint_tokens`` = tokens of the arguments as
  compact JSON (:func:`promcp.wire.mcp.arguments_text`), ``footprint_bytes`` = the JSON-RPC request's bytes on the
  wire (the arguments' bytes when the request was never sent). A call that was never sent (invalid arguments, an
  unknown tool, a server that is down) is an S3 with ``timing_quality = none`` and the failure, and no S4.
* S4: ``sent`` → ``received`` (the response arrived; ``end`` when it never did); ``footprint_tokens`` = tokens of the
  text the host forwards to the model (:func:`promcp.wire.mcp.result_text` of the result, or ``forwarded_text``
  when the host forwards something else, e.g. its own error message), ``footprint_bytes`` = the JSON-RPC response's
  bytes on the wire. ``isError`` results are ``status = error``, ``error_type = tool_error``,
  ``attrs.is_error``; JSON-RPC errors, crashes and timeouts come as the :class:`~promcp.stages.Failure`.

Both carry ``server``, ``tool``, ``tool_call_id`` (the model's call this answers), ``transport``, ``jsonrpc_id`` and
``protocol_version``. Tokens are counted here: call the builders inside ``Recorder.emit_later``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promcp.events import TOOL_ERROR, Event, Stage, Status, TimingQuality, TokenSource, Transport
from promcp.stages._common import Failure, PutText, outcome
from promcp.stages.clock import Instant
from promcp.tokenizers import CachedTokenizer
from promcp.wire import mcp

__all__ = ["Counted", "ToolsCall", "tool_request_event", "tool_result_event", "tools_call_events"]


@dataclass
class ToolsCall:
    """What a source measured around one ``tools/call``, as plain values."""

    tool: str
    start: Instant
    end: Instant
    tokenizer: CachedTokenizer
    sent: Instant | None = None  # the request handed to the transport; None: never sent
    received: Instant | None = None  # the response arrived; None: no response (crash, timeout) → ``end``
    server: str | None = None
    transport: Transport | None = None
    tool_call_id: str | None = None
    jsonrpc_id: str | None = None
    protocol_version: str | None = None
    arguments: Mapping[str, Any] | None = None
    arguments_text: str | None = (
        None  # the arguments as sent, when they are not an object (default: compact JSON)
    )
    request_bytes: int | None = None
    result: Any = None  # the ``tools/call`` result as received (raw dict or typed); None: no result
    forwarded_text: str | None = (
        None  # what the host forwards instead of the result's text (its error message)
    )
    response_bytes: int | None = None
    failure: Failure | None = None
    put_text: PutText | None = None
    attrs: dict[str, Any] = field(default_factory=dict)  # the source's own (``synthetic``, ``sent: false``…)
    round: int | None = (
        None  # the LLM round whose tool call this is, when the source knows it better than its scope
    )
    mcp: bool = True  # False: a client's own tool (no ``tools/call`` on the wire: ``mcp_method`` is null)
    #: the call was not seen but derived from the next LLM request that carries its result (the LLM proxy): S3 has
    #: no timing (``none``), S4 runs from the plan (``sent``) to that request (``received``): ``bounded``
    derived: bool = False
    request_attrs: Mapping[str, Any] | None = None  # the S3's attrs when it was sent (default: none)
    #: token counts the source was given instead of texts (an OTLP span's attributes); None: count the texts
    counted: Counted | None = None


@dataclass(frozen=True)
class Counted:
    """Token counts a source was given instead of the texts: the events take them as they are, previews stay empty,
    and a count that is None is unknown (``token_source = none``, no tokenizer)."""

    request: int | None = None
    result: int | None = None
    tokenizer: str | None = None


def _common(call: ToolsCall) -> dict[str, Any]:
    return {
        "server": call.server,
        "tool": call.tool,
        "tool_call_id": call.tool_call_id,
        "transport": call.transport,
        "mcp_method": "tools/call" if call.mcp else None,
        "jsonrpc_id": call.jsonrpc_id,
        "protocol_version": call.protocol_version,
        "round": call.round,
    }


def _tokens(call: ToolsCall, text: str | None, given: int | None) -> dict[str, Any]:
    """``footprint_tokens`` / ``tokenizer`` / ``token_source``: ``text`` counted, or the count the source was given."""
    if call.counted is None:
        return {
            "footprint_tokens": call.tokenizer.count(text) if text is not None else None,
            "tokenizer": call.tokenizer.name,
            "token_source": call.tokenizer.source,
        }
    if given is None:
        return {"footprint_tokens": None, "tokenizer": None, "token_source": TokenSource.NONE}
    return {
        "footprint_tokens": given,
        "tokenizer": call.counted.tokenizer,
        "token_source": TokenSource.TOKENIZER,
    }


def _args_text(call: ToolsCall) -> str:
    return call.arguments_text if call.arguments_text is not None else mcp.arguments_text(call.arguments)


def tool_request_event(call: ToolsCall) -> Event:
    """S3 (counts the arguments' tokens)."""
    text = _args_text(call)
    sent = call.sent
    attrs: dict[str, Any] | None = None
    if sent is None:
        attrs = {**(call.failure.attrs if call.failure else {}), **call.attrs} or None
    elif call.request_attrs:
        attrs = dict(call.request_attrs)
    timed = sent is not None and not call.derived
    return Event(
        stage=Stage.S3,
        t_start_ns=call.start.wall_ns,
        # the wall clock of an instant derived from the monotonic one can land a few µs before ``start`` (two
        # clock reads, a thread switch between them): every stage clamps, S3 did not and its event was lost
        t_end_ns=max((sent or call.start).wall_ns, call.start.wall_ns),
        latency_ms=max(call.start.ms_to(sent), 0.0) if sent and timed else None,
        timing_quality=TimingQuality.EXACT if timed else TimingQuality.NONE,
        footprint_bytes=call.request_bytes if call.request_bytes is not None else len(text.encode()),
        req_preview=text if call.counted is None else None,
        attrs=attrs,
        **_tokens(call, text, call.counted.request if call.counted else None),
        **(outcome(call.failure) if sent is None else outcome(None)),
        **_common(call),
    )


def forwarded_text(call: ToolsCall) -> str | None:
    """The text the host forwards to the model for this call's result (None: nothing known)."""
    if call.forwarded_text is not None:
        return call.forwarded_text
    return mcp.result_text(call.result) if call.result is not None else None


def tool_result_event(call: ToolsCall) -> Event | None:
    """S4 (counts the forwarded text's tokens); ``None`` when the request was never sent."""
    sent = call.sent
    if sent is None:
        return None
    received = call.received or call.end
    failure = call.failure
    attrs: dict[str, Any] = dict(failure.attrs) if failure else {}
    if call.result is not None and mcp.is_error(call.result):
        failure = Failure(Status.ERROR, TOOL_ERROR, failure.message if failure else None, attrs)
        attrs["is_error"] = True
    attrs.update(call.attrs)
    text = forwarded_text(call)
    if text is not None and call.put_text is not None:
        attrs["content"] = call.put_text("result", text)
    preview = text if text is not None else (failure.message if failure else None)
    return Event(
        stage=Stage.S4,
        t_start_ns=sent.wall_ns,
        t_end_ns=max(received.wall_ns, sent.wall_ns),
        latency_ms=max(sent.ms_to(received), 0.0),
        timing_quality=TimingQuality.BOUNDED if call.derived else TimingQuality.EXACT,
        footprint_bytes=call.response_bytes,
        resp_preview=preview if call.counted is None else None,
        attrs=attrs or None,
        **_tokens(call, text, call.counted.result if call.counted else None),
        **outcome(failure),
        **_common(call),
    )


def tools_call_events(call: ToolsCall) -> list[Event]:
    """S3, then S4 when the request was sent."""
    result = tool_result_event(call)
    return [tool_request_event(call)] if result is None else [tool_request_event(call), result]
