"""HTTP/1.1 parsing and framing of the proxy core (promcp/proxy/_h1.py), byte by byte, and the core on the wire
with raw sockets: what an HTTP/1.0 client, a HEAD request, pipelined requests, ``Expect: 100-continue``, an
upstream's informational response or close-delimited body, and malformed bytes get."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promcp.proxy import _h1
from promcp.proxy._http import ReverseProxy


def _events(reader: _h1.Reader, *pieces: bytes) -> list[object]:
    out: list[object] = []
    for piece in pieces:
        reader.feed(piece)
        while (event := reader.next_event()) is not _h1.NEED_DATA:
            out.append(event)
    return out


def test_requests_split_anywhere_and_pipelined_come_out_whole_and_in_order() -> None:
    wire = (
        b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-Key: v\r\n\r\nhello"
        b"GET /two HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    )
    for cut in (1, 7, 40, len(wire) - 3):
        reader = _h1.Reader(response=False)
        events = _events(reader, wire[:cut], wire[cut:])
        heads = [e for e in events if isinstance(e, _h1.Head)]
        assert [h.method for h in heads] == [b"POST", b"GET"]
        assert heads[0].target == b"/mcp?x=1" and heads[0].length == 5 and heads[0].keep_alive
        assert (b"x-key", b"v") in heads[0].headers  # names lower-cased, values as sent
        assert not heads[1].keep_alive
        body = b"".join(e.data for e in events if isinstance(e, _h1.Data))
        assert body == b"hello" and events.count(_h1.END) == 2 and reader.queued == 0


def test_chunked_response_is_decoded_and_a_close_delimited_one_ends_with_the_close() -> None:
    reader = _h1.Reader(response=True)
    events = _events(
        reader,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"lo\r\n3\r\n!!!\r\n0\r\n\r\n",
    )
    head = events[0]
    assert isinstance(head, _h1.Head) and head.status == 200 and head.reason == b"OK" and head.chunked
    assert (
        b"".join(e.data for e in events if isinstance(e, _h1.Data)) == b"hello!!!" and events[-1] is _h1.END
    )

    reader = _h1.Reader(response=True)
    events = _events(reader, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil", b" close")
    assert events[-1] is not _h1.END and not reader.broken
    reader.feed(b"")
    assert reader.next_event() is _h1.END
    # with a length, a close before it is not an end
    reader = _h1.Reader(response=True)
    _events(reader, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
    reader.feed(b"")
    assert reader.next_event() is _h1.NEED_DATA and reader.broken


def test_informational_204_and_head_responses_have_no_body() -> None:
    reader = _h1.Reader(response=True)
    events = _events(reader, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
    assert [e.status for e in events if isinstance(e, _h1.Head)] == [100, 204] and events.count(_h1.END) == 2
    reader = _h1.Reader(response=True)
    reader.bodiless()
    events = _events(reader, b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
    assert isinstance(events[0], _h1.Head) and events[0].length == 1234 and events[1:] == [_h1.END]
    assert not reader.reusable  # llhttp still waits for 1234 bytes: the connection is not used again


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n", "header"),
        (b"NOT-HTTP\r\n\r\n", "method"),
        (b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", "ontent-"),
        (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 300_000, "head over"),
    ],
)
def test_bad_bytes_raise_a_protocol_error_and_parse_nothing_more(wire: bytes, message: str) -> None:
    reader = _h1.Reader(response=False)
    with pytest.raises(_h1.ProtocolError, match=message):
        for i in range(0, len(wire), 65536):
            reader.feed(wire[i : i + 65536])
    assert reader.broken
    queued = len(reader.events)
    reader.feed(b"GET / HTTP/1.1\r\n\r\n")  # ignored
    assert len(reader.events) == queued


def test_an_upgrade_request_is_queued_then_nothing_more_is_parsed() -> None:
    reader = _h1.Reader(response=False)
    wire = b"GET /v1/responses HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05hello"
    reader.feed(wire)
    head = reader.next_event()
    assert isinstance(head, _h1.Head) and head.target == b"/v1/responses"
    assert reader.upgrade and reader.broken
    reader.feed(b"GET / HTTP/1.1\r\n\r\n")  # WebSocket bytes or not: never parsed
    assert all(not isinstance(e, _h1.Head) for e in reader.events)


def test_what_the_proxy_writes() -> None:
    assert _h1.request_head(b"POST", b"/x", [(b"host", b"h"), (b"content-length", b"2")]) == (
        b"POST /x HTTP/1.1\r\nhost: h\r\ncontent-length: 2\r\n\r\n"
    )
    assert _h1.response_head(200, b"OK", []) == b"HTTP/1.1 200 OK\r\n\r\n"
    assert _h1.chunk(b"x" * 26) == b"1a\r\n" + b"x" * 26 + b"\r\n"
    # and llhttp reads it back
    reader = _h1.Reader(response=True)
    wire = (
        _h1.response_head(200, b"OK", [(b"transfer-encoding", b"chunked")])
        + _h1.chunk(b"abc")
        + _h1.LAST_CHUNK
    )
    events = _events(reader, wire)
    assert [e.data for e in events if isinstance(e, _h1.Data)] == [b"abc"] and events[-1] is _h1.END


_TOKEN = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
    lambda name: name not in ("content-length", "transfer-encoding", "connection", "upgrade")
)
_VALUE = st.binary(max_size=40).map(lambda v: bytes(b for b in v if 0x20 <= b < 0x7F).strip())


@st.composite
def _responses(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, list[tuple[bytes, bytes]], bytes]]]:
    """Keep-alive responses back to back, each with a Content-Length or chunked body; the wire and what it holds."""
    wire, expected = b"", []
    for _ in range(draw(st.integers(1, 3))):
        status = draw(st.sampled_from([200, 201, 400, 404, 500, 503]))
        headers = [(name.encode(), draw(_VALUE)) for name in draw(st.lists(_TOKEN, max_size=5, unique=True))]
        body = draw(st.binary(max_size=300))
        if draw(st.booleans()):
            cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
            pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
            framed = b"".join(_h1.chunk(p) for p in pieces if p) + _h1.LAST_CHUNK
            wire += _h1.response_head(status, b"X", [*headers, (b"transfer-encoding", b"chunked")]) + framed
        else:
            wire += _h1.response_head(status, b"X", [*headers, (b"content-length", b"%d" % len(body))]) + body
        expected.append((status, headers, body))
    return wire, expected


@settings(max_examples=150, deadline=None)
@given(_responses(), st.lists(st.integers(1, 2000), max_size=8))
def test_any_split_of_valid_responses_gives_the_same_messages(
    case: tuple[bytes, list[tuple[int, list[tuple[bytes, bytes]], bytes]]], cuts: list[int]
) -> None:
    wire, expected = case
    points = sorted({c % (len(wire) + 1) for c in cuts})
    pieces = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True) if b > a]
    reader = _h1.Reader(response=True)
    messages: list[tuple[int, list[tuple[bytes, bytes]], bytes]] = []
    body = b""
    for event in _events(reader, *pieces):
        if isinstance(event, _h1.Head):
            head, body = event, b""
        elif isinstance(event, _h1.Data):
            body += event.data
        else:
            own = [(k, v) for k, v in head.headers if k not in (b"content-length", b"transfer-encoding")]
            messages.append((head.status, own, body))
    assert messages == expected and not reader.mid_message and reader.queued == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.booleans())
def test_arbitrary_bytes_raise_nothing_but_a_protocol_error(data: bytes, response: bool) -> None:
    reader = _h1.Reader(response=response, max_head_bytes=256)
    try:
        for i in range(0, len(data), 64):
            reader.feed(data[i : i + 64])
        reader.feed(b"")
    except _h1.ProtocolError:
        assert reader.broken
    while reader.next_event() is not _h1.NEED_DATA:
        pass
    assert reader.queued == 0


# -- the core on the wire ---------------------------------------------------------------------------------------------


def _raw_upstream(answer: Callable[[bytes], bytes], *, close: bool = False) -> tuple[str, list[bytes]]:
    """An upstream that reads one request head (and a Content-Length body) per exchange and writes ``answer(request)``
    verbatim; ``close``: then closes the connection."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def one(conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, data = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.lower().split(b"\r\n")
                        if line.startswith(b"content-length")
                    ),
                    0,
                )
                while len(data) < length:
                    data += conn.recv(65536)
                request, data = head + b"\r\n\r\n" + data[:length], data[length:]
                seen.append(request)
                conn.sendall(answer(request))
                if close:
                    return

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}", seen


