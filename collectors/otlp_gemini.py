"""OTLP in, the Gemini CLI: its telemetry log events (settings ``telemetry.enabled``, ``otlpProtocol: "http"``) →
conversations the import builder turns into events. Fed by :class:`promcp.collectors.otlp.ClaudeCodeSessions`,
which hands it every record named ``gemini_cli.*``.

Grouped by ``session.id`` (a conversation) and ``prompt_id`` (a task):

============================ ============================================================================
``gemini_cli.user_prompt``   a task begins (the prompt text only with ``telemetry.logPrompts``)
``gemini_cli.api_response``  one LLM call of the agent (``role: main``): ``input_token_count`` (the whole
                             prompt, ``cached_content_token_count`` included: cache reads),
                             ``output_token_count`` + ``thoughts_token_count`` (reasoning), ``duration_ms``
                             (the call, exact, no prefill split), model; other roles (``utility_router``…)
                             are the CLI's side calls: counted (``side_calls``), not rounds of the task
``gemini_cli.tool_call``     S3/S4 of the last call before it in the prompt: ``duration_ms`` (exact),
                             ``success``, ``function_args``; MCP tools by ``tool_type: mcp`` and
                             ``mcp_server_name`` (``function_name`` is ``mcp_<server>_<tool>``)
============================ ============================================================================

Everything else (``api_request``, ``gen_ai.client.inference.operation.details``, ``model_routing``, ``config``…) is
counted and left out. The log events hold no system instruction and no tool declarations.

**Spans** (:meth:`GeminiCliSessions.add_span`; what 0.61.0 sends, service ``gemini-cli``, every span an INTERNAL
span named after ``gen_ai.operation.name``):

======================== =================================================================================
``llm_call``             one ``generateContent`` call: ``gen_ai.conversation.id`` (the session),
                         ``gen_ai.prompt.name`` (the prompt id), ``gen_ai.request.model``, start/end,
                         status, and in full ``gen_ai.system_instructions`` and ``gen_ai.tool.definitions``
                         (the function declarations, JSON); with ``telemetry.traces`` also
                         ``gen_ai.usage.input_tokens`` (``promptTokenCount``), ``gen_ai.usage.output_tokens``
                         (``candidatesTokenCount``: thoughts not included) and the messages cut to 10,000
                         characters. A call with no declarations (``[]``) is a side call (model routing)
``tool_call``            one tool run: ``gen_ai.tool.name``, ``gen_ai.tool.call_id``, start/end, status
``schedule_tool_calls``  the parent of a batch of tool calls: counted, not mapped
``agent_call``           a sub-agent: counted, not mapped
======================== =================================================================================

**When logs and spans of a session both arrive, the logs win**: every figure (tokens, durations, tool calls and
their success) is the log events'. A span adds only what no log event carries: the system instruction and the
function declarations of the ``llm_call`` that made each logged call (same prompt id, nearest end time), as
``system`` (key ``system_instruction``) and ``schemas`` parts (one per declaration, MCP tools keyed
``server/tool``) counted with the run's tokenizer and taken out of the ``unobserved`` part; every other span of a
logged session is counted and left out (``gemini-cli span (the logs give it)``). A session whose logs never come
(a pipeline that drops them) is built from its spans alone, one task per prompt id, when its ``llm_call`` spans
carry usage (``telemetry.traces``); without usage they are counted and left out (``gemini-cli span without usage
or logs``): a token count is never invented. Spans are held until their session goes quiet for ``idle_s``; a
prompt the session's next prompt finishes waits up to :data:`SPAN_GRACE_S` for its calls' spans.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.events import Origin, TimingQuality, TokenSource
from promcp.wire import Piece, Usage, compact_json
from promcp.wire.gemini import mcp_tool_of, parse_request

if TYPE_CHECKING:
    from promcp.collectors.otlp import LogRecord
    from promcp.collectors.otlp_spans import SpanRecord

__all__ = ["PREFIX", "SPAN_GRACE_S", "GeminiCliSessions", "is_gemini_span"]

PREFIX = "gemini_cli."
SERVICE: Final = "gemini-cli"
#: the span operations of the Gemini CLI (its ``GeminiCliOperation``)
SPAN_OPS: Final = frozenset(
    {"llm_call", "tool_call", "schedule_tool_calls", "agent_call", "user_prompt", "system_prompt"}
)
#: seconds a prompt finished by the session's next prompt waits for its calls' spans (the OTLP span exporter's
#: default batch delay is 5 s)
SPAN_GRACE_S: Final = 6.0
#: the nearest ``llm_call`` span to a logged call must end within this of it (ns)
_MATCH_NS: Final = 5_000_000_000
_STATUS_ERROR: Final = 2


def is_gemini_span(span: SpanRecord) -> bool:
    """A span of the Gemini CLI's own tracer (mapped here, not by the generic span mapper)."""
    service = span.resource.get("service.name") == SERVICE or span.attrs.get("gen_ai.agent.name") == SERVICE
    return service and str(span.attrs.get("gen_ai.operation.name") or span.name) in SPAN_OPS


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


