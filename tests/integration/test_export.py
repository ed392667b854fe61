"""``promcp export``: the committed example run into a real ``promcp collect`` on loopback (OTLP/HTTP and gRPC; an
interrupted export resumed; the collected events equal the dataset's) and into a real Arize Phoenix server
(``phoenix serve``, started once per test session), read back through Phoenix's own REST API."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from promcp.cli import main
from tests.conftest import REPO
from tests.stubs.ports import free_port, wait_port

EXAMPLE = REPO / "examples" / "default-run"
PROMCP = [sys.executable, "-m", "promcp.cli"]


def _example() -> pd.DataFrame:
    path = next(EXAMPLE.glob("topology=*/run_id=*/events.parquet"))
    return pq.read_table(path).to_pandas().sort_values("seq").reset_index(drop=True)


class _AcceptSome(http.server.BaseHTTPRequestHandler):
    """Answers 200 to the first ``left`` OTLP requests: a destination that goes away mid-export."""

    left = 2

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).left -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_round_trip_through_promcp_collect_resumes_and_equals_the_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, grpc_port = free_port(), free_port()
    state, out = tmp_path / "state.json", tmp_path / "collected"
    argv = [
        "export",
        str(EXAMPLE),
        "--otlp",
        f"http://127.0.0.1:{port}",
        "--state",
        str(state),
        "--batch",
        "8",
    ]
    # 1. the destination acknowledges two requests (14 spans: the 6 task roots, events seq 0-7), then is gone
    stub = http.server.HTTPServer(("127.0.0.1", port), _AcceptSome)

    def serve_two() -> None:
        for _ in range(2):
            stub.handle_request()
        stub.server_close()

    serving = threading.Thread(target=serve_two)
    serving.start()
    assert main(argv) == 2
    serving.join(10)
    err = capsys.readouterr().err
    assert "connection refused" in err and "14 span(s) sent before" in err and "Traceback" not in err
    (entry,) = json.loads(state.read_text())["destinations"].values()
    assert next(iter(entry.values()))["sent"] == 14
    # 2. a real promcp collect on the same port: the export resumes after what was acknowledged
    collect = subprocess.Popen(
        [
            *PROMCP,
            "collect",
            "--listen",
            f"127.0.0.1:{port}",
            "--grpc",
            f"127.0.0.1:{grpc_port}",
            "--out",
            str(out),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_port(port, grpc_port)
        assert main(argv) == 0
        assert "42 span(s) of 1 run(s) sent" in capsys.readouterr().err
        assert main(argv) == 0  # nothing left to send
        again = capsys.readouterr().err
        assert "0 span(s) of 0 run(s) sent" in again and "1 run(s) already sent" in again
        # 3. everything again over OTLP/gRPC: the first 8 events arrive now, the other 42 are recognised
        grpc_argv = ["export", str(EXAMPLE), "--otlp", f"http://127.0.0.1:{grpc_port}", "--protocol", "grpc"]
        assert main([*grpc_argv, "--state", str(state), "--force"]) == 0
    finally:
        collect.send_signal(signal.SIGINT)
        _, stderr = collect.communicate(timeout=120)
    assert collect.returncode == 0, stderr
    assert "42 duplicate row(s) skipped" in stderr and "0 problem(s)" in stderr, stderr
    local = _example()
    collected = pq.read_table(next(out.glob("topology=l-cust/run_id=*/events.parquet"))).to_pandas()
    collected = collected.sort_values("seq").reset_index(drop=True)
    newer = [c for c in collected.columns if c not in local.columns]  # schema v2 columns the v1 example lacks
    assert newer == [
        "cache_read_tokens",
        "cache_write_tokens",
        "cache_write_5m_tokens",
        "cache_write_1h_tokens",
        "reasoning_tokens",
    ]
    assert collected[newer].isna().all().all()
    pd.testing.assert_frame_equal(collected[list(local.columns)], local)  # every column of every event


# -- Arize Phoenix ---------------------------------------------------------------------------------------------------


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real Phoenix server on loopback for the whole session (~10 s to start, ~500 MB)."""
    exe = Path(sys.executable).parent / "phoenix"
    if importlib.util.find_spec("phoenix") is None or not exe.exists():
        pytest.skip("arize-phoenix is not installed (pip install 'arize-phoenix>=20.26,<21': the dev extra)")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"phoenix serve exited ({proc.returncode}): {(work / 'phoenix.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"phoenix serve not ready after 240 s: {(work / 'phoenix.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield {"url": base, "grpc_port": grpc_port, "work": work}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _phoenix_spans(base: str, project: str, expect: int) -> list[dict[str, Any]]:
    """The project's spans once ``expect`` of them are readable (Phoenix writes them in the background)."""
    deadline = time.monotonic() + 60
    while True:
        spans: list[dict[str, Any]] = []
        cursor = None
        try:
            while True:
                query = f"limit=500{f'&cursor={cursor}' if cursor else ''}"
                page = _get(f"{base}/v1/projects/{project}/spans?{query}")
                spans += page["data"]
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        except urllib.error.HTTPError as exc:  # the project does not exist until its first span is written
            if exc.code != 404:
                raise
        if len(spans) >= expect or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_phoenix_reads_the_exported_run_with_its_token_attributes(
    phoenix: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, project = phoenix["url"], "promcp-export-http"
    argv = ["export", str(EXAMPLE), "--otlp", base, "--project", project, "--state", str(tmp_path / "s.json")]
    assert main(argv) == 0
    local = _example()
    n_tasks = local["task_id"].nunique() + int(local["task_id"].isna().any())
    expected = len(local) + n_tasks  # a root span per task (and the session's), a span per event
    spans = _phoenix_spans(base, project, expected)
    assert len(spans) == expected
    by_seq = {s["attributes"]["promcp.seq"]: s for s in spans if "promcp.seq" in s["attributes"]}
    assert sorted(by_seq) == local["seq"].tolist()
    for row in local.to_dict("records"):
        a = by_seq[row["seq"]]["attributes"]
        kind = by_seq[row["seq"]]["span_kind"]
        for column, attribute in (
            ("tokens_in", "gen_ai.usage.input_tokens"),
            ("tokens_out", "gen_ai.usage.output_tokens"),
            ("footprint_tokens", "promcp.footprint.tokens"),
            ("in_schemas", "promcp.origin.schemas"),
        ):
            assert a.get(attribute) == (None if pd.isna(row[column]) else int(row[column])), (
                row["seq"],
                column,
            )
        if row["stage"] in ("S1", "S5"):  # Phoenix's own LLM token counts, mapped from the GenAI attributes
            assert kind == "LLM" and a["llm.token_count.prompt"] == row["tokens_in"]
        elif row["stage"] in ("S2", "S6"):
            assert kind == "LLM" and a["llm.token_count.completion"] == row["tokens_out"]
        elif row["stage"] in ("S3", "S4"):
            assert kind == "TOOL" and a["gen_ai.tool.name"] == row["tool"]
        assert a["promcp.timing_quality"] == row["timing_quality"] and a["promcp.stage"] == row["stage"]
    # Phoenix's per-trace totals: one trace per task, its tokens those of the task's events
    traces = _get(f"{base}/v1/projects/{project}/traces?limit=100")["data"]
    totals = {t["trace_id"]: t["token_count_total"] for t in traces}
    per_task = local.dropna(subset=["task_id"]).groupby("task_id")[["tokens_in", "tokens_out"]].sum()
    for task, sums in per_task.iterrows():
        (trace,) = {s["context"]["trace_id"] for s in spans if s["attributes"].get("promcp.task_id") == task}
        assert totals[trace] == int(sums["tokens_in"] + sums["tokens_out"]), task
    # sending again (--force) adds nothing: the ids are the same spans
    capsys.readouterr()
    assert main([*argv, "--force"]) == 0
    time.sleep(1.0)
    assert len(_phoenix_spans(base, project, expected)) == expected


def test_phoenix_over_grpc_and_its_refusal_of_json_is_one_line(
    phoenix: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promcp.events import Topology
    from tests import synth
    from tests.conftest import write_dataset

    # another run than the example: Phoenix keeps one span per span id, whatever the project
    ds = write_dataset(tmp_path / "ds", synth.events(4, topologies=(Topology.C_CUST,), seed=31))
    local = pq.read_table(ds).to_pandas()
    expected = len(local) + local["task_id"].nunique() + 1  # tasks, the session, the events
    project = "promcp-export-grpc"
    grpc_url = f"http://127.0.0.1:{phoenix['grpc_port']}"
    argv = ["export", str(ds), "--protocol", "grpc", "--otlp", grpc_url, "--project", project]
    assert main([*argv, "--state", str(tmp_path / "g.json")]) == 0
    spans = _phoenix_spans(phoenix["url"], project, expected)
    assert len(spans) == expected
    got = {s["attributes"]["promcp.seq"]: s["attributes"] for s in spans if "promcp.seq" in s["attributes"]}
    want = local.set_index("seq")["tokens_in"].dropna().astype(int).to_dict()
    assert want and {k: got[k]["gen_ai.usage.input_tokens"] for k in want} == want
    assert all(a["promcp.time_known"] == "none" for a in got.values())  # synthetic events have no wall clock
    capsys.readouterr()
    json_argv = ["export", str(EXAMPLE), "--protocol", "http/json", "--otlp", phoenix["url"]]
    code = main([*json_argv, "--state", str(tmp_path / "j.json")])
    err = capsys.readouterr().err
    assert (
        code == 2 and "answered 415" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    )


def test_ctrl_c_mid_export_says_what_was_sent_and_how_to_resume(tmp_path: Path) -> None:
    """SIGINT while the endpoint holds a request: exit 130 with one line naming the state file, no traceback."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    port = listener.getsockname()[1]
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [
            *PROMCP,
            "export",
            str(EXAMPLE),
            "--otlp",
            f"http://127.0.0.1:{port}",
            "--state",
            str(state),
            "--timeout",
            "120",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        listener.settimeout(120)
        conn, _ = listener.accept()  # the first request is on its way
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        conn.close()
    finally:
        listener.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert f"interrupted: 0 span(s) sent are remembered in {state}" in err and "Traceback" not in err
