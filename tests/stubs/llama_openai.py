"""The embedded llama.cpp model (the default SmolLM2 GGUF of ``promcp run``) served on loopback as an
OpenAI-compatible Chat Completions API: real inference behind a real HTTP server, for end-to-end tests of clients
and proxies. Streams with ``stream: true`` (llama-cpp-python's own ``chat.completion.chunk`` objects as SSE, then
``[DONE]``); otherwise one JSON response with llama.cpp's usage. One request at a time (one model).

The model runs in its own process (``python -m tests.stubs.llama_openai``), loaded by promcp's own
``load_llama`` (the load options ``promcp run`` uses): a native crash in llama.cpp ends that process, and the test
that used it fails saying which signal killed the model, instead of the whole pytest process dying."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from promcp.host.llm._model_process import load_llama
from promcp.host.llm.llama_cpp import DEFAULT_MODEL_SHA256, default_model_path, verify_sha256


class _Server:
    def __init__(self, *, n_ctx: int = 2048) -> None:
        path = default_model_path()
        verify_sha256(path, DEFAULT_MODEL_SHA256)
        self.model_path = path
        self.llm = load_llama(path, n_ctx, 2, 0)
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

    def __enter__(self) -> _Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class LlamaOpenAI:
    """The server above in a child process: ``with LlamaOpenAI() as model: model.url``."""

    def __init__(self, *, n_ctx: int = 2048) -> None:
        self.model_path = default_model_path()
        self.n_ctx = n_ctx
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> LlamaOpenAI:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.stubs.llama_openai", str(self.n_ctx)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"the model server did not start: {self.died() or line!r}")
        self.url = line
        return self

    def died(self) -> str | None:
        """How the model's process ended, if it did (``killed by SIGSEGV``), else ``None``."""
        code = None if self._proc is None else self._proc.poll()
        if code is None:
            return None
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        death = self.died()
        self._proc.stdin.close()  # the child serves until its stdin closes
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if death is not None:
            raise AssertionError(f"the model server process was {death} during the test")


def main() -> None:
    with _Server(n_ctx=int(sys.argv[1]) if len(sys.argv) > 1 else 2048) as server:
        print(server.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