def _opt_int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return max(int(float(v)), 0)
    except (TypeError, ValueError):
        return None


def _text(v: Any) -> str | None:
    return str(v) if v not in (None, "") else None


def _json(v: Any) -> Any:
    """A span attribute the CLI wrote as JSON (``safeJsonStringify``); the text itself when it is not JSON."""
    if not isinstance(v, str):
        return v
    try:
        return json.loads(v)
    except ValueError:
        return v


def _tool_args(messages: Any) -> str:
    """The arguments of a ``tool_call`` span's request (``gen_ai.input.messages``, with ``telemetry.traces``;
    cut at 10,000 characters by the CLI, then not JSON: left empty)."""
    request = _json(messages)
    args = request.get("args") if isinstance(request, dict) else None
    return compact_json(args) if isinstance(args, dict) else ""


def _mcp_key(piece: Piece, servers: Iterable[str]) -> Piece:
    """A declaration of an MCP tool (``mcp_<server>_<tool>``) keyed ``server/tool``, as the proxies key it."""
    if piece.origin is not Origin.SCHEMAS:
        return piece
    split = mcp_tool_of(piece.key, servers)
    return piece if split is None else Piece(piece.origin, f"{split[0]}/{split[1]}", piece.text)


@dataclass
class _Prompt:
    task: Task
    last_ns: int = 0
    side_calls: int = 0
    calls: list[Call] = field(default_factory=list)
    closing_ns: int | None = None  # finished by the session's next prompt: waiting for its spans since


@dataclass
class _HeldSpan:
    """What one Gemini CLI span says, held until its session's prompt is recorded (texts shared between spans)."""

    op: str
    prompt: str
    model: str | None
    start: int
    end: int
    error: bool
    pieces: tuple[Piece, ...] = ()  # system instruction + declarations (llm_call)
    usage: tuple[int | None, int | None] = (None, None)  # input, output (candidates) with telemetry.traces
    tool: str = ""
    call_id: str | None = None
    args: str = ""
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass
class _SessionSpans:
    spans: list[_HeldSpan] = field(default_factory=list)
    last_ns: int = 0


