"""promcp import on the project's fixtures (export-formats.md §7) and on every shared sample."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from promcp.analysis import load
from promcp.collectors import events_of, import_path
from promcp.events import Event

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "exports"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "exports"


def _stages(events: list[Event], task: str | None = None) -> list[str]:
    return [e.stage.value for e in events if task is None or e.task_id == task]


def test_claude_ai_cases_branch_blocks_mcp_and_timing() -> None:
    s = import_path(FIXTURES / "claude-ai-cases.json", sink=(events := []).append)
    assert (s.format, s.imported, s.skipped) == ("claude-ai", 2, 1)
    kinds = Counter(p.kind for p in s.problems.items)
    assert kinds == {"unknown_block": 1, "orphan_result": 1, "skipped": 1}
    assert all(p.offset is not None and p.file == "claude-ai-cases.json" for p in s.problems.items)
    t1 = _stages(events, "conv-cases#1")
    assert t1 == ["S1", "S2", "S3", "S4", "S5", "S2", "S3", "S4", "S3", "S4", "S5", "S6"]
    # the retry branch answer is not on the active path
    assert not any("replaced" in (e.resp_preview or "") for e in events)
    s1 = events[0]
    keys = {p.key for p in s1.parts or []}
    assert {"prompt", "attachment:notes.txt", "injected:date_note"} <= keys
    assert (
        s1.in_system
        and s1.in_system > 0
        and s1.token_source.value == "approx"
        and s1.tokenizer == "approx:claude"
    )
    # prompt created 10:00:01, first block 10:00:02 → prefill bounded 1 s; output 2 s exact
    assert s1.timing_quality.value == "bounded" and s1.latency_ms == pytest.approx(1000.0)
    s2 = events[1]
    assert (s2.stage.value, s2.timing_quality.value, s2.latency_ms) == ("S2", "exact", pytest.approx(2000.0))
    s3 = [e for e in events if e.stage.value == "S3"]
    assert [(e.server, e.tool, e.tool_call_id) for e in s3] == [
        ("linear", "list_issues", "toolu_A"),
        ("visualize", "show_widget", "p1"),
        (None, "web_search", "p2"),
        ("linear", "save_issue", "toolu_B"),
    ]
    assert [e.mcp_method for e in s3] == ["tools/call", "tools/call", None, "tools/call"]
    s4 = [e for e in events if e.stage.value == "S4"]
    # null tool_result timestamps: arrival bounded by the next block start (10:00:06 - 10:00:04)
    assert s4[0].timing_quality.value == "bounded" and s4[0].latency_ms == pytest.approx(2000.0)
    assert s4[1].status.value == "error" and s4[1].error_type == "tool_error"
    assert s4[3].status.value == "cancelled"  # tool_use without a result: the user stopped the answer
    # the orphan result text reaches the next input as tool_results context
    s5 = [e for e in events if e.stage.value == "S5"]
    assert any(p.key.startswith("orphan:") for p in s5[-1].parts or [])
    # task 2 re-sends task 1's tool results under the same keys
    s1b = next(e for e in events if e.task_id == "conv-cases#2" and e.stage.value == "S1")
    assert {"toolu_A", "p1", "p2"} <= {p.key for p in s1b.parts or [] if p.origin.value == "tool_results"}
    legacy = _stages(events, "conv-legacy#1")
    assert legacy == ["S1", "S6"]
    assert all(e.timing_quality.value == "none" for e in events if e.task_id == "conv-legacy#1")


def test_claude_ai_jsonl_variant_keeps_good_lines() -> None:
    s = import_path(FIXTURES / "claude-ai-cases.jsonl", sink=(events := []).append)
    assert s.imported == 2
    bad = [p for p in s.problems.items if p.kind == "bad_json"]
    assert len(bad) == 1 and bad[0].line == 2
    assert _stages(events, "conv-cases#1")[0] == "S1"


def test_chatgpt_tree_tools_and_identity() -> None:
    events = events_of(FIXTURES / "chatgpt-tools.json")
    assert _stages(events) == [
        "S1",
        "S2",
        "S3",
        "S4",
        "S5",
        "S2",
        "S3",
        "S4",
        "S5",
        "S2",
        "S3",
        "S4",
        "S5",
        "S6",
    ]
    s3 = [(e.server, e.tool, e.mcp_method) for e in events if e.stage.value == "S3"]
    assert s3 == [
        (None, "python", None),
        ("linear", "create_issue", "tools/call"),
        ("chat_prompt_com", "generateVideo", None),
    ]
    assert all(
        e.tokenizer == "o200k_base" and e.token_source.value == "tokenizer"
        for e in events
        if e.stage.value == "S1"
    )
    s1 = events[0]
    keys = {p.key: p.tokens for p in s1.parts or []}
    assert keys["attachment:data.csv"] == 120 and s1.in_system and s1.in_system > 0
    python_result = next(e for e in events if e.stage.value == "S4")
    assert python_result.timing_quality.value == "exact" and python_result.latency_ms == pytest.approx(750.0)
    assert not any("abandoned" in (e.resp_preview or "") for e in events)
    assert (
        next(e for e in events if e.stage.value == "S3" and e.tool == "create_issue").attrs["connector_id"]
        == "conn_123"
    )


def test_claude_code_folder_usage_dedup_and_subagents() -> None:
    s = import_path(FIXTURES / "claude-code-project", sink=(events := []).append)
    assert s.imported == 2  # the session and its subagent file
    assert Counter(p.kind for p in s.problems.items) == {"orphan_result": 1, "duplicate": 1, "sidechain": 1}
    main = [e for e in events if e.task_id == "sess1#1"]
    assert _stages(main) == ["S1", "S2", "S3", "S4", "S5", "S2", "S3", "S4", "S5", "S6"]
    outs = [e.tokens_out for e in main if e.stage.value in ("S2", "S6")]
    assert outs == [123, 40, 50]  # final usage per message id, not 3+123 / 2+50
    s1 = main[0]
    assert s1.tokens_in == 8 + 1000 + 2000 and s1.token_source.value == "provider"
    assert (s1.cache_read_tokens, s1.cache_write_tokens) == (2000, 1000)
    # what the export does not show (system prompt, tool schemas) is a system part, not spread over the rest
    unobserved = next(p for p in s1.parts or [] if p.key == "unobserved")
    assert unobserved.origin.value == "system"
    assert unobserved.tokens == s1.tokens_in - s1.attrs["tokens_in_estimate"] > 0
    mcp = main[2]
    assert (mcp.server, mcp.tool, mcp.mcp_method) == ("claude-in-chrome", "tabs_context_mcp", "tools/call")
    s4 = main[3]
    assert s4.timing_quality.value == "exact" and s4.latency_ms == pytest.approx(141.0)
    final = main[-1]
    assert final.attrs["turn_duration_ms"] == 11700 and final.attrs["reconstructed_turn_ms"] == pytest.approx(
        11500.0
    )
    assert any(e.task_id == "sess1/agent-ag1#1" for e in events)


def test_cli_writes_dataset_readable_by_analysis(tmp_path: Path) -> None:
    from promcp.cli import main

    rc = main(
        [
            "import",
            str(FIXTURES / "chatgpt-tools.json"),
            str(FIXTURES / "claude-ai-cases.json"),
            "--out",
            str(tmp_path),
            "--quiet",
            "--since",
            "2025-06-01",
        ]
    )
    assert rc == 0
    df = load(tmp_path)
    assert set(df["topology"]) == {"c-ots"}
    assert set(df["source"]) == {"import:chatgpt", "import:claude-ai"}
    assert df["run_id"].nunique() == 2  # one run per input file
    assert "conv-legacy#1" not in set(df["task_id"])  # 2024 conversation is older than --since


def test_conversation_filter() -> None:
    ev: list[Event] = []
    s = import_path(FIXTURES / "claude-ai-cases.json", conversation="conv-legacy", sink=ev.append)
    assert s.imported == 1 and {e.task_id for e in ev} == {"conv-legacy#1"}


SAMPLES = sorted(SHARED.glob("*.json*")) if SHARED.is_dir() else []


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/exports is absent (fresh clone)")
@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_shared_sample(sample: Path) -> None:
    s = import_path(sample, sink=(events := []).append)
    assert s.imported >= 1 and events
    stages = Counter(_stages(events))
    assert stages["S1"] == s.tasks
    assert stages["S3"] == stages["S4"]
    assert stages["S2"] + stages["S6"] == stages["S1"] + stages["S5"]
    for e in events:
        if e.latency_ms is not None:
            assert e.timing_quality.value != "none" and e.latency_ms >= 0
    if sample.name.startswith("claude-code"):
        assert all(
            e.token_source.value == "provider" for e in events if e.stage.value in ("S1", "S5", "S2", "S6")
        )
    else:
        assert {e.token_source.value for e in events} == {"approx"}
    if "linear" in sample.name:
        assert {(e.server, e.tool) for e in events if e.stage.value == "S3"} == {
            ("linear", "save_project"),
            ("linear", "save_issue"),
        }
        first = next(e for e in events if e.stage.value == "S2")
        assert first.timing_quality.value == "exact" and first.latency_ms == pytest.approx(2114.591)
    if "parallel" in sample.name:
        assert stages["S3"] == 6
    if "simonw" in sample.name:
        assert set(stages) == {"S1", "S6"} and stages["S1"] == 10
