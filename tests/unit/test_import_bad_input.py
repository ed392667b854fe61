"""Bad input never crashes promcp import: valid conversations import, each problem is reported once with where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp.collectors import import_path
from promcp.events import Event

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "exports"


def _import(path: Path) -> tuple[object, list[Event]]:
    events: list[Event] = []
    return import_path(path, sink=events.append), events


def test_truncated_array_keeps_earlier_conversations(tmp_path: Path) -> None:
    data = (FIXTURES / "claude-ai-cases.json").read_bytes()
    legacy_end = data.index(b'"conv-legacy"')  # cut inside the second conversation
    f = tmp_path / "conversations.json"
    f.write_bytes(data[: legacy_end + 40])
    s, events = _import(f)
    assert s.imported == 1 and {e.task_id for e in events} == {"conv-cases#1", "conv-cases#2"}
    truncated = [p for p in s.problems.items if p.kind == "truncated"]
    assert len(truncated) == 1 and truncated[0].offset == legacy_end + 40


def test_invalid_utf8_and_lone_surrogates(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "claude-ai-cases.json").read_text())
    doc = [doc[1]]
    text = json.dumps(doc).replace("Hello", "Hel\\ud800lo")  # a lone surrogate escape
    raw = text.encode().replace(b"How can", b"How \xff\xfe can")  # invalid UTF-8 bytes
    f = tmp_path / "conversations.json"
    f.write_bytes(raw)
    s, events = _import(f)
    assert s.imported == 1
    bad = [p for p in s.problems.items if p.kind == "invalid_utf8"]
    assert len(bad) == 1 and bad[0].offset == raw.index(b"\xff")
    for e in events:  # everything stored is valid UTF-8
        (e.resp_preview or "").encode("utf-8")


def test_duplicated_and_garbage_lines_in_claude_code(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude-code-project" / "sess1.jsonl").read_bytes().splitlines(keepends=True)
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join([*lines[:4], lines[3], b"{not json\n", *lines[4:], b'{"type": "user", "uu']))
    s, events = _import(f)
    assert s.imported == 1
    kinds = {p.kind: p for p in s.problems.items}
    assert kinds["bad_json"].line == 6 and kinds["truncated"].line == len(lines) + 3
    assert "duplicate" in kinds
    assert [e.tokens_out for e in events if e.stage.value in ("S2", "S6")] == [123, 40, 50]


def test_unknown_format_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    import pytest

    from promcp.errors import ImportFormatError

    f = tmp_path / "x.json"
    f.write_text('{"hello": 1}')
    with pytest.raises(ImportFormatError, match=r"x\.json"):
        import_path(f, sink=lambda e: None)
    with pytest.raises(ImportFormatError, match="no such file"):
        import_path(tmp_path / "missing.json", sink=lambda e: None)


def test_importing_the_same_file_twice_is_detected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promcp import analysis
    from promcp.cli import main

    export = tmp_path / "conversations.json"
    export.write_bytes((FIXTURES / "claude-ai-cases.json").read_bytes())
    out = tmp_path / "ds"
    assert main(["import", str(export), "--out", str(out), "--quiet"]) == 0
    first = analysis.load(out)
    capsys.readouterr()
    # not --quiet: that prints nothing but errors
    assert main(["import", str(export), "--out", str(out)]) == 0
    assert "1 file(s) unchanged since imported: not read" in capsys.readouterr().out
    assert len(analysis.load(out)) == len(first), "nothing doubled"
    (other := tmp_path / "renamed.json").write_bytes(export.read_bytes())  # same content, other name
    assert main(["import", str(other), "--out", str(out)]) == 0
    assert "was imported before as run" in capsys.readouterr().out
    assert len(analysis.load(out)) == len(first)
    assert main(["import", str(export), "--out", str(out), "--replace"]) == 0
    again = analysis.load(out)
    assert len(again) == len(first) and set(again["run_id"]) != set(first["run_id"])
    assert "replaced run" in capsys.readouterr().out
    files = [*out.rglob("*.parquet"), *out.rglob("*.pq")]  # events.parquet, _content/<run>.pq
    assert len(files) == 2, "the earlier run and its content file are gone"


def test_a_symlink_loop_is_named_as_such(tmp_path: Path) -> None:
    import pytest

    from promcp import analysis
    from promcp.errors import ImportFormatError, NotATraceError

    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(ImportFormatError, match="symlink loop"):
        import_path(loop, sink=lambda e: None)
    with pytest.raises(NotATraceError, match="symlink loop"):
        analysis.load(loop)
