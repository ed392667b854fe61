"""Retrieval scorers, query files, catalog reading and the scaling plot of promcp whatif."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp import tokenizers
from promcp.analysis import whatif
from promcp.cli import main
from promcp.errors import ConfigError
from promcp.strategies.routing import Bm25Index, words

TOOLS = [
    {
        "name": "create_pull_request",
        "description": "Open a pull request on GitHub",
        "server": "gh",
        "inputSchema": {"type": "object", "properties": {"branch": {"type": "string"}}},
    },
    {
        "name": "list_events",
        "description": "List calendar events and meetings",
        "server": "cal",
        "inputSchema": {"type": "object", "properties": {"day": {"type": "string"}}},
    },
    {
        "name": "send_message",
        "description": "Send a chat message to a channel",
        "server": "chat",
        "inputSchema": {"type": "object", "properties": {"channel": {"type": "string"}}},
    },
]


def test_words_split_identifiers() -> None:
    assert words("createPullRequest list_events the") == ["create", "pull", "request", "list", "events"]


def test_bm25_prefers_matching_rare_terms() -> None:
    idx = Bm25Index(["pull request github", "calendar events meetings", "chat message channel"])
    s = idx.scores("open a pull request")
    assert s.argmax() == 0 and s[1] == 0.0


def test_bm25_router_ranks_and_times() -> None:
    router = whatif.Router(TOOLS, "bm25")
    order, ms = router.rank("what meetings do I have tomorrow")
    assert order[0] == 1 and sorted(order) == [0, 1, 2] and ms >= 0.0


def test_unknown_scorer_rejected() -> None:
    with pytest.raises(ValueError, match="unknown scorer"):
        whatif.Router(TOOLS, "magic")  # type: ignore[arg-type]


def test_evaluate_catalog_recall_and_hidden_calls() -> None:
    queries = [
        whatif.Query("open a pull request", frozenset({"create_pull_request"})),
        whatif.Query("post to the channel", frozenset({"cal/list_events"})),
    ]
    res = whatif.evaluate_catalog(TOOLS, queries, len, k=1, router=whatif.Router(TOOLS, "bm25"))
    s = whatif.summarize(whatif.turns_frame(res)).set_index("strategy")
    assert s.loc["topk", "recall_pct"] == 50.0 and s.loc["topk", "hidden_pct"] == 50.0
    assert s.loc["full", "recall_pct"] == 100.0
    assert s.loc["topk", "tokens_per_turn"] < s.loc["full", "tokens_per_turn"]


def test_read_queries_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_text('{"query": "a", "correct_tool": "x"}\n\n{"nope": 1}\n')
    with pytest.raises(ConfigError, match=r"q\.jsonl:3"):
        whatif.read_queries(f)
    f.write_text('{"text": "a", "expected_tools": ["x", "y"]}\n')
    assert whatif.read_queries(f) == [whatif.Query("a", frozenset({"x", "y"}))]


def test_catalog_shapes_and_bad_catalog(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(
        json.dumps({"servers": {"S": {"name": "s", "tools": {"t": {"name": "t", "input_schema": {}}}}}})
    )
    tools = whatif.load_tools(f)
    assert tools == [{"name": "t", "input_schema": {}, "server": "s"}]
    assert whatif.wire_tool(tools[0]) == {"name": "t", "inputSchema": {}}
    f.write_text(json.dumps([{"server": "a", "tools": [{"name": "x"}]}, 3]))
    with pytest.raises(ConfigError, match=r"\[1\]"):
        whatif.load_tools(f)


def test_scaling_and_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    many = [{**TOOLS[i % 3], "name": f"{TOOLS[i % 3]['name']}_{i}"} for i in range(30)]
    frame = whatif.scaling(many, tokenizers.get("cl100k_base").count, k=2, sizes=(10, 20), scorer="bm25")
    assert sorted(set(frame["n_tools"])) == [10, 20, 30]
    full = frame[frame.strategy == "full"].set_index("n_tools")["tokens_per_turn"]
    topk = frame[frame.strategy == "topk"].set_index("n_tools")["tokens_per_turn"]
    assert full.is_monotonic_increasing and (topk < full).all()
    out = whatif.plot_scaling(frame, tmp_path / "p.png", tokenizer="cl100k_base", k=2)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_catalog_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = tmp_path / "tools.json"
    cat.write_text(json.dumps(TOOLS))
    (tmp_path / "queries.jsonl").write_text('{"query": "meetings tomorrow", "correct_tool": "list_events"}\n')
    assert main(["whatif", str(tmp_path), "--scorer", "bm25", "--k", "1", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("strategy,turns") and len(lines) == 7
    assert main(["whatif", str(tmp_path / "missing.json")]) == 2


def test_union_counts_a_relisted_tool_once(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(TOOLS))
    relisted = [{**TOOLS[0], "title": "Create PR", "outputSchema": {"type": "object"}}]
    (tmp_path / "b.json").write_text(json.dumps(relisted))
    assert len(whatif.union_tools([tmp_path / "a.json", tmp_path / "b.json"])) == 3
