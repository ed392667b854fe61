"""OpenAI Responses API, ``POST /v1/responses``.

Request: ``instructions`` (system), ``input`` — a string (the user prompt) or a list of items: messages
(``role`` user / system / developer / assistant, ``content`` a string or ``input_text`` / ``output_text`` parts),
``function_call`` (the model's earlier call: ``call_id``, ``name``, ``arguments``), ``function_call_output`` (its
result, by ``call_id``), ``reasoning`` and other items — and ``tools`` (``{"type": "function", name, description,
parameters}``, or built-in tools by ``type``). With ``previous_response_id`` the earlier turns live on the server and
are not in the body: only what the body holds can be split by origin.
Response: ``output`` items (``message`` with ``output_text`` parts, ``function_call``, ``reasoning``), ``status``
(``incomplete_details.reason`` when incomplete), ``usage`` (``input_tokens`` includes
``input_tokens_details.cached_tokens``; ``output_tokens_details.reasoning_tokens``). Stream (SSE): typed events —
``response.created``, ``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.output_item.done``, and ``response.completed`` / ``.incomplete`` / ``.failed`` carrying the whole
response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promcp.events import Origin
from promcp.wire._common import as_dict, compact_json, get, opt_int, parse_arguments, text_of
from promcp.wire._types import ChatRequest, Output, Piece, ToolCall, Usage
from promcp.wire.openai import tool_text

__all__ = ["ResponseStream", "parse_request", "parse_response", "parse_usage"]

_SYSTEM_ROLES = frozenset({"system", "developer"})
_ASSISTANT_ITEMS = frozenset({"function_call", "reasoning", "custom_tool_call"})
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _tool(tool: Any) -> tuple[str, str]:
    if get(tool, "type", "function") == "function":
        name = str(get(tool, "name", ""))
        return name, tool_text(name, get(tool, "description"), get(tool, "parameters"))
    return str(get(tool, "name") or get(tool, "type")), compact_json(as_dict(tool))


def parse_request(body: Mapping[str, Any]) -> ChatRequest:
    """A Responses API request body as pieces: instructions, tools, then the input items in order."""
    model = body.get("model")
    request = ChatRequest(model=None if model is None else str(model), stream=bool(body.get("stream")))
    if body.get("instructions"):
        request.pieces.append(Piece(Origin.SYSTEM, "system", text_of(body["instructions"])))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    items = list(items or ())
    # leading system/developer messages come before the tools, as in Chat Completions
    lead = 0
    while lead < len(items) and get(items[lead], "role") in _SYSTEM_ROLES:
        request.pieces.append(Piece(Origin.SYSTEM, "system", text_of(get(items[lead], "content"))))
        lead += 1
    for tool in body.get("tools") or ():
        name, text = _tool(tool)
        request.tool_names.append(name)
        request.pieces.append(Piece(Origin.SCHEMAS, name, text))
    first_user, in_assistant_turn = True, False
    for index in range(lead, len(items)):
        item = items[index]
        kind, role = get(item, "type", "message"), get(item, "role")
        assistant = role == "assistant" or kind in _ASSISTANT_ITEMS
        if assistant and not in_assistant_turn:
            request.assistant_turns += 1
        in_assistant_turn = assistant
        if kind == "function_call_output":
            output = get(item, "output")
            text = output if isinstance(output, str) else text_of(output)
            request.pieces.append(Piece(Origin.TOOL_RESULTS, str(get(item, "call_id", f"msg:{index}")), text))
        elif kind == "function_call":
            args = parse_arguments(get(item, "arguments", ""))[0]
            text = compact_json([{"name": get(item, "name"), "arguments": args}])
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", text))
        elif kind == "message" and role in _SYSTEM_ROLES:
            request.pieces.append(Piece(Origin.SYSTEM, "system", text_of(get(item, "content"))))
        elif kind == "message" and role == "user" and first_user:
            first_user = False
            request.pieces.append(Piece(Origin.USER, "prompt", text_of(get(item, "content"))))
        elif kind == "message":
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", text_of(get(item, "content"))))
        else:
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", f"[{kind} content omitted]"))
    return request


def parse_usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    details = get(usage, "input_tokens_details")
    return Usage(
        input_tokens=opt_int(usage, "input_tokens"),
        output_tokens=opt_int(usage, "output_tokens"),
        cache_read_tokens=opt_int(details, "cached_tokens"),
        cache_write_tokens=opt_int(details, "cache_write_tokens"),
        reasoning_tokens=opt_int(get(usage, "output_tokens_details"), "reasoning_tokens"),
        reported=as_dict(usage),
    )


def _finish(body: Any) -> str | None:
    status = get(body, "status")
    reason = get(get(body, "incomplete_details"), "reason")
    if status == "incomplete" and reason:
        return f"incomplete:{reason}"
    return None if status is None else str(status)


def _item_into(out: Output, item: Any, texts: list[str], thinking: list[str]) -> None:
    kind = get(item, "type")
    if kind == "message":
        texts.extend(
            str(get(p, "text", "")) for p in get(item, "content") or () if get(p, "type") == "output_text"
        )
    elif kind == "function_call":
        obj, raw = parse_arguments(get(item, "arguments", ""))
        out.tool_calls.append(
            ToolCall(str(get(item, "call_id") or get(item, "id", "")), str(get(item, "name", "")), obj, raw)
        )
    elif kind == "reasoning":
        thinking.extend(str(get(s, "text", "")) for s in get(item, "summary") or ())


def parse_response(body: Any) -> Output:
    """A Responses API response object (dict or SDK ``Response``)."""
    out = Output(
        finish_reason=_finish(body),
        model=None if get(body, "model") is None else str(get(body, "model")),
        response_id=None if get(body, "id") is None else str(get(body, "id")),
        usage=parse_usage(get(body, "usage")),
    )
    texts: list[str] = []
    thinking: list[str] = []
    for item in get(body, "output") or ():
        _item_into(out, item, texts, thinking)
    out.text, out.thinking = "".join(texts), "\n".join(thinking)
    error = get(body, "error")
    if error is not None:
        out.error = compact_json(as_dict(error))
    return out


class ResponseStream:
    """Folds Responses API stream events (SDK events or decoded SSE ``data:`` JSON). The final event carries the
    whole response and wins; a stream cut before it yields what the finished items and deltas said."""

    def __init__(self) -> None:
        self._final: Any = None
        self._latest: Any = None
        self._items: dict[int, Any] = {}
        self._texts: list[str] = []
        self.complete = False  # a final event seen

    def feed(self, event: Any) -> None:
        kind = get(event, "type")
        if kind in _FINAL_EVENTS:
            self._final = get(event, "response")
            self.complete = True
        elif kind in ("response.created", "response.in_progress"):
            self._latest = get(event, "response")
        elif kind == "response.output_item.done":
            self._items[int(get(event, "output_index", len(self._items)))] = get(event, "item")
        elif kind == "response.output_text.delta":
            self._texts.append(str(get(event, "delta", "")))
        elif kind == "error":
            self._items.setdefault(-1, {"type": "error", "message": get(event, "message")})

    def result(self) -> Output:
        if self._final is not None:
            return parse_response(self._final)
        out = parse_response(self._latest or {})
        texts: list[str] = []
        thinking: list[str] = []
        for index, item in sorted(self._items.items()):
            if index == -1:
                out.error = str(get(item, "message", "error"))
            else:
                _item_into(out, item, texts, thinking)
        out.text = "".join(texts) or "".join(self._texts)
        out.thinking = "\n".join(thinking)
        return out
