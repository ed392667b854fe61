"""The event record: one row type for every source (live host, instrumented user code, importers).

A trace is a table of :class:`Event` rows. Every source (``promcp run``, ``promcp.instrument()``, ``promcp import``)
produces the same record, so every table in :mod:`promcp.analysis` works on all of them. The meaning of each column,
and the rule that turns columns into the paper's phases and latency segments without counting a token twice, is
written down in ``docs/events.md`` and ``docs/accounting.md``.

Columns are grouped as in the design card: identity, stage, timing, who, tokens, input-by-origin, outcome, linkage.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Final

import msgspec

#: Version of the event schema. Stored in every journal header and in the Parquet key-value metadata; readers refuse
#: files with a newer version (SchemaVersionError) instead of misreading them.
SCHEMA_VERSION: Final = 2


class Stage(StrEnum):
    """Where in an MCP interaction an event happened (ProMCP stages)."""

    INIT = "INIT"  # session start-up: spawn, ready, initialize/discover, tools/list
    S1 = "S1"  # user -> LLM: the prompt (first LLM call of a task)
    S2 = "S2"  # LLM -> client: planning output (tool name + arguments)
    S3 = "S3"  # client -> server: tools/call request
    S4 = "S4"  # server -> client: tool result
    S5 = "S5"  # client -> LLM: context update (results, history, schemas re-sent) for a later LLM call
    S6 = "S6"  # LLM -> user: the final answer
    MCP = "MCP"  # other MCP traffic seen on the wire: resources/*, prompts/*, ping, notifications, server->client requests


class Phase(StrEnum):
    """The phase an event's tokens and latency are attributed to (the paper's Tables 1/2, plus start-up phases)."""

    SPAWN = "spawn"
    READY = "ready"
    INITIALIZE = "initialize"
    PROBE = "probe"  # a ``server/discover`` the server refused: the client falls back to ``initialize``
    TOOLS_DISCOVERY = "tools_discovery"
    CONTEXT = "context"
    LLM_PLAN = "llm_plan"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    FINAL_ANSWER = "final_answer"
    PROTOCOL = "protocol"  # MCP traffic outside the six stages (stage MCP)


class Direction(StrEnum):
    USER_TO_LLM = "user->llm"
    LLM_TO_CLIENT = "llm->client"
    CLIENT_TO_SERVER = "client->server"
    SERVER_TO_CLIENT = "server->client"
    CLIENT_TO_LLM = "client->llm"
    LLM_TO_USER = "llm->user"


class TimingQuality(StrEnum):
    """How much to trust ``t_start_ns``/``t_end_ns``/``latency_ms``."""

    EXACT = "exact"  # measured by promcp (monotonic clock) or recorded by the source at the instant itself
    BOUNDED = (
        "bounded"  # the true interval lies within the recorded one (e.g. an export gives only an upper bound)
    )
    DERIVED = "derived"  # computed from other events' timestamps (e.g. a gap between two exact points)
    NONE = "none"  # no usable timing; latency_ms is null


class TokenSource(StrEnum):
    """Where the token numbers of an event come from."""

    PROVIDER = "provider"  # usage reported by the LLM provider (ground truth for billing)
    TOKENIZER = "tokenizer"  # counted with the exact tokenizer named in ``tokenizer``
    APPROX = "approx"  # a labelled approximation (no public tokenizer exists, e.g. Claude)
    NONE = "none"  # no token numbers


class Status(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    CONTEXT_OVERFLOW = (
        "context_overflow"  # the prompt did not fit the model's context window; nothing was sent
    )


#: ``error_type`` of a tool result that reports a failure (MCP ``isError``, an export's error flag): every source
TOOL_ERROR: Final = "tool_error"
#: ``error_type`` of an imported tool use the export holds no result for
NO_RESULT: Final = "no_result"

#: Every ``error_type`` promcp writes: the one vocabulary (docs/events.md "``error_type`` values" explains each, by
#: source; ``tests/unit/test_docs.py`` checks both ways). OTLP spans keep the sender's own ``error.type``, which is
#: not promcp's to name.
ERROR_TYPES: Final = frozenset(
    {
        # server start-up
        "spawn_failed", "server_exited", "startup_timeout", "server_error", "connect_failed",
        "discovery_timeout",
        # tool calls (host, instrumentation, MCP proxy, imports)
        TOOL_ERROR, "mcp_error", "protocol_error", "server_crashed", "tool_timeout", "timeout", "cancelled",
        "unknown_tool", "invalid_arguments", NO_RESULT,
        # LLM calls (host backends; the LLM proxy's upstream HTTP status kinds are the same names)
        "connection", "bad_request", "auth", "permission", "not_found", "too_large", "rate_limit", "overloaded",
        "http_error", "bad_response", "model_load", "llm_error", "model_crashed", "context_overflow",
        "task_not_started", "task_timeout", "interrupted",
        # MCP proxy
        "no_response", "unparsed_response", "unreadable_response", "invalid_response", "unmatched_response",
        "response_error", "invalid_json", "not_jsonrpc", "session_closed", "session_expired", "session_evicted",
        "stream_closed", "stream_error", "client_closed", "proxy_stopped",
        # LLM proxy
        "upstream_unreachable", "upstream_timeout", "upstream_error", "upstream_cut", "client_disconnected",
        "request_too_large", "proxy_closed", "unparsed_request",
        # OTLP spans without an error type of their own
        "error",
    }
)  # fmt: skip

#: values older datasets hold, as readers show them (``is_error``: imports before the vocabulary was one)
LEGACY_ERROR_TYPES: Final = {"is_error": TOOL_ERROR}


class Topology(StrEnum):
    L_CUST = "l-cust"  # local LLM + customized client
    C_CUST = "c-cust"  # cloud LLM API + customized client
    C_OTS = "c-ots"  # cloud LLM + off-the-shelf client (reconstructed from exports)


class Transport(StrEnum):
    STDIO = "stdio"
    STREAMABLE_HTTP = "streamable_http"
    SSE = "sse"
    INPROC = "inproc"


class Origin(StrEnum):
    """Where the input tokens of an LLM call came from (columns ``in_*``)."""

    SYSTEM = "system"
    SCHEMAS = "schemas"
    USER = "user"
    HISTORY = "history"
    TOOL_RESULTS = "tool_results"


#: The phases each stage may carry.
STAGE_PHASES: Final[dict[Stage, frozenset[Phase]]] = {
    Stage.INIT: frozenset({Phase.SPAWN, Phase.READY, Phase.INITIALIZE, Phase.PROBE, Phase.TOOLS_DISCOVERY}),
    Stage.S1: frozenset({Phase.CONTEXT}),
    Stage.S2: frozenset({Phase.LLM_PLAN}),
    Stage.S3: frozenset({Phase.TOOL_CALL}),
    Stage.S4: frozenset({Phase.TOOL_RESULT}),
    Stage.S5: frozenset({Phase.CONTEXT}),
    Stage.S6: frozenset({Phase.FINAL_ANSWER}),
    Stage.MCP: frozenset({Phase.PROTOCOL}),
}

#: The default phase of each stage (INIT has none: the caller names the start-up phase).
STAGE_PHASE: Final[dict[Stage, Phase]] = {
    Stage.S1: Phase.CONTEXT,
    Stage.S2: Phase.LLM_PLAN,
    Stage.S3: Phase.TOOL_CALL,
    Stage.S4: Phase.TOOL_RESULT,
    Stage.S5: Phase.CONTEXT,
    Stage.S6: Phase.FINAL_ANSWER,
    Stage.MCP: Phase.PROTOCOL,
}

STAGE_DIRECTION: Final[dict[Stage, Direction]] = {
    Stage.INIT: Direction.CLIENT_TO_SERVER,
    Stage.S1: Direction.USER_TO_LLM,
    Stage.S2: Direction.LLM_TO_CLIENT,
    Stage.S3: Direction.CLIENT_TO_SERVER,
    Stage.S4: Direction.SERVER_TO_CLIENT,
    Stage.S5: Direction.CLIENT_TO_LLM,
    Stage.S6: Direction.LLM_TO_USER,
    Stage.MCP: Direction.CLIENT_TO_SERVER,  # a server's request or notification says server->client
}

#: Stages whose event stands for the input side of one LLM call (they carry ``tokens_in`` and ``in_*``).
LLM_INPUT_STAGES: Final = frozenset({Stage.S1, Stage.S5})
#: Stages whose event stands for the output side of one LLM call (they carry ``tokens_out``).
LLM_OUTPUT_STAGES: Final = frozenset({Stage.S2, Stage.S6})

ORIGIN_COLUMNS: Final[dict[Origin, str]] = {
    Origin.SYSTEM: "in_system",
    Origin.SCHEMAS: "in_schemas",
    Origin.USER: "in_user",
    Origin.HISTORY: "in_history",
    Origin.TOOL_RESULTS: "in_tool_results",
}


class Part(msgspec.Struct, frozen=True, array_like=True):
    """One piece of an LLM call's input: its origin, a stable key, and its tokens.

    Keys identify the same content across calls of a task, which is what makes the cumulative re-send cost derivable:
    ``schemas`` parts use ``"<server>/<tool>"``, ``tool_results`` parts use the tool-call id, ``user`` uses
    ``"prompt"`` (plus ``"attachment:<name>"``), ``system`` uses ``"system"``, ``history`` uses ``"msg:<index>"``.
    """

    origin: Origin
    key: str
    tokens: int


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One row of a trace. See ``docs/events.md`` for every column."""

    # identity
    run_id: str = ""
    topology: Topology = Topology.L_CUST
    source: str = "live"
    benchmark: str | None = None
    task_id: str | None = None
    round: int | None = None
    seq: int = -1
    # stage
    stage: Stage
    phase: Phase | None = None
    direction: Direction | None = None
    # timing (wall clock for t_*, monotonic clock for latency_ms)
    t_start_ns: int | None = None
    t_end_ns: int | None = None
    latency_ms: float | None = None
    timing_quality: TimingQuality = TimingQuality.EXACT
    # who
    model: str | None = None
    provider: str | None = None
    server: str | None = None
    tool: str | None = None
    transport: Transport | None = None
    mcp_method: str | None = None
    jsonrpc_id: str | None = None
    tool_call_id: str | None = None
    protocol_version: str | None = None
    sdk_versions: str | None = None
    # tokens: LLM usage (tokens_in/out) and protocol footprint (footprint_*)
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_total: int | None = None
    token_source: TokenSource = TokenSource.NONE
    tokenizer: str | None = None
    footprint_tokens: int | None = None
    footprint_bytes: int | None = None
    # input tokens by origin (LLM input events); they sum to tokens_in
    in_system: int | None = None
    in_schemas: int | None = None
    in_user: int | None = None
    in_history: int | None = None
    in_tool_results: int | None = None
    parts: list[Part] | None = None
    context_window: int | None = None
    # the cache split of an LLM call's input as the provider reported it (input events; subsets of tokens_in)
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    # reasoning / thinking tokens of the output (output events; a subset of tokens_out)
    reasoning_tokens: int | None = None
    # outcome
    status: Status = Status.OK
    error_type: str | None = None
    req_preview: str | None = None
    resp_preview: str | None = None
    # linkage
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    attrs: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # Hot path (every decoded journal line): plain attribute reads, no loops over column names.
        stage = self.stage
        if self.phase is None:
            if stage is Stage.INIT:
                raise ValueError("an INIT event needs a phase (spawn, ready, initialize or tools_discovery)")
            self.phase = STAGE_PHASE[stage]
        elif self.phase not in STAGE_PHASES[stage]:
            allowed = ", ".join(sorted(STAGE_PHASES[stage]))
            raise ValueError(f"phase {self.phase.value!r} does not belong to stage {stage.value} ({allowed})")
        if self.direction is None:
            self.direction = STAGE_DIRECTION[stage]
        if stage in LLM_INPUT_STAGES:
            self._check_origins()
        tokens_in, tokens_out = self.tokens_in, self.tokens_out
        if self.tokens_total is None and (tokens_in is not None or tokens_out is not None):
            self.tokens_total = (tokens_in or 0) + (tokens_out or 0)
        if (
            (tokens_in is not None and tokens_in < 0)
            or (tokens_out is not None and tokens_out < 0)
            or (self.footprint_tokens is not None and self.footprint_tokens < 0)
            or (self.footprint_bytes is not None and self.footprint_bytes < 0)
        ):
            raise ValueError("token and byte counts must not be negative")
        latency = self.latency_ms
        if latency is not None:
            if latency < 0:
                raise ValueError(f"latency_ms is negative ({latency})")
            if self.timing_quality is TimingQuality.NONE:
                raise ValueError("timing_quality 'none' with a latency_ms value")
        if self.t_start_ns is not None and self.t_end_ns is not None and self.t_end_ns < self.t_start_ns:
            raise ValueError("t_end_ns is before t_start_ns")

    def _check_origins(self) -> None:
        origins = (self.in_system, self.in_schemas, self.in_user, self.in_history, self.in_tool_results)
        if self.parts is not None and origins == (None, None, None, None, None):
            sums = dict.fromkeys(Origin, 0)
            for part in self.parts:
                sums[part.origin] += part.tokens
            origins = (
                sums[Origin.SYSTEM],
                sums[Origin.SCHEMAS],
                sums[Origin.USER],
                sums[Origin.HISTORY],
                sums[Origin.TOOL_RESULTS],
            )
            self.in_system, self.in_schemas, self.in_user, self.in_history, self.in_tool_results = origins
        if origins != (None, None, None, None, None):
            total = sum(v or 0 for v in origins)
            if self.tokens_in is None:
                self.tokens_in = total
            elif total != self.tokens_in:
                raise ValueError(f"input tokens by origin sum to {total}, but tokens_in is {self.tokens_in}")

    def replace(self, **changes: Any) -> Event:
        """A copy with some columns changed (validated again)."""
        return msgspec.structs.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """All columns as plain Python values (enums as their string values, parts as lists)."""
        out: dict[str, Any] = msgspec.to_builtins(msgspec.structs.asdict(self))
        return out


