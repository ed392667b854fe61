"""``promcp import`` of Codex's own session files: the rollout the real Codex CLI (npm ``@openai/codex``) writes
under ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` during a ``promcp record -- codex exec …`` run against
the scripted loopback Responses upstream of tests/integration/test_record_codex.py (custom provider,
``server-everything`` in its config). One Codex run serves every test here: the rollout it wrote is imported and
set against what ``record`` measured of the same session and against the upstream's own usage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import promcp.analysis as pa
from promcp.collectors import Problems, events_of, parse_path
from tests.integration.test_record_codex import CODEX, EVERYTHING, run_codex

PROMCP = Path(sys.executable).parent / "promcp"

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not CODEX.exists() or not EVERYTHING.exists(), reason="npm packages not installed"),
]


@pytest.fixture(scope="module")
def codex_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("codex-import")
    _stdout, script, out, _stderr = run_codex(tmp, "custom", record=True)
    codex_home = tmp / "recorded" / "codex-home"
    rollouts = sorted((codex_home / "sessions").rglob("rollout-*.jsonl"))
    assert len(rollouts) == 1, rollouts  # Codex wrote its session where it always does
    return {"rollout": rollouts[0], "codex_home": codex_home, "usage": script.usage, "recorded": out}


def test_rollout_imported_with_the_upstreams_usage(codex_run: dict[str, Any]) -> None:
    rollout, usage = codex_run["rollout"], codex_run["usage"]
    events = list(events_of(rollout))
    stages = [e.stage.value for e in events]
    assert stages == ["S1", "S2", "S3", "S4", "S5", "S6"], stages
    assert {e.task_id for e in events} == {f"{rollout.stem.split('-', 6)[-1]}#1"}  # the session id, task 1
    calls = [e for e in events if e.stage.value in ("S1", "S5")]
    outputs = [e for e in events if e.stage.value in ("S2", "S6")]
    for call, out, reported in zip(calls, outputs, usage, strict=True):
        assert call.tokens_in == reported["input_tokens"] == sum(p.tokens for p in call.parts)
        assert call.cache_read_tokens == reported["input_tokens_details"]["cached_tokens"]
        assert call.token_source.value == "provider" and call.model == "gpt-scripted"
        assert out.tokens_out == reported["output_tokens"]
        assert out.reasoning_tokens == reported["output_tokens_details"]["reasoning_tokens"]
        keys = {p.key: p for p in call.parts}
        # the rollout holds Codex's system prompt and its context messages: observed, not "unobserved" guesswork
        assert keys["system"].origin.value == "system" and keys["system"].tokens > 1000
        assert keys["injected:environment_context"].origin.value == "system"
        assert keys["injected:developer"].origin.value == "system"
        assert keys["prompt"].origin.value == "user" and keys["prompt"].tokens < 20
        assert call.attrs["schemas_observable"] is False  # Codex does not write the tool definitions down
    s1, s2 = events[0], events[1]
    assert s1.timing_quality.value == "bounded" and s1.attrs is not None
    assert s2.timing_quality.value == "bounded" and s2.attrs["client_ttft_ms"] > 0
    assert events[5].attrs["turn_duration_ms"] > 0  # Codex's own figure for the turn, beside the rebuilt one
    s3, s4 = events[2], events[3]
    assert (s3.server, s3.tool, s3.tool_call_id, s3.mcp_method) == (
        "everything",
        "echo",
        "call_0001",
        "tools/call",
    )
    assert s4.server == "everything" and s4.status.value == "ok"
    assert s4.timing_quality.value == "exact" and s4.latency_ms is not None and s4.latency_ms >= 0
    assert "promcp records every stage" in (s4.resp_preview or "")
    assert s2.tool_call_id == "call_0001" and s2.tool == "echo"
    # the result re-read by the second call is the tool_results part under the call's id
    assert {p.key for p in calls[1].parts if p.origin.value == "tool_results"} == {"call_0001"}


def test_record_and_import_of_one_codex_session(codex_run: dict[str, Any]) -> None:
    """What each sees of the same session (docs/record.md, Codex: record vs import)."""
    recorded = pa.load(codex_run["recorded"])
    imported = events_of(codex_run["rollout"])
    rec_calls = recorded[(recorded.source == "proxy:llm") & recorded.stage.isin(["S1", "S5"])].sort_values(
        "seq"
    )
    imp_calls = [e for e in imported if e.stage.value in ("S1", "S5")]
    assert rec_calls.tokens_in.tolist() == [e.tokens_in for e in imp_calls]  # the same provider usage
    assert rec_calls.cache_read_tokens.tolist() == [e.cache_read_tokens for e in imp_calls]
    assert (rec_calls.in_schemas > 0).all() and all(not e.in_schemas for e in imp_calls)
    # the system prompt both see; the proxy the request as sent, the rollout the instructions Codex stored
    assert (rec_calls.in_system > 0).all() and all(e.in_system > 0 for e in imp_calls)
    assert set(recorded[recorded.stage == "INIT"].server) == {"everything"}
    assert not any(e.stage.value == "INIT" for e in imported)  # no server start-up in a rollout
    rec_s4 = recorded[(recorded.stage == "S4") & (recorded.source == "proxy:mcp")]
    imp_s4 = [e for e in imported if e.stage.value == "S4"]
    assert set(rec_s4.timing_quality) == {"exact"} and imp_s4[0].timing_quality.value == "exact"


def test_no_path_reads_codex_home(codex_run: dict[str, Any], tmp_path: Path) -> None:
    """``promcp import`` alone reads ``$CODEX_HOME/sessions`` (no Claude folder in this HOME)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "CODEX_HOME": str(codex_run["codex_home"])}
    env.pop("CLAUDE_CONFIG_DIR", None)
    out = tmp_path / "traces"
    got = subprocess.run(
        [str(PROMCP), "import", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    assert got.returncode == 0, got.stderr
    assert f"importing {codex_run['codex_home'] / 'sessions'} (codex)" in got.stderr
    df = pa.load(out)
    assert set(df.source) == {"import:codex"} and len(df) == 6
    # and the folder given by path is told from a Claude Code projects folder by its files' first bytes
    again = subprocess.run(
        [str(PROMCP), "import", str(codex_run["codex_home"] / "sessions"), "--out", str(tmp_path / "t2")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert set(pa.load(tmp_path / "t2").source) == {"import:codex"}


def test_bad_lines_are_named_and_the_rest_kept(codex_run: dict[str, Any], tmp_path: Path) -> None:
    lines = codex_run["rollout"].read_text(encoding="utf-8").splitlines()
    bad = tmp_path / codex_run["rollout"].name
    mangled = [
        *lines[:3],
        "{not json",  # line 4
        json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "from_the_future", "payload": {}}),
        json.dumps([1, 2]),
        *lines[3:],
        lines[-1][: len(lines[-1]) // 2],  # a torn last line (Codex killed mid-write)
    ]
    bad.write_text("\n".join(mangled), encoding="utf-8")
    problems = Problems()
    convs = list(parse_path(bad, "codex", problems=problems))
    assert len(convs) == 1 and len(convs[0].tasks) == 1 and len(convs[0].tasks[0].calls) == 2
    kinds = {p.kind for p in problems.items}
    assert {"unknown_line", "bad_line"} <= kinds
    assert any(p.line == 4 for p in problems.items)
    got = subprocess.run(
        [str(PROMCP), "import", str(bad), "--out", str(tmp_path / "t")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0 and "Traceback" not in got.stderr
    assert "from_the_future" in got.stdout + got.stderr
    assert len(pa.load(tmp_path / "t")) == 6


def test_older_rollouts_usage_and_mcp_end_events(codex_run: dict[str, Any], tmp_path: Path) -> None:
    """Rollouts of older Codex versions have no ``token_usage_record`` (usage comes from ``token_count`` events,
    which 0.169.0 still writes beside it, and repeats of the same totals are rate-limit updates, not calls) and end
    an MCP call with ``mcp_tool_call_end`` (``invocation``, ``duration``) instead of ``item_completed``: the real
    rollout rewritten that way imports to the same figures."""
    older = []
    for line in codex_run["rollout"].read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        payload = item.get("payload", {})
        if item["type"] == "token_usage_record":
            continue
        if payload.get("type") == "token_count":
            older += [item, item]  # the same totals twice: the second is no new call
            continue
        if payload.get("type") == "item_completed" and payload["item"].get("type") == "McpToolCall":
            done = payload["item"]
            took_ms = payload["completed_at_ms"] - payload["started_at_ms"]
            item = {
                "timestamp": item["timestamp"],
                "type": "event_msg",
                "payload": {
                    "type": "mcp_tool_call_end",
                    "call_id": done["id"],
                    "invocation": {"server": done["server"], "tool": done["tool"], "arguments": {}},
                    "duration": {"secs": took_ms // 1000, "nanos": (took_ms % 1000) * 1_000_000},
                    "result": {"Ok": done.get("result")},
                },
            }
        older.append(item)
    path = tmp_path / codex_run["rollout"].name
    path.write_text("\n".join(json.dumps(i) for i in older) + "\n", encoding="utf-8")
    now, then = events_of(codex_run["rollout"]), events_of(path)
    assert [e.stage for e in then] == [e.stage for e in now]
    assert [(e.tokens_in, e.cache_read_tokens, e.tokens_out) for e in then] == [
        (e.tokens_in, e.cache_read_tokens, e.tokens_out) for e in now
    ]
    s4 = next(e for e in then if e.stage.value == "S4")
    assert (s4.server, s4.tool, s4.timing_quality.value) == ("everything", "echo", "exact")
