"""MCP's JSON-RPC shapes as promcp reads them: handshake results, tool lists, tool-call results and errors.

Every function takes the raw JSON dicts seen on the wire (what a proxy parses) and the mcp SDK's typed models
(``InitializeResult``, ``Tool``, ``CallToolResult``, pydantic, snake_case attributes) alike. What a host forwards
to the model, and so what the S4 footprint counts, is defined here once:

* :func:`result_text` — the text of a ``tools/call`` result: the text blocks of ``content`` joined by newlines,
  other blocks summarized as ``[<type> content omitted]``, and the ``structuredContent`` JSON only when there is no
  content at all. Never the JSON-RPC envelope nor ``_meta`` (so a profiler's own ``traceparent`` is not counted);
* :func:`tool_text` / :func:`tool_text_of` — one tool definition as a host renders it into a prompt (compact JSON
  of name, description and input schema under the OpenAI-style ``parameters`` key);
* :func:`arguments_text` — a ``tools/call`` request's arguments as compact JSON (the S3 footprint);
* :func:`message_bytes` — a JSON-RPC message's size on the wire (stdio adds the newline that frames it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promcp.events import Status, Transport
from promcp.wire._common import compact_json

__all__ = [
    "CONNECTION_CLOSED",
    "REQUEST_TIMEOUT",
    "Handshake",
    "arguments_text",
    "handshake",
    "is_error",
    "jsonrpc_failure",
    "message_bytes",
    "next_cursor",
    "result_text",
    "tool_text",
    "tool_text_of",
    "tools_of",
]

#: JSON-RPC error codes the mcp SDK uses for a closed connection and a request timeout
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
#: ``_meta`` keys of a ``server/discover`` result (protocol 2026-07-28)
META_PROTOCOL = "io.modelcontextprotocol/protocolVersion"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def _get(obj: Any, snake: str, camel: str | None = None) -> Any:
    """A field of a raw dict (camelCase on the wire) or of an SDK model (snake_case attribute)."""
    if isinstance(obj, Mapping):
        return obj.get(camel or snake, obj.get(snake))
    return getattr(obj, snake, None)


def result_text(result: Any) -> str:
    """The text a host forwards to the model for a ``tools/call`` result (typed ``CallToolResult`` or raw dict)."""
    parts: list[str] = []
    for block in _get(result, "content") or ():
        kind = _get(block, "type")
        if kind == "text":
            parts.append(str(_get(block, "text") or ""))
        else:
            parts.append(f"[{kind or 'content'} content omitted]")
    if not parts:
        structured = _get(result, "structured_content", "structuredContent")
        if structured is not None:
            parts.append(compact_json(structured))
    return "\n".join(parts)


def is_error(result: Any) -> bool:
    """Whether a ``tools/call`` result says the tool failed (``isError``)."""
    return bool(_get(result, "is_error", "isError"))


def arguments_text(arguments: Mapping[str, Any] | None) -> str:
    """A tools/call request's arguments as the compact JSON the model produced / the host sends (``{}`` if none)."""
    return compact_json(dict(arguments or {}))


def tool_text(name: str, description: str | None, input_schema: Mapping[str, Any] | None) -> str:
    """One tool definition as rendered into a prompt (the host backends' default rendering)."""
    return compact_json(
        {"name": name, "description": description or "", "parameters": dict(input_schema or {})}
    )


def tool_text_of(tool: Any) -> tuple[str, str]:
    """``(name, text)`` of a typed ``Tool`` or a raw tools/list entry."""
    name = str(_get(tool, "name"))
    return name, tool_text(name, _get(tool, "description"), _get(tool, "input_schema", "inputSchema"))


def tools_of(result: Any) -> list[Any]:
    """The ``tools`` of a ``tools/list`` result (typed or raw; ``[]`` when absent)."""
    tools = _get(result, "tools")
    return list(tools) if isinstance(tools, Sequence) and not isinstance(tools, str) else []


def next_cursor(result: Any) -> str | None:
    """The cursor of the next page of a paginated list result (``None``: the last page)."""
    value = _get(result, "next_cursor", "nextCursor")
    return None if value is None else str(value)


@dataclass(frozen=True)
class Handshake:
    """What an ``initialize`` (or ``server/discover``) result says about the server."""

    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)


def handshake(result: Any, request_params: Mapping[str, Any] | None = None) -> Handshake:
    """The protocol version, server info and capabilities of an ``initialize`` result, or of a
    ``server/discover`` result (server info in ``_meta``; the version the client asked for in its request's
    ``_meta`` when the result names none)."""
    meta = _get(result, "meta", "_meta")
    info = _get(result, "server_info", "serverInfo")
    if info is None and isinstance(meta, Mapping):
        info = meta.get(META_SERVER_INFO)
    version = _get(result, "protocol_version", "protocolVersion")
    if version is None and isinstance(meta, Mapping):
        version = meta.get(META_PROTOCOL)
    if version is None and request_params:
        asked = request_params.get("_meta")
        version = asked.get(META_PROTOCOL) if isinstance(asked, Mapping) else None
    caps = _get(result, "capabilities")
    if caps is not None and not isinstance(caps, Mapping):
        dump = getattr(caps, "model_dump", None)
        caps = dump(by_alias=True, exclude_none=True) if callable(dump) else None
    name, ver = _get(info, "name"), _get(info, "version")
    return Handshake(
        protocol_version=None if version is None else str(version),
        server_name=None if name is None else str(name),
        server_version=None if ver is None else str(ver),
        capabilities=dict(caps or {}),
    )


def jsonrpc_failure(code: int | None) -> tuple[Status, str]:
    """``(status, error_type)`` of a JSON-RPC error response: the SDK's timeout and closed-connection codes, else
    ``mcp_error`` (``attrs.jsonrpc_code`` keeps the code)."""
    if code == REQUEST_TIMEOUT:
        return Status.TIMEOUT, "timeout"
    if code == CONNECTION_CLOSED:
        return Status.ERROR, "server_crashed"
    return Status.ERROR, "mcp_error"


def message_bytes(message: Any, transport: Transport | None) -> int | None:
    """Bytes of one JSON-RPC message on the wire: its JSON (an SDK model serialized as the SDK sends it, a raw
    dict compactly, bytes as they are) plus the newline that frames a stdio message. ``None`` for no message."""
    if message is None:
        return None
    if isinstance(message, bytes | bytearray):
        size = len(message)
    elif isinstance(message, str):
        size = len(message.encode())
    elif isinstance(message, Mapping):
        size = len(compact_json(message).encode())
    else:
        size = len(message.model_dump_json(by_alias=True, exclude_unset=True).encode())
    return size + (1 if transport is Transport.STDIO else 0)
