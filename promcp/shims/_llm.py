"""LLM client wrappers: S1/S5 (input by origin) and S2/S6 (output) events from user code, and the S2 → S3 join.

One LLM call becomes an input event and an output event with the same ``round`` (docs/accounting.md):

* input: S1 when the prompt holds no assistant turn yet (round 1), S5 otherwise (round = 1 + assistant turns in the
  prompt, unless a :func:`promcp.scope` sets ``round``). ``parts`` split the prompt by origin with the keys the
  accounting rules name: ``system``, schemas ``<server>/<tool>`` (or ``<tool>`` when no MCP server listed it),
  user ``prompt`` (the first user message), history ``msg:<index>``, tool results by tool-call id. Parts are counted
  locally (``tokenizers.for_model(model)``) and, when the provider reports usage, scaled to the provider's input
  total (largest remainder; ``attrs.tokens_in_estimate`` and ``attrs.origin_scale`` keep the local count);
* output: S2 when the model asked for tool calls, S6 when it answered; ``tokens_out`` from provider usage (else
  counted). Latency: input = prefill when the backend reports it (Ollama), else ``None``/``timing_quality="none"``;
  output = the rest of the call.

Every tool call the model makes is remembered as ``(tool name, canonical arguments) → tool-call id``; when the host
then sends the matching MCP ``tools/call`` without a ``scope(tool_call_id=…)``, the MCP shim takes the id from here
(:func:`take_tool_call_id`), so S2, S3 and S4 carry the same ``tool_call_id``.

Supported: the OpenAI Python SDK (``chat.completions.create``, sync and async), the Anthropic Python SDK
(``messages.create``, sync and async) — patched process-wide by ``promcp.instrument(llm=True)`` or per client with
:func:`wrap_openai` / :func:`wrap_anthropic` — and any chat function of the host's own (llama-cpp-python's
``create_chat_completion``, an Ollama ``/api/chat`` call, an OpenAI-compatible HTTP call) via :func:`wrap_chat` or
:func:`record_chat`. Streamed responses (``stream=True``) are recorded when the stream ends, with the time to the
first chunk as the input (prefill) latency.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from promcp.events import Event, Origin, Part, Stage, Status, TimingQuality, TokenSource, scale_parts
from promcp.recorder import Recorder, current_recorder, current_scope
from promcp.shims._footprint import compact_json, tool_text
from promcp.shims._patch import Patches, guard

__all__ = [
    "note_tools",
    "record_chat",
    "take_tool_call_id",
    "wrap_anthropic",
    "wrap_chat",
    "wrap_openai",
]

Wire = Literal["openai", "anthropic", "ollama"]
_MAX_JOIN = 4096


# -- normalized call ------------------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any  # parsed JSON (dict) when possible, else the raw string


@dataclass
class ChatIn:
    """A prompt as (origin, key, text) pieces, plus the model and the offered tool names."""

    provider: str
    model: str | None
    pieces: list[tuple[Origin, str, str]] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    assistant_turns: int = 0


@dataclass
class ChatOut:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    tokens_in: int | None = None  # provider total input (incl. cache read/write)
    tokens_out: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    model: str | None = None
    response_id: str | None = None
    prompt_ms: float | None = None  # prefill, when the backend reports it


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of blocks (text blocks kept, others summarized)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out: list[str] = []
    for block in content:
        if isinstance(block, str):
            out.append(block)
            continue
        kind = _get(block, "type")
        if kind == "text" or (kind is None and _get(block, "text") is not None):
            out.append(str(_get(block, "text") or ""))
        elif kind == "tool_result":
            out.append(_text_of(_get(block, "content")))
        elif kind == "tool_use":
            out.append(compact_json({"name": _get(block, "name"), "input": _get(block, "input")}))
        else:
            out.append(f"[{kind or 'content'} content omitted]")
    return "\n".join(out)


def _parse_args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        arguments = _parse_args(arguments)
    return json.dumps(arguments or {}, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


# -- request parsers --------------------------------------------------------------------------------------------------


def _openai_in(kwargs: Mapping[str, Any], provider: str, model: str | None = None) -> ChatIn:
    """OpenAI chat-completions shape (also llama-cpp-python and Ollama's /api/chat, whose messages match)."""
    chat = ChatIn(provider=provider, model=model or kwargs.get("model"))
    first_user = True
    for index, msg in enumerate(kwargs.get("messages") or ()):
        role = _get(msg, "role")
        text = _text_of(_get(msg, "content"))
        calls = _get(msg, "tool_calls") or ()
        if calls:
            text += compact_json(
                [
                    {
                        "name": _get(_get(c, "function") or {}, "name"),
                        "arguments": _get(_get(c, "function"), "arguments"),
                    }
                    for c in calls
                ]
            )
        if role in ("system", "developer"):
            chat.pieces.append((Origin.SYSTEM, "system", text))
        elif role == "tool":
            chat.pieces.append((Origin.TOOL_RESULTS, str(_get(msg, "tool_call_id") or f"msg:{index}"), text))
        elif role == "user" and first_user:
            first_user = False
            chat.pieces.append((Origin.USER, "prompt", text))
        else:
            if role == "assistant":
                chat.assistant_turns += 1
            chat.pieces.append((Origin.HISTORY, f"msg:{index}", text))
    for tool in kwargs.get("tools") or ():
        fn = _get(tool, "function") or tool
        name = str(_get(fn, "name"))
        chat.tool_names.append(name)
        chat.pieces.append(
            (Origin.SCHEMAS, name, tool_text(name, _get(fn, "description"), _get(fn, "parameters")))
        )
    return chat


def _anthropic_in(kwargs: Mapping[str, Any], provider: str = "anthropic") -> ChatIn:
    chat = ChatIn(provider=provider, model=kwargs.get("model"))
    system = kwargs.get("system")
    if system:
        chat.pieces.append((Origin.SYSTEM, "system", _text_of(system)))
    first_user = True
    for index, msg in enumerate(kwargs.get("messages") or ()):
        role = _get(msg, "role")
        content = _get(msg, "content")
        if role == "user" and not isinstance(content, str):
            results = [b for b in content or () if _get(b, "type") == "tool_result"]
            others = [b for b in content or () if _get(b, "type") != "tool_result"]
            for block in results:
                chat.pieces.append(
                    (Origin.TOOL_RESULTS, str(_get(block, "tool_use_id")), _text_of(_get(block, "content")))
                )
            if not others:
                continue
            content = others
        text = _text_of(content)
        if role == "user" and first_user:
            first_user = False
            chat.pieces.append((Origin.USER, "prompt", text))
        else:
            if role == "assistant":
                chat.assistant_turns += 1
            chat.pieces.append((Origin.HISTORY, f"msg:{index}", text))
    for tool in kwargs.get("tools") or ():
        name = str(_get(tool, "name"))
        chat.tool_names.append(name)
        chat.pieces.append(
            (Origin.SCHEMAS, name, tool_text(name, _get(tool, "description"), _get(tool, "input_schema")))
        )
    return chat


# -- response parsers -------------------------------------------------------------------------------------------------


def _openai_out(resp: Any) -> ChatOut:
    choice = (_get(resp, "choices") or [None])[0]
    message = _get(choice, "message") or {}
    out = ChatOut(
        text=_text_of(_get(message, "content")),
        finish_reason=_get(choice, "finish_reason"),
        model=_get(resp, "model"),
        response_id=_get(resp, "id"),
    )
    for i, c in enumerate(_get(message, "tool_calls") or ()):
        fn = _get(c, "function") or {}
        out.tool_calls.append(
            ToolCall(
                str(_get(c, "id") or f"call_{i}"), str(_get(fn, "name")), _parse_args(_get(fn, "arguments"))
            )
        )
    usage = _get(resp, "usage")
    if usage is not None:
        out.tokens_in = _get(usage, "prompt_tokens")
        out.tokens_out = _get(usage, "completion_tokens")
        details = _get(usage, "prompt_tokens_details")
        if details is not None:
            out.cache_read = _get(details, "cached_tokens")
    return out


def _anthropic_out(resp: Any) -> ChatOut:
    out = ChatOut(
        finish_reason=_get(resp, "stop_reason"), model=_get(resp, "model"), response_id=_get(resp, "id")
    )
    texts: list[str] = []
    for block in _get(resp, "content") or ():
        kind = _get(block, "type")
        if kind == "tool_use":
            out.tool_calls.append(
                ToolCall(str(_get(block, "id")), str(_get(block, "name")), _get(block, "input"))
            )
        elif kind == "text":
            texts.append(str(_get(block, "text") or ""))
    out.text = "\n".join(texts)
    usage = _get(resp, "usage")
    if usage is not None:
        plain = _get(usage, "input_tokens")
        out.cache_read = _get(usage, "cache_read_input_tokens")
        out.cache_write = _get(usage, "cache_creation_input_tokens")
        if plain is not None:
            out.tokens_in = plain + (out.cache_read or 0) + (out.cache_write or 0)
        out.tokens_out = _get(usage, "output_tokens")
    return out


_ollama_seq = iter(range(1, 1 << 62))


def _ollama_out(resp: Any) -> ChatOut:
    """Ollama ``/api/chat`` (non-streaming): prompt_eval_count/eval_count and the prefill duration in ns."""
    message = _get(resp, "message") or {}
    out = ChatOut(
        text=_text_of(_get(message, "content")),
        finish_reason=_get(resp, "done_reason"),
        model=_get(resp, "model"),
        tokens_in=_get(resp, "prompt_eval_count"),
        tokens_out=_get(resp, "eval_count"),
    )
    prefill = _get(resp, "prompt_eval_duration")
    if isinstance(prefill, int | float):
        out.prompt_ms = prefill / 1e6
    for c in _get(message, "tool_calls") or ():
        fn = _get(c, "function") or {}
        call_id = _get(c, "id") or f"ollama-{next(_ollama_seq)}"  # older Ollama versions give no ids
        out.tool_calls.append(
            ToolCall(str(call_id), str(_get(fn, "name")), _parse_args(_get(fn, "arguments")))
        )
    if out.tool_calls and out.finish_reason in (None, "stop"):
        out.finish_reason = "tool_calls"
    return out


_REQUEST: dict[Wire, Callable[[Mapping[str, Any], str, str | None], ChatIn]] = {
    "openai": _openai_in,
    "ollama": _openai_in,
    "anthropic": lambda kw, provider, _model: _anthropic_in(kw, provider),
}
_RESPONSE: dict[Wire, Callable[[Any], ChatOut]] = {
    "openai": _openai_out,
    "ollama": _ollama_out,
    "anthropic": _anthropic_out,
}


# -- streamed responses -------------------------------------------------------------------------------------------------


class _OpenAIStream:
    """Folds chat-completion chunks (``delta`` content and tool-call fragments, the final ``usage`` chunk)."""

    def __init__(self) -> None:
        self.out = ChatOut()
        self.texts: list[str] = []
        self.calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]

    def feed(self, chunk: Any) -> None:
        self.out.model = _get(chunk, "model") or self.out.model
        self.out.response_id = _get(chunk, "id") or self.out.response_id
        for choice in _get(chunk, "choices") or ():
            if _get(choice, "index", 0) != 0:
                continue
            delta = _get(choice, "delta") or {}
            if _get(delta, "content"):
                self.texts.append(str(_get(delta, "content")))
            for tc in _get(delta, "tool_calls") or ():
                slot = self.calls.setdefault(int(_get(tc, "index", 0) or 0), ["", "", ""])
                fn = _get(tc, "function") or {}
                slot[0] = str(_get(tc, "id") or slot[0])
                slot[1] = slot[1] or str(_get(fn, "name") or "")
                slot[2] += str(_get(fn, "arguments") or "")
            self.out.finish_reason = _get(choice, "finish_reason") or self.out.finish_reason
        usage = _get(chunk, "usage")
        if usage is not None:
            self.out.tokens_in = _get(usage, "prompt_tokens")
            self.out.tokens_out = _get(usage, "completion_tokens")
            details = _get(usage, "prompt_tokens_details")
            if details is not None:
                self.out.cache_read = _get(details, "cached_tokens")

    def result(self) -> ChatOut:
        self.out.text = "".join(self.texts)
        self.out.tool_calls = [
            ToolCall(cid or f"call_{i}", name, _parse_args(args))
            for i, (cid, name, args) in sorted(self.calls.items())
        ]
        return self.out


