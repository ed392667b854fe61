"""Which ``Host`` and ``Origin`` a local proxy answers (DNS-rebinding protection), and which ``Host`` it sends on.

A web page the user visits can make the browser send requests to ``127.0.0.1:PORT`` — directly (its ``Origin`` is
then the page's) or through a DNS name it re-points at 127.0.0.1 (its ``Host`` is then that name). The MCP
specification asks servers on localhost to validate ``Origin``; servers built on the mcp SDKs also check ``Host``
(``TransportSecuritySettings``: 421 for a wrong ``Host``, 403 for a wrong ``Origin``). A proxy in front of such a
server must neither let such a request through nor undo the server's own check. :class:`HostPolicy`:

* **admits** a request when its ``Host`` is a loopback name (``localhost``, ``127.x.x.x``, ``[::1]``, any port) or
  one of ``allow_hosts``, and its ``Origin`` is absent (a client that is not a browser), a loopback origin
  (``http(s)://localhost:…``) or one of ``allow_origins`` (``*``: any). Anything else gets 403 from the proxy with
  one log line (:meth:`refusal` says why);
* **forwards** ``Host``: a loopback name addressed the proxy itself, so the upstream's own name replaces it (as a
  client talking to the upstream directly would send); a name the user allowed with ``--allow-host`` is sent on
  unchanged, so the upstream judges it by its own rules — the proxy never turns a foreign ``Host`` into the one the
  upstream trusts. ``Origin`` always goes on unchanged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["HostPolicy", "is_loopback_name"]


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (IPv6 in brackets) as (lower-case host, port); None when it is not one."""
    value = value.strip().lower()
    if not value:
        return None
    try:
        parts = urlsplit(f"//{value}")
        return (parts.hostname or "", parts.port)
    except ValueError:
        return None


def is_loopback_name(host: str) -> bool:
    """Whether ``host`` (no port) names this machine's loopback: ``localhost`` (and its subdomains, which resolvers
    keep on loopback), a 127/8 address or ``::1``."""
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HostPolicy:
    """The ``Host`` / ``Origin`` rule of one listener (see the module's docstring)."""

    def __init__(self, allow_hosts: Iterable[str] = (), allow_origins: Iterable[str] = ()) -> None:
        self.allow_hosts = {h.strip().lower() for h in allow_hosts if h.strip()}
        self.allow_origins = {o.strip().lower().rstrip("/") for o in allow_origins if o.strip()}

    def _allowed_host(self, value: str) -> bool:
        value = value.strip().lower()
        if value in self.allow_hosts:
            return True
        split = _split_host(value)
        return split is not None and split[0] in self.allow_hosts  # a name allowed without a port: any port

    def loopback_host(self, value: str | None) -> bool:
        split = _split_host(value or "")
        return split is not None and is_loopback_name(split[0])

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these headers is refused (None: it is admitted)."""
        if host is None or not host.strip():
            return "no Host header"
        if not self.loopback_host(host) and not self._allowed_host(host):
            return f"Host {host[:100]!r} is not a loopback name (--allow-host widens)"
        if origin is not None and origin.strip():
            value = origin.strip().lower().rstrip("/")
            if "*" in self.allow_origins or value in self.allow_origins:
                return None
            parts = urlsplit(value) if value != "null" else None
            if (
                parts is None
                or parts.scheme not in ("http", "https")
                or not is_loopback_name(parts.hostname or "")
            ):
                return f"Origin {origin[:100]!r} is not a loopback origin (--allow-origin widens)"
        return None

    def forward_host(self, host: str | None) -> bool:
        """Whether the client's ``Host`` goes to the upstream unchanged (an allowed foreign name) rather than being
        replaced by the upstream's own (a loopback name: the client addressed the proxy)."""
        return host is not None and not self.loopback_host(host)
