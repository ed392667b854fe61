"""OpenAI Chat Completions, ``POST /v1/chat/completions`` — also every OpenAI-compatible server (vLLM, LM Studio,
llama.cpp's server) and llama-cpp-python's ``create_chat_completion``.

Request: ``messages`` (``system``/``developer``, ``user``, ``assistant`` with ``tool_calls``, ``tool`` with
``tool_call_id``), ``tools`` as ``{"type": "function", "function": {name, description, parameters}}``.
Response: ``choices[0].message`` (``content``, ``tool_calls`` with JSON-string ``arguments``), ``finish_reason``,
``usage`` (``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``; ``completion_tokens`` includes
``completion_tokens_details.reasoning_tokens``). Stream: ``chat.completion.chunk`` objects with ``delta`` content
and tool-call fragments (by ``index``), and a last chunk with ``usage`` when ``stream_options.include_usage``; the
stream ends with ``data: [DONE]`` (fed to :class:`ChatStream` as the string :data:`DONE`). Only the first choice is
read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promcp.errors import WireFormatError
from promcp.events import Origin
from promcp.wire._common import (
    IdFactory,
    as_dict,
    compact_json,
    count,
    get,
    need,
    next_call_id,
    opt_int,
    parse_arguments,
    text_of,
)
from promcp.wire._types import ChatRequest, Output, Piece, ToolCall, Usage

__all__ = ["DONE", "ChatStream", "parse_request", "parse_response", "parse_usage", "tool_text"]

_SYSTEM_ROLES = frozenset({"system", "developer"})
#: the SSE data of a Chat Completions stream's last event (not JSON)
DONE = "[DONE]"


def tool_text(name: str, description: Any, parameters: Any) -> str:
    """One function tool as counted: compact JSON of name, description and parameters (the ``function`` object)."""
    return compact_json(
        {"name": name, "description": description or "", "parameters": as_dict(parameters) or {}}
    )


def function_tool(tool: Any) -> tuple[str, str]:
    """``(name, text)`` of a ``{"type": "function", "function": {...}}`` tool (or a bare function object)."""
    fn = get(tool, "function") or tool
    name = str(get(fn, "name", ""))
    if get(fn, "parameters") is None and get(tool, "type") not in (None, "function"):
        return name or str(get(tool, "type")), compact_json(as_dict(tool))  # a built-in tool: as sent
    return name, tool_text(name, get(fn, "description"), get(fn, "parameters"))


def calls_text(calls: Sequence[Any]) -> str:
    """Tool calls of an assistant message as counted: ``[{"name", "arguments"}]``, arguments as the object."""
    out = []
    for c in calls:
        fn = get(c, "function") or c
        args = get(fn, "arguments")
        out.append(
            {"name": get(fn, "name"), "arguments": parse_arguments(args)[0] if args is not None else {}}
        )
    return compact_json(out)


def message_pieces(messages: Sequence[Any], request: ChatRequest, schemas: Sequence[Piece]) -> None:
    """The pieces of an OpenAI-style message list (shared with Ollama's ``/api/chat``), schemas after the leading
    system message(s). Tool results are keyed by ``tool_call_id``, else by the id of the call they answer in order
    (when the assistant message gave ids), else ``msg:<index>``."""
    first_user = True
    pending: list[str] = []
    placed = False
    for index, msg in enumerate(messages):
        role = get(msg, "role")
        if not placed and role not in _SYSTEM_ROLES:
            request.pieces.extend(schemas)
            placed = True
        text = text_of(get(msg, "content"))
        calls = list(get(msg, "tool_calls") or ())
        if calls:
            text = f"{text}\n{calls_text(calls)}" if text else calls_text(calls)
        if role in _SYSTEM_ROLES:
            request.pieces.append(Piece(Origin.SYSTEM, "system", text))
        elif role == "tool":
            key = get(msg, "tool_call_id") or (pending.pop(0) if pending else f"msg:{index}")
            request.pieces.append(Piece(Origin.TOOL_RESULTS, str(key), text))
        elif role == "user" and first_user:
            first_user = False
            request.pieces.append(Piece(Origin.USER, "prompt", text))
        else:
            if role == "assistant":
                request.assistant_turns += 1
                pending = [str(i) for c in calls if (i := get(c, "id"))]
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", text))
    if not placed:
        request.pieces.extend(schemas)


def parse_request(body: Mapping[str, Any], *, streams_by_default: bool = False) -> ChatRequest:
    """A Chat Completions request body (or an SDK call's keyword arguments) as pieces by origin
    (``streams_by_default``: Ollama's ``/api/chat`` streams unless ``"stream": false``)."""
    stream = body.get("stream")
    model = body.get("model")
    request = ChatRequest(
        model=None if model is None else str(model),
        stream=stream is not False if streams_by_default else bool(stream),
    )
    schemas = []
    for tool in body.get("tools") or ():
        name, text = function_tool(tool)
        request.tool_names.append(name)
        schemas.append(Piece(Origin.SCHEMAS, name, text))
    message_pieces(list(body.get("messages") or ()), request, schemas)
    return request


def parse_usage(usage: Any) -> Usage | None:
    """``usage`` of a response or of a stream's last chunk (``None`` when absent)."""
    if usage is None:
        return None
    prompt_details = get(usage, "prompt_tokens_details")
    completion_details = get(usage, "completion_tokens_details")
    return Usage(
        input_tokens=opt_int(usage, "prompt_tokens"),
        output_tokens=opt_int(usage, "completion_tokens"),
        cache_read_tokens=opt_int(prompt_details, "cached_tokens"),
        cache_write_tokens=opt_int(prompt_details, "cache_write_tokens"),
        reasoning_tokens=opt_int(completion_details, "reasoning_tokens"),
        reported=as_dict(usage),
    )


def function_calls(
    message: Any, *, strict: bool = False, fallback_id: IdFactory = next_call_id, where: str = "message"
) -> list[ToolCall]:
    """The ``tool_calls`` of an OpenAI- or Ollama-shaped assistant message. ``strict``: WireFormatError naming a
    call without a function or a name (``where`` is the message's path in the response)."""
    calls = []
    for i, c in enumerate(get(message, "tool_calls") or ()):
        if strict:
            fn = need(message, f"tool_calls.{i}.function", at=where)
            name = need(message, f"tool_calls.{i}.function.name", at=where)
            if not isinstance(name, str) or not name:
                path = f"{where}.tool_calls.{i}.function.name"
                raise WireFormatError(f"malformed response: {path} is not a name", path=path)
        else:
            fn = get(c, "function") or {}
            name = str(get(fn, "name", ""))
        args, raw = parse_arguments(get(fn, "arguments", ""))
        calls.append(ToolCall(str(get(c, "id") or fallback_id()), name, args, raw))
    return calls


def parse_response(body: Any, *, strict: bool = False, fallback_id: IdFactory = next_call_id) -> Output:
    """A Chat Completions response (dict or SDK object). ``strict`` raises WireFormatError for a missing
    ``choices.0.message`` or a malformed tool call instead of reading what is there."""
    if strict:
        message = need(body, "choices.0.message")
        choice = need(body, "choices.0")
    else:
        choice = (get(body, "choices") or [None])[0]
        message = get(choice, "message") or {}
    usage = get(body, "usage")
    if strict and usage is not None:
        for key in ("prompt_tokens", "completion_tokens"):
            count(usage, key, required=False)
    return Output(
        text=text_of(get(message, "content")),
        tool_calls=function_calls(message, strict=strict, fallback_id=fallback_id, where="choices.0.message"),
        finish_reason=_str(get(choice, "finish_reason")),
        model=_str(get(body, "model")),
        response_id=_str(get(body, "id")),
        usage=parse_usage(usage),
    )


class ChatStream:
    """Folds ``chat.completion.chunk`` objects (SDK chunks or decoded SSE ``data:`` JSON) into one :class:`Output`:
    ``delta`` content, tool-call fragments reassembled by ``index``, ``finish_reason``, the final ``usage``."""

    def __init__(self, fallback_id: IdFactory = next_call_id) -> None:
        self.out = Output()
        self._texts: list[str] = []
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]
        self._fallback_id = fallback_id
        self.complete = False  # [DONE] seen

    def feed(self, chunk: Any) -> None:
        if chunk == DONE:
            self.complete = True
            return
        out = self.out
        out.model = _str(get(chunk, "model")) or out.model
        out.response_id = _str(get(chunk, "id")) or out.response_id
        error = get(chunk, "error")
        if error is not None:
            out.error = compact_json(as_dict(error) or str(error))
        for choice in get(chunk, "choices") or ():
            if get(choice, "index", 0) != 0:
                continue
            delta = get(choice, "delta") or {}
            content = get(delta, "content")
            if content:
                self._texts.append(str(content))
            for tc in get(delta, "tool_calls") or ():
                slot = self._calls.setdefault(int(get(tc, "index", 0)), ["", "", ""])
                fn = get(tc, "function") or {}
                slot[0] = str(get(tc, "id") or slot[0])
                slot[1] = slot[1] or str(get(fn, "name", ""))
                slot[2] += str(get(fn, "arguments", ""))
            out.finish_reason = _str(get(choice, "finish_reason")) or out.finish_reason
        usage = get(chunk, "usage")
        if usage is not None:
            out.usage = parse_usage(usage)

    def result(self) -> Output:
        self.out.text = "".join(self._texts)
        calls = []
        for _i, (cid, name, args) in sorted(self._calls.items()):
            obj, raw = parse_arguments(args)
            calls.append(ToolCall(cid or self._fallback_id(), name, obj, raw))
        self.out.tool_calls = calls
        return self.out


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
