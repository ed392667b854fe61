"""``promcp record -- gemini``: the real Gemini CLI (npm ``@google/gemini-cli``, pinned in package.json), offline,
against a scripted loopback Gemini-API upstream, with the npm ``server-everything`` in the user's
``~/.gemini/settings.json``.

The model calls the server's echo tool (``mcp_everything_echo``), then answers quoting its result. One run must hold
INIT of the server, then S1 → S2 → S3 → S4 → S5 → S6 in one task (the CLI's model-routing call beside it, as a side
call), every token figure equal to the upstream's ``usageMetadata``, origins summing to it, the MCP call joined to
the ``functionCall``; the CLI prints the same answer with and without promcp, its settings file is untouched, and
the API key is nowhere on disk.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import promcp.analysis as pa
from promcp.collectors import import_path
from tests.stubs.llm_http import StubServer
from tests.stubs.ports import free_port, wait_port
from tests.stubs.scripted_llm import ScriptedGemini

ROOT = Path(__file__).resolve().parents[2]
GEMINI = ROOT / "node_modules" / ".bin" / "gemini"
EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
SECRET = "AIzaSyPROMCP-test-secret-0123456789abcdef"
TOOL = "mcp_everything_echo"
ARGS = {"message": "promcp records every stage"}
PROMPT = "Echo: promcp records every stage"

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(
        not GEMINI.exists() or not EVERYTHING.exists(), reason="npm packages not installed (npm ci)"
    ),
]

#: what the Gemini CLI needs to run headless and offline (the issue's verified settings)
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "mcpServers": {"everything": {"command": "node", "args": [str(EVERYTHING)]}},
}


def setup(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS, indent=2))
    env = {
        "PATH": f"{GEMINI.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "GEMINI_API_KEY": SECRET,
        "NO_COLOR": "1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),  # promcp from this checkout
    }
    return env, home, work


def gemini_cli(command: list[str], env: dict[str, str], work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, "gemini", "-p", PROMPT, "--approval-mode", "yolo", "-o", "json"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=240,
    )


def same_requests(bodies: list[dict[str, Any]], work: Path) -> list[str]:
    """The request bodies with what differs between two sessions by design taken out: the workspace folder, the
    CLI's own call ids (a clock time) and where its ``.gemini`` folder is (the private ``GEMINI_CLI_HOME`` when
    recorded, linked to the same files: docs/record.md)."""
    text = [json.dumps(b).replace(str(work), "<work>") for b in bodies]
    text = [re.sub(r"/[^\s`'\"(]*/\.gemini/", "<home>/.gemini/", t) for t in text]
    return [re.sub(r"_\d{13}_(\d+)", r"_<ms>_\1", t) for t in text]


def test_gemini_cli_end_to_end(tmp_path: Path) -> None:
    # the same CLI, the same script, without promcp: what the user would see
    env, home, plain_work = setup(tmp_path / "a")  # two folders of one length: the prompts are the same size
    plain_script = ScriptedGemini(TOOL, ARGS)
    with StubServer(plain_script.gemini) as stub:
        plain = gemini_cli([], {**env, "GOOGLE_GEMINI_BASE_URL": stub.url}, plain_work)
    assert plain.returncode == 0, plain.stderr
    plain_result = json.loads(plain.stdout)

    env, home, work = setup(tmp_path / "b")
    settings_before = (home / ".gemini" / "settings.json").read_bytes()
    out = tmp_path / "traces"
    script = ScriptedGemini(TOOL, ARGS)
    with StubServer(script.gemini) as stub:
        proc = gemini_cli([str(PROMCP), "record", "--out", str(out), "--upstream", stub.url, "--"], env, work)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert "MCP servers recorded: everything" in proc.stderr
    assert (home / ".gemini" / "settings.json").read_bytes() == settings_before  # nothing edited on disk

    # the client saw exactly what it sees without promcp
    assert script.steps == plain_script.steps == ["tool", "answer"]
    assert result["response"] == plain_result["response"] and result["response"].startswith("Echoed: ")
    assert "Echo: promcp records every stage" in result["response"]
    assert same_requests(script.bodies, work) == same_requests(plain_script.bodies, plain_work)
    assert result["stats"]["tools"]["byName"][TOOL]["success"] == 1

    df = pa.load(out)
    assert df["run_id"].nunique() == 1 and set(df["topology"]) == {"c-ots"}
    init = df[(df.stage == "INIT") & (df.server == "everything")]
    assert {"spawn", "ready", "initialize", "tools_discovery"} <= set(init.phase)

    llm = df[df.source == "proxy:llm"].sort_values("seq")
    side = llm[llm.task_id.isna()]  # the CLI's model routing: recorded as what it is, in no task
    assert len(script.side) == len(side) // 2 >= 1
    assert {json.loads(a)["side_call"] for a in side["attrs"]} == {"json_mode"}
    assert side[side.stage == "S1"].tokens_in.tolist() == [
        s["usage"]["promptTokenCount"] for s in script.side
    ]

    task = df[df.task_id.notna()].sort_values("seq")
    assert task.task_id.nunique() == 1
    assert task.stage.tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"], task.stage.tolist()
    calls, outs = task[task.stage.isin(["S1", "S5"])], task[task.stage.isin(["S2", "S6"])]
    for (_, row), (_, answer), usage in zip(calls.iterrows(), outs.iterrows(), script.usage, strict=True):
        origins = row[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum()
        assert row.tokens_in == usage["promptTokenCount"] == origins
        assert row.cache_read_tokens == usage["cachedContentTokenCount"] and row.token_source == "provider"
        assert answer.tokens_out == usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
        assert answer.reasoning_tokens == usage["thoughtsTokenCount"]
        assert json.loads(row["attrs"])["tokens_in_estimate"] > 0
    parts = {p["key"]: p for p in calls.parts.iloc[0]}
    assert (
        parts["instructions:everything"]["origin"] == "system"
        and parts["session_context"]["origin"] == "system"
    )
    assert parts["everything/echo"]["origin"] == "schemas" and parts["prompt"]["origin"] == "user"
    assert "read_file" in parts  # the CLI's own tools are schemas too
    last = {p["origin"] for p in calls.parts.iloc[1]}
    assert {"history", "tool_results"} <= last

    # the MCP call: the MCP proxy's exact pair, joined to the model's functionCall on the arguments
    s2 = task[task.stage == "S2"].iloc[0]
    mcp = task[task.stage.isin(["S3", "S4"])]
    assert (
        set(mcp.source) == {"proxy:mcp"} and set(mcp.server) == {"everything"} and set(mcp.tool) == {"echo"}
    )
    assert set(mcp.tool_call_id) == {s2.tool_call_id} and set(mcp.timing_quality) == {"exact"}
    for attrs in mcp["attrs"]:
        assert json.loads(attrs)["join"]["quality"] == "arguments"

    # every streamed response reached the client byte for byte
    assert [json.loads(a)["response_bytes"] for a in outs["attrs"]] == [len(b) for b in script.sent]

    # the CLI's own session log landed in the real ~/.gemini (through the private home's link) and imports to
    # the same calls and token figures, without what only the wire shows (schemas, timing split)
    [log] = list((home / ".gemini" / "tmp").rglob("session-*.jsonl"))
    imported: list[Any] = []
    summary = import_path(log, sink=imported.append)
    assert summary.format == "gemini-cli" and [e.stage.value for e in imported] == task.stage.tolist()
    got = [(e.tokens_in, e.cache_read_tokens) for e in imported if e.stage.value in ("S1", "S5")]
    assert got == [(u["promptTokenCount"], u["cachedContentTokenCount"]) for u in script.usage]
    assert [e.tokens_out for e in imported if e.stage.value in ("S2", "S6")] == outs.tokens_out.tolist()
    assert [e.tool_call_id for e in imported if e.stage.value == "S3"] != [
        s2.tool_call_id
    ]  # the CLI's own id

    # the API key went to the upstream and nowhere else
    for path in [*out.rglob("*"), *home.rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_gemini_cli_telemetry_through_collect(tmp_path: Path) -> None:
    """The same session's OTLP telemetry (OTLP/HTTP JSON with chunked request bodies) through ``promcp collect``."""
    env, home, work = setup(tmp_path)
    port = free_port()
    settings = {
        **SETTINGS,
        "telemetry": {
            "enabled": True,
            "target": "local",
            "otlpEndpoint": f"http://127.0.0.1:{port}",
            "otlpProtocol": "http",
            "logPrompts": True,
        },
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    out = tmp_path / "ds"
    collect = subprocess.Popen(
        [str(PROMCP), "collect", "--listen", f"127.0.0.1:{port}", "--out", str(out)],
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_port(port)
        script = ScriptedGemini(TOOL, ARGS)
        with StubServer(script.gemini) as stub:
            proc = gemini_cli([], {**env, "GOOGLE_GEMINI_BASE_URL": stub.url}, work)
        assert proc.returncode == 0, proc.stderr
    finally:
        collect.send_signal(signal.SIGINT)
        _, err = collect.communicate(timeout=120)
    assert collect.returncode == 0, err
    assert "rejected none" in err and "(1 prompt(s): 1 Gemini CLI)" in err, err

    df = pa.load(out).sort_values("seq")
    assert set(df["source"]) == {"otlp:gemini-cli"} and set(df["provider"]) == {"google"}
    assert df["stage"].tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"]  # the routing side call left out
    inputs, outputs = df[df["stage"].isin(["S1", "S5"])], df[df["stage"].isin(["S2", "S6"])]
    for (_, row), out_row, usage in zip(inputs.iterrows(), outputs.itertuples(), script.usage, strict=True):
        assert row["tokens_in"] == usage["promptTokenCount"] and row["token_source"] == "provider"
        assert row["cache_read_tokens"] == usage["cachedContentTokenCount"]
        assert out_row.tokens_out == usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
        assert out_row.reasoning_tokens == usage["thoughtsTokenCount"]
        assert out_row.timing_quality == "exact"
    s3, s4 = df[df["stage"] == "S3"].iloc[0], df[df["stage"] == "S4"].iloc[0]
    assert (s3["server"], s3["tool"], s4["status"], s4["timing_quality"]) == (
        "everything",
        "echo",
        "ok",
        "exact",
    )
    assert json.loads(s3["req_preview"]) == ARGS

    # the llm_call spans gave what no log event carries: the system instruction and the function declarations
    for _, row in inputs.iterrows():
        parts = {p["key"]: p for p in row["parts"]}
        assert (
            parts["system_instruction"]["origin"] == "system" and parts["system_instruction"]["tokens"] > 1000
        )
        assert parts["everything/echo"]["origin"] == "schemas" and "read_file" in parts
        assert row["in_schemas"] == sum(p["tokens"] for p in row["parts"] if p["origin"] == "schemas") > 0
        assert sum(p["tokens"] for p in row["parts"]) == row["tokens_in"]  # the rest stays unobserved
        assert json.loads(row["attrs"])["schemas_observable"] is True
    assert "not mapped" in err and "gemini-cli span (the logs give it)" not in err  # counted, not printed


class Capture:
    """A loopback OTLP/HTTP endpoint that keeps each request body as the CLI sent it (chunked, JSON)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from promcp.collect import read_chunked

        self.bodies: list[tuple[str, bytes]] = []
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    body = read_chunked(self.rfile, 64 << 20)
                else:
                    body = self.rfile.read(int(self.headers.get("content-length") or 0))
                bodies.append((self.path, body))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Capture:
        import threading

        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_gemini_cli_spans_alone_and_beside_its_logs(tmp_path: Path) -> None:
    """The CLI's own requests (``telemetry.traces`` on: usage on the ``llm_call`` spans) into ``promcp collect``:
    spans alone make the same task with the spans' figures; logs and spans together, in either order, the logs'
    task once, with the spans' declarations."""
    from promcp.collect import Collector

    env, home, work = setup(tmp_path)
    script = ScriptedGemini(TOOL, ARGS)
    with Capture() as capture, StubServer(script.gemini) as stub:
        telemetry = {"enabled": True, "target": "local", "otlpEndpoint": capture.url, "otlpProtocol": "http"}
        settings = {**SETTINGS, "telemetry": {**telemetry, "logPrompts": True, "traces": True}}
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        proc = gemini_cli([], {**env, "GOOGLE_GEMINI_BASE_URL": stub.url}, work)
    assert proc.returncode == 0, proc.stderr
    traces = [(p, b) for p, b in capture.bodies if p == "/v1/traces"]
    logs = [(p, b) for p, b in capture.bodies if p == "/v1/logs"]
    assert traces and logs

    def collect(requests: list[tuple[str, bytes]], name: str) -> tuple[Any, Any]:
        c = Collector(tmp_path / name, port=0).start()
        try:
            for path, body in requests:
                assert c.accept(path, body, "application/json", "")[0] == 200
        finally:
            stats = c.stop()
        return pa.load(tmp_path / name).sort_values("seq"), stats

    alone, stats = collect(traces, "spans")
    assert alone["stage"].tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"] and stats.prompts == {
        "Gemini CLI": 1
    }
    assert set(alone["source"]) == {"otlp:gemini-cli"}
    inputs, outputs = alone[alone.stage.isin(["S1", "S5"])], alone[alone.stage.isin(["S2", "S6"])]
    assert inputs["tokens_in"].tolist() == [u["promptTokenCount"] for u in script.usage]
    assert outputs["tokens_out"].tolist() == [u["candidatesTokenCount"] for u in script.usage]  # no thoughts
    assert set(outputs["timing_quality"]) == {"exact"}
    s3 = alone[alone.stage == "S3"].iloc[0]
    assert (s3["server"], s3["tool"], json.loads(s3["req_preview"])) == ("everything", "echo", ARGS)
    assert all("everything/echo" in {p["key"] for p in parts} for parts in inputs["parts"])

    both = [collect([*logs, *traces], "logs-first")[0], collect([*traces, *logs], "spans-first")[0]]
    for df in both:
        assert df["stage"].tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"]  # once, not twice
        outs = df[df.stage.isin(["S2", "S6"])]
        assert outs["tokens_out"].tolist() == [
            u["candidatesTokenCount"] + u["thoughtsTokenCount"] for u in script.usage
        ]  # the logs' figures
        assert all("everything/echo" in {p["key"] for p in parts} for parts in df[df.stage == "S1"]["parts"])
    columns = ["stage", "tokens_in", "tokens_out", "in_system", "in_schemas", "latency_ms"]
    assert both[0][columns].astype(str).values.tolist() == both[1][columns].astype(str).values.tolist()