def scale_parts(parts: Sequence[Part], total: int) -> list[Part]:
    """Scale part token counts so they sum to ``total`` (largest-remainder rounding; order kept)."""
    local = sum(p.tokens for p in parts)
    if local == total:
        return list(parts)
    if not parts:
        return []
    if local == 0:  # nothing counted locally: give everything to the first part
        first = parts[0]
        return [Part(first.origin, first.key, total), *(Part(p.origin, p.key, 0) for p in parts[1:])]
    exact = [p.tokens * total / local for p in parts]
    floors = [int(x) for x in exact]
    left = total - sum(floors)
    order = sorted(range(len(parts)), key=lambda i: (exact[i] - floors[i], -i), reverse=True)
    for i in order[:left]:
        floors[i] += 1
    return [Part(p.origin, p.key, n) for p, n in zip(parts, floors, strict=True)]


#: Column order of the Parquet files and of :func:`promcp.analysis.load`.
COLUMNS: Final[tuple[str, ...]] = Event.__struct_fields__

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Event)


def encode_event(event: Event) -> bytes:
    """Compact JSON of one event (the journal line format, without the newline)."""
    return _ENCODER.encode(event)


def decode_event(data: bytes | str) -> Event:
    """Parse and validate one journal line. Raises ``msgspec.ValidationError``/``DecodeError`` on bad input."""
    return _DECODER.decode(data)


_LIST_DECODER = msgspec.json.Decoder(list[Event])


def encode_events(events: Sequence[Event]) -> bytes:
    """A JSON array of events (the rows ``promcp.instrument()`` carries on its spans to ``promcp collect``)."""
    return _ENCODER.encode(list(events))


def decode_events(data: bytes | str) -> list[Event]:
    """Parse and validate a JSON array of events. Raises ``msgspec.ValidationError``/``DecodeError``."""
    return _LIST_DECODER.decode(data)
