"""``promcp run --strategy``: the host sends what the strategy decides, serves the meta tools, records it all.

A scripted OpenAI-compatible upstream (the real wire format, checked) plays the model; the MCP servers are real
(promcp's echo and scicalc over stdio). The BM25 scorer keeps torch out of the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import promcp.analysis as pa
from promcp.store.layout import META_RUN
from tests.stubs.llm_http import Reply, Request, StubServer, openai_text, openai_tool_call

BENCH = """
name: strategies-smoke
llm:
  backend: openai
  model: gpt-4o-mini
servers:
  echo:
    command: python
    args: [-m, promcp.servers.echo]
  scicalc:
    command: python
    args: [-m, promcp.servers.scicalc]
tasks:
  - id: routed
    prompt: "Reverse the text hello for me."
    servers: [echo, scicalc]
    expected_tools: ["echo:reverse"]
    strategy: topk:2:bm25
  - id: searched
    prompt: "Reverse the text hello for me."
    servers: [echo, scicalc]
    strategy: search-tool:1:bm25
  - id: two-phase
    prompt: "Please turn hello around."
    servers: [echo, scicalc]
    strategy: two-phase:1:bm25
"""


def _names(req: Request) -> list[str]:
    return [t["function"]["name"] for t in req.body.get("tools") or ()]


def _model(req: Request) -> Reply:
    """Searches (when it can only search), loads (two-phase, when reverse is only summarised), calls ``reverse``
    once it is offered, then answers."""
    messages = req.body["messages"]
    names = _names(req)
    last = messages[-1]
    if last["role"] == "tool" and "olleh" in str(last.get("content")):
        return Reply(200, openai_text("Done: olleh."))
    if "reverse" in names:
        return Reply(
            200, openai_tool_call("reverse", json.dumps({"text": "hello"}), call_id=f"call_r{len(messages)}")
        )
    if "search_tools" in names:
        args = {"query": "reverse the text", "limit": 1}
        return Reply(200, openai_tool_call("search_tools", json.dumps(args), call_id="call_s1"))
    if "load_tool" in names:
        return Reply(200, openai_tool_call("load_tool", json.dumps({"name": "reverse"}), call_id="call_l1"))
    return Reply(200, openai_text("I have no tool for that."))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Request]]]:
    """One run of the three tasks, each with its own ``strategy:``; the upstream's requests by task."""
    tmp = tmp_path_factory.mktemp("strategies")
    bench = tmp / "bench.yaml"
    bench.write_text(BENCH)
    out = tmp / "out"
    with StubServer(_model, wire="openai") as stub:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "promcp.cli",
                "run",
                "--base-url",
                stub.url,
                "--out",
                str(out),
                str(bench),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OPENAI_API_KEY": "sk-test-strategies", "COLUMNS": "150"},
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert stub.violations == [], "the requests are valid Chat Completions requests"
    by_task: dict[str, list[Request]] = {}
    task = iter(["routed"] * 2 + ["searched"] * 3 + ["two-phase"] * 3)
    for req in stub.requests:
        by_task.setdefault(next(task), []).append(req)
    return out, by_task


def _inputs(out: Path, task: str) -> Any:
    df = pa.load(out)
    df = df[df["task_id"] == task]
    calls = df[df["stage"].astype(str).isin(["S1", "S5"])].sort_values("round")
    return df, calls, [json.loads(a) for a in calls["attrs"]]


@pytest.mark.servers
def test_topk_sends_only_the_routed_tools_and_records_the_router(recorded: Any) -> None:
    out, requests = recorded[0], recorded[1]["routed"]
    assert len(requests) == 2
    for req in requests:  # 7 tools listed (echo 3, scicalc 4); the upstream saw two, the routed ones
        assert len(_names(req)) == 2 and "reverse" in _names(req)
    _df, calls, attrs = _inputs(out, "routed")
    assert [a["strategy"] for a in attrs] == ["topk:2:bm25"] * 2
    assert all(a["strategy_tools"] == 2 and a["routing_ms"] >= 0 for a in attrs)
    schemas = [sum(1 for p in parts if p["origin"] == "schemas") for parts in calls["parts"]]
    assert schemas == [2, 2], "only the tools sent are counted as schemas"
    (run_file,) = out.glob("topology=*/run_id=*/events.parquet")
    run_meta = json.loads(pq.read_schema(run_file).metadata[META_RUN])["meta"]
    assert run_meta["strategies"] == {
        "routed": "topk:2:bm25",
        "searched": "search-tool:1:bm25",
        "two-phase": "two-phase:1:bm25",
    }
    assert "strategy" not in run_meta, "tasks of one run with different strategies: no single run strategy"
    router = run_meta["routers"]["topk:2:bm25"]
    assert router["scorer"] == "bm25" and router["k"] == 2 and router["bm25_k1"] == 1.2, (
        "the router is recorded"
    )


