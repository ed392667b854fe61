"""``promcp proxy llm`` killed with SIGKILL in the middle of a call (issue 23, item 7): the call's request row is
journaled when the request is forwarded (``attrs.in_flight``), so the call stays in the dataset as in flight — read
in place by ``promcp.analysis.load`` and kept by ``promcp finalize`` — while a call that ended before the kill has
exactly the events it always had (its in-flight row is settled by them). A real upstream: the loopback stub scripted
to answer the first call and stream the second one's first event, then hold it open."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx

from promcp.analysis import load
from tests.stubs.llm_http import Drip, Reply, Request, StubServer, anthropic_reply
from tests.stubs.llm_streams import SSE_HEADERS, anthropic_stream, sse

PROMCP = [sys.executable, "-m", "promcp.cli"]
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01", "content-type": "application/json"}


def body(text: str, *, stream: bool = False) -> dict[str, object]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 50,
        "stream": stream,
        "messages": [{"role": "user", "content": text}],
    }


def journal_line(out: Path, needle: str, timeout: float = 20.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for journal in out.glob("_journal/**/*.jsonl"):
            for line in journal.read_text(errors="replace").splitlines():
                if needle in line:
                    row: dict[str, object] = json.loads(line)
                    return row
        time.sleep(0.05)
    raise AssertionError(f"no journal line with {needle!r} after {timeout} s")


def test_llm_proxy_killed_mid_call_leaves_the_call_in_flight(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    events = anthropic_stream(text="slow", tool=None)
    held = Drip(
        [sse(events[:1]), sse(events[1:])], delay_s=120
    )  # the first event, then two minutes of nothing

    def answer(req: Request) -> Reply:
        if not req.body.get("stream"):
            return Reply(200, anthropic_reply([{"type": "text", "text": "done"}], stop="end_turn"))
        return Reply(200, held, dict(SSE_HEADERS))

    with StubServer(answer) as stub:
        proxy = subprocess.Popen(
            [*PROMCP, "proxy", "llm", "--upstream", stub.url, "--out", str(out)],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stderr is not None
            url = proxy.stderr.readline().split()[3]
            finished = httpx.post(url + "/v1/messages", json=body("first"), headers=HEADERS, timeout=30)
            assert finished.status_code == 200
            with (
                httpx.Client(timeout=httpx.Timeout(30, read=300)) as client,
                client.stream(
                    "POST", url + "/v1/messages", json=body("second", stream=True), headers=HEADERS
                ) as resp,
            ):
                assert resp.status_code == 200
                in_flight = journal_line(out, '"stream":true')  # the second call's request row, mid-call
                proxy.send_signal(signal.SIGKILL)
                proxy.wait(30)
        except httpx.HTTPError:
            pass  # the stream broke off with the proxy
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait(30)
    assert proxy.returncode == -signal.SIGKILL
    attrs = in_flight["attrs"]
    assert isinstance(attrs, dict) and attrs["in_flight"] is True and in_flight["stage"] == "S1"

    def calls(ev: object) -> list[tuple[str, bool]]:
        import pandas as pd

        assert isinstance(ev, pd.DataFrame)
        rows = ev.sort_values("seq")
        return [
            (str(r.stage), bool(json.loads(r.attrs or "{}").get("in_flight", False)))
            for r in rows.itertuples()
            if r.stage in ("S1", "S2", "S5", "S6")
        ]

    # the finished call: its S1 and S6 (its in-flight row settled); the call in flight: its request row
    expected = [("S1", False), ("S6", False), ("S1", True)]
    assert calls(load(out)) == expected  # read in place, before anything merged it
    done = subprocess.run([*PROMCP, "finalize", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(out.glob("_journal/**/*.jsonl"))
    assert calls(load(out)) == expected