class GeminiCliSessions:
    """Gemini CLI log records and spans → one :class:`Conversation` per finished prompt, per session (the same
    life cycle as Claude Code's: finished by the session's next prompt, by :meth:`idle`, or at :meth:`flush`; at
    most ``max_open`` prompts and ``max_spans`` spans held)."""

    def __init__(self, *, max_open: int = 10_000, max_spans: int = 20_000) -> None:
        self.max_open, self.max_spans = max_open, max_spans
        self.open: dict[tuple[str, str], _Prompt] = {}
        self.held: OrderedDict[str, _SessionSpans] = OrderedDict()  # session → spans not used yet
        self.n_held = 0
        self.spans_seen = False  # a Gemini CLI span arrived: prompts finished early wait for theirs
        self.logged: OrderedDict[str, None] = (
            OrderedDict()
        )  # sessions that sent log events (the last 100,000)
        self.servers: dict[str, set[str]] = {}  # session → MCP servers its tool_call events named
        self.unmapped: dict[str, int] = {}  # spans left out, by why
        self._texts: OrderedDict[str, tuple[Piece, ...]] = OrderedDict()  # digest → parsed texts (shared)

    # -- log records ----------------------------------------------------------------------------------------------

    def add(self, rec: LogRecord, now_ns: int | None = None) -> list[Conversation]:
        name = rec.name.removeprefix(PREFIX)
        session = str(rec.attrs.get("session.id") or rec.resource.get("session.id") or "session")
        now = time.time_ns() if now_ns is None else now_ns
        self._logged(session)
        prompt_id = rec.attrs.get("prompt_id")
        done: list[Conversation] = []
        if name == "user_prompt":
            for k in [k for k, p in self.open.items() if k[0] == session and p.closing_ns is None]:
                if self._spans_ready(k):
                    done.append(self._finish(k))
                else:
                    self.open[k].closing_ns = now
        if prompt_id is None or name not in ("user_prompt", "api_response", "tool_call"):
            return done
        key = (session, str(prompt_id))
        prompt = self.open.get(key)
        if prompt is None:
            if len(self.open) >= self.max_open:
                done.append(self._finish(next(iter(self.open))))
            text = rec.attrs.get("prompt") if name == "user_prompt" else None
            shown = text if isinstance(text, str) else ""
            task = Task(
                prompt=shown, at=rec.time_ns, attrs={"prompt_id": str(prompt_id), "resource": rec.resource}
            )
            if not shown:
                task.attrs["prompt_missing"] = True
            prompt = self.open[key] = _Prompt(task)
        prompt.last_ns = now
        if name == "api_response":
            self._call(prompt, rec)
        elif name == "tool_call":
            self._tool(prompt, rec, session)
        return done

    def _logged(self, session: str) -> None:
        self.logged[session] = None
        self.logged.move_to_end(session)
        if len(self.logged) > 100_000:
            self.logged.popitem(last=False)

    # -- spans ----------------------------------------------------------------------------------------------------

    def add_span(self, span: SpanRecord, now_ns: int | None = None) -> list[Conversation]:
        """Take one span of the Gemini CLI (:func:`is_gemini_span`); return the conversations it finished (held
        spans over ``max_spans``: the oldest session is resolved early)."""
        op = str(span.attrs.get("gen_ai.operation.name") or span.name)
        self.spans_seen = True
        if op not in ("llm_call", "tool_call"):
            self._left_out(f"gemini-cli {op}")
            return []
        a = span.attrs
        session = str(a.get("gen_ai.conversation.id") or span.resource.get("session.id") or "session")
        held = _HeldSpan(
            op=op,
            prompt=str(a.get("gen_ai.prompt.name") or ""),
            model=_text(a.get("gen_ai.request.model")),
            start=span.start_ns,
            end=max(span.end_ns, span.start_ns),
            error=span.status_code == _STATUS_ERROR,
            resource=span.resource,
        )
        if op == "llm_call":
            held.pieces = self._pieces(a.get("gen_ai.system_instructions"), a.get("gen_ai.tool.definitions"))
            held.usage = (
                _opt_int(a.get("gen_ai.usage.input_tokens")),
                _opt_int(a.get("gen_ai.usage.output_tokens")),
            )
        else:
            held.tool = str(a.get("gen_ai.tool.name") or "tool")
            held.call_id = _text(a.get("gen_ai.tool.call_id"))
            held.args = _tool_args(a.get("gen_ai.input.messages"))
        spans = self.held.setdefault(session, _SessionSpans())
        spans.spans.append(held)
        spans.last_ns = time.time_ns() if now_ns is None else now_ns
        self.held.move_to_end(session)
        self.n_held += 1
        done: list[Conversation] = []
        while self.n_held > self.max_spans and self.held:
            done += self._resolve(next(iter(self.held)))
        return done

    def _pieces(self, system: Any, tools: Any) -> tuple[Piece, ...]:
        """The system instruction and the function declarations of an ``llm_call`` as the proxy splits them
        (:func:`promcp.wire.gemini.parse_request`), parsed once per distinct text (they repeat on every call)."""
        raw = f"{system}\x00{tools}"
        digest = hashlib.blake2b(raw.encode("utf-8", "replace"), digest_size=16).hexdigest()
        found = self._texts.get(digest)
        if found is not None:
            self._texts.move_to_end(digest)
            return found
        body: dict[str, Any] = {}
        instruction = _json(system)
        if isinstance(instruction, str) and instruction:
            body["systemInstruction"] = {"parts": [{"text": instruction}]}
        elif isinstance(instruction, dict | list) and instruction:
            body["systemInstruction"] = (
                instruction if isinstance(instruction, dict) else {"parts": instruction}
            )
        declared = _json(tools)
        if isinstance(declared, list):
            body["tools"] = [t for t in declared if isinstance(t, dict)]
        try:
            request = parse_request(body)
        except (TypeError, ValueError, AttributeError):
            request = None
        pieces = tuple(
            Piece(p.origin, "system_instruction" if p.origin is Origin.SYSTEM else p.key, p.text)
            for p in (request.pieces if request is not None else ())
            if p.origin in (Origin.SYSTEM, Origin.SCHEMAS)
        )
        self._texts[digest] = pieces
        if len(self._texts) > 64:
            self._texts.popitem(last=False)
        return pieces

    def _spans_ready(self, key: tuple[str, str]) -> bool:
        """True when the prompt can be recorded now: no Gemini CLI span ever arrived (senders without traces), or
        an ``llm_call`` span is held for each of its calls."""
        session, prompt_id = key
        held = self.held.get(session)
        if held is None:
            return not self.spans_seen
        calls = [s for s in held.spans if s.op == "llm_call" and s.prompt == prompt_id and s.pieces]
        return len(calls) >= len(self.open[key].calls)

    def _left_out(self, why: str, n: int = 1) -> None:
        self.unmapped[why] = self.unmapped.get(why, 0) + n

    def _resolve(self, session: str) -> list[Conversation]:
        """The held spans of a quiet session: left out when its logs came (they give every figure), else its
        prompts built from the spans alone."""
        spans = self.held.pop(session).spans
        self.n_held -= len(spans)
        if session in self.logged or any(k[0] == session for k in self.open):
            self._left_out("gemini-cli span (the logs give it)", len(spans))
            return []
        by_prompt: dict[str, list[_HeldSpan]] = {}
        for s in sorted(spans, key=lambda s: s.start):
            by_prompt.setdefault(s.prompt, []).append(s)
        done = []
        tools = [
            s for s in spans if s.op == "tool_call"
        ]  # tool spans name no prompt: joined to a call by time
        for prompt_id, group in by_prompt.items():
            if prompt_id:
                conv = self._from_spans(session, prompt_id, group, tools)
                if conv is not None:
                    done.append(conv)
        if tools:
            self._left_out("gemini-cli tool_call without its llm_call", len(tools))
        return done

    def _from_spans(
        self, session: str, prompt_id: str, spans: list[_HeldSpan], tools: list[_HeldSpan]
    ) -> Conversation | None:
        calls = [s for s in spans if s.op == "llm_call"]
        main = [s for s in calls if any(p.origin is Origin.SCHEMAS for p in s.pieces)]
        if not main or any(s.usage[0] is None for s in main):
            self._left_out("gemini-cli span without usage or logs", len(calls))
            return None
        first = calls[0]
        task = Task(prompt="", at=first.start, attrs={"prompt_id": prompt_id, "resource": first.resource})
        task.attrs["prompt_missing"] = True
        task.attrs["from_spans"] = True
        if len(calls) > len(main):
            task.attrs["side_calls"] = len(calls) - len(main)
        servers = self.servers.get(session, set())
        for i, s in enumerate(main):
            inp, out = s.usage
            usage = Usage(
                input_tokens=inp,
                output_tokens=out,
                source=TokenSource.PROVIDER,
                reported={"input_tokens": inp, "output_tokens": out, "thoughts": "not sent in spans"},
            )
            call = Call(model=s.model, usage=usage, context=[_mcp_key(p, servers) for p in s.pieces])
            call.span = Span(s.start, s.end, TimingQuality.EXACT)
            if s.error:
                call.attrs["error_type"] = "llm_call_error"
            until = main[i + 1].start if i + 1 < len(main) else None
            for t in [t for t in tools if t.start >= s.end and (until is None or t.start < until)]:
                tools.remove(t)
                call.tools.append(self._span_tool(t, servers))
            task.calls.append(call)
        return Conversation(id=f"{session}:{prompt_id}", created=task.at, tasks=[task])

    @staticmethod
    def _span_tool(t: _HeldSpan, servers: Iterable[str]) -> ToolUse:
        split = mcp_tool_of(t.tool, servers)
        span = Span(t.start, t.end, TimingQuality.EXACT)
        return ToolUse(
            call_id=t.call_id,
            name=t.tool,
            tool=split[1] if split else t.tool,
            server=split[0] if split else None,
            mcp=split is not None,
            arguments=t.args,
            result="",
            is_error=t.error,
            call_span=Span(t.start, t.start, TimingQuality.EXACT),
            result_span=span,
            attrs={"texts_observed": False},
        )

    def _attach_spans(self, key: tuple[str, str], prompt: _Prompt) -> None:
        """Give each logged call of the prompt the texts of its ``llm_call`` span (same prompt id, nearest end)."""
        session, prompt_id = key
        held = self.held.get(session)
        if held is None:
            return
        free = [s for s in held.spans if s.op == "llm_call" and s.prompt == prompt_id and s.pieces]
        for call in prompt.calls:
            end = call.span.end
            if end is None or not free:
                continue
            best = min(free, key=lambda s: abs(s.end - end))
            if abs(best.end - end) > _MATCH_NS:
                continue
            free.remove(best)
            held.spans = [s for s in held.spans if s is not best]
            self.n_held -= 1
            call.context = [_mcp_key(p, self.servers.get(session, ())) for p in best.pieces]
        # the prompt's other spans (side calls, tool runs up to its last call) say nothing the logs do not
        ends = [c.span.end for c in prompt.calls if c.span.end is not None]
        last = max(ends, default=None)
        covered = [
            s
            for s in held.spans
            if (s.op == "llm_call" and s.prompt == prompt_id)
            or (s.op == "tool_call" and last is not None and s.start <= last)
        ]
        if covered:
            gone = {id(s) for s in covered}
            held.spans = [s for s in held.spans if id(s) not in gone]
            self.n_held -= len(covered)
            self._left_out("gemini-cli span (the logs give it)", len(covered))

    # -- life cycle -----------------------------------------------------------------------------------------------

    def idle(self, now_ns: int, idle_s: float) -> list[Conversation]:
        quiet = [
            k
            for k, p in self.open.items()
            if now_ns - p.last_ns > idle_s * 1e9
            or (
                p.closing_ns is not None
                and (now_ns - p.closing_ns > SPAN_GRACE_S * 1e9 or self._spans_ready(k))
            )
        ]
        done = [self._finish(k) for k in quiet]
        for session in [s for s, h in self.held.items() if now_ns - h.last_ns > idle_s * 1e9]:
            if not any(k[0] == session for k in self.open):
                done += self._resolve(session)
        return done

    def flush(self) -> list[Conversation]:
        done = [self._finish(k) for k in list(self.open)]
        for session in list(self.held):
            done += self._resolve(session)
        return done

    def _call(self, prompt: _Prompt, rec: LogRecord) -> None:
        a = rec.attrs
        if str(a.get("role") or "main") != "main":
            prompt.side_calls += 1
            return
        keys = (
            "input_token_count",
            "output_token_count",
            "cached_content_token_count",
            "thoughts_token_count",
        )
        thoughts = _int(a.get("thoughts_token_count"))
        usage = Usage(
            input_tokens=_int(a.get("input_token_count")),
            output_tokens=_int(a.get("output_token_count")) + thoughts,
            cache_read_tokens=_int(a.get("cached_content_token_count")),
            reasoning_tokens=thoughts,
            source=TokenSource.PROVIDER,
            reported={k: a[k] for k in (*keys, "tool_token_count", "total_token_count") if k in a},
        )
        call = Call(model=str(a.get("model") or "") or None, usage=usage)
        end, duration = rec.time_ns, _float(a.get("duration_ms"))
        if end is not None and duration is not None:
            call.span = Span(end - int(duration * 1e6), end, TimingQuality.EXACT)  # the whole call, no split
        prompt.calls.append(call)
        prompt.task.calls.append(call)

    def _tool(self, prompt: _Prompt, rec: LogRecord, session: str) -> None:
        a = rec.attrs
        server = str(a.get("mcp_server_name") or "") or None
        if server:
            self.servers.setdefault(session, set()).add(server)
            if len(self.servers) > 100_000:  # bounded like ``logged``: the oldest session's names go
                del self.servers[next(iter(self.servers))]
        if not prompt.calls:
            return  # a tool call with no model call before it in this prompt: nothing to join it to
        name = str(a.get("function_name") or "tool")
        mcp = str(a.get("tool_type")) == "mcp"
        split = mcp_tool_of(name, [server] if server else ())
        tool = split[1] if mcp and split else name
        end, duration = rec.time_ns, _float(a.get("duration_ms"))
        start = end - int(duration * 1e6) if end is not None and duration is not None else None
        quality = TimingQuality.EXACT if start is not None else TimingQuality.NONE
        ok = str(a.get("success")).lower() == "true"
        args = a.get("function_args")
        try:
            arguments = compact_json(json.loads(args)) if isinstance(args, str) else ""
        except ValueError:
            arguments = args if isinstance(args, str) else ""
        prompt.calls[-1].tools.append(
            ToolUse(
                call_id=None,
                name=name,
                tool=tool,
                server=server if mcp else None,
                mcp=mcp,
                arguments=arguments,
                result="",
                is_error=not ok,
                call_span=Span(start, start, quality),
                result_span=Span(start, end, quality),
                attrs={"texts_observed": False, "decision": str(a.get("decision") or "")},
            )
        )

    def _finish(self, key: tuple[str, str]) -> Conversation:
        prompt = self.open.pop(key)
        self._attach_spans(key, prompt)
        if prompt.side_calls:
            prompt.task.attrs["side_calls"] = prompt.side_calls
        return Conversation(id=f"{key[0]}:{key[1]}", created=prompt.task.at, tasks=[prompt.task])
