"""What the LLM proxy adds to an LLM API call: time to first byte and total time, streamed and not, vs. the same
client talking to the upstream directly — all in one run, interleaved (the machine is shared and noisy).

The upstream is a minimal asyncio HTTP/1.1 server on loopback (keep-alive, ~0 service time) answering either a
1.1 KB JSON Messages response, a 13-event Anthropic SSE stream or a 13-chunk Gemini ``streamGenerateContent`` SSE
stream (each event its own chunk, as an API streams them), so the proxy's own cost is not hidden behind a model. The client is a blocking socket with keep-alive and TCP_NODELAY
(the least client overhead). Modes, in a rotating order per round:

* ``direct``      — client → upstream;
* ``proxy``       — client → ``promcp proxy llm`` core → upstream, forwarding only (no observer);
* ``recording``   — the same with the LLM recorder attached (a Recorder journaling into a temporary dataset:
                    what ``promcp proxy llm`` and ``promcp record`` run).

Reported: median and p90 time to the first response byte (TTFB) and to the end of the body, µs, and the median of
the per-round differences to ``direct`` (paired: requests ~1 ms apart). Targets: ≤ 1 ms added to the first byte.

Two more measurements: ``upstream client alone`` — the same request through an ``httpx2.AsyncClient`` and through
the proxy's own pool (promcp/proxy/_upstream.py, llhttp parsing), interleaved, which is why the proxy does not use httpx2 on
its hot path; and ``slow drip`` — an upstream that sends one SSE event every 200 ms: when the first event reached
the client vs. when the upstream sent its last one (no buffering: the first arrives ~1 s earlier).

    .venv/bin/python tests/perf/bench_proxy_llm.py [--rounds 1500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from promcp.proxy._http import ReverseProxy
from promcp.proxy._upstream import UpstreamPool
from promcp.proxy.llm import LLMProxy
from promcp.recorder import Recorder

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs when run as a script

from tests.stubs.llm_http import anthropic_reply
from tests.stubs.llm_streams import anthropic_stream, sse

JSON_BODY = json.dumps(
    anthropic_reply([{"type": "text", "text": "It is 7 pm in Tokyo. " * 20}], stop="end_turn")
).encode()
STREAM_EVENTS = [sse([e]) for e in anthropic_stream()]
REQUEST = json.dumps(
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "system": "You are a helpful assistant. " * 20,
        "messages": [{"role": "user", "content": "What time is it in Tokyo?"}],
    }
).encode()
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
GEMINI_REQUEST = json.dumps(
    {
        "systemInstruction": {"parts": [{"text": "You are a helpful assistant. " * 20}]},
        "contents": [{"role": "user", "parts": [{"text": "What time is it in Tokyo?"}]}],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_time",
                        "description": "Time in a city.",
                        "parametersJsonSchema": {"type": "object"},
                    }
                ]
            }
        ],
    }
).encode()


def _gemini_chunk(text: str, last: bool) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    usage: dict[str, Any] = {"promptTokenCount": 180}
    if last:
        candidate["finishReason"] = "STOP"
        usage.update(candidatesTokenCount=60, thoughtsTokenCount=12, totalTokenCount=252)
    chunk = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash"}
    return sse([(None, chunk)])


GEMINI_EVENTS = [_gemini_chunk("It is 7 pm in Tokyo. ", i == 12) for i in range(13)]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, drip_s: float) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            target = head.split(b" ", 2)[1]
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length:
                await reader.readexactly(length)
            if target.startswith((b"/stream", b"/drip")) or b"streamGenerateContent" in target:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                events = GEMINI_EVENTS if b"streamGenerateContent" in target else STREAM_EVENTS
                for i, event in enumerate(events):
                    if drip_s and i and target.startswith(b"/drip"):
                        await asyncio.sleep(drip_s)
                        DRIP_SENT.append(time.perf_counter())
                    writer.write(_chunk(event))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(JSON_BODY), JSON_BODY)
                )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass


DRIP_SENT: list[float] = []


def start_upstream(drip_s: float = 0.2) -> int:
    ready = threading.Event()
    port: list[int] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(
            asyncio.start_server(lambda r, w: _handle(r, w, drip_s), "127.0.0.1", 0)
        )
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait()
    return port[0]


class Client:
    """A keep-alive HTTP/1.1 client on a blocking socket: send, time the first byte, read to the end."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, path: str, body: bytes = REQUEST) -> tuple[float, float, float | None]:
        """(µs to the first byte, µs to the end, perf_counter of the first body chunk)."""
        data = (
            b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-api-key: k\r\ncontent-length: %d\r\n\r\n%s"
            % (
                path.encode(),
                len(body),
                body,
            )
        )
        t0 = time.perf_counter_ns()
        self.sock.sendall(data)
        buf = b""
        first: int | None = None
        first_body: float | None = None
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            if first is None:
                first = time.perf_counter_ns()
            buf += chunk
            head, sep, body = buf.partition(b"\r\n\r\n")
            if not sep:
                continue
            if first_body is None and body:
                first_body = time.perf_counter()
            if b"transfer-encoding: chunked" in head.lower():
                if body.endswith(b"0\r\n\r\n"):
                    break
            elif len(body) >= int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]):
                break
        end = time.perf_counter_ns()
        return (first - t0) / 1e3, (end - t0) / 1e3, first_body


