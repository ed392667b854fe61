"""The recording path: the recorder is a small API (identity, scope, ``seq``, redaction) over a Sink — the journal, or
a list in memory for tests — and importing it, or a proxy that records through it, loads neither pyarrow nor pandas
(measured with ``python -X importtime``: the modules a fresh interpreter actually imports)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promcp.events import Event, Stage
from promcp.recorder import Recorder, scope
from promcp.sinks import JournalSink, MemorySink
from tests.conftest import REPO

#: the recording path of every live source: the recorder, the LLM proxy, both MCP proxies, the OTLP receiver
RECORDING_PATH = (
    "promcp.recorder",
    "promcp.proxy.llm",
    "promcp.proxy.mcp.http",
    "promcp.proxy.mcp.stdio",
    "promcp.collect",
    "promcp.cli.proxy_llm",
)


@pytest.mark.parametrize("module", RECORDING_PATH)
def test_the_recording_path_imports_no_dataframe_library(module: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert module in imported  # the measurement really saw the import
    heavy = sorted(m for m in imported if m.split(".")[0] in ("pyarrow", "pandas"))
    assert heavy == [], f"{module} imports {heavy[:5]}"


def test_a_memory_sink_gets_the_rows_the_journal_would_with_identity_scope_seq_and_redaction() -> None:
    sink = MemorySink()
    rec = Recorder(sink=sink, run_id="mem", topology="c-cust", source="live", benchmark="b")
    with scope(task_id="t1", round=2):
        rec.emit(
            Event(stage=Stage.S1, tokens_in=5, req_preview="my api key is sk-abcdefghijklmnop0123456789")
        )
    rec.emit_later(lambda: Event(stage=Stage.S2, tokens_out=3))
    rec.emit_many([Event(stage=Stage.S3, tool="t"), Event(stage=Stage.S4, tool="t")])
    digest = rec.put_text("result", "some content")
    assert rec.close() is None  # nothing to finalize: a memory sink writes no file
    assert sink.header is not None and sink.header.run_id == "mem" and sink.closed
    by_seq = sorted(sink.rows, key=lambda e: e.seq)
    assert [e.stage for e in by_seq] == [Stage.S1, Stage.S2, Stage.S3, Stage.S4]
    assert [e.seq for e in by_seq] == [0, 1, 2, 3]  # emit_later keeps the place it was called at
    first = by_seq[0]
    assert (first.run_id, first.topology.value, first.benchmark) == ("mem", "c-cust", "b")
    assert (first.task_id, first.round) == ("t1", 2)
    assert first.req_preview is not None and "sk-abcdefghijklmnop0123456789" not in first.req_preview
    assert digest in sink.blobs and rec.events == 4


def test_a_recorder_needs_a_folder_or_a_sink() -> None:
    with pytest.raises(TypeError, match="out"):
        Recorder()


def test_the_journal_sink_is_the_default_and_finalizes_the_run(tmp_path: Path) -> None:
    with Recorder(tmp_path, run_id="j") as rec:
        assert isinstance(rec.sink, JournalSink) and rec.journal_path.name == "j.jsonl"
        rec.emit(Event(stage=Stage.S1, tokens_in=1))
    assert rec.result_path is not None and rec.result_path.name == "events.parquet"
    assert not rec.journal_path.exists()  # merged into the run file, then removed


def test_a_settled_row_is_dropped_by_every_reader_of_the_journal_and_by_the_memory_sink(
    tmp_path: Path,
) -> None:
    """A call's request row written while in flight, then superseded by the call's final rows: the journal keeps
    the line (a kill before the settle leaves both), readers drop it; a run killed before the end keeps it."""
    from promcp.store.journal import read_journal

    rec = Recorder(tmp_path, run_id="settle")
    flying = rec.emit(Event(stage=Stage.S1, attrs={"in_flight": True}))
    rec.emit(Event(stage=Stage.S1, tokens_in=7))
    rec.emit(Event(stage=Stage.S2, tokens_out=3))
    rec.settle([flying])
    kept = rec.emit(Event(stage=Stage.S1, attrs={"in_flight": True}))  # the next call, never ended
    assert rec.events == 3
    contents = read_journal(rec.journal_path)
    assert [e.seq for e in contents.events] == [1, 2, kept.seq] and not contents.problems
    path = rec.close()
    assert path is not None
    import pyarrow.parquet as pq

    assert pq.read_table(path).column("seq").to_pylist() == [1, 2, 3]

    sink = MemorySink()
    mem = Recorder(sink=sink, run_id="m")
    row = mem.emit(Event(stage=Stage.S1))
    mem.emit(Event(stage=Stage.S1, tokens_in=1))
    mem.settle([row])
    assert [e.seq for e in sink.rows] == [1]


def test_an_llm_call_the_full_recording_queue_refuses_is_relayed_counted_lost_and_left_in_flight(
    tmp_path: Path,
) -> None:
    """The LLM proxy's queue refuses (never stalls the relay): the client gets its answer, the call is counted
    ``lost`` and named in ``errors``; its request row, journaled at forward, keeps it in the dataset as in flight."""
    import json

    import httpx2 as httpx

    from promcp.analysis import load
    from promcp.bounded_worker import BoundedWorker
    from promcp.proxy.llm import LLMProxy
    from tests.stubs.llm_http import Reply, StubServer, anthropic_reply

    headers = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    reply = anthropic_reply([{"type": "text", "text": "hello"}], stop="end_turn")
    out = tmp_path / "ds"
    with (
        StubServer([Reply(200, reply)]) as stub,
        Recorder(out, topology="c-ots", source="proxy:llm") as rec,
        LLMProxy(stub.url, rec) as prx,
    ):
        recording = prx.recording
        recording._worker.close(timeout=5)
        small: BoundedWorker[object] = BoundedWorker(
            recording._handle,
            name="t",
            max_items=1,
            full="refuse",
            start=False,  # type: ignore[arg-type]
        )
        recording._worker = small  # type: ignore[assignment]
        got = httpx.post(prx.url + "/v1/messages", json=body, headers=headers, timeout=30)
        assert got.json() == reply  # relayed whole
        deadline = time.monotonic() + 10
        while recording.counters.lost == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        small.start()
    assert recording.counters.lost == 1 and "the recording queue was full" in recording.errors[0]
    ev = load(out)
    assert ev["stage"].tolist() == ["S1"] and json.loads(ev["attrs"].iloc[0])["in_flight"] is True
