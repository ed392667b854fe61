"""OTLP in: OpenTelemetry export requests → conversations the import builder turns into events.

Read by ``promcp collect`` (OTLP/HTTP, protobuf or JSON, live) and by ``promcp import --format otlp`` (the
OpenTelemetry Collector ``file`` exporter's output: one JSON export request per line). Requests are decoded with
the official protobuf definitions (``opentelemetry-proto``), never by hand.

Mapped today: **Claude Code's telemetry** (log events, ``CLAUDE_CODE_ENABLE_TELEMETRY=1``), grouped by
``session.id`` (a conversation) and ``prompt.id`` (a task):

========================== ==============================================================================
``claude_code.user_prompt``  a task begins (the prompt text only with ``OTEL_LOG_USER_PROMPTS=1``)
``claude_code.api_request``  one LLM call: provider usage (input, cache read, cache creation with the
                             5-minute / 1-hour split, output), ``duration_ms`` (the call, exact),
                             ``ttft_ms`` (prefill, exact), model, request id, the client's ``cost_usd``
``claude_code.tool_result``  S3/S4 of the call whose ``request_id`` asked for it: ``duration_ms`` (exact),
                             success, sizes in bytes; MCP tools named by ``tool_parameters``
                             (``mcp_server_name`` / ``mcp_tool_name``) when the generic ``mcp_tool`` is sent.
                             Without ``request_id`` (Claude Code up to 2.1.328 sends none), the call is the
                             prompt's last one that ended before the tool started (by time), else the last one
                             that arrived before it (by order); a record with no call to join is kept as S3/S4
                             of its own (``attrs.unplaced``) and counted in :attr:`ClaudeCodeSessions.unplaced`
========================== ==============================================================================

**The Gemini CLI's telemetry** (``gemini_cli.*`` log events, and its ``llm_call`` / ``tool_call`` spans) is mapped
by :mod:`promcp.collectors.otlp_gemini`,
which :class:`ClaudeCodeSessions` hands those records to.

Everything else (``tool_decision``, ``assistant_response``, ``plugin_loaded``…) is counted and left out; metrics
are accepted and not added (``claude_code.token.usage`` counts the same tokens as ``api_request``). Prompts,
responses and tool inputs are redacted by Claude Code unless the user enables them; the token counts are the
provider's, so every input token lands in the unobserved ``system`` part, as in an import of a Claude Code session.
"""

from __future__ import annotations

import base64
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.collectors.otlp_gemini import PREFIX as GEMINI_PREFIX
from promcp.collectors.otlp_gemini import GeminiCliSessions
from promcp.errors import ImportFormatError
from promcp.events import TimingQuality, TokenSource
from promcp.wire import Usage
from promcp.wire.json_bounds import loads as bounded_json

__all__ = ["ClaudeCodeSessions", "LogRecord", "decode_request", "log_records", "request_kind"]

#: The decompressed size an export request may have (a larger one is refused: 413).
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024
_KINDS: Final = {"/v1/logs": "logs", "/v1/traces": "traces", "/v1/metrics": "metrics"}
_ID_FIELDS: Final = frozenset({"traceId", "spanId", "parentSpanId"})


class RequestTooLarge(ImportFormatError):
    """An export request over :data:`MAX_REQUEST_BYTES` once decompressed."""


def request_kind(path: str) -> str | None:
    """``logs``, ``traces`` or ``metrics`` for an OTLP/HTTP path (query string ignored); None for another path."""
    return _KINDS.get(path.split("?", 1)[0].rstrip("/"))


def _message(kind: str) -> Any:
    if kind == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        return ExportLogsServiceRequest()
    if kind == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        return ExportTraceServiceRequest()
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    return ExportMetricsServiceRequest()