class _AnthropicStream:
    """Folds Messages API stream events (message_start usage, content blocks, input_json deltas, message_delta)."""

    def __init__(self) -> None:
        self.out = ChatOut()
        self.texts: list[str] = []
        self.tools: dict[int, list[str]] = {}  # index -> [id, name, json so far]
        self.plain_in: int | None = None

    def feed(self, event: Any) -> None:
        kind = _get(event, "type")
        if kind == "message_start":
            msg = _get(event, "message") or {}
            self.out.model, self.out.response_id = _get(msg, "model"), _get(msg, "id")
            usage = _get(msg, "usage") or {}
            self.plain_in = _get(usage, "input_tokens")
            self.out.cache_read = _get(usage, "cache_read_input_tokens")
            self.out.cache_write = _get(usage, "cache_creation_input_tokens")
            self.out.tokens_out = _get(usage, "output_tokens")
        elif kind == "content_block_start":
            block = _get(event, "content_block") or {}
            if _get(block, "type") == "tool_use":
                self.tools[int(_get(event, "index", 0) or 0)] = [
                    str(_get(block, "id")),
                    str(_get(block, "name")),
                    "",
                ]
            elif _get(block, "type") == "text" and _get(block, "text"):
                self.texts.append(str(_get(block, "text")))
        elif kind == "content_block_delta":
            delta = _get(event, "delta") or {}
            if _get(delta, "type") == "text_delta":
                self.texts.append(str(_get(delta, "text") or ""))
            elif _get(delta, "type") == "input_json_delta":
                slot = self.tools.get(int(_get(event, "index", 0) or 0))
                if slot is not None:
                    slot[2] += str(_get(delta, "partial_json") or "")
        elif kind == "message_delta":
            self.out.finish_reason = _get(_get(event, "delta") or {}, "stop_reason") or self.out.finish_reason
            usage = _get(event, "usage")
            if usage is not None and _get(usage, "output_tokens") is not None:
                self.out.tokens_out = _get(usage, "output_tokens")

    def result(self) -> ChatOut:
        self.out.text = "".join(self.texts)
        self.out.tool_calls = [
            ToolCall(cid, name, _parse_args(args or "{}"))
            for _i, (cid, name, args) in sorted(self.tools.items())
        ]
        if self.plain_in is not None:
            self.out.tokens_in = self.plain_in + (self.out.cache_read or 0) + (self.out.cache_write or 0)
        return self.out


