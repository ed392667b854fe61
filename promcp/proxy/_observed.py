"""What an observer of the reverse proxy (:mod:`promcp.proxy._http`) sees of one exchange — the request and
response heads without credentials, how the exchange ended — the hooks it overrides, and the guard that keeps an
observer's failure from ever reaching the traffic."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from promcp.stages.clock import Instant

__all__ = [
    "ExchangeObserver",
    "Guarded",
    "Observe",
    "Outcome",
    "ProxyRequest",
    "ProxyResponse",
    "is_loopback",
    "safe_headers",
]

log = logging.getLogger(__name__)

_SECRET_NAMES = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_SECRET_LIKE = re.compile(r"key|token|secret|auth|passw|credential|signature|cookie", re.I)


def safe_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` (lower-case names) without credentials: the only view of headers an observer gets."""
    return [
        (name, value)
        for name, value in headers
        if name not in _SECRET_NAMES and not _SECRET_LIKE.search(name)
    ]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listen address) is a loopback address."""
    if host == "localhost":
        return True
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    import ipaddress

    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


@dataclass
class ProxyRequest:
    """One request as received (credential headers removed), handed to ``observe``."""

    method: str
    target: str  # path and query, as received
    headers: list[tuple[str, str]]  # lower-case names, credentials removed (safe_headers)
    body: bytes
    received: Instant  # the request's head arrived
    client: str  # "host:port" of the client

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


@dataclass
class ProxyResponse:
    """The response head as the upstream sent it (credential headers removed)."""

    status: int
    headers: list[tuple[str, str]]
    started: Instant  # the head arrived from the upstream
    sent: Instant | None = None  # the request had been handed to the upstream in full

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


@dataclass
class Outcome:
    """How an exchange ended, handed to :meth:`ExchangeObserver.end`.

    ``error`` is None when the response was forwarded whole; else one of ``upstream_unreachable`` (502 sent),
    ``upstream_timeout`` (504 sent, or the upstream went silent mid-body), ``upstream_error`` (502 sent),
    ``upstream_cut`` (the upstream broke off mid-body; the client's response was broken off too),
    ``client_disconnected`` (the client went away; the upstream response was closed), ``request_too_large`` (413
    sent, nothing forwarded), ``proxy_closed`` (the proxy stopped mid-response).
    """

    end: Instant
    error: str | None = None
    message: str | None = None
    bytes_to_client: int = 0  # body bytes handed to the client (as the upstream sent them)
    status: int | None = None  # the status the client got (the upstream's, or the proxy's own 502/504/413)
    sent: Instant | None = None  # the request had been handed to the upstream in full (None: it never was)


class ExchangeObserver:
    """Hooks for one exchange (subclass and override what you need; every hook is optional)."""

    #: set in :meth:`response` to change the response body before it reaches the client: called with each chunk
    #: (returns the bytes to send now, possibly none while it holds some back) and once with ``b""`` when the
    #: upstream's body ended (returns what it still holds). Ignored for a response with ``Content-Length``.
    rewrite: Callable[[bytes], bytes] | None = None
    #: set in ``observe`` to change the request before it is forwarded: called (in a worker thread) with the body
    #: as received; returns the body to forward and headers to set on it (lower-case name → value)
    prepare: Callable[[bytes], tuple[bytes, Mapping[str, str]]] | None = None

    def forwarded(self, at: Instant) -> None:
        """The request was handed to the upstream in full (before any answer; again if it is sent once more on a
        fresh connection after a stale keep-alive one)."""

    def response(self, response: ProxyResponse) -> None:
        """The upstream's response head (already forwarded)."""

    def chunk(self, data: bytes, at: Instant) -> None:
        """One body chunk as the upstream sent it, right after it was handed to the client socket."""

    def end(self, outcome: Outcome) -> None:
        """The exchange is over (exactly once)."""


Observe = Callable[[ProxyRequest], ExchangeObserver | None]


class Guarded:
    """An observer whose failures never reach the exchange: a ``response`` or ``chunk`` hook that raises is logged
    and the observer gets no more of them; ``end`` is still called once."""

    def __init__(self, inner: ExchangeObserver) -> None:
        self.inner = inner
        self.broken = False

    @property
    def rewrite(self) -> Callable[[bytes], bytes] | None:
        return None if self.broken else self.inner.rewrite

    @property
    def prepare(self) -> Callable[[bytes], tuple[bytes, Mapping[str, str]]] | None:
        return self.inner.prepare

    def _fail(self, hook: str) -> None:
        self.broken = True
        log.exception("promcp proxy: observer %s.%s failed; detached", type(self.inner).__name__, hook)

    def forwarded(self, at: Instant) -> None:
        if not self.broken:
            try:
                self.inner.forwarded(at)
            except Exception:
                self._fail("forwarded")

    def response(self, response: ProxyResponse) -> None:
        if not self.broken:
            try:
                self.inner.response(response)
            except Exception:
                self._fail("response")

    def chunk(self, data: bytes, at: Instant) -> None:
        if not self.broken:
            try:
                self.inner.chunk(data, at)
            except Exception:
                self._fail("chunk")

    def end(self, outcome: Outcome) -> None:
        try:
            self.inner.end(outcome)
        except Exception:
            log.exception("promcp proxy: observer %s.end failed", type(self.inner).__name__)