@pytest.mark.servers
def test_search_tool_serves_the_meta_tool_and_carries_what_it_found(recorded: Any) -> None:
    out, requests = recorded[0], recorded[1]["searched"]
    assert [_names(r) for r in requests] == [
        ["search_tools"],
        ["search_tools", "reverse"],
        ["search_tools", "reverse"],
    ]
    result = requests[1].body["messages"][-1]
    assert result["role"] == "tool" and json.loads(result["content"])[0]["name"] == "reverse"
    df, _calls, attrs = _inputs(out, "searched")
    s3 = df[df["stage"].astype(str) == "S3"].sort_values("t_start_ns")
    assert list(s3["server"]) == ["promcp", "echo"] and list(s3["tool"]) == ["search_tools", "reverse"]
    s4 = df[(df["stage"].astype(str) == "S4") & (df["server"] == "promcp")].iloc[0]
    assert s4["status"] == "ok" and s4["footprint_tokens"] > 0, (
        "the search result is a tool result, in the tax"
    )
    assert json.loads(s4["attrs"])["meta_tool"] is True
    assert [a["meta_tools"] for a in attrs] == [["search_tools"]] * 3
    assert [a["strategy_tools"] for a in attrs] == [0, 1, 1]
    rows = pa.task_table(df)
    assert rows.iloc[0]["outcome"] == "ok" and rows.iloc[0]["tool_calls"] == 2


@pytest.mark.servers
def test_two_phase_sends_the_pool_and_promotes_with_load_tool(recorded: Any) -> None:
    out, requests = recorded[0], recorded[1]["two-phase"]
    first = requests[0].body
    pool = [m["content"] for m in first["messages"] if m["role"] == "system"][1]
    assert "reverse:" in pool and "calculate:" in pool, "every tool is summarised"
    assert "load_tool" in _names(requests[0]) and "reverse" not in _names(requests[0])
    assert "reverse" in _names(requests[1]), "load_tool promoted it"
    df, calls, _attrs = _inputs(out, "two-phase")
    keys = [p["key"] for p in calls.iloc[0]["parts"] if p["origin"] == "schemas"]
    assert "summaries" in keys and "promcp/load_tool" in keys
    assert list(df.loc[df["stage"].astype(str) == "S3", "tool"]) == ["load_tool", "reverse"]


def test_a_bad_strategy_is_one_line_naming_the_option(tmp_path: Path) -> None:
    bench = tmp_path / "bench.yaml"
    bench.write_text(BENCH.replace("tasks:", "strategy: topk:zero\ntasks:"))
    proc = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "run", "--dry-run", "--out", str(tmp_path / "o"), str(bench)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert (
        "bench.yaml:" in proc.stderr
        and "[strategy]" in proc.stderr
        and "K must be a whole number" in proc.stderr
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.servers
def test_diff_compares_the_strategy_run_with_its_baseline_and_the_prediction(recorded: Any) -> None:
    out = recorded[0]
    (strategy_run,) = [p.name.removeprefix("run_id=") for p in out.glob("topology=*/run_id=*")]
    bench = out.parent / "bench.yaml"
    with StubServer(_model, wire="openai") as stub:
        base = subprocess.run(
            [
                sys.executable,
                "-m",
                "promcp.cli",
                "run",
                "--base-url",
                stub.url,
                "--out",
                str(out),
                str(bench),
                "--task",
                "routed",
                "--strategy",
                "full",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OPENAI_API_KEY": "sk-test-strategies"},
        )
    assert base.returncode == 0, base.stderr[-3000:]
    assert all(len(_names(r)) == 7 for r in stub.requests), "the baseline sends every tool"
    (base_run,) = [
        p.name.removeprefix("run_id=") for p in out.glob("topology=*/run_id=*") if strategy_run not in p.name
    ]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "diff",
            base_run,
            strategy_run,
            "--dataset",
            str(out),
            "--task",
            "routed",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["strategy"]: r for r in json.loads(proc.stdout)["tables"]["strategies"]}
    assert set(rows) == {"full", "topk:2:bm25"}
    full, topk = rows["full"], rows["topk:2:bm25"]
    assert full["answered"] == "1/1" and topk["answered"] == "1/1"
    assert full["expected_pct"] == topk["expected_pct"] == 100.0, "echo:reverse was called on both sides"
    assert topk["schema_per_call"] < full["schema_per_call"]
    assert topk["predicted_schema_per_call"] < full["schema_per_call"], "predicted from the baseline's calls"
    assert topk["schema_diff_pct"] is not None and topk["routing_ms_p50"] is not None
    assert full["predicted_schema_per_call"] is None, "the baseline is not predicted"
    # promcp report over the dataset: the same comparison as its strategies section (the latest all-full run is
    # the baseline), with the prediction from it
    rep = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "report", str(out), "--task", "routed", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr[-3000:]
    section = {r["strategy"]: r for r in json.loads(rep.stdout)["tables"]["strategies"]}
    assert set(section) == {"full", "topk:2:bm25"}
    for key in ("schema_per_call", "predicted_schema_per_call", "schema_diff_pct", "answered"):
        assert section["topk:2:bm25"][key] == topk[key], key