class _OllamaStream:
    """Folds Ollama ``/api/chat`` stream objects (content pieces; counts and durations on the ``done`` object)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[Any] = []
        self.last: Any = None

    def feed(self, chunk: Any) -> None:
        message = _get(chunk, "message") or {}
        if _get(message, "content"):
            self.texts.append(str(_get(message, "content")))
        self.calls.extend(_get(message, "tool_calls") or ())
        if _get(chunk, "done"):
            self.last = chunk

    def result(self) -> ChatOut:
        final = dict(self.last) if isinstance(self.last, Mapping) else {}
        final["message"] = {"content": "".join(self.texts), "tool_calls": self.calls}
        out = _ollama_out(final)
        out.prompt_ms = None  # the stream's first chunk is measured instead
        return out


_STREAMS: dict[Wire, Callable[[], Any]] = {
    "openai": _OpenAIStream,
    "anthropic": _AnthropicStream,
    "ollama": _OllamaStream,
}


class _LazyChat:
    """The request, snapshotted on the caller's path (shallow list copies), parsed on the recorder's worker thread.

    Rendering tool schemas and messages to text costs ~1 ms for 50 tools: kept off the call's path like the counting.
    """

    _KEYS = ("model", "messages", "tools", "system")

    def __init__(self, wire: Wire, provider: str, model: str | None, request: Mapping[str, Any]) -> None:
        self.wire, self.provider = wire, provider
        self.snapshot: dict[str, Any] = {
            k: list(v) if isinstance(v, list | tuple) else v for k, v in request.items() if k in self._KEYS
        }
        requested = self.snapshot.get("model")
        self.model: str | None = model or (str(requested) if requested is not None else None)
        self._parsed: ChatIn | None = None

    def get(self) -> ChatIn:
        if self._parsed is None:
            self._parsed = _REQUEST[self.wire](self.snapshot, self.provider, self.model)
        return self._parsed


# -- tool-call join ---------------------------------------------------------------------------------------------------


class _Join:
    """(tool name, canonical arguments) → tool-call ids the model produced, oldest first (bounded).

    ``take`` runs on the MCP call's path: it serializes the arguments only when the model has a pending call of
    that tool name (a dict lookup otherwise).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: OrderedDict[tuple[str, str], deque[str]] = OrderedDict()
        self.names: dict[str, int] = {}  # tool name -> pending keys with that name
        self.servers: dict[str, str] = {}

    def add(self, name: str, arguments: Any, call_id: str) -> None:
        key = (name, _canonical(arguments))
        with self.lock:
            if key not in self.calls:
                self.names[name] = self.names.get(name, 0) + 1
            self.calls.setdefault(key, deque()).append(call_id)
            self.calls.move_to_end(key)
            while len(self.calls) > _MAX_JOIN:
                self._drop(self.calls.popitem(last=False)[0])

    def _drop(self, key: tuple[str, str]) -> None:
        left = self.names.get(key[0], 0) - 1
        if left > 0:
            self.names[key[0]] = left
        else:
            self.names.pop(key[0], None)

    def take(self, name: str, arguments: Any) -> str | None:
        if name not in self.names:  # no lock: a stale read only delays the join to the next lookup
            return None
        key = (name, _canonical(arguments))
        with self.lock:
            ids = self.calls.get(key)
            if not ids:
                return None
            call_id = ids.popleft()
            if not ids:
                del self.calls[key]
                self._drop(key)
            return call_id

    def clear(self) -> None:
        with self.lock:
            self.calls.clear()
            self.names.clear()
            self.servers.clear()