def _exchange(port: int, wire: bytes) -> bytes:
    """Send ``wire``, read until the proxy closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(wire)
        out = b""
        while True:
            data = sock.recv(65536)
            if not data:
                break
            out += data
        return out


def test_http10_client_gets_a_close_delimited_body_and_head_requests_no_body() -> None:
    url, _ = _raw_upstream(
        lambda req: (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
            if req.startswith(b"HEAD")
            else b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        ),
    )
    with ReverseProxy(url) as proxy:
        old = _exchange(proxy.port, b"GET /a HTTP/1.0\r\n\r\n")
        head = _exchange(proxy.port, b"HEAD /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert old.startswith(b"HTTP/1.1 200 OK\r\n") and old.endswith(b"\r\n\r\nhello")
    assert b"transfer-encoding" not in old.lower() and b"connection: close" in old.lower()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(
        b"content-length: 5\r\nconnection: close\r\n\r\n"
    )


def test_pipelined_requests_expect_continue_and_an_informational_answer() -> None:
    url, seen = _raw_upstream(
        lambda req: (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
            % (len(req.split(b" ")[1]), req.split(b" ")[1])
        )
    )
    with ReverseProxy(url) as proxy:
        out = _exchange(
            proxy.port,
            b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /second HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"
            b"POST /third HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
            b"GET /fourth HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
    # the client's own 100 Continue, then four answers in order; the upstream's 100 is not forwarded
    assert out.count(b"HTTP/1.1 100 Continue") == 1
    assert out.index(b"/first") < out.index(b"/second") < out.index(b"/third") < out.index(b"/fourth")
    assert out.count(b"HTTP/1.1 200 OK") == 4
    assert [r.split(b" ")[1] for r in seen] == [b"/first", b"/second", b"/third", b"/fourth"]
    assert seen[1].endswith(b"\r\n\r\nhi") and b"expect" not in seen[1].lower()
    # a chunked request body goes up whole, with its length
    assert seen[2].endswith(b"content-length: 5\r\n\r\nabcde") and b"chunked" not in seen[2].lower()


def test_close_delimited_upstream_body_and_malformed_requests() -> None:
    url, seen = _raw_upstream(lambda req: b"HTTP/1.1 200 OK\r\n\r\nall of it", close=True)
    with ReverseProxy(url) as proxy:
        out = _exchange(proxy.port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # the proxy re-frames it for an HTTP/1.1 client
        assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"9\r\nall of it\r\n0\r\n\r\n")
        # malformed bytes: a 400 saying why, the connection closed, nothing forwarded, the proxy goes on serving
        bad = _exchange(proxy.port, b"GARBAGE\r\n\r\n")
        assert bad.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"promcp proxy: bad request" in bad
        try:  # past 256 KiB of head the proxy stops reading: the client sees the 400 or a reset
            big = _exchange(proxy.port, b"GET / HTTP/1.1\r\nX: " + b"a" * 400_000 + b"\r\n\r\n")
        except ConnectionError:  # reset, or a broken pipe while still sending
            big = b""
        assert big == b"" or b"head over 262144 bytes" in big
        again = _exchange(proxy.port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert proxy.stats.errors["bad_request"] == 2
    assert again == out and len(seen) == 2
