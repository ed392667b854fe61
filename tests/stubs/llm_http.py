"""Stub LLM HTTP servers on 127.0.0.1 that speak the OpenAI, Ollama and Anthropic wire formats.

A stub is a real HTTP server (``http.server`` in a thread, ephemeral port). It records every request (path, headers,
JSON body) and answers from a script: a list of ``Reply`` (status, JSON body, headers) consumed in order, or — for
end-to-end runs — an ``agent`` replier that reads the request like a model would: on a request whose last message
is not a tool result it calls the first offered tool with schema-shaped arguments, afterwards it answers in text.
The response bodies follow the providers' documented shapes, including usage blocks and error bodies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


Replier = Callable[[Request], Reply]


class StubServer:
    def __init__(self, replies: list[Reply] | Replier) -> None:
        self.requests: list[Request] = []
        self._replies = replies
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                req = Request(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}")
                )
                stub.requests.append(req)
                reply = stub._next(req)
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _next(self, req: Request) -> Reply:
        if callable(self._replies):
            return self._replies(req)
        if not self._replies:
            return Reply(500, {"error": {"type": "stub_exhausted", "message": "no scripted reply left"}})
        return self._replies.pop(0)

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