_join = _Join()


def take_tool_call_id(tool: str, arguments: Mapping[str, Any] | None) -> str | None:
    """The id of the model's pending tool call with this name and these arguments (consumed), or None."""
    return _join.take(tool, arguments)


def note_tools(server: str, tools: Sequence[str]) -> None:
    """Remember which MCP server offers which tool, so schema parts get ``<server>/<tool>`` keys."""
    with _join.lock:
        for name in tools:
            _join.servers[name] = server


# -- events -----------------------------------------------------------------------------------------------------------


@dataclass
class _Clock:
    wall_ns: int
    mono_ns: int

    @classmethod
    def now(cls) -> _Clock:
        return cls(time.time_ns(), time.perf_counter_ns())


_tokenizer_cache: dict[str | None, Any] = {}


def _tokenizer_for(model: str | None) -> Any:
    """The model's own tokenizer when promcp knows it, else the footprint tokenizer ``instrument()`` was given."""
    tok = _tokenizer_cache.get(model)
    if tok is not None:
        return tok
    from promcp import tokenizers
    from promcp.errors import TokenizerError

    try:
        tok = tokenizers.get(tokenizers.for_model(model, default="")) if model else None
    except TokenizerError:  # e.g. a .gguf label whose file is not here: fall back, do not lose the event
        tok = None
    if tok is None:
        from promcp.shims import _mcp

        tok = getattr(getattr(_mcp, "settings", None), "tokenizer", None) or tokenizers.get("o200k_base")
    _tokenizer_cache[model] = tok
    return tok


