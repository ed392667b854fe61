"""``promcp collect``: an OTLP/HTTP receiver that turns what agents export into promcp events.

``POST /v1/logs``, ``/v1/traces``, ``/v1/metrics`` with ``application/x-protobuf`` or ``application/json`` bodies,
gzip or not — what every OpenTelemetry SDK exporter and the OpenTelemetry Collector's ``otlphttp`` exporter send.
Requests are decoded and mapped by :mod:`promcp.collectors.otlp` (the same mapping ``promcp import --format otlp``
uses for the Collector's ``file`` exporter) and the events are built by the importers' builder, so a collected
session and an imported one are the same events.

Answers: 200 with an empty export response in the request's encoding; 400 with the reason for a body that does not
decode (nested too deep included); 413 for a body over the limit; 415 for another content type; 404 for another
path; and **503 with ``Retry-After``** when the recording worker is behind (the queue of decoded requests is full,
or the bodies being read and queued would pass ``max_pending`` bytes) and, with the reason, when the recording
worker has stopped: nothing is acknowledged that cannot be recorded. **A batch is written to the spool before it is
answered 200** (:mod:`promcp._spool`: on disk until it is recorded), so a collector killed with SIGKILL loses
nothing it acknowledged: the next ``promcp collect`` on the same folder (or ``promcp finalize``) replays it. OTLP
exporters retry on 503, so a burst is slowed down, never dropped. Bad input only affects its own request; a request the worker could not record (out of
memory, say) is counted as lost and said. The listener is bounded too: a listen backlog for hundreds of senders,
``timeout_s`` for a request's head, its body and an idle keep-alive connection, and at most ``max_connections``
connections at once (a refused one is one line on stderr, never a traceback).

Spans are journaled as they arrive (:mod:`promcp.collectors.otlp_runs` says into which run: promcp's own rows into
their own run, other spans into one run per sender and day); Claude Code's log events as each prompt finishes: at
the session's next prompt, after ``idle_s`` without news from it, at a rotation and at exit. Every ``rotate_s`` the
open runs are finalized into Parquet (a later batch of the same run continues it as a part, merged in), so a
long-running collector yields readable runs. SIGINT / SIGTERM finalize.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from promcp._spool import FsyncPolicy, SpooledBatch
from promcp.bounded_worker import BoundedWorker
from promcp.content import DEFAULT_CONTENT, DEFAULT_MAX_CONTENT_BYTES
from promcp.defaults import DEFAULT_TOKENIZER

__all__ = ["Collector", "CollectorStats", "replay_spool"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY: Final = 64 * 1024 * 1024
#: bodies being read or queued for the recording worker, in bytes, before the receiver answers 503
DEFAULT_MAX_PENDING: Final = 256 * 1024 * 1024
#: connections served at once (each holds a thread); more are closed at once with one line on stderr
DEFAULT_MAX_CONNECTIONS: Final = 512
#: the listen backlog: the 200 senders docs/collect.md sizes it for connect at once without a reset
LISTEN_BACKLOG: Final = 1024
#: seconds a request's head, its body, or an idle keep-alive connection may take
DEFAULT_TIMEOUT_S: Final = 30.0
BEHIND: Final = "promcp collect is behind: retry later"
#: the INFO line logged for each run file written (``promcp finalize`` says those on stdout instead)
FINALIZED: Final = "finalized %s"


@dataclass
class CollectorStats:
    """What the receiver saw (printed at exit)."""

    requests: dict[str, int] = field(default_factory=dict)  # kind → accepted requests
    rejected: dict[int, int] = field(default_factory=dict)  # HTTP status → requests
    grpc_rejected: dict[str, int] = field(default_factory=dict)  # gRPC status name → requests
    records: int = 0
    spans: int = 0
    metrics: int = 0
    events: int = 0
    tasks: int = 0
    prompts: dict[str, int] = field(
        default_factory=dict
    )  # client (Claude Code, Gemini CLI) → prompts recorded
    problems: int = 0  # spans or requests the mapping refused (each said on stderr)
    lost: int = 0  # acknowledged requests the worker could not record (out of memory…; each said on stderr)
    unplaced: int = 0  # Claude Code tool results without a call to join (kept as events of their own)
    refused_connections: int = 0  # connections closed at once: over max_connections
    duplicates: int = 0  # rows already recorded (an exporter's retry)
    replayed: int = 0  # batches an earlier process acknowledged and left in the spool, recorded by this one
    unmapped: dict[str, int] = field(default_factory=dict)  # spans left out, by why
    runs: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class _Batch:
    """A decoded export request on its way to the recording worker: spooled as batch ``number``."""

    kind: str
    request: Any
    number: int
    replayed: bool


class Collector:
    """The receiver: an HTTP server on loopback, a bounded queue, one recording worker
    (:class:`promcp.bounded_worker.BoundedWorker`). Problems and progress are logged on ``promcp.collect`` (and
    ``promcp.collectors.otlp_runs``); ``promcp collect`` prints them through its one handler."""

    def __init__(
        self,
        out: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 4318,
        rotate_s: float | None = None,
        idle_s: float = 30.0,
        queue_size: int = 256,
        max_body: int = DEFAULT_MAX_BODY,
        content: str = DEFAULT_CONTENT,
        max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
        grpc: tuple[str, int] | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        spool_fsync: FsyncPolicy = "never",
    ) -> None:
        from promcp import tokenizers
        from promcp.collectors import otlp
        from promcp.collectors.otlp_runs import OtlpRuns
        from promcp.collectors.otlp_spans import SpanMapper

        self.out = Path(out)
        self.rotate_s, self.idle_s = rotate_s, idle_s
        self.max_body = max_body
        self.content, self.max_content_bytes = content, max_content_bytes
        self.stats = CollectorStats()
        self.sessions = otlp.ClaudeCodeSessions()
        self.runs = OtlpRuns(out, content=content, max_content_bytes=max_content_bytes)
        self.mapper = SpanMapper(tokenizers.get(DEFAULT_TOKENIZER))
        self._lock = threading.Lock()
        self.max_pending, self.max_connections, self.timeout_s = max_pending, max_connections, timeout_s
        self._reading = 0  # bytes of bodies being read and decoded (queued ones: the worker's backlog_bytes)
        self._connections = 0
        #: why the recording worker stopped (None while it runs): the receiver then answers 503 with it
        self.stopped: str | None = None
        self._server = _Server((host, port), _handler(self), self)
        self._grpc: Any = None
        self.grpc_port: int | None = None
        if grpc is not None:
            self._grpc, self.grpc_port = _grpc_server(self, *grpc)
        # at most queue_size decoded requests (the one being recorded included); their bodies' bytes count against
        # max_pending (reserve()); a full queue is a 503, never a wait; each recorded batch, and every second of quiet,
        # ends with the due work (idle prompts, rotation); a failure stops the recording (_failed)
        self._worker: BoundedWorker[_Batch] = BoundedWorker(
            self._record_spooled,
            name="promcp-collect",
            max_items=queue_size,
            full="refuse",
            tick_s=1.0,
            on_tick=self._due,
            on_error=self._failed,
            on_stop=self._finish,
            start=False,
        )
        self._opened = time.monotonic()  # the open runs' start, for rotate_s (again at start())
        self._init_spool(content, max_content_bytes, spool_fsync)
        self._serving = threading.Thread(
            target=self._server.serve_forever, name="promcp-collect-http", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> Collector:
        self._opened = time.monotonic()
        self._worker.start()
        self._replaying.start()
        self._serving.start()
        if self._grpc is not None:
            self._grpc.start()
        return self

    def stop(self) -> CollectorStats:
        """Stop accepting, record what is queued and every open prompt, finalize the run."""
        if self._grpc is not None:
            self._grpc.stop(grace=5).wait()
        self._server.shutdown()
        self._server.server_close()
        self._stop_replay()
        self._worker.close()  # records what is queued, then every open prompt (_finish)
        if (
            not self._spool.closed
        ):  # the worker stopped before recording everything: left for the next process
            self._spool.release()
        return self.stats

    # -- the HTTP side (handler threads) ------------------------------------------------------------------------

    def accept(self, path: str, body: bytes, content_type: str, encoding: str) -> tuple[int, bytes, str, str]:
        """(status, body, content type, reason) of the answer to one POST."""
        from promcp.collectors import otlp
        from promcp.errors import ImportFormatError

        kind = otlp.request_kind(path)
        if kind is None:
            return self._reject(404, f"no OTLP endpoint {path!r} (POST /v1/logs, /v1/traces or /v1/metrics)")
        media = content_type.split(";", 1)[0].strip().lower()
        if media not in ("application/x-protobuf", "application/json"):
            return self._reject(415, f"content-type {media or 'none'!r}: send application/x-protobuf or json")
        try:
            request = otlp.decode_request(kind, body, media, encoding)
        except otlp.RequestTooLarge as exc:
            return self._reject(413, str(exc))
        except ImportFormatError as exc:
            return self._reject(400, str(exc))
        except RecursionError:  # protobuf's own nesting limit is lower; a bound whatever the decoder
            return self._reject(400, "the request is nested too deep to decode")
        except MemoryError:
            return self._reject(503, f"{BEHIND} (out of memory decoding the request)")
        if not self.enqueue(kind, request, len(body), SpooledBatch(kind, media, encoding, body)):
            return self._reject(503, self.stopped or BEHIND)
        if media == "application/json":
            return 200, b"{}", "application/json", ""
        return 200, b"", "application/x-protobuf", ""  # an empty Export*ServiceResponse

    def enqueue(
        self,
        kind: str,
        request: Any,
        size: int = 0,
        batch: SpooledBatch | None = None,
        replayed: bool = False,
    ) -> bool:
        """Write a decoded export request to the spool and queue it for the recording worker; False when the queue
        is full (back-pressure), the spool cannot be written, or the worker has stopped (:attr:`stopped` says
        why). ``size``: its body's bytes, already reserved with :meth:`reserve` (held by the worker's queue until
        recorded); ``batch``: the body as received (None: a gRPC message, spooled as protobuf)."""
        if self.stopped is not None or not self._spooled(kind, request, size, batch, replayed):
            return False
        with self._lock:
            self.stats.requests[kind] = self.stats.requests.get(kind, 0) + 1
        return True

    def reserve(self, size: int) -> bool:
        """Room for a body of ``size`` bytes while it is read and decoded (False: answer 503 without reading it)."""
        with self._lock:
            pending = self._worker.backlog_bytes  # queued or being recorded
            if self._reading + pending + size > self.max_pending and (self._reading or pending):
                return False
            self._reading += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._reading -= size

    def _reject(self, status: int, reason: str) -> tuple[int, bytes, str, str]:
        with self._lock:
            self.stats.rejected[status] = self.stats.rejected.get(status, 0) + 1
        body = json.dumps({"code": status, "message": reason}).encode()
        return status, body, "application/json", reason

    # -- the recording side (one worker thread) -----------------------------------------------------------------

    def _logs(self, request: Any) -> None:
        from promcp.collectors import otlp

        done: list[Any] = []
        for record in otlp.log_records(request):
            self.stats.records += 1
            done += self.sessions.add(record)
        self._conversations(done)

    def _conversations(self, conversations: list[Any]) -> None:
        self.stats.unplaced = self.sessions.unplaced
        if conversations:
            events, tasks = self.runs.conversations(conversations)
            self.stats.events += events
            self.stats.tasks += tasks

    def _traces(self, request: Any) -> None:
        from promcp.collectors import otlp_spans
        from promcp.collectors.otlp_gemini import is_gemini_span

        def problem(exc: Exception) -> None:
            self.stats.problems += 1
            log.warning("promcp collect: %s (span skipped)", exc)

        spans = list(otlp_spans.span_records(request))
        self.stats.spans += len(spans)
        gemini = [s for s in spans if is_gemini_span(s)]  # the Gemini CLI's: beside its logs (otlp_gemini.py)
        if gemini:
            spans = [s for s in spans if not is_gemini_span(s)]
            done: list[Any] = []
            for span in gemini:
                done += self.sessions.gemini.add_span(span)
            self._conversations(done)
        for resource, rows, events in otlp_spans.request_batches(spans, self.mapper, problem):
            self.stats.events += self.runs.carried(rows) if rows else self.runs.mapped(resource, events)

    def _close(self) -> None:
        written = self.runs.close()
        for path in written:
            log.info(FINALIZED, path)
        self.stats.runs.extend(written)
        self.stats.duplicates = self.runs.duplicates - self._replay_duplicates
        self.stats.unmapped = {**self.mapper.unmapped, **self.sessions.gemini.unmapped}
        self.stats.prompts = dict(self.runs.prompts)

    def _record(self, kind: str, request: Any) -> None:
        try:
            if kind == "logs":
                self._logs(request)
            elif kind == "traces":
                self._traces(request)
            else:  # metrics duplicate the log events' counts (claude_code.token.usage): counted, not added
                self.stats.metrics += sum(
                    len(sm.metrics) for rm in request.resource_metrics for sm in rm.scope_metrics
                )
        except (
            ValueError,
            TypeError,
            RecursionError,
        ) as exc:  # a value the mapping refuses: this request only
            self.stats.problems += 1
            log.warning(
                "promcp collect: a %s request was not fully recorded: %s", kind, exc or type(exc).__name__
            )
        except MemoryError:
            self.stats.lost += 1
            log.warning("promcp collect: a %s request was acknowledged but not recorded: out of memory", kind)

    # the worker's three hooks: after each batch and each second of quiet (_due), at close (_finish), on a failure
    # (_failed: anything _record does not turn into a problem — the journal cannot be written, say)

    def _due(self) -> None:
        """Prompts quiet for idle_s are journaled; every rotate_s the open runs are finalized."""
        if self.stopped is not None:
            return
        quiet = self.sessions.idle(time.time_ns(), self.idle_s)
        self._conversations(quiet)
        if quiet:  # prompts journaled: the spool files they held may go
            self._spool.recorded(None, self._held())
        if self.rotate_s and time.monotonic() - self._opened >= self.rotate_s:
            self._close()
            self._opened = time.monotonic()

    def _finish(self) -> None:
        if self.stopped is not None:
            return  # what it holds stays in the spool (stop() releases it for the next process)
        self._conversations(self.sessions.flush())
        self._close()
        self._spool.close()  # everything it held is journaled: nothing to replay

    def _failed(self, batch: _Batch | None, exc: BaseException) -> None:
        """The receiver must stop acknowledging what nobody records: 503 with the reason from now on; the batch it
        was recording and those waiting stay in the spool (the worker skips them) for the next process."""
        if self.stopped is not None:
            return
        waiting = self._worker.backlog_items - (batch is not None)
        self.stopped = (
            f"promcp collect cannot record: its recording worker stopped ({type(exc).__name__}: {exc})"
        )
        self.stats.lost += 1 + waiting  # the request it was recording (or its due work) and those waiting
        log.warning(
            "%s; %d acknowledged request(s) not recorded (kept in the spool: the next 'promcp collect' on %s or "
            "'promcp finalize %s' records them)",
            self.stopped,
            self.stats.lost,
            self.out,
            self.out,
        )

    # -- the spool: written before the 200 answer, replayed after a kill (promcp/_spool.py) -------------------------

    def _init_spool(self, content: str, max_content_bytes: int | None, fsync: FsyncPolicy) -> None:
        from promcp._spool import Spool

        meta = {"content": content, "max_content_bytes": max_content_bytes}
        self._spool = Spool(self.out, meta=meta, fsync=fsync)
        self._spool_lock = threading.Lock()
        self._spool_failed = False
        self._replay_duplicates = 0  # rows of replayed batches an earlier process had journaled already
        self._replaying = threading.Thread(target=self._replay, name="promcp-collect-replay", daemon=True)

    def _spooled(
        self, kind: str, request: Any, size: int, batch: SpooledBatch | None, replayed: bool
    ) -> bool:
        """On disk, then queued (both or neither, as far as the answer goes)."""
        if batch is None:
            batch = SpooledBatch(kind, "application/x-protobuf", "", request.SerializeToString())
        with self._spool_lock:  # the only producer section: a free slot checked here stays free for the put
            if not self._worker.has_room(size):
                return False
            try:
                number = self._spool.write(batch)
            except OSError as exc:
                if not self._spool_failed:  # said once; every such batch is answered 503
                    self._spool_failed = True
                    log.warning(
                        "promcp collect: cannot write the spool %s: %s", self._spool.dir, exc.strerror or exc
                    )
                return False
            self._spool_failed = False
            if not self._worker.put(_Batch(kind, request, number, replayed), size):  # closed since the check
                self._spool.forget(number)
                return False
        return True

    def _record_spooled(self, batch: _Batch) -> None:
        if self.stopped is not None:
            return  # the recording stopped: the batch stays in the spool, counted lost when it stopped
        before = self.runs.duplicates
        try:
            self._record(batch.kind, batch.request)
        finally:
            if batch.replayed:
                self._replay_duplicates += self.runs.duplicates - before
            self._spool.recorded(batch.number, self._held())

    def _held(self) -> list[Any]:
        """The prompts whose records are held in memory, not journaled yet (their batches stay spooled)."""
        gemini = self.sessions.gemini
        return [
            *self.sessions.open,
            *(("gemini", *key) for key in gemini.open),
            *(("gemini spans", session) for session in gemini.held),  # spans waiting for their prompt's logs
        ]

    def _replay(self) -> None:
        """Batches an earlier (killed) process acknowledged and left in the spool: through the accept path again."""
        from promcp._spool import leftovers, read_spool
        from promcp.collectors import otlp
        from promcp.errors import ImportFormatError

        for path in leftovers(self.out):
            count = 0
            for batch in read_spool(path):
                try:
                    request = otlp.decode_request(batch.kind, batch.body, batch.media, batch.encoding)
                except (ImportFormatError, otlp.RequestTooLarge, RecursionError):
                    continue  # it was decoded once before it was spooled: not expected
                while not self.enqueue(batch.kind, request, 0, batch, replayed=True):
                    if self.stopped is not None:
                        return  # the worker stopped: the file stays, replayed by the next process
                    time.sleep(0.02)  # the queue is full: the worker catches up
                count += 1
            path.unlink(missing_ok=True)  # every batch of it is in this process's spool now
            with self._lock:
                self.stats.replayed += count
            log.info(
                "promcp collect: replayed %d acknowledged batch(es) an earlier process left (%s)",
                count,
                path.name,
            )

    def wait_replayed(self, timeout: float | None = None) -> None:
        """Wait until the spool an earlier process left has been queued again (``promcp finalize``)."""
        self._replaying.join(timeout)

    def _stop_replay(self) -> None:
        """At stop: the replay runs to its end (what it replays was acknowledged), then everything is recorded."""
        if self._replaying.is_alive():
            self._replaying.join()


def replay_spool(out: str | Path) -> CollectorStats | None:
    """``promcp finalize``: record the batches a killed collector acknowledged and left in ``out``'s spool (with
    the content settings it ran with), as a restarted collector would; its stats (None: no spool was left)."""
    from promcp._spool import leftovers, settings

    left = leftovers(out)
    if not left:
        return None
    ran = settings(left[0])
    content = ran.get("content")
    limit = ran.get("max_content_bytes", DEFAULT_MAX_CONTENT_BYTES)
    collector = Collector(
        out,
        port=0,  # loopback, never announced: the replay is the only sender
        content=content if isinstance(content, str) else DEFAULT_CONTENT,
        max_content_bytes=limit if isinstance(limit, int) or limit is None else DEFAULT_MAX_CONTENT_BYTES,
    ).start()
    collector.wait_replayed()
    return collector.stop()


def _grpc_server(collector: Collector, host: str, port: int) -> tuple[Any, int]:
    """The OTLP/gRPC services (``opentelemetry-proto``'s generated stubs on grpcio, which the OTLP exporter
    package already brings) in front of the same queue: back-pressure is ``UNAVAILABLE``, which OTLP exporters
    retry; a message over the body limit is refused by gRPC itself (``RESOURCE_EXHAUSTED``)."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    def export(kind: str, response: Any) -> Callable[[Any, Any, Any], Any]:
        def handle(_self: Any, request: Any, context: Any) -> Any:
            if not collector.enqueue(kind, request):  # spooled as protobuf, then queued
                with collector._lock:
                    rejected = collector.stats.grpc_rejected
                    rejected["UNAVAILABLE"] = rejected.get("UNAVAILABLE", 0) + 1
                context.abort(grpc.StatusCode.UNAVAILABLE, collector.stopped or BEHIND)
            return response()

        return handle

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="promcp-collect-grpc"),
        options=[("grpc.max_receive_message_length", collector.max_body)],
    )
    services = (
        ("logs", logs_service_pb2_grpc, "LogsService", logs_service_pb2.ExportLogsServiceResponse),
        ("traces", trace_service_pb2_grpc, "TraceService", trace_service_pb2.ExportTraceServiceResponse),
        (
            "metrics",
            metrics_service_pb2_grpc,
            "MetricsService",
            metrics_service_pb2.ExportMetricsServiceResponse,
        ),
    )
    for kind, module, name, response in services:
        servicer = type(
            f"{name}Servicer", (getattr(module, f"{name}Servicer"),), {"Export": export(kind, response)}
        )
        getattr(module, f"add_{name}Servicer_to_server")(servicer(), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot listen on {host}:{port} (gRPC)")
    return server, bound


def read_chunked(rfile: Any, limit: int) -> bytes:
    """A ``Transfer-Encoding: chunked`` request body, de-chunked, read up to ``limit`` bytes; ValueError saying why
    for a body over it or a broken one (a size line that is not hexadecimal, the stream ending early)."""
    body = bytearray()
    while True:
        line = rfile.readline(1024)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ValueError("a chunked body with a malformed chunk size line") from None
        if size == 0:
            while rfile.readline(1024) not in (b"\r\n", b"\n", b""):  # trailers, then the blank line
                pass
            return bytes(body)
        if len(body) + size > limit:
            raise ValueError(f"the body is over {limit} bytes")
        chunk = rfile.read(size)
        if len(chunk) < size:
            raise ValueError("a chunked body that ends before its last chunk")
        body += chunk
        rfile.readline(1024)


class _Server(ThreadingHTTPServer):
    """The HTTP listener, bounded: a backlog for hundreds of senders, at most ``max_connections`` served at once
    (one line on stderr per refusal, no traceback), a timeout on every socket (head, body, idle keep-alive)."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: Collector
    ) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        owner = self.owner
        with owner._lock:
            full = owner._connections >= owner.max_connections
            if full:
                owner.stats.refused_connections += 1
            else:
                owner._connections += 1
        if full:
            log.warning(
                "promcp collect: connection from %s refused: %d connections already open",
                client_address[0],
                owner.max_connections,
            )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.owner._lock:
                self.owner._connections -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not a traceback: a sender that hung up or timed out is its own business."""
        import sys

        exc = sys.exc_info()[1]
        log.warning(
            "promcp collect: connection from %s dropped: %s: %s", client_address[0], type(exc).__name__, exc
        )


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "promcp-collect"
        timeout = collector.timeout_s  # the socket's timeout: a slow head, a slow body, an idle keep-alive

        def do_POST(self) -> None:
            if (
                "chunked" in (self.headers.get("transfer-encoding") or "").lower()
            ):  # the Gemini CLI's exporter
                try:
                    body = read_chunked(self.rfile, collector.max_body)
                except ValueError as exc:
                    status = 413 if "over" in str(exc) else 400
                    self._answer(*collector._reject(status, str(exc)), close=True)
                    return
                if not collector.reserve(len(body)):  # read already (its length was unknown): not queued
                    self._answer(*collector._reject(503, BEHIND), close=True)
                    return
                try:
                    answer = self._accept(body)
                finally:
                    collector.release(len(body))
                self._answer(*answer)
                return
            try:
                length = int(self.headers.get("content-length") or "")
            except ValueError:
                self._answer(*collector._reject(411, "a Content-Length header is required"))
                return
            if length > collector.max_body:
                self._answer(
                    *collector._reject(413, f"the body is over {collector.max_body} bytes"), close=True
                )
                return
            if not collector.reserve(length):
                self._answer(*collector._reject(503, BEHIND), close=True)  # the body is not read
                return
            try:
                body = self.rfile.read(length)
                if len(body) < length:  # the sender hung up mid-body: nothing to answer
                    self.close_connection = True
                    return
                answer = self._accept(body)
            finally:
                collector.release(length)
            self._answer(*answer)

        def _accept(self, body: bytes) -> tuple[int, bytes, str, str]:
            return collector.accept(
                self.path,
                body,
                self.headers.get("content-type") or "",
                self.headers.get("content-encoding") or "",
            )

        def _answer(self, status: int, body: bytes, kind: str, _reason: str, close: bool = False) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            if status == 503:
                self.send_header("retry-after", "1")
            if close:
                self.send_header("connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler
