"""``promcp export`` pieces: event → span (stable ids, times never invented, attributes), the OTLP/JSON body as
``promcp collect`` decodes it, the resume state (no secret in it), and the one-line errors of the command."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from promcp.cli import main
from promcp.collectors.otlp import attributes, decode_request
from promcp.collectors.otlp_spans import carried_rows, span_records
from promcp.events import Event, Stage, Status, TimingQuality, TokenSource, Topology
from promcp.export import _request
from promcp.export.runs import RunSpans
from promcp.export.send import otlp_json, traces_url
from promcp.export.spans import NO_TASK, Cost, event_span, root_span_id, span_id, trace_id
from promcp.export.state import ExportState, default_state_path, destination_key
from promcp.stages.link import link_tool_calls
from promcp.store.discovery import discover
from tests.conftest import write_dataset
from tests.stubs.ports import free_port


def _attrs(span: Span) -> dict[str, object]:
    return attributes(span.attributes)


def _llm_in(**kw: object) -> Event:
    base: dict[str, object] = dict(
        run_id="r1",
        topology=Topology.C_CUST,
        task_id="t1",
        round=1,
        seq=4,
        stage=Stage.S1,
        model="claude-sonnet-4-5",
        provider="anthropic",
        tokens_in=1200,
        cache_read_tokens=1000,
        cache_write_tokens=0,
        token_source=TokenSource.PROVIDER,
        in_system=200,
        in_schemas=900,
        in_user=100,
        t_start_ns=1_000_000_000,
        t_end_ns=1_500_000_000,
        latency_ms=500.0,
    )
    base.update(kw)
    return Event(**base)  # type: ignore[arg-type]


def test_an_llm_input_event_carries_genai_usage_promcp_origins_cost_and_its_row() -> None:
    e = _llm_in()
    span = event_span(e, 0, run_header='{"run_id": "r1"}', cost=Cost(0.0123, None, "genai-prices x"))
    a = _attrs(span)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert a["gen_ai.usage.input_tokens"] == 1200 and a["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert "gen_ai.usage.output_tokens" not in a  # the output side is the S2/S6 span: never counted twice
    assert (a["promcp.origin.schemas"], a["promcp.origin.system"], a["promcp.origin.user"]) == (900, 200, 100)
    assert a["promcp.cost.usd"] == pytest.approx(0.0123) and a["promcp.timing_quality"] == "exact"
    assert (span.start_time_unix_nano, span.end_time_unix_nano) == (1_000_000_000, 1_500_000_000)
    assert span.kind == Span.SpanKind.SPAN_KIND_CLIENT
    record = next(span_records(_request([span], {"promcp.run.id": "r1"})))
    rows = carried_rows(record)
    assert rows is not None and rows.rows == [e]  # the row travels exactly


def test_a_tool_call_carries_mcp_and_genai_tool_attributes_and_its_error() -> None:
    e = Event(
        run_id="r1",
        task_id="t1",
        seq=7,
        stage=Stage.S4,
        server="memory",
        tool="search",
        mcp_method="tools/call",
        jsonrpc_id="3",
        tool_call_id="call_1",
        transport="stdio",
        footprint_tokens=42,
        footprint_bytes=180,
        status=Status.ERROR,
        error_type="tool_error",
        latency_ms=2.0,
    )
    span = event_span(e, 5, run_header=None, cost=None)
    a = _attrs(span)
    assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == "search"
    assert a["mcp.method.name"] == "tools/call" and a["jsonrpc.request.id"] == "3"
    assert a["network.transport"] == "pipe" and a["error.type"] == "tool_error"
    assert a["promcp.footprint.tokens"] == 42 and a["promcp.server"] == "memory"
    assert "promcp.events" not in a  # --no-rows
    assert span.status.code == span.status.STATUS_CODE_ERROR and span.name == "tools/call search"


def test_ids_are_stable_and_each_event_hangs_under_its_task() -> None:
    e = _llm_in()
    one, two = event_span(e, 0, run_header=None, cost=None), event_span(e, 0, run_header=None, cost=None)
    assert one.SerializeToString() == two.SerializeToString()
    assert one.trace_id == trace_id("r1", "t1") and one.span_id == span_id("r1", 4)
    assert one.parent_span_id == root_span_id("r1", "t1")
    assert len(one.trace_id) == 16 and len(one.span_id) == 8
    assert trace_id("r1", "t1") != trace_id("r2", "t1") != trace_id("r1", "t2")
    session = event_span(
        Event(run_id="r1", seq=0, stage=Stage.INIT, phase="spawn"), 0, run_header=None, cost=None
    )
    assert session.trace_id == trace_id("r1", NO_TASK) and session.kind == Span.SpanKind.SPAN_KIND_INTERNAL


def test_times_come_from_the_event_and_unknown_ones_are_marked_never_invented() -> None:
    bounded = _llm_in(timing_quality=TimingQuality.BOUNDED)
    a = _attrs(event_span(bounded, 0, run_header=None, cost=None))
    assert a["promcp.timing_quality"] == "bounded" and a["promcp.time_known"] == "both"
    start_only = _llm_in(t_end_ns=None)
    s = event_span(start_only, 0, run_header=None, cost=None)
    assert (s.start_time_unix_nano, s.end_time_unix_nano) == (
        1_000_000_000,
        1_500_000_000,
    )  # + measured latency
    assert _attrs(s)["promcp.time_known"] == "start"
    none = _llm_in(t_start_ns=None, t_end_ns=None, latency_ms=None, timing_quality=TimingQuality.NONE)
    n = event_span(none, 777, run_header=None, cost=None)
    assert (n.start_time_unix_nano, n.end_time_unix_nano) == (777, 777)  # zero-length at the last known time
    assert _attrs(n)["promcp.time_known"] == "none" and _attrs(n)["promcp.timing_quality"] == "none"
    assert "promcp.latency_ms" not in _attrs(n)


def test_otlp_json_body_decodes_in_promcp_collect_with_hex_ids() -> None:
    span = event_span(_llm_in(), 0, run_header='{"run_id": "r1"}', cost=None)
    body = otlp_json(_request([span], {"service.name": "promcp", "promcp.run.id": "r1"}))
    doc = json.loads(body)
    raw = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert raw["traceId"] == trace_id("r1", "t1").hex() and raw["kind"] == 3
    back = decode_request("traces", body, "application/json")
    (record,) = span_records(back)
    assert record.trace_id == trace_id("r1", "t1").hex() and record.attrs["gen_ai.usage.input_tokens"] == 1200


def test_a_run_without_times_gets_placeholder_spans_and_task_roots(tmp_path: Path) -> None:
    from tests import synth

    ds = write_dataset(tmp_path / "ds", synth.events(3, topologies=(Topology.C_CUST,)))
    (run,) = [RunSpans(f, batch_rows=7) for f in discover(ds, link=link_tool_calls)]
    tasks, first = run.tasks()
    assert first is None and {t.task for t in tasks} == {NO_TASK, "t000000", "t000001", "t000002"}
    batches = list(run.spans())
    assert all(len(b) <= 7 for b in batches) and sum(map(len, batches)) == run.total()
    spans = [s for b in batches for s in b]
    assert len({s.span_id for s in spans}) == len(spans)
    assert all(_attrs(s)["promcp.time_known"] == "none" for s in spans)
    rest = [s for b in run.spans(skip=10) for s in b]
    assert [s.span_id for s in rest] == [
        s.span_id for s in spans[10:]
    ]  # resuming skips exactly what was sent


def test_state_resumes_per_destination_and_holds_no_secret(tmp_path: Path) -> None:
    url = traces_url("https://user:s3cret@collector.example:4318/?token=abc", "http/protobuf")
    key = destination_key("http/protobuf", url)
    assert key == "http/protobuf https://collector.example:4318/v1/traces"
    path = tmp_path / "state.json"
    state = ExportState(path, key)
    state.record("r1", "10:20", 5, 9)
    again = ExportState(path, key)
    assert again.sent("r1", "10:20") == 5 and again.sent("r1", "11:20") == 0  # a changed run starts over
    assert ExportState(path, "grpc http://other:4317").sent("r1", "10:20") == 0
    text = path.read_text()
    assert "s3cret" not in text and "token" not in text and "user" not in text
    assert path.stat().st_mode & 0o077 == 0
    assert (
        default_state_path(tmp_path / "traces") == tmp_path / "traces.promcp-export.json"
    )  # beside, not inside


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--otlp", "ftp://host"], "[--otlp]: 'ftp://host' is not an http:// or https:// URL"),
        (["--otlp", "http://:4318"], "names no host"),
        (["--otlp", "http://h:99999"], "invalid port"),
        (["--otlp", "http://h", "--header", "novalue"], "[--header]"),
    ],
)
def test_bad_options_are_one_line_errors(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.conftest import REPO

    code = main(["export", str(REPO / "examples" / "default-run"), "--state", str(tmp_path / "s"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_collector_that_is_down_or_a_bad_dataset_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.conftest import REPO

    port = free_port()
    state = tmp_path / "state.json"
    code = main(
        [
            "export",
            str(REPO / "examples" / "default-run"),
            "--otlp",
            f"http://127.0.0.1:{port}",
            "--state",
            str(state),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "connection refused" in err and f"127.0.0.1:{port}/v1/traces" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and not state.exists()
    (tmp_path / "empty").mkdir()
    for bad in (tmp_path / "empty", tmp_path / "missing"):
        code = main(["export", str(bad), "--otlp", f"http://127.0.0.1:{port}", "--state", str(state)])
        err = capsys.readouterr().err
        assert code == 2 and str(bad) in err and "Traceback" not in err, err
    state.write_text("{not json")
    code = main(
        [
            "export",
            str(REPO / "examples" / "default-run"),
            "--otlp",
            "http://127.0.0.1:1",
            "--state",
            str(state),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "export state is not JSON" in err


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of ``replies`` (the last one again after)."""

    replies: ClassVar[list[tuple[int, dict[str, str], bytes]]] = []
    seen = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        status, headers, body = type(self).replies[min(type(self).seen, len(type(self).replies) - 1)]
        type(self).seen += 1
        self.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(replies: list[tuple[int, dict[str, str], bytes]]) -> tuple[http.server.HTTPServer, str]:
    _Scripted.replies, _Scripted.seen = replies, 0
    server = http.server.HTTPServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:{}".format(*server.server_address[1:])


def test_a_busy_endpoint_is_retried_after_its_retry_after_and_a_refusal_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.conftest import REPO

    ok = (200, {"Content-Type": "application/x-protobuf"}, b"")
    server, url = _serve([(503, {"Retry-After": "0"}, b"busy"), ok])
    try:
        argv = [
            "export",
            str(REPO / "examples" / "default-run"),
            "--otlp",
            url,
            "--state",
            str(tmp_path / "s"),
        ]
        assert main(argv) == 0 and _Scripted.seen == 3  # the roots (refused once, then taken), the events
    finally:
        server.shutdown()
        server.server_close()
    capsys.readouterr()
    refusal = (400, {"Content-Type": "application/json"}, b'{"code": 3, "message": "bad spans"}')
    server, url = _serve([refusal])
    try:
        argv = [
            "export",
            str(REPO / "examples" / "default-run"),
            "--otlp",
            url,
            "--state",
            str(tmp_path / "t"),
        ]
        assert main(argv) == 2
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert (
        'answered 400 Bad Request: {"code": 3, "message": "bad spans"}' in err and len(err.splitlines()) == 1
    )


def test_without_rows_promcp_collect_maps_the_spans_and_keeps_the_tokens(tmp_path: Path) -> None:
    """What docs/export.md says of --no-rows: token sums per stage come back, the events multiply."""
    import promcp.analysis as pa
    from promcp.collect import Collector
    from tests.conftest import REPO

    col = Collector(tmp_path / "col", port=0).start()
    try:
        url = "http://{}:{}".format(*col.address)
        argv = ["export", str(REPO / "examples" / "default-run"), "--otlp", url, "--no-rows"]
        assert main([*argv, "--state", str(tmp_path / "s")]) == 0
    finally:
        col.stop()
    got, src = pa.load(tmp_path / "col"), pa.load(REPO / "examples" / "default-run")
    assert got["run_id"].astype(str).str.startswith("otlp-spans-promcp-").all()
    sums = ["tokens_in", "tokens_out"]
    llm = ["S1", "S2", "S5", "S6"]

    def by_stage(df: pd.DataFrame) -> dict[str, list[int]]:
        table = df.astype({"stage": str}).groupby("stage")[sums].sum()
        return {stage: [int(v) for v in table.loc[stage]] for stage in llm}

    assert by_stage(got) == by_stage(src) and by_stage(src)["S1"][0] == 3498
    schemas = got[got["phase"] == "tools_discovery"]["footprint_tokens"].sum()
    assert schemas == src[src["phase"] == "tools_discovery"]["footprint_tokens"].sum()
    assert (len(src), len(got)) == (50, 73)