def _span_start(chat: _LazyChat) -> Any:
    try:
        from promcp.shims import _spans

        tracer = getattr(_spans, "_tracer", None)
    except ImportError:  # pragma: no cover - the MCP side is optional for LLM wrappers
        tracer = None
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind

    return tracer.start_span(
        f"chat {chat.model}" if chat.model else "chat",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": chat.provider,
            **({"gen_ai.request.model": chat.model} if chat.model else {}),
        },
    )


def _ids(span: Any) -> dict[str, Any]:
    if span is None:
        return {}
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return {}
    parent = getattr(span, "parent", None)
    return {
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": f"{parent.span_id:016x}" if parent is not None else None,
    }


def _emit(
    rec: Recorder,
    lazy: _LazyChat,
    out: ChatOut | None,
    start: _Clock,
    end: _Clock,
    span: Any,
    exc: BaseException | None,
) -> None:
    _drain_mcp()  # MCP events still waiting for their hand-off come first (journal order = call order)
    scope_round = current_scope().round
    model = (out.model if out else None) or lazy.model
    provider = lazy.provider
    ids = _ids(span)
    total_ms = (end.mono_ns - start.mono_ns) / 1e6
    for tc in out.tool_calls if out else ():
        _join.add(tc.name, tc.arguments, tc.id)
    with _join.lock:
        servers = dict(_join.servers)
    if span is not None:
        _end_span(span, out, exc)

    def round_of(chat: ChatIn) -> int:
        return scope_round or chat.assistant_turns + 1

    def build_in() -> Event:
        chat = lazy.get()
        rnd = round_of(chat)
        stage_in = Stage.S1 if rnd == 1 else Stage.S5
        tok = _tokenizer_for(chat.model)
        parts = []
        for origin, key, text in chat.pieces:
            if origin is Origin.SCHEMAS and key in servers:
                key = f"{servers[key]}/{key}"
            parts.append(Part(origin, key, tok.count(text)))
        local = sum(p.tokens for p in parts)
        attrs: dict[str, Any] = {"n_tools": len(chat.tool_names), "source": "instrument"}
        token_source = tok.source
        if out is not None and out.tokens_in is not None:
            token_source = TokenSource.PROVIDER
            if out.tokens_in != local:
                attrs["tokens_in_estimate"] = local
                attrs["origin_scale"] = round(out.tokens_in / local, 6) if local else None
                parts = scale_parts(parts, out.tokens_in)
        if out is not None and (out.cache_read or out.cache_write):
            attrs["cache_read_tokens"] = out.cache_read
            attrs["cache_write_tokens"] = out.cache_write
        prompt_ms = out.prompt_ms if out is not None else None
        if prompt_ms is not None:
            prompt_ms = min(prompt_ms, total_ms)
        split = start.wall_ns + int((prompt_ms or 0.0) * 1e6)
        status, error_type = (Status.OK, None) if exc is None else _failure(exc)
        return Event(
            stage=stage_in,
            round=rnd,
            model=model,
            provider=provider,
            parts=parts,
            token_source=token_source,
            tokenizer=tok.name,
            t_start_ns=start.wall_ns,
            t_end_ns=split if prompt_ms is not None else start.wall_ns,
            latency_ms=prompt_ms,
            timing_quality=TimingQuality.EXACT if prompt_ms is not None else TimingQuality.NONE,
            status=status,
            error_type=error_type,
            attrs=attrs,
            **ids,
        )

    rec.emit_later(build_in)

    def build_out() -> Event:
        chat = lazy.get()
        rnd = round_of(chat)
        attrs: dict[str, Any] = {"source": "instrument"}
        if exc is not None or out is None:
            status, error_type = _failure(exc) if exc is not None else (Status.ERROR, "unparsed_response")
            return Event(
                stage=Stage.S6,
                round=rnd,
                model=model,
                provider=provider,
                t_start_ns=start.wall_ns,
                t_end_ns=max(end.wall_ns, start.wall_ns),
                latency_ms=total_ms,
                status=status,
                error_type=error_type,
                resp_preview=f"{type(exc).__name__}: {exc}" if exc is not None else None,
                attrs=attrs,
                **ids,
            )
        calls = out.tool_calls
        stage_out = Stage.S2 if calls else Stage.S6
        attrs["finish_reason"] = out.finish_reason
        if out.response_id:
            attrs["response_id"] = out.response_id
        if len(calls) > 1:
            attrs["tool_call_ids"] = [c.id for c in calls]
        text = (
            json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)
            if calls
            else out.text
        )
        tok = _tokenizer_for(chat.model)
        tokens_out, source = out.tokens_out, TokenSource.PROVIDER
        if tokens_out is None:
            tokens_out, source = tok.count(text), tok.source
        if stage_out is Stage.S6:
            attrs["content"] = rec.put_text("answer", text)
        prompt_ms = min(out.prompt_ms, total_ms) if out.prompt_ms is not None else None
        split = start.wall_ns + int((prompt_ms or 0.0) * 1e6)
        return Event(
            stage=stage_out,
            round=rnd,
            model=model,
            provider=provider,
            tokens_out=tokens_out,
            token_source=source,
            tokenizer=tok.name,
            t_start_ns=split,
            t_end_ns=max(end.wall_ns, split),
            latency_ms=max(total_ms - (prompt_ms or 0.0), 0.0),
            tool_call_id=calls[0].id if calls else None,
            tool=calls[0].name if calls else None,
            resp_preview=text,
            attrs=attrs,
            **ids,
        )

    rec.emit_later(build_out)


