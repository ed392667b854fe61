"""A TCP tee for tests: listens on a loopback port, relays every connection to a target port, and keeps the bytes
of each connection in both directions; :func:`exchanges` reads them back as HTTP/1.1 exchanges.

Placed on both sides of the HTTP MCP proxy (client → tee → proxy → tee → server), it lets a test compare what the
client received with what the server sent, exchange by exchange. Test scaffolding only: it changes no byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field

import h11

#: headers a proxy may legitimately set or drop (hop-by-hop, framing, the Host it forwards to)
FRAMING = frozenset(
    {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}
)


@dataclass
class Conn:
    up: bytearray = field(default_factory=bytearray)  # client → target
    down: bytearray = field(default_factory=bytearray)  # target → client


@dataclass(frozen=True)
class Exchange:
    method: str
    target: str
    request_headers: tuple[tuple[str, str], ...]  # end-to-end ones, lower-case names
    request_body: bytes
    status: int | None
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes
    #: the response body ended as framed. Not compared: a client may stop reading once it has the message it waited
    #: for, before the chunked body's last (empty) chunk reaches its side of the tee
    complete: bool = field(compare=False)


class TcpTee:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.conns: list[Conn] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TcpTee:
        ready = threading.Event()

        async def main() -> None:
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await self._stop.wait()
            server.close()
            relays = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in relays:
                task.cancel()
            await asyncio.gather(*relays, return_exceptions=True)

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Conn()
        self.conns.append(conn)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, log: bytearray) -> None:
            try:
                while data := await src.read(65536):
                    log += data
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.write_eof()

        await asyncio.gather(pump(reader, up_writer, conn.up), pump(up_reader, writer, conn.down))
        for w in (writer, up_writer):
            w.close()


def _headers(raw: object) -> tuple[tuple[str, str], ...]:
    pairs = [(bytes(k).decode().lower(), bytes(v).decode()) for k, v in raw]  # type: ignore[attr-defined]
    return tuple(sorted((k, v) for k, v in pairs if k not in FRAMING))


def exchanges(conn: Conn) -> list[Exchange]:
    """The HTTP exchanges of one captured connection (a response cut off keeps the body received so far)."""
    server = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 30)
    client = h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 30)
    server.receive_data(bytes(conn.up))
    server.receive_data(b"")
    client.receive_data(bytes(conn.down))
    client.receive_data(b"")
    out: list[Exchange] = []
    while True:
        try:
            event = server.next_event()
        except h11.RemoteProtocolError:
            break
        if not isinstance(event, h11.Request):
            break
        body = bytearray()
        while isinstance(ev := server.next_event(), h11.Data):
            body += ev.data
        client.send(h11.Request(method=event.method, target=event.target, headers=list(event.headers)))
        if body:
            client.send(h11.Data(data=bytes(body)))
        client.send(h11.EndOfMessage())
        status, headers, resp, complete = None, (), bytearray(), False
        try:
            while True:
                got = client.next_event()
                if isinstance(got, h11.InformationalResponse):
                    continue
                if isinstance(got, h11.Response):
                    status, headers = got.status_code, _headers(got.headers)
                elif isinstance(got, h11.Data):
                    resp += got.data
                elif isinstance(got, h11.EndOfMessage):
                    complete = True
                    break
                else:
                    break
        except h11.RemoteProtocolError:
            pass
        out.append(
            Exchange(
                event.method.decode(),
                event.target.decode(),
                _headers(event.headers),
                bytes(body),
                status,
                headers,
                bytes(resp),
                complete,
            )
        )
        if not complete:
            break
        server.send(h11.Response(status_code=204, headers=[]))  # lets h11 read the next request
        server.send(h11.EndOfMessage())
        if h11.DONE not in (server.our_state,) or server.their_state is not h11.DONE:
            break
        if client.our_state is not h11.DONE or client.their_state is not h11.DONE:
            break
        server.start_next_cycle()
        client.start_next_cycle()
    return out
