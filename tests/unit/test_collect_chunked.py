"""``promcp collect`` reads chunked OTLP/HTTP request bodies (the Gemini CLI's exporter sends them): de-chunked,
bounded, and a broken one refused with a reason (promcp/collect.py ``read_chunked``)."""

from __future__ import annotations

import io

import pytest

from promcp.collect import read_chunked


def chunked(*pieces: bytes, trailer: bytes = b"") -> io.BytesIO:
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces)
    return io.BytesIO(body + b"0\r\n" + trailer + b"\r\nNEXT REQUEST")


def test_dechunked_with_extensions_and_trailers() -> None:
    rfile = chunked(b'{"resourceLogs":', b"[]}", trailer=b"x-checksum: 1\r\n")
    assert read_chunked(rfile, 1024) == b'{"resourceLogs":[]}'
    assert rfile.read() == b"NEXT REQUEST"  # the connection is left at the next request


@pytest.mark.parametrize(
    ("rfile", "why"),
    [
        (chunked(b"a" * 600, b"b" * 600), "over 1000 bytes"),
        (io.BytesIO(b"zz\r\nabc"), "malformed chunk size"),
        (io.BytesIO(b"10\r\nabc"), "ends before its last chunk"),
    ],
)
def test_bounded_and_broken_bodies_are_refused(rfile: io.BytesIO, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        read_chunked(rfile, 1000)
