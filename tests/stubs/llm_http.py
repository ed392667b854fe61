"""Stub LLM APIs that speak the OpenAI, Ollama and Anthropic wire formats: a loopback HTTP server, or the same
script behind an ``httpx2.MockTransport``.

A :class:`StubServer` is a real HTTP server (``http.server`` in a thread, ephemeral port) for end-to-end tests; a
:class:`MockAPI` answers from the same script inside the client (``transport=MockAPI(...).transport`` on a backend:
no thread, no socket) for unit tests of a backend's wire handling. Both record every request (path, headers, JSON
body) and answer from a script: a list of ``Reply`` (status, JSON body, headers) consumed in order, or — for
end-to-end runs — an ``agent`` replier that reads the request like a model would: on a request whose last message
is not a tool result it calls the first offered tool with schema-shaped arguments, afterwards it answers in text.
The response bodies follow the providers' documented shapes, including usage blocks and error bodies. A reply
whose body is a :class:`Drip` is streamed by the server with chunked transfer encoding, one chunk at a time with a
pause between them (and can break off mid-stream), as a streaming LLM API does; a request body that is not JSON is
kept as ``Request.raw`` (``body`` is then ``{}``). The server speaks HTTP/1.1 with keep-alive.

With ``wire="openai" | "anthropic" | "ollama"`` the stub first checks the request the way the real API does (auth
headers, required fields, tool name pattern, role order, every tool call answered by its id) and answers a
violation with that API's own 400 error shape, recording it in ``StubServer.violations``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx2 as httpx

Wire = Literal["openai", "anthropic", "ollama"]


@dataclass
class Drip:
    """A streamed body: ``chunks`` written one by one, ``delay_s`` apart; ``cut_after`` chunks then the connection
    is dropped without the end of the body (a stream cut mid-way); ``end_delay_s`` between the last chunk and the
    chunked body's terminator (an upstream whose last bytes lag behind its final event)."""

    chunks: list[bytes]
    delay_s: float = 0.0
    cut_after: int | None = None
    end_delay_s: float = 0.0
    sent: list[float] = field(default_factory=list)  # perf_counter() when each chunk was written


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes = b""


Replier = Callable[[Request], Reply]


class _Script:
    """The replies, the request checks and the log shared by the server and the mock transport."""

    def __init__(self, replies: list[Reply] | Replier, *, wire: Wire | None = None) -> None:
        self.requests: list[Request] = []
        self.violations: list[str] = []
        self._replies = replies
        self._wire = wire

    def answer(self, req: Request) -> Reply:
        self.requests.append(req)
        return self._check(req) or self._next(req)

    def _check(self, req: Request) -> Reply | None:
        if self._wire is None:
            return None
        problem = CHECKS[self._wire](req)
        if problem is None:
            return None
        self.violations.append(problem)
        return Reply(400, ERRORS[self._wire](problem))

    def _next(self, req: Request) -> Reply:
        if callable(self._replies):
            return self._replies(req)
        if not self._replies:
            return Reply(500, {"error": {"type": "stub_exhausted", "message": "no scripted reply left"}})
        return self._replies.pop(0)


def _body(reply: Reply) -> bytes:
    return reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()


class MockAPI(_Script):
    """The script behind an ``httpx2.MockTransport`` (pass ``.transport`` to a backend; ``url`` is its base URL).
    ``on_request`` runs inside each request (a test advances its fake clock there)."""

    url = "http://stub.test"

    def __init__(
        self,
        replies: list[Reply] | Replier,
        *,
        wire: Wire | None = None,
        on_request: Callable[[Request], None] | None = None,
    ) -> None:
        super().__init__(replies, wire=wire)
        self._on_request = on_request
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        req = Request(request.url.path, headers, json.loads(request.content or b"{}"))
        if self._on_request is not None:
            self._on_request(req)
        reply = self.answer(req)
        return httpx.Response(
            reply.status, content=_body(reply), headers={"content-type": "application/json", **reply.headers}
        )


