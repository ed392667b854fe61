"""From finished LLM exchanges to events: one worker thread parses, places, counts and journals, in the order the
exchanges ended (a request that continues a conversation always ends after the call it continues).

Per LLM call (docs/proxy-llm.md "What it records"): the input event (S1 for a task's first call, S5 after) with
the request body split by origin and reconciled with the provider's usage, and the output event (S2 / S6) — both
from :func:`promcp.stages.llm_call_events`, the builder every source uses. Per tool call the model asked for, once
the next request carries its result: S3 / S4 derived from that request (``attrs.derived = "next_request"``,
``attrs.client_tool`` for a tool the client runs itself, timing bounded by the gap between the two calls); when an
MCP proxy recorded the real ``tools/call``, the run's merge joins it to the call and drops the derived pair
(:mod:`promcp.stages.link`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from promcp import tokenizers
from promcp.bounded_worker import BoundedWorker
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.events import Event, Origin, Stage, Status
from promcp.proxy._http import ExchangeObserver, ProxyRequest
from promcp.proxy.llm._conversations import Conversations, Placement
from promcp.proxy.llm._exchange import COUNT_TOKENS, LLMExchange, api_of
from promcp.recorder import Recorder
from promcp.stages import (
    Failure,
    Instant,
    LLMCall,
    ToolsCall,
    failed_step_event,
    llm_call_events,
    llm_input_event,
    tools_call_events,
)
from promcp.stages.link import mcp_tool_of, tool_calls_attr
from promcp.tokenizers import CachedTokenizer
from promcp.wire import (
    ChatRequest,
    Output,
    ToolCall,
    arguments_digest,
    conversation_blocks,
    error_message,
    gemini,
    http_error_type,
    parse_request,
    parse_response,
)
from promcp.wire.json_bounds import loads as bounded_json

if TYPE_CHECKING:
    from promcp.proxy.llm._rewrite import Rewriter

__all__ = ["SESSION_HEADERS", "Counters", "LLMRecording"]

log = logging.getLogger(__name__)

#: finished exchanges waiting to be recorded, at most (each holds its request body and the response kept: one can be
#: 64 MiB, so the bytes are bounded too). A full queue does not stall the proxy's loop: the exchange is relayed all
#: the same, counted in ``Counters.lost`` and logged.
QUEUE_ITEMS = 4096
QUEUE_BYTES = 512 * 1024 * 1024

#: request headers that name the client session (the first present wins)
SESSION_HEADERS = ("x-claude-code-session-id",)
_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "ollama": "ollama",
    "gemini": "google",
}


@dataclass(frozen=True)
class InFlight:
    """An exchange whose request reached the upstream at ``at``: the worker writes its request row."""

    exchange: LLMExchange
    at: Instant


@dataclass
class Counters:
    """What the proxy saw, for its summary line."""

    calls: int = 0
    failed: int = 0
    forwarded_only: int = 0
    count_tokens: int = 0
    side_calls: int = 0
    unparsed: int = 0
    lost: int = 0  # relayed while the recording queue was full: not recorded (each one logged)
    by_task: dict[str, int] = field(default_factory=dict)


class LLMRecording:
    """Records the LLM calls a :class:`~promcp.proxy._http.ReverseProxy` forwards (pass :meth:`observe` to it).

    ``tokenizer`` names the tokenizer of the local estimate (default: the model's, :func:`promcp.tokenizers.
    for_model`); ``footprint_tokenizer`` counts derived tool-call footprints (S3 / S4), as the MCP proxy does;
    ``mcp_servers`` names the client's MCP servers where known (``promcp record``), so a Gemini CLI tool name
    ``mcp_<server>_<tool>`` is split right when a server name holds ``_``.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        tokenizer: str | None = None,
        footprint_tokenizer: str = DEFAULT_TOKENIZER,
        mcp_servers: Sequence[str] = (),
        rewriter: Rewriter | None = None,
    ) -> None:
        self.recorder = recorder
        self.rewriter = rewriter  # --strategy: requests rewritten in flight (promcp/proxy/llm/_rewrite.py)
        self.mcp_servers = tuple(mcp_servers)
        self.tokenizer_name = tokenizer
        self.footprint = tokenizers.get(footprint_tokenizer)
        self.conversations = Conversations()
        self.counters = Counters()
        self.errors: list[str] = []
        self._worker: BoundedWorker[LLMExchange | InFlight] = BoundedWorker(
            self._handle,
            name="promcp-llm-recorder",
            max_items=QUEUE_ITEMS,
            max_bytes=QUEUE_BYTES,
            full="refuse",
            on_error=self._failed,
        )
        self._closed = False

    # -- the proxy's side (event loop) ----------------------------------------------------------------------------

    def observe(self, request: ProxyRequest) -> ExchangeObserver | None:
        api = api_of(request.method, request.path)
        if api is None:
            self.counters.forwarded_only += 1
            return None
        on_forward = None if api == COUNT_TOKENS else self._forwarded
        exchange = LLMExchange(api, request, self._finished, on_forward)
        if self.rewriter is not None and api != COUNT_TOKENS:
            from promcp.proxy.llm._rewrite import prepare_hook

            exchange.prepare = prepare_hook(self.rewriter, exchange)
        return exchange

    # -- the worker's side ------------------------------------------------------------------------------------------

    def _finished(self, exchange: LLMExchange) -> None:
        """An exchange ended (on the proxy's loop): queued for the worker, or — the queue is full — counted lost."""
        size = len(exchange.request.body) + len(exchange.body)
        if not self._worker.put(exchange, size):
            self.counters.lost += 1
            where = f"{exchange.request.method} {exchange.request.path}"
            self.errors.append(f"{where}: not recorded: the recording queue was full")
            log.warning("promcp proxy llm: %s relayed but not recorded: the recording queue was full", where)

    def _forwarded(self, exchange: LLMExchange, at: Instant) -> None:
        """The request reached the upstream (on the proxy's loop): its request row is written by the worker, in
        order before the call's end (a full queue skips it: the call is still recorded when it ends)."""
        self._worker.put(InFlight(exchange, at))

    def _handle(self, item: LLMExchange | InFlight) -> None:
        if isinstance(item, InFlight):
            self._in_flight(item.exchange, item.at)
            return
        self._record(item)
        self._settle(item)

    def _in_flight(self, ex: LLMExchange, at: Instant) -> None:
        """The call's request row, while it is in flight (``attrs.in_flight``): what a proxy killed mid-call leaves.
        No tokens are counted and no task placed yet (both need the answer); the call's final rows supersede it."""
        try:
            body = bounded_json(ex.request.body)
            if not isinstance(body, dict):
                return
            request = parse_request(ex.api, body)
        except (ValueError, TypeError, AttributeError):
            return  # an unreadable request is recorded when it ends (unparsed_request)
        model, stream = request.model, request.stream
        if ex.api == "gemini":  # the model and streaming are in the path
            model = model or gemini.model_of_path(ex.request.path)
            stream = ":streamGenerateContent" in ex.request.path
        attrs: dict[str, Any] = {
            "api": ex.api,
            "path": ex.request.path,
            "stream": stream,
            "request_bytes": len(ex.request.body),
            "in_flight": True,
        }
        session = next((v for h in SESSION_HEADERS if (v := ex.request.header(h))), None)
        if session:
            attrs["client_session"] = session
        call = LLMCall(
            provider=_PROVIDERS.get(ex.api),
            model=model,
            round=1,
            start=ex.request.received,
            end=at,
            tokenizer=self._tokenizer(model),
            texts_observed=False,
            attrs_in=attrs,
        )
        ex.in_flight = self.recorder.emit(llm_input_event(call))

    def _settle(self, ex: LLMExchange) -> None:
        """The call's final rows are journaled: its in-flight request row is superseded."""
        row, ex.in_flight = ex.in_flight, None
        if row is not None:
            self.recorder.settle([row])

    def _failed(self, item: LLMExchange | InFlight | None, exc: BaseException) -> None:
        """Never lose the worker, nor the call: an event says it was not readable (the worker logged the error)."""
        if isinstance(item, InFlight):  # no request row: the call is still recorded when it ends
            return
        exchange = item
        where = f"{exchange.request.method} {exchange.request.path}" if exchange is not None else "?"
        self.errors.append(f"{where}: {type(exc).__name__}: {exc}")
        if exchange is not None and exchange.outcome is not None:
            try:
                self._unparsed(exchange, f"could not be recorded: {type(exc).__name__}: {exc}"[:300])
            except Exception as again:  # the recorder itself failed: logged, counted in errors
                self.errors.append(f"{where}: not recorded either: {again}")
                log.warning("promcp proxy llm: %s not recorded either: %s", where, again)
            else:
                self._settle(exchange)

    def flush(self) -> None:
        """Wait until every finished exchange is journaled."""
        self._worker.flush()

    def close(self) -> None:
        """Record what is queued and stop the worker (the recorder stays open: its owner closes it)."""
        if not self._closed:
            self._closed = True
            for item in self._worker.close():  # only with a deadline: none today
                if isinstance(item, LLMExchange):
                    self.counters.lost += 1
                    self.errors.append(f"{item.request.method} {item.request.path}: not recorded")

    def _tokenizer(self, model: str | None) -> CachedTokenizer:
        return tokenizers.get_or_default(self.tokenizer_name or tokenizers.for_model(model))

    def _emit(self, events: Sequence[Event], placement: Placement | None) -> None:
        for event in events:
            if placement is not None:
                event = event.replace(task_id=placement.task_id)
            self.recorder.emit(event)

    def _record(self, ex: LLMExchange) -> None:
        if ex.api == COUNT_TOKENS:
            self.counters.count_tokens += 1
            return
        self.counters.calls += 1
        outcome = ex.outcome
        assert outcome is not None
        try:
            body = bounded_json(ex.request.body)
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
            request = client = parse_request(ex.api, body)
            if ex.rewritten is not None and ex.rewritten.changed(ex.request.body):
                from promcp.proxy.llm._rewrite import forwarded_request

                request = forwarded_request(ex.api, ex.rewritten)  # what the model read
        except (ValueError, TypeError, AttributeError) as exc:
            self._unparsed(ex, f"request body is not a {ex.api} request: {exc}")
            return
        if ex.api == "gemini":  # the model and streaming are in the path
            for req in {id(request): request, id(client): client}.values():
                req.model = req.model or gemini.model_of_path(ex.request.path)
                req.stream = ":streamGenerateContent" in ex.request.path
        if request.side_call is not None:
            self._side_call(ex, request)
            return
        session = next((v for h in SESSION_HEADERS if (v := ex.request.header(h))), None)
        placement = self.conversations.place(
            session,
            conversation_blocks(ex.api, body),
            previous_response_id=_str(body.get("previous_response_id")),
        )
        self.counters.by_task[placement.task_id] = self.counters.by_task.get(placement.task_id, 0) + 1
        if placement.answered:
            self._emit(self._tool_events(ex, request, placement), placement)
        output, failure, attrs_out = self._output(ex)
        if failure is not None:
            self.counters.failed += 1
        elif output is not None and output.tool_calls:
            attrs_out["tool_calls"] = tool_calls_attr(output.tool_calls)
        tokenizer = self._tokenizer(request.model)
        end = outcome.end
        if _closed_after_end(ex) and ex.last_byte is not None:
            end = (
                ex.last_byte
            )  # the call ended when its last byte reached the client, not when the socket closed
        call = LLMCall(
            provider=_PROVIDERS.get(ex.api),
            model=request.model,
            round=placement.round,
            start=ex.request.received,
            end=end,
            tokenizer=tokenizer,
            pieces=request.pieces,
            schema_keys=_schema_keys(request, ex.api, self.mcp_servers),
            n_tools=request.n_tools,
            output=output,
            prompt_ms=ex.request.received.ms_to(ex.first_byte) if ex.first_byte is not None else None,
            failure=failure,
            put_text=self.recorder.put_text if self.recorder.capture_content else None,
            attrs_in=self._attrs_in(ex, request, placement, session, tokenizer),
            attrs_out=attrs_out,
        )
        if ex.rewritten is not None:
            from promcp.proxy.llm._rewrite import rewrite_attrs

            call.attrs_in = {**(call.attrs_in or {}), **rewrite_attrs(call, client, ex.rewritten)}
        self._emit(llm_call_events(call), placement)
        ok = failure is None and output is not None
        self.conversations.answered(
            placement,
            ok=ok,
            tool_calls=output.tool_calls if output is not None else (),
            end=end,
            response_id=output.response_id if output is not None else None,
        )

    def _side_call(self, ex: LLMExchange, request: ChatRequest) -> None:
        """A helper call beside the task (``ChatRequest.side_call``): its own S1 and S2/S6, in no task and no
        conversation, ``attrs.side_call`` saying what it is."""
        self.counters.side_calls += 1
        outcome = ex.outcome
        assert outcome is not None
        output, failure, attrs_out = self._output(ex)
        if failure is not None:
            self.counters.failed += 1
        mark = {"side_call": request.side_call}
        call = LLMCall(
            provider=_PROVIDERS.get(ex.api),
            model=request.model,
            round=1,
            start=ex.request.received,
            end=outcome.end,
            tokenizer=self._tokenizer(request.model),
            pieces=request.pieces,
            output=output,
            prompt_ms=ex.request.received.ms_to(ex.first_byte) if ex.first_byte is not None else None,
            failure=failure,
            put_text=self.recorder.put_text if self.recorder.capture_content else None,
            attrs_in={
                "api": ex.api,
                "path": ex.request.path,
                "stream": request.stream,
                "request_bytes": len(ex.request.body),
                **mark,
            },
            attrs_out={**attrs_out, **mark},
        )
        self._emit(llm_call_events(call), None)

    def _attrs_in(
        self,
        ex: LLMExchange,
        request: ChatRequest,
        placement: Placement,
        session: str | None,
        tokenizer: CachedTokenizer,
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "api": ex.api,
            "path": ex.request.path,
            "stream": request.stream,
            "conversation": placement.conversation,
            "request_bytes": len(ex.request.body),
        }
        if session:
            attrs["client_session"] = session
        if placement.parent_task:
            attrs["parent_task"] = placement.parent_task
        if placement.retry:
            attrs["retry"] = True
        if request.deferred_tools:
            attrs["deferred_tools"] = len(request.deferred_tools)
            attrs["deferred_not_loaded"] = [p.key for p in request.deferred]
            attrs["deferred_schema_tokens"] = sum(tokenizer.count(p.text) for p in request.deferred)
        announced = _announced_mcp_tools(request)
        if announced:
            attrs["deferred_mcp_tools"] = announced
        if request.loaded:
            attrs["loaded_tools"] = list(request.loaded)
        if request.tool_search:
            attrs["tool_search"] = list(request.tool_search)
        return attrs

    def _output(self, ex: LLMExchange) -> tuple[Output | None, Failure | None, dict[str, Any]]:
        """The response as an Output, or why there is none."""
        outcome = ex.outcome
        assert outcome is not None
        head = ex.response_head
        attrs: dict[str, Any] = {"response_bytes": outcome.bytes_to_client}
        if outcome.status is not None:
            attrs["http_status"] = outcome.status
        if head is not None:
            request_id = head.header("request-id") or head.header("x-request-id")
            if request_id:
                attrs["request_id"] = request_id
        if ex.first_byte is not None:
            attrs["ttfb_ms"] = round(ex.request.received.ms_to(ex.first_byte), 3)
        error = outcome.error
        if _closed_after_end(ex):
            attrs["client_closed_before_terminator"] = True  # recorded whole: the client had every byte
            error = None
        elif error == "client_disconnected":
            return None, Failure(Status.CANCELLED, "client_disconnected", outcome.message, attrs), attrs
        if error is not None and (head is None or error != "upstream_cut"):
            return None, Failure.of(error, outcome.message, **attrs), attrs
        status = outcome.status or 0
        if status >= 400:
            retry_after = head.header("retry-after") if head is not None else None
            if retry_after:
                attrs["retry_after"] = retry_after
            message = f"HTTP {status}: {error_message(bytes(ex.body))}"
            return None, Failure.of(http_error_type(status), message, **attrs), attrs
        if ex.decode_error is not None:
            return None, Failure.of("unreadable_response", ex.decode_error, **attrs), attrs
        if ex.stream is not None:
            output = ex.stream.result()
            attrs["stream_frames"] = ex.frames
            if (
                ex.skipped_frames
            ):  # a long stream: its middle counted, not read (promcp/proxy/llm/_exchange.py)
                attrs["stream_frames_not_read"] = ex.skipped_frames
                attrs["stream_bytes_not_read"] = ex.skipped_bytes
            if error == "upstream_cut":
                return None, Failure.of("upstream_cut", outcome.message, **attrs), attrs
            if output.error is not None:
                return None, Failure.of("stream_error", output.error, **attrs), attrs
            return output, None, attrs
        if ex.body_dropped:
            return None, Failure.of("unreadable_response", "response body over the size kept", **attrs), attrs
        try:
            doc = bounded_json(bytes(ex.body))
        except ValueError:
            return None, Failure.of("unreadable_response", "response body is not JSON", **attrs), attrs
        output = parse_response(ex.api, doc)
        if output.error is not None:
            return None, Failure.of("response_error", output.error, **attrs), attrs
        return output, None, attrs

    def _tool_events(self, ex: LLMExchange, request: ChatRequest, placement: Placement) -> list[Event]:
        """S3 / S4 of the tool calls this request answers, derived from the results it carries."""
        results = {p.key: p.text for p in request.pieces if p.origin is Origin.TOOL_RESULTS}
        keys = _result_keys(placement.answered, request)
        since = placement.answered_since or ex.request.received
        events: list[Event] = []
        for call in placement.answered:
            key = keys.get(call.id)
            text = results.get(key) if key is not None else None
            if key is None or text is None:  # not answered in this request (the client dropped it)
                continue
            failed = key in request.failed_results
            mcp = (
                gemini.mcp_tool_of(call.name, self.mcp_servers)
                if ex.api == "gemini"
                else mcp_tool_of(call.name)
            )
            marks = {"derived": "next_request", "client_tool": mcp is None, "llm_tool_name": call.name}
            tc = ToolsCall(
                tool=mcp[1] if mcp else call.name,
                server=mcp[0] if mcp else None,
                start=since,
                end=ex.request.received,
                sent=since,
                received=ex.request.received,
                tokenizer=self.footprint,
                tool_call_id=call.id,
                arguments=call.arguments,
                arguments_text=None if call.arguments or call.raw_arguments is None else call.raw_arguments,
                forwarded_text=text,
                failure=Failure.of("tool_error", text) if failed else None,
                put_text=self.recorder.put_text if self.recorder.capture_content else None,
                attrs={**marks, "args_digest": arguments_digest(call.join_arguments)},
                request_attrs=marks,
                round=placement.answered_round,
                derived=True,  # seen in the next request, not on the wire: S3 untimed, S4 bounded
            )
            events.extend(tools_call_events(tc))
        return events

    def _unparsed(self, ex: LLMExchange, why: str) -> None:
        """A request promcp cannot read: forwarded all the same, recorded without a task."""
        self.counters.unparsed += 1
        outcome = ex.outcome
        assert outcome is not None
        attrs: dict[str, Any] = {
            "api": ex.api,
            "path": ex.request.path,
            "request_bytes": len(ex.request.body),
        }
        if outcome.status is not None:
            attrs["http_status"] = outcome.status
        self.recorder.emit(
            failed_step_event(
                stage=Stage.S1,
                start=ex.request.received,
                end=outcome.end,
                failure=Failure(Status.ERROR, "unparsed_request", why),
                provider=_PROVIDERS.get(ex.api),
                attrs=attrs,
            )
        )


_MCP_NAME = re.compile(r"\bmcp__[A-Za-z0-9_-]+?__[A-Za-z0-9_-]+")


def _announced_mcp_tools(request: ChatRequest) -> list[str]:
    """MCP tools the client names in its system text without sending their definitions: Claude Code lists the
    tools it defers behind ToolSearch by name (``mcp__<server>__<tool>``) in a system message."""
    sent = set(request.tool_names)
    named: dict[str, None] = {}
    for piece in request.pieces:
        if piece.origin is Origin.SYSTEM and "mcp__" in piece.text:
            named.update(dict.fromkeys(m for m in _MCP_NAME.findall(piece.text) if m not in sent))
    return list(named)


def _result_keys(calls: Sequence[ToolCall], request: ChatRequest) -> dict[str, str]:
    """call id → the key of its result in ``request``: the same id, else (a call the model sent without an id, whose
    result the client keyed by an id of its own: Gemini) the first result not taken yet of a function of that name."""
    keys = {p.key for p in request.pieces if p.origin is Origin.TOOL_RESULTS}
    found = {c.id: c.id for c in calls if c.id in keys}
    free = [k for k in request.result_names if k not in found.values()]
    for call in calls:
        if call.id in found:
            continue
        key = next((k for k in free if request.result_names[k] == call.name), None)
        if key is not None:
            found[call.id] = key
            free.remove(key)
    return found


def _schema_keys(request: ChatRequest, api: str, servers: Sequence[str] = ()) -> dict[str, str]:
    """``mcp__server__tool`` (Gemini: ``mcp_server_tool``) → ``server/tool``: the schema part keys the MCP side's
    tool lists use (and a Responses namespace's instructions, ``mcp__server#instructions`` →
    ``server#instructions``)."""
    keys = {}
    for name in request.tool_names:
        mcp = gemini.mcp_tool_of(name, servers) if api == "gemini" else mcp_tool_of(name)
        if mcp is not None:
            keys[name] = f"{mcp[0]}/{mcp[1]}"
    for piece in request.pieces:
        space, sep, _ = piece.key.partition("#")
        if sep and space.startswith("mcp__") and piece.origin is Origin.SCHEMAS:
            keys[piece.key] = f"{space.removeprefix('mcp__')}#instructions"
    return keys


def _closed_after_end(ex: LLMExchange) -> bool:
    """The client closed the connection after it had received the whole response (the zero-loss rule, the same
    for every API family): the call is recorded as answered, not cancelled."""
    outcome = ex.outcome
    return (
        outcome is not None
        and outcome.error == "client_disconnected"
        and (outcome.status or 0) < 400
        and ex.delivered_whole()
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
