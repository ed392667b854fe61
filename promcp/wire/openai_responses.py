"""OpenAI Responses API, ``POST /v1/responses``.

Request: ``instructions`` (system), ``input`` — a string (the user prompt) or a list of items: messages
(``role`` user / system / developer / assistant, ``content`` a string or ``input_text`` / ``output_text`` parts),
``function_call`` (the model's earlier call: ``call_id``, ``name``, ``arguments``), ``function_call_output`` (its
result, by ``call_id``), ``reasoning`` and other items — and ``tools`` (``{"type": "function", name, description,
parameters}``, or built-in tools by ``type``). With ``previous_response_id`` the earlier turns live on the server and
are not in the body: only what the body holds can be split by origin.

Codex (the OpenAI Codex CLI) shapes, measured with 0.169.0:

* a **namespace** tool ``{"type": "namespace", "name": "mcp__<server>", "description": <the server's
  instructions>, "tools": [function tools…]}`` per MCP server (and a few of its own, e.g. ``multi_agent_v1``):
  one schema piece per inner tool, named like the MCP side's tools, ``everything/echo`` for the ``mcp__everything``
  namespace (:func:`namespaced`; other namespaces ``<namespace>__<tool>``), plus the description as a schema piece of its
  own keyed ``<namespace>#instructions`` (a schema-tax component: the server's instructions ride along with its
  tools); ``n_tools`` counts the callable tools only;
* the same tools may come in an ``additional_tools`` input item (``role`` developer) instead of ``tools``;
* the model's call of a namespaced tool carries ``namespace``: the call is named ``<server>/<tool>`` like its
  schema piece (S2's ``tool``), so it joins the MCP side on server and tool — never on a bare name another server
  may share — and is never mistaken for a client built-in;
* Codex's own context messages sent as ``user`` messages — ``<environment_context>`` (working directory, shell,
  date, sandbox), ``<user_instructions>`` / ``# AGENTS.md instructions`` — are system pieces keyed by their tag,
  not the user's prompt (:data:`CLIENT_CONTEXT`).
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

__all__ = ["CLIENT_CONTEXT", "ResponseStream", "namespaced", "parse_request", "parse_response", "parse_usage"]

_SYSTEM_ROLES = frozenset({"system", "developer"})
_ASSISTANT_ITEMS = frozenset({"function_call", "reasoning", "custom_tool_call"})
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
#: how a client's own context message starts → the key of its system piece (Codex sends these as user messages)
CLIENT_CONTEXT = {
    "<environment_context>": "environment_context",
    "<user_instructions>": "user_instructions",
    "# AGENTS.md instructions": "user_instructions",
}


def namespaced(namespace: Any, name: Any) -> str:
    """The name of tool ``name`` inside ``namespace`` as promcp records it: an MCP server's namespace gives the
    MCP side's own ``server/tool`` (``mcp__everything`` + ``echo`` → ``everything/echo``, which
    :func:`promcp.stages.link.mcp_tool_of` reads and the join matches on server and tool, not on the bare name);
    any other namespace ``<namespace>__<name>``."""
    if not namespace:
        return str(name)
    space = str(namespace)
    if space.startswith("mcp__") and len(space) > len("mcp__"):
        return f"{space[len('mcp__') :]}/{name}"
    return f"{space}__{name}"


def _tools(tool: Any) -> list[tuple[str, str, bool]]:
    """(name, counted text, callable) of one entry of ``tools``: a namespace gives each of its tools, and its
    description as a piece of its own."""
    kind = get(tool, "type", "function")
    if kind == "function":
        name = str(get(tool, "name", ""))
        return [(name, tool_text(name, get(tool, "description"), get(tool, "parameters")), True)]
    if kind == "namespace":
        space = str(get(tool, "name", ""))
        out = []
        if get(tool, "description"):
            out.append((f"{space}#instructions", str(get(tool, "description")), False))
        for inner in get(tool, "tools") or ():
            for name, text, _callable in _tools(inner):
                out.append((namespaced(space, name), text, True))
        return out
    return [(str(get(tool, "name") or get(tool, "type")), compact_json(as_dict(tool)), True)]


def _client_context(text: str) -> str | None:
    head = text.lstrip()
    return next((key for tag, key in CLIENT_CONTEXT.items() if head.startswith(tag)), None)


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
        if get(items[lead], "type", "message") == "message":  # (an additional_tools item: the schemas below)
            request.pieces.append(Piece(Origin.SYSTEM, "system", text_of(get(items[lead], "content"))))
        lead += 1
    tools = list(body.get("tools") or ())
    for item in items:  # Codex may send its tools as an input item
        if get(item, "type") == "additional_tools":
            tools += list(get(item, "tools") or ())
    for tool in tools:
        for name, text, can_call in _tools(tool):
            if can_call:
                request.tool_names.append(name)
            request.pieces.append(Piece(Origin.SCHEMAS, name, text))
    request.n_tools = len(request.tool_names)
    first_user, in_assistant_turn = True, False
    for index in range(lead, len(items)):
        item = items[index]
        kind, role = get(item, "type", "message"), get(item, "role")
        if kind == "additional_tools":  # counted with the schemas above
            continue
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
            name = namespaced(get(item, "namespace"), get(item, "name"))
            text = compact_json([{"name": name, "arguments": args}])
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", text))
        elif kind == "message" and role in _SYSTEM_ROLES:
            request.pieces.append(Piece(Origin.SYSTEM, "system", text_of(get(item, "content"))))
        elif (
            kind == "message"
            and role == "user"
            and (context := _client_context(text_of(get(item, "content"))))
        ):
            request.pieces.append(Piece(Origin.SYSTEM, context, text_of(get(item, "content"))))
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
        name = namespaced(get(item, "namespace"), get(item, "name", ""))
        out.tool_calls.append(ToolCall(str(get(item, "call_id") or get(item, "id", "")), name, obj, raw))
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