class StubServer(_Script):
    def __init__(self, replies: list[Reply] | Replier, *, wire: Wire | None = None, port: int = 0) -> None:
        super().__init__(replies, wire=wire)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except (ValueError, RecursionError):  # a body nested too deep for Python: kept raw
                    body = {}
                req = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                reply = stub.answer(req)
                try:
                    self.send_response(reply.status)
                    if "content-type" not in {k.lower() for k in reply.headers}:
                        self.send_header("content-type", "application/json")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    if isinstance(reply.body, Drip):
                        self._drip(reply.body)
                        return
                    data = _body(reply)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            do_GET = do_POST

            def _drip(self, drip: Drip) -> None:
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                for i, chunk in enumerate(drip.chunks):
                    if drip.cut_after is not None and i >= drip.cut_after:
                        self.close_connection = True
                        return
                    if i and drip.delay_s:
                        time.sleep(drip.delay_s)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    drip.sent.append(time.perf_counter())
                if drip.end_delay_s:
                    time.sleep(drip.end_delay_s)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# -- recorded response shapes ----------------------------------------------------------------------------------


def openai_tool_call(name: str, arguments: str, *, call_id: str = "call_abc123") -> dict[str, Any]:
    return {
        "id": "chatcmpl-9xYz",
        "object": "chat.completion",
        "created": 1731000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 412,
            "completion_tokens": 23,
            "total_tokens": 435,
            "prompt_tokens_details": {"cached_tokens": 256, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "system_fingerprint": "fp_0ba0d124f1",
    }


def openai_text(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-9xZa",
        "object": "chat.completion",
        "created": 1731000001,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": text, "refusal": None},
            }
        ],
        "usage": {"prompt_tokens": 480, "completion_tokens": 12, "total_tokens": 492},
    }


def openai_error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def ollama_reply(*, content: str = "", tool: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool:
        message["tool_calls"] = [{"function": {"name": tool[0], "arguments": tool[1]}}]
    return {
        "model": "qwen2.5:7b",
        "created_at": "2026-11-22T10:00:00.000000Z",
        "message": message,
        "done_reason": "stop",
        "done": True,
        "total_duration": 2_150_000_000,
        "load_duration": 12_000_000,
        "prompt_eval_count": 301,
        "prompt_eval_duration": 640_000_000,
        "eval_count": 19,
        "eval_duration": 1_410_000_000,
    }


def anthropic_reply(
    blocks: list[dict[str, Any]], *, stop: str, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 472,
            "output_tokens": 41,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "service_tier": "standard",
        },
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


# -- an end-to-end replier ---------------------------------------------------------------------------------------


def _example(schema: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name in schema.get("required", []):
        typ = (schema.get("properties", {}).get(name) or {}).get("type")
        args[name] = {"integer": 3, "number": 2.5, "boolean": True, "array": [], "object": {}}.get(
            typ, "hello"
        )
    return args


def anthropic_agent(req: Request) -> Reply:
    """Calls the first tool once, then answers — the Messages API's shapes both times."""
    last = req.body["messages"][-1]
    answered = isinstance(last.get("content"), list) and any(
        b.get("type") == "tool_result" for b in last["content"]
    )
    if answered or not req.body.get("tools"):
        return Reply(
            200,
            anthropic_reply(
                [{"type": "text", "text": "Done: the tool answered."}], stop="end_turn", cache_read=128
            ),
        )
    tool = req.body["tools"][0]
    block = {
        "type": "tool_use",
        "id": f"toolu_{len(req.body['messages']):02d}",
        "name": tool["name"],
        "input": _example(tool["input_schema"]),
    }
    return Reply(
        200,
        anthropic_reply(
            [{"type": "text", "text": "Let me use a tool."}, block], stop="tool_use", cache_write=200
        ),
    )


def openai_agent(req: Request) -> Reply:
    """Chat Completions: calls the first tool once, then answers."""
    if req.body["messages"][-1]["role"] == "tool" or not req.body.get("tools"):
        return Reply(200, openai_text("Done: the tool answered."))
    fn = req.body["tools"][0]["function"]
    return Reply(
        200, openai_tool_call(fn["name"], json.dumps(_example(fn["parameters"])), call_id="call_e2e1")
    )


def ollama_agent(req: Request) -> Reply:
    """Ollama /api/chat: calls the first tool once, then answers."""
    if req.body["messages"][-1]["role"] == "tool" or not req.body.get("tools"):
        return Reply(200, ollama_reply(content="Done: the tool answered."))
    fn = req.body["tools"][0]["function"]
    return Reply(200, ollama_reply(tool=(fn["name"], _example(fn["parameters"]))))


# -- request checks, as the real APIs make them -----------------------------------------------------------------

_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_function_tools(tools: Any) -> str | None:
    if not isinstance(tools, list):
        return "tools: must be an array"
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            return f"tools[{i}]: expected {{'type': 'function', 'function': {{...}}}}"
        if not _FUNCTION_NAME.fullmatch(str(fn.get("name", ""))):
            return f"tools[{i}].function.name: string does not match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if not isinstance(fn.get("parameters", {}), dict):
            return f"tools[{i}].function.parameters: must be an object"
    return None


def check_openai(req: Request) -> str | None:
    """Chat Completions: bearer key (remote), model, messages, function tools, each tool_calls answered in order."""
    if not req.path.endswith("/chat/completions"):
        return f"unknown path {req.path}"
    body = req.body
    if not isinstance(body.get("model"), str):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: must be a non-empty array"
    if "tools" in body and (problem := _check_function_tools(body["tools"])):
        return problem
    pending: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{i}].role: invalid value {role!r}"
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return (
                    f"messages[{i}]: messages with role 'tool' must be a response to a preceeding message "
                    "with 'tool_calls'."
                )
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}"
            )
        if role == "assistant" and m.get("tool_calls"):
            for j, c in enumerate(m["tool_calls"]):
                fn = c.get("function") or {}
                if c.get("type") != "function" or not c.get("id") or not isinstance(fn.get("arguments"), str):
                    return f"messages[{i}].tool_calls[{j}]: needs id, type 'function' and string arguments"
                pending.append(c["id"])
        elif not isinstance(m.get("content"), str):
            return f"messages[{i}].content: must be a string"
    return None


