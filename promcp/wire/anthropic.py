"""The Anthropic Messages API, ``POST /v1/messages``.

Request: ``system`` (a string or a list of text blocks, ``cache_control`` marks ignored), ``messages`` alternating
user/assistant whose content is a string or blocks — the model's calls are ``tool_use`` blocks in assistant turns,
their results ``tool_result`` blocks in the next user turn — and ``tools`` as ``{name, description, input_schema}``
(server tools such as web search have a ``type`` and no schema). The prompt is rendered tools → system → messages
(also the cache-prefix order), and the pieces follow it.

What clients such as Claude Code add, and where it goes: a ``system`` message inside ``messages`` (the environment
and the list of deferred tools) and ``<system-reminder>`` text blocks in user turns are ``system`` pieces (keys
``msg:<index>`` and ``reminder:<index>``), not history or the user's prompt; a tool with ``defer_loading: true`` is
not in the prompt (``ChatRequest.deferred``) until a ``tool_reference`` block of a tool search result names it,
from then on it is a schema piece; the tool-search tools (a ``tool_search_tool_*`` server tool, or a client tool
named ``ToolSearch`` / ``tool_search``) are listed in ``ChatRequest.tool_search``.
Response: ``content`` blocks (``text``, ``tool_use``, ``thinking``…), ``stop_reason``, ``usage``: ``input_tokens``
counts only the uncached input; ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` come on top (split by
TTL in ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``), so promcp's input total is
their sum; ``output_tokens_details.thinking_tokens`` is the reasoning part of ``output_tokens``.
Stream (SSE): ``message_start`` (id, model, first usage), ``content_block_start`` / ``content_block_delta``
(``text_delta``, ``input_json_delta``, ``thinking_delta``) / ``content_block_stop``, ``message_delta`` (stop reason,
cumulative usage), ``message_stop``, ``ping``, ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promcp.errors import WireFormatError
from promcp.events import Origin
from promcp.wire._common import as_dict, compact_json, count, get, need, opt_int, parse_arguments, text_of
from promcp.wire._types import ChatRequest, Output, Piece, ToolCall, Usage

__all__ = ["MessageStream", "is_tool_search", "parse_request", "parse_response", "parse_usage", "tool_text"]


def tool_text(tool: Any) -> tuple[str, str]:
    """``(name, text)`` of one tool as counted: compact JSON of name, description and ``input_schema`` as sent (a
    server tool without a schema: its whole definition)."""
    name = str(get(tool, "name") or get(tool, "type", ""))
    schema = get(tool, "input_schema")
    if schema is None:
        return name, compact_json({k: v for k, v in as_dict(tool).items() if k != "cache_control"})
    return name, compact_json(
        {"name": name, "description": get(tool, "description", ""), "input_schema": as_dict(schema)}
    )


_TOOL_SEARCH_NAMES = frozenset({"toolsearch", "tool_search"})
_REMINDER = "<system-reminder>"


def is_tool_search(tool: Any) -> bool:
    """Whether ``tool`` searches deferred tools: Anthropic's ``tool_search_tool_*`` server tools, or a client tool
    named ``ToolSearch`` (Claude Code) / ``tool_search``."""
    kind = str(get(tool, "type", ""))
    return kind.startswith("tool_search_tool") or str(get(tool, "name", "")).lower() in _TOOL_SEARCH_NAMES


def _references(messages: Any) -> set[str]:
    """Tool names referenced by ``tool_reference`` blocks of tool results (the tools a tool search loaded)."""
    names: set[str] = set()
    for msg in messages:
        content = get(msg, "content")
        if get(msg, "role") != "user" or isinstance(content, str):
            continue
        for block in content or ():
            if get(block, "type") != "tool_result" or isinstance(get(block, "content"), str):
                continue
            for inner in get(block, "content") or ():
                if get(inner, "type") == "tool_reference" and get(inner, "tool_name"):
                    names.add(str(get(inner, "tool_name")))
    return names


def _is_reminder(block: Any) -> bool:
    return get(block, "type") == "text" and str(get(block, "text", "")).lstrip().startswith(_REMINDER)


def parse_request(body: Mapping[str, Any]) -> ChatRequest:
    """A Messages API request body (or an SDK call's keyword arguments) as pieces: tools, system, messages."""
    model = body.get("model")
    request = ChatRequest(model=None if model is None else str(model), stream=bool(body.get("stream")))
    messages = list(body.get("messages") or ())
    referenced = _references(messages)
    for tool in body.get("tools") or ():
        name, text = tool_text(tool)
        request.tool_names.append(name)
        piece = Piece(Origin.SCHEMAS, name, text)
        if is_tool_search(tool):
            request.tool_search.append(name)
        if get(tool, "defer_loading") is True:
            request.deferred_tools.append(name)
            if name not in referenced:
                request.deferred.append(piece)
                continue
            request.loaded.append(name)
        request.pieces.append(piece)
    system = body.get("system")
    if system:
        request.pieces.append(Piece(Origin.SYSTEM, "system", text_of(system)))
    first_user = True
    for index, msg in enumerate(messages):
        role = get(msg, "role")
        content = get(msg, "content")
        if role == "system":
            request.pieces.append(Piece(Origin.SYSTEM, f"msg:{index}", text_of(content)))
            continue
        if role == "user" and not isinstance(content, str):
            blocks = list(content or ())
            for block in blocks:
                if get(block, "type") == "tool_result":
                    key = str(get(block, "tool_use_id", f"msg:{index}"))
                    request.pieces.append(Piece(Origin.TOOL_RESULTS, key, text_of(get(block, "content"))))
                    if get(block, "is_error") is True:
                        request.failed_results.append(key)
            reminders = [b for b in blocks if _is_reminder(b)]
            if reminders:
                request.pieces.append(Piece(Origin.SYSTEM, f"reminder:{index}", text_of(reminders)))
            content = [b for b in blocks if get(b, "type") != "tool_result" and not _is_reminder(b)]
            if not content:
                continue
        text = text_of(content)
        if role == "user" and first_user:
            first_user = False
            request.pieces.append(Piece(Origin.USER, "prompt", text))
        else:
            if role == "assistant":
                request.assistant_turns += 1
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", text))
    return request


def parse_usage(usage: Any, *, strict: bool = False) -> Usage | None:
    """A Messages API ``usage`` block (``None`` when absent). ``strict``: WireFormatError for a missing or
    malformed ``input_tokens`` / ``output_tokens``."""
    if usage is None:
        return None
    if strict:
        plain = count(usage, "input_tokens")
        output = count(usage, "output_tokens")
        read = count(usage, "cache_read_input_tokens", required=False)
        write = count(usage, "cache_creation_input_tokens", required=False)
    else:
        plain, output = opt_int(usage, "input_tokens"), opt_int(usage, "output_tokens")
        read = opt_int(usage, "cache_read_input_tokens")
        write = opt_int(usage, "cache_creation_input_tokens")
    split = get(usage, "cache_creation")
    return Usage(
        input_tokens=None if plain is None else plain + (read or 0) + (write or 0),
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_5m_tokens=opt_int(split, "ephemeral_5m_input_tokens"),
        cache_write_1h_tokens=opt_int(split, "ephemeral_1h_input_tokens"),
        reasoning_tokens=opt_int(get(usage, "output_tokens_details"), "thinking_tokens"),
        reported=as_dict(usage),
    )


def parse_response(body: Any, *, strict: bool = False) -> Output:
    """A Messages API response (dict or SDK ``Message``). ``strict``: WireFormatError naming a missing ``usage``,
    ``content``, block ``type`` or tool_use ``id``/``name``/``input``."""
    blocks = need(body, "content") if strict else (get(body, "content") or ())
    if strict and not isinstance(blocks, list):
        raise WireFormatError("malformed response: 'content' is not a list", path="content")
    out = Output(
        finish_reason=_str(get(body, "stop_reason")),
        model=_str(get(body, "model")),
        response_id=_str(get(body, "id")),
    )
    texts, thinking = [], []
    for i, block in enumerate(blocks):
        kind = need(body, f"content.{i}.type") if strict else get(block, "type")
        if kind == "text":
            texts.append(str(get(block, "text", "")))
        elif kind == "thinking":
            thinking.append(str(get(block, "thinking", "")))
        elif kind == "tool_use":
            if strict:
                call_id, name = need(body, f"content.{i}.id"), need(body, f"content.{i}.name")
                args = need(body, f"content.{i}.input")
            else:
                call_id, name, args = get(block, "id", ""), get(block, "name", ""), get(block, "input", {})
            obj, raw = parse_arguments(args if isinstance(args, Mapping | str) else as_dict(args))
            out.tool_calls.append(ToolCall(str(call_id), str(name), obj, raw))
        # other blocks (redacted_thinking, server tool results) carry no text or call for a host
    out.text = "".join(texts)
    out.thinking = "\n".join(thinking)
    out.usage = parse_usage(need(body, "usage") if strict else get(body, "usage"), strict=strict)
    return out


class MessageStream:
    """Folds Messages API stream events (SDK event objects or decoded SSE ``data:`` JSON) into one :class:`Output`.

    ``message_delta`` usage is cumulative and wins over ``message_start``'s field by field (its ``output_tokens`` is
    the final count; recent API versions repeat the input and cache counts there too).
    """

    def __init__(self) -> None:
        self.out = Output()
        self._texts: list[str] = []
        self._thinking: list[str] = []
        self._tools: dict[int, list[str]] = {}  # index -> [id, name, json so far]
        self._usage: dict[str, Any] = {}
        self.complete = False  # message_stop seen

    def feed(self, event: Any) -> None:
        kind = get(event, "type")
        if kind == "message_stop":
            self.complete = True
        elif kind == "message_start":
            msg = get(event, "message") or {}
            self.out.model, self.out.response_id = _str(get(msg, "model")), _str(get(msg, "id"))
            self._usage.update(as_dict(get(msg, "usage")))
        elif kind == "content_block_start":
            block = get(event, "content_block") or {}
            index = int(get(event, "index", 0))
            if get(block, "type") == "tool_use":
                self._tools[index] = [str(get(block, "id", "")), str(get(block, "name", "")), ""]
            elif get(block, "type") == "text" and get(block, "text"):
                self._texts.append(str(get(block, "text")))
        elif kind == "content_block_delta":
            delta = get(event, "delta") or {}
            dtype = get(delta, "type")
            if dtype == "text_delta":
                self._texts.append(str(get(delta, "text", "")))
            elif dtype == "thinking_delta":
                self._thinking.append(str(get(delta, "thinking", "")))
            elif dtype == "input_json_delta":
                slot = self._tools.get(int(get(event, "index", 0)))
                if slot is not None:
                    slot[2] += str(get(delta, "partial_json", ""))
        elif kind == "message_delta":
            self.out.finish_reason = (
                _str(get(get(event, "delta") or {}, "stop_reason")) or self.out.finish_reason
            )
            self._usage.update(as_dict(get(event, "usage")))
        elif kind == "error":
            error = get(event, "error")
            self.out.error = compact_json(as_dict(error)) if error is not None else "error"

    def result(self) -> Output:
        out = self.out
        out.text = "".join(self._texts)
        out.thinking = "".join(self._thinking)
        calls = []
        for _i, (cid, name, args) in sorted(self._tools.items()):
            obj, raw = parse_arguments(args or "{}")
            calls.append(ToolCall(cid, name, obj, raw))
        out.tool_calls = calls
        out.usage = parse_usage(self._usage) if self._usage else None
        return out


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
