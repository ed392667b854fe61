"""``promcp proxy llm``: a recording reverse proxy for LLM APIs (Anthropic Messages, OpenAI Chat Completions and
Responses, Ollama ``/api/chat``, the Gemini API's ``generateContent`` / ``streamGenerateContent``), on the shared HTTP core (:mod:`promcp.proxy._http`).

A client pointed at :attr:`LLMProxy.url` (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``…) talks to the upstream as
before — every byte forwarded as it arrives — while each LLM call becomes the events every promcp source records
(docs/proxy-llm.md)::

    from promcp.proxy.llm import LLMProxy
    from promcp.recorder import Recorder

if TYPE_CHECKING:
    from promcp.strategies.live import StrategySpec

    with Recorder("traces", topology="c-ots", source="proxy:llm") as rec, LLMProxy("https://api.anthropic.com", rec) as proxy:
        ...  # run the client with ANTHROPIC_BASE_URL=proxy.url
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.proxy._http import DEFAULT_READ_TIMEOUT_S, ReverseProxy
from promcp.proxy.llm._exchange import api_of
from promcp.proxy.llm._record import SESSION_HEADERS, Counters, LLMRecording
from promcp.recorder import Recorder

if TYPE_CHECKING:
    from promcp.strategies.live import StrategySpec

__all__ = ["DEFAULT_UPSTREAMS", "SESSION_HEADERS", "SOURCE", "Counters", "LLMProxy", "api_of"]

#: the ``source`` column of what the LLM proxy records
SOURCE = "proxy:llm"
#: the public API each client family talks to when its base-URL variable is not set
DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}


class LLMProxy:
    """A :class:`~promcp.proxy._http.ReverseProxy` to ``upstream`` whose LLM calls go to ``recorder``.

    Start it with ``with`` (a thread of its own) or ``await start()`` / ``await close()`` on a running loop. The
    recorder is the caller's: closing the proxy waits until every finished call is journaled, then leaves the
    recorder open.

    ``strategy`` (``--strategy``): requests are rewritten in flight by it (promcp/proxy/llm/_rewrite.py); off when
    ``None``.
    """

    def __init__(
        self,
        upstream: str,
        recorder: Recorder,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_remote: bool = False,
        tokenizer: str | None = None,
        footprint_tokenizer: str = DEFAULT_TOKENIZER,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        mcp_servers: Sequence[str] = (),
        strategy: StrategySpec | None = None,
    ) -> None:
        rewriter = None
        if strategy is not None:  # imported on use: the plain recording path stays as light as it was
            from promcp.proxy.llm._rewrite import Rewriter

            rewriter = Rewriter(strategy)
            rewriter.warm()  # the embedding model, if the scorer needs one, loads while the client starts
        self.recording = LLMRecording(
            recorder,
            tokenizer=tokenizer,
            footprint_tokenizer=footprint_tokenizer,
            mcp_servers=mcp_servers,
            rewriter=rewriter,
        )
        self.http = ReverseProxy(
            upstream,
            observe=self.recording.observe,
            host=host,
            port=port,
            allow_remote=allow_remote,
            read_timeout_s=read_timeout_s,
        )

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def counters(self) -> Counters:
        return self.recording.counters

    async def start(self) -> None:
        await self.http.start()

    async def close(self) -> None:
        await self.http.close()
        self.recording.close()

    def __enter__(self) -> LLMProxy:
        self.http.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop_thread()
        self.recording.close()