def check_anthropic(req: Request) -> str | None:
    """Messages API: key and version headers, max_tokens, user-first alternation, tool_use answered next turn."""
    if req.path != "/v1/messages":
        return f"Not found: {req.path}"
    if not req.headers.get("x-api-key"):
        return "x-api-key header is required"
    if not req.headers.get("anthropic-version"):
        return "anthropic-version: header is required"
    body = req.body
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    if not isinstance(body.get("system", ""), str | list):
        return "system: Input should be a valid list"
    for i, t in enumerate(body.get("tools") or []):
        if not _FUNCTION_NAME.fullmatch(str(t.get("name", ""))):
            return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if (t.get("input_schema") or {}).get("type") != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    expected = "user"
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if role != expected:
            return 'messages: roles must alternate between "user" and "assistant"'
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            return f"messages.{i}.content: must be a string or a non-empty list of blocks"
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if answered - pending:
            return (
                f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(sorted(map(str, answered - pending)))}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        if pending - answered:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(sorted(pending - answered))}"
            )
        for b in blocks:
            if b.get("type") == "text" and not b.get("text"):
                return f"messages.{i}: text content blocks must be non-empty"
            if b.get("type") in ("tool_use", "tool_result") and not body.get("tools"):
                return "Requests which include `tool_use` or `tool_result` blocks must define tools."
        pending = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        expected = "assistant" if role == "user" else "user"
    if expected != "assistant":
        return "messages: the last message must have role user"
    return None


def check_ollama(req: Request) -> str | None:
    """/api/chat: model, messages, function tools, object arguments in history tool calls."""
    if req.path != "/api/chat":
        return f"404 page not found: {req.path}"
    body = req.body
    if not body.get("model"):
        return "model is required"
    if "tools" in body and (problem := _check_function_tools(body["tools"])):
        return problem
    for i, m in enumerate(body.get("messages") or []):
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            return f"messages[{i}]: invalid role"
        for c in m.get("tool_calls") or []:
            if not isinstance((c.get("function") or {}).get("arguments"), dict):
                return "json: cannot unmarshal string into Go struct field .messages.tool_calls.function.arguments"
    return None


CHECKS: dict[Wire, Callable[[Request], str | None]] = {
    "openai": check_openai,
    "anthropic": check_anthropic,
    "ollama": check_ollama,
}
ERRORS: dict[Wire, Callable[[str], Any]] = {
    "openai": lambda m: openai_error("invalid_request_error", m),
    "anthropic": lambda m: anthropic_error("invalid_request_error", m),
    "ollama": lambda m: {"error": m},
}
