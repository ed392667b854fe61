"""``promcp proxy mcp --upstream URL``: a recording reverse proxy in front of one MCP server over HTTP.

Streamable HTTP (POST with a JSON or SSE answer, GET event streams, ``Mcp-Session-Id``, DELETE) and legacy SSE (a
GET ``/sse`` stream whose ``endpoint`` event names where to POST) both go through the one reverse-proxy core of
promcp (:mod:`promcp.proxy._http`): every byte forwarded as it arrives, each SSE event handed on before the next
one is read, credential headers never seen by the recording side. What passes is recorded by the same
:class:`~promcp.proxy.mcp.observer.McpObserver` as the stdio relay, one per client session
(:mod:`.http_exchanges`), so a server gives the same events over HTTP as over stdio::

    from promcp.proxy.mcp.http import McpHttpProxy

    with McpHttpProxy("http://127.0.0.1:3001/mcp", out="traces", name="everything") as proxy:
        ...  # point the client at proxy.url

DNS rebinding: only requests whose ``Host`` is a loopback name and whose ``Origin`` (when a browser sent one) is a
loopback origin are relayed; others get 403 and one log line (``allow_hosts`` / ``allow_origins``, the CLI's
``--allow-host`` / ``--allow-origin``, widen it). An allowed foreign ``Host`` reaches the server unchanged, so a
server's own check (the mcp SDK's ``TransportSecuritySettings``) keeps working behind the proxy
(:mod:`promcp.proxy._hosts`).

Runs: one per client session (each ``Mcp-Session-Id`` or legacy SSE session is its own run, finalized when the
session ends) unless ``run_id`` is given — then every session writes one part of that run (``promcp record``, or
``--run-id`` / ``$PROMCP_RUN_ID``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from promcp.content import DEFAULT_CONTENT, DEFAULT_MAX_CONTENT_BYTES
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.proxy._hosts import HostPolicy
from promcp.proxy._http import ProxyRequest, ReverseProxy
from promcp.proxy.mcp.frames import DEFAULT_MAX_FRAME
from promcp.proxy.mcp.http_exchanges import HttpSessions
from promcp.proxy.mcp.http_hooks import HttpExchange
from promcp.proxy.mcp.session_registry import SOURCE, SessionRegistry
from promcp.redact import public_url
from promcp.stages import SYSTEM_CLOCK, Clock
from promcp.tokenizers import CachedTokenizer

__all__ = ["SOURCE", "STREAM_SILENCE_S", "McpHttpProxy", "serve"]

#: how long a server may stay silent on an open exchange (an idle GET stream, a long tool) before the proxy gives
#: up on it: a day, i.e. never before the client does
STREAM_SILENCE_S = 24 * 3600.0


def _say(text: str) -> None:  # the command's own start and summary lines (its problems are logged)
    with contextlib.suppress(OSError):
        os.write(2, f"promcp proxy: {text}\n".encode(errors="replace"))


class McpHttpProxy:
    """A recording reverse proxy from ``host:port`` to the MCP server at ``upstream``.

    Start it with ``with`` (a thread of its own) or ``await start()`` / ``await close()`` on a running loop;
    :attr:`url` is the address to give the client (the upstream's path on the local origin). Closing ends every
    open session and finalizes the runs.
    """

    def __init__(
        self,
        upstream: str,
        *,
        out: str | Path = "traces",
        name: str | None = None,
        run_id: str | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
        timeout_s: float | None = None,
        content: str = DEFAULT_CONTENT,
        max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
        max_message: int = DEFAULT_MAX_FRAME,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_remote: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        meta: Mapping[str, Any] | None = None,
        allow_hosts: Sequence[str] = (),
        allow_origins: Sequence[str] = (),
    ) -> None:
        self.http = ReverseProxy(
            upstream,
            observe=self._observe,
            host=host,
            port=port,
            allow_remote=allow_remote,
            read_timeout_s=STREAM_SILENCE_S,
            clock=clock,
            hosts=HostPolicy(allow_hosts, allow_origins),
        )
        self.name = name or urlsplit(upstream).hostname or "server"
        self.clock = clock
        self._tokenizer_name = tokenizer
        self._tokenizer: CachedTokenizer | None = None
        self._tokenizer_lock = threading.Lock()
        registry = SessionRegistry(
            out=Path(out),
            name=self.name,
            run_id=run_id,
            tokenizer=self.tokenizer,
            content=content,
            max_content_bytes=max_content_bytes,
            timeout_s=timeout_s,
            meta={
                "server": self.name,
                "transport": "http",
                "upstream": public_url(upstream),
                "proxy_pid": os.getpid(),
                **(meta or {}),
            },
        )
        self.sessions = HttpSessions(registry, max_message=max_message)
        self._closed = False
        # the tokenizer takes ~0.5 s to load: not at the first tools/list
        threading.Thread(target=self._warm, name="promcp-proxy-tokenizer", daemon=True).start()

    def _warm(self) -> None:
        with contextlib.suppress(Exception):
            self.tokenizer()

    def tokenizer(self) -> CachedTokenizer:
        """The footprint tokenizer, loaded once for every session (``o200k_base`` when the named one fails)."""
        with self._tokenizer_lock:
            if self._tokenizer is None:
                from promcp import tokenizers

                self._tokenizer = tokenizers.get_or_default(self._tokenizer_name)  # a fallback is logged
            return self._tokenizer

    def _observe(self, request: ProxyRequest) -> HttpExchange:
        return self.sessions.observe(request, self.clock.now())

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def port(self) -> int:
        return self.http.port

    async def start(self) -> None:
        await self.http.start()

    async def close(self) -> None:
        await self.http.close()
        self._stop_sessions()

    def _stop_sessions(self) -> None:
        if not self._closed:
            self._closed = True
            self.sessions.stop(self.clock.now())

    def __enter__(self) -> McpHttpProxy:
        self.http.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop_thread()
        self._stop_sessions()


def serve(proxy: McpHttpProxy, *, upstream: str, run_note: str) -> int:
    """Run ``proxy`` in this thread until SIGINT, SIGTERM or SIGHUP; then end the sessions and finalize the runs
    (used by ``promcp proxy mcp --upstream``)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await proxy.start()
        _say(f"{proxy.url} → {public_url(upstream)}  ({run_note}; Ctrl-C stops)")
        try:
            await stop.wait()
        finally:
            await proxy.close()

    asyncio.run(main())
    s = proxy.sessions
    runs = ", ".join(s.runs) if s.runs else "none"
    _say(f"{s.sessions_seen} session(s) recorded; run(s): {runs}")
    return 0
