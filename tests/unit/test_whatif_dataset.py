"""What-if over a recorded dataset: a real Recorder writes a two-round task with captured content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp import tokenizers
from promcp.analysis import load, load_content, whatif
from promcp.cli import main
from promcp.events import Event, Origin, Part, Stage
from promcp.recorder import Recorder

TOK = "cl100k_base"
TOOLS = {
    "read_file": {
        "name": "read_file",
        "description": "Read the complete contents of a text file",
        "parameters": {"type": "object", "title": "Args", "properties": {"path": {"type": "string"}}},
    },
    "write_file": {
        "name": "write_file",
        "description": "Write text content to a file, replacing it",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    },
    "list_dir": {
        "name": "list_dir",
        "description": "List the entries of a directory",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    "weather": {
        "name": "weather",
        "description": "Current weather forecast for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
RESULT = json.dumps(
    {"path": "/tmp/notes.txt", "size": 5120, "text": "Remember the milk", "mtime": "2026-01-01"}
)


def _record(out: Path) -> None:
    count = tokenizers.get(TOK).count
    texts = {n: json.dumps(t, separators=(",", ":")) for n, t in TOOLS.items()}
    with Recorder(out, run_id="r1") as rec:
        for text in texts.values():
            rec.put_text("schema", text)
        rec.emit(
            Event(
                stage=Stage.INIT,
                phase="tools_discovery",
                server="fs",
                tokenizer=TOK,
                attrs={"n_tools": 4, "tools": {n: {"tokens": count(t)} for n, t in texts.items()}},
            )
        )
        prompt = "read the file notes.txt and tell me what it says"
        h_prompt = rec.put_text("prompt", prompt)
        schemas = [Part(Origin.SCHEMAS, f"fs/{n}", count(t)) for n, t in texts.items()]
        user = Part(Origin.USER, "prompt", count(prompt))
        common = {"task_id": "t1", "tokenizer": TOK, "model": "m"}
        rec.emit(
            Event(stage=Stage.S1, round=1, parts=[*schemas, user], attrs={"content": h_prompt}, **common)
        )
        rec.emit(Event(stage=Stage.S2, round=1, tokens_out=12, tool_call_id="c1", **common))
        rec.emit(
            Event(
                stage=Stage.S3,
                round=1,
                server="fs",
                tool="read_file",
                tool_call_id="c1",
                req_preview='{"path":"/tmp/notes.txt"}',
                **common,
            )
        )
        h_res = rec.put_text("result", RESULT)
        rec.emit(
            Event(
                stage=Stage.S4,
                round=1,
                server="fs",
                tool="read_file",
                tool_call_id="c1",
                footprint_tokens=count(RESULT),
                attrs={"content": h_res},
                **common,
            )
        )
        result = Part(Origin.TOOL_RESULTS, "c1", count(RESULT))
        rec.emit(Event(stage=Stage.S5, round=2, parts=[*schemas, user, result], **common))
        answer = "The file says: Remember the milk"
        rec.emit(
            Event(
                stage=Stage.S6,
                round=2,
                tokens_out=9,
                attrs={"content": rec.put_text("answer", answer)},
                **common,
            )
        )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whatif")
    _record(out)
    return out


def _bm25(tools):  # type: ignore[no-untyped-def]
    return whatif.Router(tools, "bm25")


def test_every_llm_call_recomputed(dataset: Path) -> None:
    res = whatif.evaluate_dataset(
        load(dataset), load_content(dataset), lambda n: tokenizers.get(n).count, k=1, router_factory=_bm25
    )
    t = res.turns
    assert res.skipped == {}
    assert set(t["strategy"]) == set(whatif.DATASET_STRATEGIES)
    assert (t.groupby("strategy").size() == 2).all()  # two LLM calls
    full = t[t.strategy == "full"].set_index("round")["tokens"]
    topk = t[t.strategy == "topk"].set_index("round")
    count = tokenizers.get(TOK).count
    read_file = count(  # counted in the form it was captured in (``parameters``), as the host sends it
        json.dumps(
            {
                "name": "read_file",
                "description": TOOLS["read_file"]["description"],
                "parameters": TOOLS["read_file"]["parameters"],
            },
            separators=(",", ":"),
        )
    )
    all_four = sum(
        count(
            json.dumps(
                {"name": n, "description": d["description"], "parameters": d["parameters"]},
                separators=(",", ":"),
            )
        )
        for n, d in TOOLS.items()
    )
    assert (full - topk["tokens"]).tolist() == [all_four - read_file] * 2
    assert topk.loc[1, "hits"] == 1 and topk.loc[1, "expected"] == 1  # read_file routed, call not hidden
    slim = t[t.strategy == "slim"].set_index("round")["tokens"]
    assert (slim < full).all()  # the "title" keyword goes
    rf = t[t.strategy == "result-fields"].set_index("round")["tokens"]
    assert rf.loc[1] == full.loc[1]  # no tool result yet
    assert rf.loc[2] < full.loc[2]  # only path and text were used later


def test_missing_schema_texts_are_reported_not_invented(dataset: Path) -> None:
    empty = load_content(dataset).iloc[0:0]
    res = whatif.evaluate_dataset(
        load(dataset),
        empty,
        lambda n: tokenizers.get(n).count,
        strategies=["slim", "topk"],
        router_factory=_bm25,
    )
    assert res.skipped == {"slim": 2, "topk": 2}  # data for the caller, which says it
    assert set(res.turns["strategy"]) == {"full"}
    assert whatif.skipped_note(res.skipped) == (
        "LLM calls left out for lack of captured schema texts or prompt (slim: 2, topk: 2); see docs/whatif.md"
    )
    assert whatif.skipped_note({}) is None
    # whatif_dataset (promcp whatif) logs it on promcp.*: tests/unit/test_report_html.py sees the CLI print it


def test_cli_dataset_json(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["whatif", str(dataset), "--scorer", "bm25", "--k", "1", "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "dataset" and out["llm_calls"] == 2
    rows = {r["strategy"]: r for r in out["tables"]["summary"]}
    assert rows["topk"]["recall_pct"] == 100.0
    assert rows["topk"]["saved_total"] > 0
    assert rows["full"]["tokens_per_task"] == rows["full"]["tokens_per_turn"] * 2


def test_cli_rejects_plot_for_dataset(dataset: Path) -> None:
    assert main(["whatif", str(dataset), "--plot", str(dataset / "x.png")]) == 2