def _drain_mcp() -> None:
    from promcp.shims import _mcp

    drain = getattr(_mcp, "drain", None)
    if drain is not None:
        drain()


def _failure(exc: BaseException) -> tuple[Status, str]:
    name = type(exc).__name__
    if "timeout" in name.lower():
        return Status.TIMEOUT, "timeout"
    if "cancel" in name.lower():
        return Status.CANCELLED, "cancelled"
    return Status.ERROR, name


def _end_span(span: Any, out: ChatOut | None, exc: BaseException | None) -> None:
    from opentelemetry.trace import StatusCode

    attrs: dict[str, Any] = {}
    if out is not None:
        if out.model:
            attrs["gen_ai.response.model"] = out.model
        if out.response_id:
            attrs["gen_ai.response.id"] = out.response_id
        if out.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = [str(out.finish_reason)]
        if out.tokens_in is not None:
            attrs["gen_ai.usage.input_tokens"] = out.tokens_in
        if out.tokens_out is not None:
            attrs["gen_ai.usage.output_tokens"] = out.tokens_out
        if out.cache_read:
            attrs["gen_ai.usage.cache_read.input_tokens"] = out.cache_read
        if out.cache_write:
            attrs["gen_ai.usage.cache_creation.input_tokens"] = out.cache_write
        attrs["promcp.stage"] = "S2" if out.tool_calls else "S6"
        if out.tool_calls:
            attrs["gen_ai.tool.call.id"] = out.tool_calls[0].id
    if exc is not None:
        attrs["error.type"] = type(exc).__name__
        span.set_status(StatusCode.ERROR, str(exc))
    span.set_attributes(attrs)
    span.end()


