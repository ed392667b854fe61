"""The embedded llama.cpp model (the default SmolLM2 GGUF of ``promcp run``) served on loopback as an
OpenAI-compatible Chat Completions API: real inference behind a real HTTP server, for end-to-end tests of clients
and proxies. Streams with ``stream: true`` (llama-cpp-python's own ``chat.completion.chunk`` objects as SSE, then
``[DONE]``); otherwise one JSON response with llama.cpp's usage. One request at a time (one model)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from promcp.host.llm.llama_cpp import DEFAULT_MODEL_SHA256, _load, default_model_path, verify_sha256


class LlamaOpenAI:
    def __init__(self, *, n_ctx: int = 2048) -> None:
        path = default_model_path()
        verify_sha256(path, DEFAULT_MODEL_SHA256)
        self.model_path = path
        self.llm = _load(path, n_ctx, 2, 0)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                with server._lock:
                    server._answer(self, body)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        args = {
            "messages": body["messages"],
            "max_tokens": body.get("max_tokens") or 24,
            "temperature": 0.0,
            "seed": 0,
        }
        if not body.get("stream"):
            data = json.dumps(self.llm.create_chat_completion(**args)).encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for chunk in self.llm.create_chat_completion(**args, stream=True):
            frame = f"data: {json.dumps(chunk)}\n\n".encode()
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            handler.wfile.flush()
        done = b"data: [DONE]\n\n"
        handler.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        handler.wfile.flush()

    def __enter__(self) -> LlamaOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
