"""Sending OTLP trace requests: OTLP/HTTP with a protobuf or JSON body, or OTLP/gRPC.

Each request is retried while the destination says it is busy (HTTP 429/502/503/504 honouring ``Retry-After``,
gRPC ``UNAVAILABLE`` / ``RESOURCE_EXHAUSTED``) or the connection broke, a few times with a growing pause; anything
else ends the export with one line naming the destination and the reason (:class:`ExportError`).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any, Final, Protocol
from urllib.parse import unquote, urlsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from promcp.errors import ConfigError, ExportError
from promcp.store.files import describe

__all__ = ["PROTOCOLS", "Sender", "make_sender", "otlp_json", "traces_url"]

PROTOCOLS: Final = ("http/protobuf", "http/json", "grpc")
_BUSY: Final = frozenset({429, 502, 503, 504})
_ID_KEYS: Final = frozenset({"traceId", "spanId", "parentSpanId"})


class Sender(Protocol):
    url: str
    rejected: int

    def send(self, request: ExportTraceServiceRequest) -> None: ...

    def close(self) -> None: ...


def traces_url(url: str, protocol: str) -> str:
    """The URL requests go to: for OTLP/HTTP, ``/v1/traces`` is appended unless the path already ends with it (as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` does); raises :class:`ConfigError` naming ``--otlp`` for a URL that is not one."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"{url!r} is not an http:// or https:// URL", key="--otlp")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"{url!r} has an invalid port", key="--otlp") from None
    if not parts.hostname:
        raise ConfigError(f"{url!r} names no host", key="--otlp")
    del port
    path = parts.path.rstrip("/")
    if protocol != "grpc" and not path.endswith("/v1/traces"):
        path += "/v1/traces"
    netloc = parts.netloc
    return f"{parts.scheme}://{netloc}{path}{'?' + parts.query if parts.query else ''}"


def _basic_auth(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(token).decode()}


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """The OTLP/JSON body of a request: protobuf's JSON mapping with hex trace / span ids and integer enums."""
    from google.protobuf import json_format

    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    return json.dumps(_hex_ids(doc), separators=(",", ":")).encode()


def _safe(url: str) -> str:
    """The URL as shown in messages (no user info)."""
    parts = urlsplit(url)
    return url.replace(parts.netloc, parts.netloc.rsplit("@", 1)[-1]) if "@" in parts.netloc else url


class HttpSender:
    """OTLP/HTTP on one kept-alive connection."""

    def __init__(
        self,
        url: str,
        *,
        encoding: str = "protobuf",
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        retries: int = 5,
    ) -> None:
        parts = urlsplit(url)
        self.url = _safe(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._path = parts.path + (f"?{parts.query}" if parts.query else "")
        self._json = encoding == "json"
        self._headers = {
            "Content-Type": "application/json" if self._json else "application/x-protobuf",
            **_basic_auth(url),
            **dict(headers or {}),
        }
        self.timeout, self.retries = timeout, retries
        self.rejected = 0
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout, context=ssl.create_default_context()
                )
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def send(self, request: ExportTraceServiceRequest) -> None:
        body = otlp_json(request) if self._json else request.SerializeToString()
        pause = 0.5
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                conn = self._connection()
                conn.request("POST", self._path, body, self._headers)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError:
                self.close()
                if last or attempt >= 1:  # it hangs: one more try, then say so
                    raise ExportError(f"{self.url}: no answer within {self.timeout:g} s") from None
            except socket.gaierror as exc:
                self.close()
                raise ExportError(f"{self.url}: cannot resolve {self._host!r} ({exc.strerror})") from None
            except ssl.SSLError as exc:
                self.close()
                raise ExportError(f"{self.url}: TLS failed ({exc.reason or exc})") from None
            except ConnectionRefusedError:
                self.close()
                if last or attempt >= 2:  # nothing listens: say so quickly
                    raise ExportError(
                        f"{self.url}: connection refused (is the collector running and listening there?)"
                    ) from None
            except (OSError, http.client.HTTPException) as exc:
                self.close()  # a dropped keep-alive connection: try again on a new one
                if last:
                    why = describe(exc) if isinstance(exc, OSError) else type(exc).__name__
                    raise ExportError(f"{self.url}: the connection failed ({why})") from None
            else:
                if 200 <= resp.status < 300:
                    self._partial(data, resp.getheader("Content-Type") or "")
                    return
                if resp.status not in _BUSY or last:
                    raise ExportError(f"{self.url} answered {resp.status} {resp.reason}{_snippet(data)}")
                retry_after = _retry_after(resp.getheader("Retry-After"))
                if retry_after is not None:
                    pause = retry_after
            if not last:
                time.sleep(min(pause, 30.0))
                pause = min(pause * 2, 30.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _partial(self, data: bytes, content_type: str) -> None:
        """Count the spans a destination said it rejected (OTLP partial success)."""
        if not data:
            return
        resp = ExportTraceServiceResponse()
        try:
            if "json" in content_type:
                doc = json.loads(data)
                n = int((doc.get("partialSuccess") or {}).get("rejectedSpans") or 0)
            else:
                resp.ParseFromString(data)
                n = int(resp.partial_success.rejected_spans)
        except Exception:  # an answer that is not OTLP: the request was accepted
            return
        self.rejected += n


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def _snippet(data: bytes) -> str:
    text = data[:300].decode("utf-8", "replace").strip()
    if not text or not text.isprintable():
        return f" ({len(data)} bytes)" if data else ""
    return f": {' '.join(text.split())[:200]}"


class GrpcSender:
    """OTLP/gRPC (``TraceService/Export``) on one channel."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        retries: int = 5,
    ) -> None:
        import grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

        parts = urlsplit(url)
        self.url = _safe(url)
        target = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 4317)}"
        self._channel = (
            grpc.secure_channel(target, grpc.ssl_channel_credentials())
            if parts.scheme == "https"
            else grpc.insecure_channel(target)
        )
        self._stub = TraceServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = [(k.lower(), v) for k, v in {**_basic_auth(url), **dict(headers or {})}.items()]
        self.timeout, self.retries = timeout, retries
        self.rejected = 0

    def send(self, request: ExportTraceServiceRequest) -> None:
        import grpc

        pause = 0.5
        for attempt in range(self.retries + 1):
            try:
                resp = self._stub.Export(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                busy = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
                if (
                    not busy
                    or attempt == self.retries
                    or (code is grpc.StatusCode.UNAVAILABLE and attempt >= 2)
                ):
                    detail = exc.details() if hasattr(exc, "details") else str(exc)
                    name = code.name if code is not None else "error"
                    raise ExportError(
                        f"{self.url} (gRPC): {name}: {' '.join(str(detail).split())[:200]}"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 30.0)
            else:
                self.rejected += int(resp.partial_success.rejected_spans)
                return

    def close(self) -> None:
        self._channel.close()


def make_sender(
    url: str, protocol: str, *, headers: Mapping[str, str] | None = None, timeout: float = 10.0
) -> Sender:
    """A sender of ``protocol`` (one of :data:`PROTOCOLS`) to ``url`` (see :func:`traces_url`)."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{protocol!r}: expected one of {', '.join(PROTOCOLS)}", key="--protocol")
    target = traces_url(url, protocol)
    if protocol == "grpc":
        return GrpcSender(target, headers=headers, timeout=timeout)
    return HttpSender(target, encoding=protocol.split("/")[1], headers=headers, timeout=timeout)
