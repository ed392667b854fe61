"""The Gemini API, ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse`` (what
Google's Gemini CLI and the ``@google/genai`` SDK send).

Request: the model is in the path, not the body (the proxy passes it in as ``model``); ``systemInstruction``
(``{role, parts: [{text}]}`` or a string), ``tools`` — a list of ``{functionDeclarations: [{name, description,
parametersJsonSchema | parameters}]}`` plus built-in tools (``googleSearch``, ``codeExecution``…, counted as sent) —
and ``contents``: ``{role: user|model, parts}`` with ``text``, ``functionCall {id?, name, args}`` (the model's
earlier calls), ``functionResponse {id?, name, response}`` (their results, in a user turn), ``thought`` parts and
inline data. The prompt is rendered system instruction → tools → contents (also the implicit cache's prefix
order), and the pieces follow it.

What the Gemini CLI adds, and where it goes: a first user text that is a ``<session_context>`` block (date, OS,
workspace tree, loaded memory) is a ``system`` piece keyed ``session_context``, and the MCP servers' instructions
inside it (``The following are instructions provided by the tool server 'NAME':`` … ``---[end of server
instructions]---``) are ``system`` pieces of their own keyed ``instructions:<server>``; MCP tools are named
``mcp_<server>_<tool>`` (:func:`tool_name`; :func:`mcp_tool_of` reads a name back); function responses are keyed
by their ``id`` (the CLI makes one up as ``<name>_<ms>_<index>`` when the model gave none) and their function's name
is kept in ``ChatRequest.result_names``, so a result is matched to a call that had no id by name, in order.

Response (``GenerateContentResponse``): ``candidates[0].content.parts`` (``text``; ``thought: true`` text is
thinking; ``functionCall``), ``finishReason``, ``modelVersion``, ``responseId``, ``promptFeedback.blockReason``,
``usageMetadata``: ``promptTokenCount`` (the whole prompt, INCLUDING ``cachedContentTokenCount``, which are cache
reads), ``candidatesTokenCount`` (the answer WITHOUT the thoughts), ``thoughtsTokenCount`` (reasoning),
``toolUsePromptTokenCount`` (the prompts of server-side tools), ``totalTokenCount`` = prompt + candidates +
thoughts + tool-use prompt. promcp's output count is candidates + thoughts (reasoning is part of promcp's output, as
for the other providers); input is ``promptTokenCount`` (what the request's pieces add up to; the tool-use prompt
stays in ``reported``). Stream (SSE, ``alt=sse``): one ``data:`` line per ``GenerateContentResponse`` chunk holding
the new parts; ``usageMetadata`` is cumulative (often complete only on the last chunk); an error mid-stream is a
chunk with ``error``. Only the first candidate is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from promcp.events import Origin
from promcp.wire._common import (
    IdFactory,
    as_dict,
    compact_json,
    get,
    next_call_id,
    opt_int,
    parse_arguments,
)
from promcp.wire._types import ChatRequest, Output, Piece, ToolCall, Usage

__all__ = [
    "GenerateStream",
    "mcp_tool_of",
    "model_of_path",
    "parse_request",
    "parse_response",
    "parse_usage",
    "side_call_of",
    "tool_name",
    "tool_text",
]

_MODEL_PATH = re.compile(r"/models/([^/:?]+):(?:stream)?[gG]enerateContent")
_SESSION_CONTEXT = "<session_context>"
_INSTRUCTIONS = re.compile(
    r"The following are instructions provided by the tool server '(?P<server>[^'\n]*)':\n"
    r"---\[start of server instructions\]---\n.*?\n---\[end of server instructions\]---\n?",
    re.DOTALL,
)
_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_\-.:]")
#: the Gemini API's limit on a function name (the CLI shortens longer MCP tool names)
MAX_FUNCTION_NAME_LENGTH = 64


def model_of_path(path: str) -> str | None:
    """The model of a ``…/models/{model}:generateContent`` / ``:streamGenerateContent`` request path."""
    found = _MODEL_PATH.search(path)
    return found.group(1) if found else None


def tool_name(server: str, tool: str) -> str:
    """The name the Gemini CLI gives an MCP server's tool: ``mcp_<server>_<tool>``, characters outside
    ``[A-Za-z0-9_.:-]`` replaced by ``_``, shortened to ``first 30…last 30`` beyond 63 characters."""
    name = f"{server}_{tool}"
    name = name if name.startswith("mcp_") else f"mcp_{name}"
    name = _INVALID_NAME.sub("_", name)
    if not re.match(r"[a-zA-Z_]", name):
        name = f"_{name}"
    if len(name) > MAX_FUNCTION_NAME_LENGTH - 1:
        name = f"{name[:30]}...{name[-30:]}"
    return name


def mcp_tool_of(name: str, servers: Iterable[str] = ()) -> tuple[str, str] | None:
    """``(server, tool)`` of a Gemini CLI MCP tool name ``mcp_<server>_<tool>``, else None. With the known
    ``servers``, the longest server whose prefix fits wins (a server name may hold ``_``); without, the server is
    the part before the first ``_``."""
    if not name.startswith("mcp_"):
        return None
    best: tuple[str, str] | None = None
    for server in servers:
        prefix = tool_name(server, "")
        fits = name.startswith(prefix) and len(name) > len(prefix)
        if fits and (best is None or len(server) > len(best[0])):
            best = (server, name[len(prefix) :])
    if best is not None:
        return best
    server, sep, tool = name[4:].partition("_")
    return (server, tool) if sep and server and tool else None


def tool_text(declaration: Any) -> tuple[str, str]:
    """``(name, text)`` of one function declaration as counted: compact JSON of name, description and the schema
    as sent (``parametersJsonSchema`` or ``parameters``; ``response`` schemas kept)."""
    decl = as_dict(declaration)
    name = str(decl.get("name", ""))
    shown = {"name": name, "description": decl.get("description", "")}
    for key in ("parametersJsonSchema", "parameters", "responseJsonSchema", "response"):
        if decl.get(key) is not None:
            shown[key] = decl[key]
    return name, compact_json(shown)


def _tools(body: Mapping[str, Any], request: ChatRequest) -> None:
    for tool in body.get("tools") or ():
        declarations = get(tool, "functionDeclarations") or get(tool, "function_declarations")
        if declarations is not None:
            for decl in declarations:
                name, text = tool_text(decl)
                request.tool_names.append(name)
                request.pieces.append(Piece(Origin.SCHEMAS, name, text))
        others = {
            k: v
            for k, v in as_dict(tool).items()
            if k not in ("functionDeclarations", "function_declarations")
        }
        for kind, spec in others.items():  # built-in tools: googleSearch, codeExecution, urlContext…
            request.tool_names.append(kind)
            request.pieces.append(Piece(Origin.SCHEMAS, kind, compact_json({kind: spec})))


def _text_of_parts(parts: Any) -> str:
    """The text of a content's parts as counted: text as is, calls and responses as compact JSON, other data
    summarized (``[inlineData content omitted]``)."""
    out: list[str] = []
    for part in parts or ():
        if isinstance(part, str):
            out.append(part)
        elif get(part, "text") is not None:
            out.append(str(get(part, "text")))
        elif get(part, "functionCall") is not None:
            call = get(part, "functionCall")
            out.append(compact_json({"name": get(call, "name"), "args": get(call, "args", {})}))
        elif get(part, "functionResponse") is not None:
            out.append(_response_text(get(part, "functionResponse")))
        else:
            kind = next(iter(as_dict(part)), "content")
            out.append(f"[{kind} content omitted]")
    return "\n".join(out)


def _response_text(response: Any) -> str:
    """What a function response gives the model: its ``response`` object as compact JSON."""
    return compact_json(as_dict(get(response, "response")) or get(response, "response", {}))


def _session_context(text: str, request: ChatRequest) -> None:
    """The CLI's ``<session_context>`` block: the MCP servers' instructions apart, the rest as one piece."""
    rest = text
    for found in _INSTRUCTIONS.finditer(text):
        request.pieces.append(Piece(Origin.SYSTEM, f"instructions:{found['server']}", found.group(0)))
    rest = _INSTRUCTIONS.sub("", text)
    request.pieces.append(Piece(Origin.SYSTEM, "session_context", rest))


def side_call_of(body: Mapping[str, Any]) -> str | None:
    """``json_mode`` for a request that asks for structured output and offers no tools — the Gemini CLI's helper
    calls (model routing, next-speaker and loop checks) — else None: a turn of the conversation."""
    config = body.get("generationConfig") or body.get("generation_config") or {}
    structured = get(config, "responseMimeType") == "application/json" or any(
        get(config, key) is not None for key in ("responseJsonSchema", "responseSchema")
    )
    return "json_mode" if structured and not body.get("tools") else None


def parse_request(body: Mapping[str, Any], *, model: str | None = None, stream: bool = False) -> ChatRequest:
    """A ``generateContent`` request body as pieces: system instruction, tools, then the contents in order
    (``model`` and ``stream`` come from the request path)."""
    request = ChatRequest(model=model or (None if body.get("model") is None else str(body.get("model"))))
    request.stream = stream
    request.side_call = side_call_of(body)
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        text = system if isinstance(system, str) else _text_of_parts(get(system, "parts"))
        request.pieces.append(Piece(Origin.SYSTEM, "system", text))
    _tools(body, request)
    first_user = True
    contents = body.get("contents") or ()
    if isinstance(contents, str | Mapping):
        contents = [contents]
    for index, content in enumerate(contents):
        if isinstance(content, str):
            content = {"role": "user", "parts": [{"text": content}]}
        role = get(content, "role", "user")
        parts = list(get(content, "parts") or ())
        if role == "model":
            request.assistant_turns += 1
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", _text_of_parts(parts)))
            continue
        rest: list[Any] = []
        for j, part in enumerate(parts):
            response = get(part, "functionResponse")
            if response is not None:
                key = str(get(response, "id") or f"msg:{index}.{j}")
                request.pieces.append(Piece(Origin.TOOL_RESULTS, key, _response_text(response)))
                request.result_names[key] = str(get(response, "name", ""))
                if isinstance(get(response, "response"), Mapping) and "error" in get(response, "response"):
                    request.failed_results.append(key)
            elif isinstance(get(part, "text"), str) and str(get(part, "text")).lstrip().startswith(
                _SESSION_CONTEXT
            ):
                _session_context(str(get(part, "text")), request)
            else:
                rest.append(part)
        if not rest:
            continue
        text = _text_of_parts(rest)
        if first_user:
            first_user = False
            request.pieces.append(Piece(Origin.USER, "prompt", text))
        else:
            request.pieces.append(Piece(Origin.HISTORY, f"msg:{index}", text))
    return request


def parse_usage(usage: Any) -> Usage | None:
    """A ``usageMetadata`` block (``None`` when absent): input = ``promptTokenCount`` (cached content included),
    output = candidates + thoughts, cache reads = ``cachedContentTokenCount``, reasoning = thoughts."""
    if usage is None:
        return None
    prompt = opt_int(usage, "promptTokenCount")
    candidates = opt_int(usage, "candidatesTokenCount")
    thoughts = opt_int(usage, "thoughtsTokenCount")
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        cache_read_tokens=opt_int(usage, "cachedContentTokenCount"),
        reasoning_tokens=thoughts,
        reported=as_dict(usage),
    )


def _function_call(call: Any, fallback_id: IdFactory) -> ToolCall:
    args = get(call, "args", {})
    obj, raw = parse_arguments(args if isinstance(args, Mapping | str) else as_dict(args))
    return ToolCall(str(get(call, "id") or fallback_id()), str(get(call, "name", "")), obj, raw)


def _error_of(body: Any) -> str | None:
    error = get(body, "error")
    if error is not None:
        return compact_json(as_dict(error) or str(error))
    blocked = get(get(body, "promptFeedback"), "blockReason")
    return f"prompt blocked: {blocked}" if blocked else None


def parse_response(body: Any, *, fallback_id: IdFactory = next_call_id) -> Output:
    """A ``GenerateContentResponse`` (dict or SDK object), leniently."""
    stream = GenerateStream(fallback_id)
    stream.feed(body)
    return stream.result()


class GenerateStream:
    """Folds ``GenerateContentResponse`` chunks (decoded SSE ``data:`` JSON or SDK objects) into one
    :class:`Output`: the parts of every chunk in order, the last finish reason, model and id, the latest usage."""

    def __init__(self, fallback_id: IdFactory = next_call_id) -> None:
        self.out = Output()
        self._texts: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self._fallback_id = fallback_id
        self.complete = (
            False  # a chunk with the candidate's finishReason seen (Gemini sends no other end marker)
        )

    def feed(self, chunk: Any) -> None:
        out = self.out
        if isinstance(chunk, list):  # a non-streamed "stream" (alt=json) is one array of chunks
            for item in chunk:
                self.feed(item)
            return
        error = _error_of(chunk)
        if error is not None:
            out.error = error
        out.model = _str(get(chunk, "modelVersion")) or out.model
        out.response_id = _str(get(chunk, "responseId")) or out.response_id
        candidates = get(chunk, "candidates") or ()
        if candidates:
            candidate = candidates[0]
            for part in get(get(candidate, "content"), "parts") or ():
                if get(part, "functionCall") is not None:
                    self._calls.append(_function_call(get(part, "functionCall"), self._fallback_id))
                elif get(part, "text") is not None:
                    (self._thinking if get(part, "thought") is True else self._texts).append(
                        str(get(part, "text"))
                    )
            out.finish_reason = _str(get(candidate, "finishReason")) or out.finish_reason
            if get(candidate, "finishReason"):
                self.complete = True
        usage = get(chunk, "usageMetadata")
        if usage is not None:
            out.usage = parse_usage(usage)

    def result(self) -> Output:
        self.out.text = "".join(self._texts)
        self.out.thinking = "".join(self._thinking)
        self.out.tool_calls = list(self._calls)
        return self.out


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