def _inflate(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        data = body
    elif encoding == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = d.decompress(body, MAX_REQUEST_BYTES + 1)
        except zlib.error as exc:
            raise ImportFormatError(f"the gzip body does not decompress: {exc}") from None
    else:
        raise ImportFormatError(f"content-encoding {encoding!r} is not supported (gzip or none)")
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestTooLarge(f"the request is over {MAX_REQUEST_BYTES // (1024 * 1024)} MiB decompressed")
    return data


def _hex_ids_to_base64(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping expects base64 for bytes."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _ID_FIELDS and isinstance(v, str) and v:
                try:
                    v = base64.b64encode(bytes.fromhex(v)).decode()
                except ValueError:
                    raise ImportFormatError(f"{k} {v[:40]!r} is not hex") from None
            out[k] = _hex_ids_to_base64(v)
        return out
    if isinstance(value, list):
        return [_hex_ids_to_base64(v) for v in value]
    return value


def decode_request(kind: str, body: bytes, content_type: str, encoding: str = "") -> Any:
    """An OTLP export request of ``kind`` (``logs``/``traces``/``metrics``) from an HTTP body: protobuf
    (``application/x-protobuf``) or JSON (``application/json``), optionally gzip. Raises
    :class:`ImportFormatError` with the reason (400), :class:`RequestTooLarge` (413)."""
    from google.protobuf.message import DecodeError

    data = _inflate(body, encoding)
    media = content_type.split(";", 1)[0].strip().lower()
    message = _message(kind)
    if media == "application/x-protobuf":
        try:
            message.ParseFromString(data)
        except DecodeError as exc:
            raise ImportFormatError(f"not an OTLP {kind} protobuf message: {exc}") from None
        return message
    if media == "application/json":
        try:
            doc = bounded_json(data)
        except ValueError as exc:
            raise ImportFormatError(f"not JSON: {exc}") from None
        return _from_json(kind, doc)
    raise ImportFormatError(
        f"content-type {media or 'none'!r}: expected application/x-protobuf or application/json"
    )


def _from_json(kind: str, doc: Any) -> Any:
    from google.protobuf import json_format

    if not isinstance(doc, dict):
        raise ImportFormatError(f"an OTLP {kind} request is a JSON object")
    try:
        return json_format.ParseDict(_hex_ids_to_base64(doc), _message(kind), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ImportFormatError(f"not an OTLP {kind} request: {str(exc)[:200]}") from None


def file_requests(doc: Any) -> Iterator[tuple[str, Any]]:
    """The export requests of one line of a Collector ``file`` exporter output: ``(kind, message)``."""
    if not isinstance(doc, dict):
        raise ImportFormatError("a line of an OTLP file is a JSON object")
    for key, kind in (("resourceLogs", "logs"), ("resourceSpans", "traces"), ("resourceMetrics", "metrics")):
        if key in doc:
            yield kind, _from_json(kind, {key: doc[key]})


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def attributes(kvs: Iterable[Any]) -> dict[str, Any]:
    """OTLP key-values as a dict of plain values (bytes as hex)."""
    return {kv.key: _value(kv.value) for kv in kvs}


@dataclass
class LogRecord:
    """One OTLP log record, flattened: its event name, attributes, time (ns) and resource attributes."""

    name: str
    attrs: dict[str, Any]
    time_ns: int | None
    resource: dict[str, Any] = field(default_factory=dict)


def log_records(request: Any) -> Iterator[LogRecord]:
    """Every log record of an ``ExportLogsServiceRequest``."""
    for rl in request.resource_logs:
        resource = attributes(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                attrs = attributes(r.attributes)
                body = _value(r.body) if r.HasField("body") else None
                name = str(attrs.get("event.name") or r.event_name or body or "")
                t = r.time_unix_nano or r.observed_time_unix_nano or None
                yield LogRecord(name.removeprefix("claude_code."), attrs, t, resource)


def _int(v: Any) -> int:
    try:
        return max(int(float(v)), 0)
    except (TypeError, ValueError):
        return 0


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _tool_names(rec: LogRecord) -> tuple[str, str, str | None, bool]:
    """(client name, tool, server, mcp) of a tool_result."""
    name = str(rec.attrs.get("tool_name") or "tool")
    params: Any = rec.attrs.get("tool_parameters")
    if isinstance(params, str):
        try:
            params = bounded_json(params)
        except ValueError:
            params = None
    if isinstance(params, dict) and params.get("mcp_server_name"):
        server, tool = str(params["mcp_server_name"]), str(params.get("mcp_tool_name") or name)
        return f"mcp__{server}__{tool}", tool, server, True
    if name.startswith("mcp__") and name.count("__") >= 2:
        _, server, tool = name.split("__", 2)
        return name, tool, server, True
    return name, name, None, str(rec.attrs.get("tool_source")) == "mcp"


@dataclass
class _Prompt:
    task: Task
    calls: dict[str, Call] = field(default_factory=dict)  # request id → call
    tools: list[tuple[LogRecord, int]] = field(default_factory=list)  # (record, calls arrived before it)
    last_ns: int = 0  # when its last record arrived


class ClaudeCodeSessions:
    """Claude Code log records → one :class:`Conversation` per finished prompt (a task), per session.

    A prompt is finished when the same session sends its next ``user_prompt``, when :meth:`idle` finds it quiet
    for ``idle_s``, or at :meth:`flush`. At most ``max_open`` prompts are held; past that the oldest is finished
    early (memory stays bounded whatever the senders do)."""

    def __init__(self, *, max_open: int = 10_000) -> None:
        self.max_open = max_open
        self.open: dict[tuple[str, str], _Prompt] = {}  # (session, prompt id) → records so far
        self.counts: dict[str, int] = {}  # event name → records seen
        self.gemini = GeminiCliSessions(max_open=max_open)  # gemini_cli.* records (collectors/otlp_gemini.py)
        self.unplaced = (
            0  # tool results no call of their prompt could be joined to (kept as their own events)
        )

    def add(self, rec: LogRecord, now_ns: int | None = None) -> list[Conversation]:
        """Take one record (arrived at ``now_ns``, default now); return the conversations it finished."""
        self.counts[rec.name] = self.counts.get(rec.name, 0) + 1
        if rec.name.startswith(GEMINI_PREFIX):
            return self.gemini.add(rec, now_ns)
        session = str(rec.attrs.get("session.id") or "session")
        prompt_id = rec.attrs.get("prompt.id")
        done: list[Conversation] = []
        if rec.name == "user_prompt":
            done += [self._finish(k) for k in [k for k in self.open if k[0] == session]]
        if prompt_id is None or rec.name not in ("user_prompt", "api_request", "tool_result"):
            return done
        key = (session, str(prompt_id))
        prompt = self.open.get(key)
        if prompt is None:
            if len(self.open) >= self.max_open:
                done.append(self._finish(next(iter(self.open))))
            text = rec.attrs.get("prompt") if rec.name == "user_prompt" else None
            shown = text if isinstance(text, str) and text != "<REDACTED>" else ""
            task = Task(
                prompt=shown, at=rec.time_ns, attrs={"prompt_id": str(prompt_id), "resource": rec.resource}
            )
            if not shown:
                task.attrs["prompt_missing"] = True
            prompt = self.open[key] = _Prompt(task)
        prompt.last_ns = time.time_ns() if now_ns is None else now_ns  # idle is measured on arrival
        if rec.name == "api_request":
            self._call(prompt, rec)
        elif rec.name == "tool_result":
            prompt.tools.append((rec, len(prompt.task.calls)))
        return done

    def idle(self, now_ns: int, idle_s: float) -> list[Conversation]:
        """Finish the prompts that received nothing for ``idle_s``."""
        quiet = [k for k, p in self.open.items() if now_ns - p.last_ns > idle_s * 1e9]
        return [self._finish(k) for k in quiet] + self.gemini.idle(now_ns, idle_s)

    def flush(self) -> list[Conversation]:
        return [self._finish(k) for k in list(self.open)] + self.gemini.flush()

    def _call(self, prompt: _Prompt, rec: LogRecord) -> None:
        a = rec.attrs
        read, write, fresh = (
            _int(a.get("cache_read_tokens")),
            _int(a.get("cache_creation_tokens")),
            _int(a.get("input_tokens")),
        )
        usage = Usage(
            input_tokens=fresh + read + write,
            output_tokens=_int(a.get("output_tokens")),
            cache_read_tokens=read,
            cache_write_tokens=write,
            cache_write_5m_tokens=_int(a["cache_creation_5m_tokens"])
            if "cache_creation_5m_tokens" in a
            else None,
            cache_write_1h_tokens=_int(a["cache_creation_1h_tokens"])
            if "cache_creation_1h_tokens" in a
            else None,
            source=TokenSource.PROVIDER,
            reported={
                k: a[k]
                for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
                if k in a
            },
        )
        call = Call(model=str(a.get("model") or "") or None, usage=usage)
        end = rec.time_ns
        duration, ttft = _float(a.get("duration_ms")), _float(a.get("ttft_ms"))
        if end is not None and duration is not None:
            start = end - int(duration * 1e6)
            call.span = Span(start, end, TimingQuality.EXACT)  # the whole call when the split is unknown
            if (
                ttft is not None and 0 <= ttft <= duration
            ):  # else: prefill to the first token, then generation
                split = start + int(ttft * 1e6)
                call.prefill = Span(start, split, TimingQuality.EXACT)
                call.span = Span(split, end, TimingQuality.EXACT)
        cost = _float(a.get("cost_usd"))
        if cost is not None:
            call.attrs["client_cost_usd"] = cost
        rid = str(a.get("request_id") or f"call{len(prompt.calls)}")
        call.attrs["request_id"] = rid
        prompt.calls[rid] = call
        prompt.task.calls.append(call)

    @staticmethod
    def _call_of(prompt: _Prompt, rec: LogRecord, arrived_after: int, start: int | None) -> Call | None:
        """The call whose response asked for the tool of ``rec``: by ``request_id`` when the record has one, else
        the last call that ended before the tool started, else the last call that arrived before the record."""
        rid = rec.attrs.get("request_id")
        if rid:
            return prompt.calls.get(str(rid))
        calls = prompt.task.calls
        if start is not None:
            ended = [c for c in calls if c.span.end is not None and c.span.end <= start + 1_000_000]
            if ended:
                return max(ended, key=lambda c: c.span.end or 0)
        return calls[arrived_after - 1] if 0 < arrived_after <= len(calls) else None

    def _finish(self, key: tuple[str, str]) -> Conversation:
        prompt = self.open.pop(key)
        for rec, arrived_after in prompt.tools:  # each tool result joins the call whose response asked for it
            end = rec.time_ns
            duration = _float(rec.attrs.get("duration_ms"))
            start = end - int(duration * 1e6) if end is not None and duration is not None else None
            call = self._call_of(prompt, rec, arrived_after, start)
            client, tool, server, mcp = _tool_names(rec)
            ok = str(rec.attrs.get("success")).lower() == "true"
            uses = call.tools if call is not None else prompt.task.unplaced
            if call is None:
                self.unplaced += 1
            uses.append(
                ToolUse(
                    call_id=str(rec.attrs.get("tool_use_id") or "") or None,
                    name=client,
                    tool=tool,
                    server=server,
                    mcp=mcp,
                    arguments="",
                    result="",
                    is_error=not ok,
                    call_span=Span(
                        start, start, TimingQuality.EXACT if start is not None else TimingQuality.NONE
                    ),
                    result_span=Span(
                        start, end, TimingQuality.EXACT if start is not None else TimingQuality.NONE
                    ),
                    attrs={
                        "arguments_bytes": _int(rec.attrs.get("tool_input_size_bytes")),
                        "result_bytes": _int(rec.attrs.get("tool_result_size_bytes")),
                        "texts_observed": False,
                        **(
                            {"error_type": str(rec.attrs.get("error"))}
                            if not ok and rec.attrs.get("error")
                            else {}
                        ),
                    },
                )
            )
        # one conversation per prompt (its task id is "<session>:<prompt id>#1"): prompts may finish out of order
        return Conversation(id=f"{key[0]}:{key[1]}", created=prompt.task.at, tasks=[prompt.task])


def mapping_counts(sessions: ClaudeCodeSessions) -> Mapping[str, int]:
    """Records seen per event name (what was mapped and what was left out)."""
    return dict(sessions.counts)