# -- wrapping ---------------------------------------------------------------------------------------------------------


def record_chat(
    *,
    provider: str,
    request: Mapping[str, Any],
    response: Any = None,
    error: BaseException | None = None,
    wire: Wire = "openai",
    model: str | None = None,
    started_ns: int | None = None,
    ended_ns: int | None = None,
    recorder: Recorder | None = None,
) -> None:
    """Record one chat call the host made itself (``request`` = the keyword arguments / JSON body it sent).

    ``wire`` names the request/response shape: ``openai`` (also llama-cpp-python's ``create_chat_completion`` and
    any OpenAI-compatible server), ``ollama`` (``/api/chat``), ``anthropic``. ``started_ns``/``ended_ns`` are
    ``time.perf_counter_ns()`` readings around the call (default: now, i.e. no latency).
    """
    rec = recorder or current_recorder()
    if rec is None:
        return
    now_mono, now_wall = time.perf_counter_ns(), time.time_ns()
    end_mono = ended_ns if ended_ns is not None else now_mono
    start_mono = started_ns if started_ns is not None else end_mono
    start = _Clock(now_wall - (now_mono - start_mono), start_mono)
    end = _Clock(now_wall - (now_mono - end_mono), end_mono)
    out = _RESPONSE[wire](response) if response is not None and error is None else None
    _emit(rec, _LazyChat(wire, provider, model, request), out, start, end, None, error)


def _begin(wire: Wire, provider: str, model: str | None, kwargs: Mapping[str, Any]) -> tuple[_LazyChat, Any]:
    chat = _LazyChat(wire, provider, model, kwargs)
    return chat, guard(_span_start, chat)


def _done(
    rec: Recorder, wire: Wire, pre: tuple[_LazyChat, Any], start: _Clock, resp: Any, exc: BaseException | None
) -> None:
    chat, span = pre
    out = _RESPONSE[wire](resp) if exc is None else None
    _emit(rec, chat, out, start, _Clock.now(), span, exc)


def wrap_chat(
    fn: Callable[..., Any], *, provider: str, wire: Wire = "openai", model: str | None = None
) -> Callable[..., Any]:
    """Wrap a chat function (sync or async) whose keyword arguments are the request and whose return value is the
    response in ``wire`` shape. With ``stream=True`` the caller gets a proxy of the stream: the call is recorded when
    the stream ends, and the time to the first chunk splits it into input (prefill) and output latency."""
    if getattr(fn, "__promcp_wrapped__", False):
        return fn

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = current_recorder()
            if rec is None:
                return await fn(*args, **kwargs)
            pre = guard(_begin, wire, provider, model, kwargs)
            start = _Clock.now()
            try:
                resp = await fn(*args, **kwargs)
            except BaseException as exc:
                if pre is not None:
                    guard(_done, rec, wire, pre, start, None, exc)
                raise
            return _after(rec, wire, pre, start, resp, bool(kwargs.get("stream")))

        async_wrapper.__promcp_wrapped__ = True  # type: ignore[attr-defined]
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = current_recorder()
        if rec is None:
            return fn(*args, **kwargs)
        pre = guard(_begin, wire, provider, model, kwargs)
        start = _Clock.now()
        stream = bool(kwargs.get("stream"))
        try:
            resp = fn(*args, **kwargs)
        except BaseException as exc:
            if pre is not None:
                guard(_done, rec, wire, pre, start, None, exc)
            raise
        if inspect.isawaitable(resp):  # an async SDK method behind a sync decorator: record when awaited
            return _finish_later(resp, rec, wire, pre, start, stream)
        return _after(rec, wire, pre, start, resp, stream)

    wrapper.__promcp_wrapped__ = True  # type: ignore[attr-defined]
    return wrapper


async def _finish_later(
    awaitable: Any, rec: Recorder, wire: Wire, pre: tuple[_LazyChat, Any] | None, start: _Clock, stream: bool
) -> Any:
    try:
        resp = await awaitable
    except BaseException as exc:
        if pre is not None:
            guard(_done, rec, wire, pre, start, None, exc)
        raise
    return _after(rec, wire, pre, start, resp, stream)