def _stats(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return statistics.median(values), values[int(len(values) * 0.9)]


def end_to_end(rounds: int, upstream: int) -> list[tuple[str, str, float, float, float, float, float, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Recorder(Path(tmp), topology="c-ots", fsync="group") as rec:
        plain = ReverseProxy(f"http://127.0.0.1:{upstream}").start_in_thread()
        recording = LLMProxy(f"http://127.0.0.1:{upstream}", rec).__enter__()
        clients = {
            "direct": Client(upstream),
            "proxy": Client(plain.port),
            "recording": Client(recording.http.port),
        }
        modes = list(clients)
        for kind, path, body in (
            ("plain JSON", "/v1/messages", REQUEST),
            ("SSE stream", "/stream/v1/messages", REQUEST),
            ("Gemini SSE stream", GEMINI_PATH, GEMINI_REQUEST),
        ):
            samples: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
            for r in range(rounds + 50):
                order = modes[r % 3 :] + modes[: r % 3]
                for mode in order:
                    ttfb, total, _ = clients[mode].request(path, body)
                    if r >= 50:  # warm-up
                        samples[mode].append((ttfb, total))
            for mode in modes:
                ttfb_med, ttfb_p90 = _stats([s[0] for s in samples[mode]])
                tot_med, tot_p90 = _stats([s[1] for s in samples[mode]])
                added_ttfb = statistics.median(
                    s[0] - d[0] for s, d in zip(samples[mode], samples["direct"], strict=True)
                )
                added_tot = statistics.median(
                    s[1] - d[1] for s, d in zip(samples[mode], samples["direct"], strict=True)
                )
                rows.append((kind, mode, ttfb_med, ttfb_p90, tot_med, tot_p90, added_ttfb, added_tot))
        recording.recording.flush()
        recording.__exit__(None, None, None)
        plain.stop_thread()
        print(f"(recorded {rec.events} events while measuring)")
    return rows


def upstream_clients(rounds: int, upstream: int) -> list[tuple[str, float, float]]:
    import httpx2

    async def run() -> list[tuple[str, float, float]]:
        pool = UpstreamPool(f"http://127.0.0.1:{upstream}", connect_timeout_s=5, read_timeout_s=30)
        client = httpx2.AsyncClient(trust_env=False)
        headers = [("host", "x"), ("content-type", "application/json"), ("content-length", str(len(REQUEST)))]
        raw = [(k.encode(), v.encode()) for k, v in headers]

        async def with_pool() -> None:
            resp = await pool.request(b"POST", b"/stream/v1/messages", raw, REQUEST)
            async for _ in resp.chunks():
                pass
            await resp.aclose()

        async def with_httpx() -> None:
            req = httpx2.Request(
                "POST", f"http://127.0.0.1:{upstream}/stream/v1/messages", headers=headers, content=REQUEST
            )
            resp = await client.send(req, stream=True)
            async for _ in resp.aiter_raw():
                pass
            await resp.aclose()

        samples: dict[str, list[float]] = {"promcp pool": [], "httpx2.AsyncClient": []}
        calls: dict[str, Callable[[], Any]] = {
            "promcp pool": with_pool,
            "httpx2.AsyncClient": with_httpx,
        }
        for r in range(rounds + 50):
            for name in list(calls)[r % 2 :] + list(calls)[: r % 2]:
                t0 = time.perf_counter_ns()
                await calls[name]()
                if r >= 50:
                    samples[name].append((time.perf_counter_ns() - t0) / 1e3)
        await client.aclose()
        await pool.aclose()
        return [(name, *_stats(values)) for name, values in samples.items()]

    return asyncio.run(run())


def slow_drip(upstream: int) -> tuple[float, float]:
    with ReverseProxy(f"http://127.0.0.1:{upstream}") as proxy:
        DRIP_SENT.clear()
        client = Client(proxy.port)
        t0 = time.perf_counter()
        _, _, first_body = client.request("/drip/v1/messages")
    assert first_body is not None
    return (first_body - t0) * 1e3, (DRIP_SENT[-1] - t0) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1500)
    args = parser.parse_args()
    upstream = start_upstream()
    rows = end_to_end(args.rounds, upstream)
    print(f"\nLLM proxy overhead, loopback, {args.rounds} rounds interleaved (µs)")
    print(
        "| response | mode | TTFB median | TTFB p90 | total median | total p90 | added TTFB (paired median) | added total (paired median) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for kind, mode, a, b, c, d, e, f in rows:
        added = ("—", "—") if mode == "direct" else (f"{e:.0f}", f"{f:.0f}")
        print(f"| {kind} | {mode} | {a:.0f} | {b:.0f} | {c:.0f} | {d:.0f} | {added[0]} | {added[1]} |")
    print(f"\nUpstream client alone: one streamed request, {args.rounds} rounds interleaved (µs)")
    print("| client | median | p90 |")
    print("|---|---:|---:|")
    for name, med, p90 in upstream_clients(args.rounds, upstream):
        print(f"| {name} | {med:.0f} | {p90:.0f} |")
    first, last = slow_drip(upstream)
    print(
        f"\nSlow drip (one SSE event every 200 ms, 13 events): first event at the client after {first:.1f} ms, "
        f"the upstream sent its last event at {last:.1f} ms"
    )


if __name__ == "__main__":
    main()