def _after(
    rec: Recorder, wire: Wire, pre: tuple[_LazyChat, Any] | None, start: _Clock, resp: Any, stream: bool
) -> Any:
    """Record a complete response now, or hand back a proxy that records the stream when it ends."""
    if pre is None:
        return resp
    if not stream:
        guard(_done, rec, wire, pre, start, resp, None)
        return resp
    proxy = guard(_stream_proxy, rec, wire, pre, start, resp)
    return proxy if proxy is not None else resp


def _stream_proxy(rec: Recorder, wire: Wire, pre: tuple[_LazyChat, Any], start: _Clock, resp: Any) -> Any:
    from promcp.shims._llmstream import AsyncStream, SyncStream

    acc = _STREAMS[wire]()
    lazy, span = pre

    def finish(first_ns: int | None, error: BaseException | None) -> None:
        out = acc.result()
        if first_ns is not None:  # time to first chunk = the measured prefill split of the call
            out.prompt_ms = (first_ns - start.mono_ns) / 1e6
        _emit(rec, lazy, out, start, _Clock.now(), span, error)

    cls = AsyncStream if hasattr(resp, "__anext__") else SyncStream
    return cls(resp, acc.feed, finish)


def _provider_of(client: Any, default: str) -> str:
    """``openai`` for api.openai.com; else the base URL's host (an OpenAI-compatible server is not OpenAI)."""
    base = str(getattr(client, "base_url", "") or "")
    if not base or "api.openai.com" in base or "api.anthropic.com" in base:
        return default
    from urllib.parse import urlsplit

    return urlsplit(base).hostname or default


def wrap_openai(client: Any) -> Any:
    """Record this OpenAI (or AsyncOpenAI) client's ``chat.completions.create`` calls; returns the client."""
    completions = client.chat.completions
    completions.create = wrap_chat(completions.create, provider=_provider_of(client, "openai"), wire="openai")
    return client


def wrap_anthropic(client: Any) -> Any:
    """Record this Anthropic (or AsyncAnthropic) client's ``messages.create`` calls; returns the client."""
    messages = client.messages
    messages.create = wrap_chat(messages.create, provider="anthropic", wire="anthropic")
    return client


def _patch_method(patches: Patches, cls: Any, wire: Wire, provider: str) -> None:
    """Patch ``cls.create`` (an SDK resource class) so every instance's calls are recorded."""
    orig = cls.__dict__["create"]
    # the SDKs' async create() sits behind a sync decorator (required_args): decide by the class, not by inspect
    is_async = inspect.iscoroutinefunction(orig) or cls.__name__.startswith("Async")

    def owner_provider(self: Any) -> str:
        client = getattr(self, "_client", None)
        return _provider_of(client, provider) if client is not None else provider

    if is_async:

        @functools.wraps(orig)
        async def acreate(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = wrap_chat(functools.partial(_acall, orig, self), provider=owner_provider(self), wire=wire)
            return await bound(*args, **kwargs)

        patches.set(cls, "create", acreate)
    else:

        @functools.wraps(orig)
        def create(self: Any, *args: Any, **kwargs: Any) -> Any:
            return wrap_chat(functools.partial(orig, self), provider=owner_provider(self), wire=wire)(
                *args, **kwargs
            )

        patches.set(cls, "create", create)


async def _acall(orig: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    return await orig(self, *args, **kwargs)


def install(patches: Patches) -> None:
    """Patch the OpenAI and Anthropic SDKs when installed, and plug the tool-call join into the MCP shim."""
    if importlib.util.find_spec("openai") is not None:
        from openai.resources.chat import completions as oc

        _patch_method(patches, oc.Completions, "openai", "openai")
        _patch_method(patches, oc.AsyncCompletions, "openai", "openai")
    if importlib.util.find_spec("anthropic") is not None:
        from anthropic.resources import messages as am

        _patch_method(patches, am.Messages, "anthropic", "anthropic")
        _patch_method(patches, am.AsyncMessages, "anthropic", "anthropic")
    from promcp.shims import _mcp

    if hasattr(_mcp, "tool_call_lookup"):
        patches.set(_mcp, "tool_call_lookup", take_tool_call_id)


def reset() -> None:
    """Forget pending tool calls, tool→server names and tokenizer choices (uninstrument)."""
    _join.clear()
    _tokenizer_cache.clear()
