"""What a new user meets at the command line (issue 29): partial imports that say what was and was not imported,
a quiet --quiet, a command's own usage for a mistyped option, report's default dataset, base-URL hints."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from promcp.cli import main
from promcp.cli.proxy_llm import base_url_hint
from tests.conftest import REPO

EXPORTS = REPO / "tests" / "fixtures" / "exports"


def test_a_mixed_import_imports_what_is_valid_and_names_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "stream.sse.txt"
    junk.write_text("event: ping\ndata: {}\n\n")
    good = EXPORTS / "claude-ai-cases.json"
    out = tmp_path / "ds"
    assert main(["import", str(good), str(junk), "--out", str(out)]) == 2
    got = capsys.readouterr()
    assert (
        "promcp import" in got.out and "claude-ai-cases.json" in got.out
    )  # the summary of what was imported
    assert "wrote " in got.out
    assert "stream.sse.txt: not a known export" in got.err
    assert "1 of 2 input(s) not imported" in got.err
    assert list(out.glob("topology=*/run_id=*/events.parquet"))
    # --quiet prints nothing on success, only the errors on failure
    assert main(["import", str(good), "--out", str(tmp_path / "q"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["import", str(good), str(junk), "--out", str(tmp_path / "q2"), "--quiet"]) == 2
    quiet = capsys.readouterr()
    assert quiet.out == "" and "not a known export" in quiet.err
    # a second import of the same file: the table counts it as skipped, as the note says
    assert main(["import", str(good), "--out", str(out)]) == 0
    again = capsys.readouterr().out
    assert "unchanged since imported: not read" in again
    row = next(line for line in again.splitlines() if "claude-ai-cases" in line)
    assert [c.strip() for c in row.split("│")[4:6]] == ["0", "1"]  # imported 0, skipped 1


def test_a_folder_import_imports_its_other_exports_and_names_what_it_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder of Claude Code sessions beside Claude.ai .json exports (as ../shared/data/exports is): the
    sessions are one input, every .json export one more, and a file that is no export is named with why."""
    folder = tmp_path / "exports"
    shutil.copytree(EXPORTS / "claude-code-project", folder)
    shutil.copy(EXPORTS / "claude-ai-cases.json", folder)
    (folder / "stream.sse.txt").write_text("event: ping\ndata: {}\n\n")
    out = tmp_path / "ds"
    assert (
        main(["import", str(folder), "--out", str(out), "--format", "claude-code"]) == 0
    )  # forced: as before
    assert "claude-ai-cases.json" not in capsys.readouterr().out
    assert main(["import", str(folder), "--out", str(tmp_path / "ds2")]) == 0
    got = capsys.readouterr().out
    rows: list[list[str]] = []  # a wrapped name continues on the next lines, its numbers empty
    for line in got.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.split("│")[1:-1]]
            if cells[2]:  # MB: a number, never wrapped
                rows.append(cells)
            else:
                rows[-1] = [a + b for a, b in zip(rows[-1], cells, strict=True)]
    assert sorted((r[0], r[1]) for r in rows) == [
        ("claude-ai-cases.json", "claude-ai"),
        ("exports", "claude-code"),
    ]
    assert "1 file(s) not imported: stream.sse.txt (not a known export" in got
    import promcp.analysis as pa

    both = pa.load(tmp_path / "ds2")
    assert (
        main(["import", str(EXPORTS / "claude-ai-cases.json"), "--out", str(tmp_path / "one"), "--quiet"])
        == 0
    )
    alone = pa.load(tmp_path / "one")
    from_folder = both[both["source"].astype(str) == "import:claude-ai"]
    assert len(from_folder) == len(alone) > 0  # the .json export imported whole, as when named
    assert (both["source"].astype(str) == "import:claude-code").any()


def test_a_mistyped_option_prints_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "examples/default-run", "--sectoin", "init"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: promcp report") and "unrecognized arguments: --sectoin init" in err


def test_report_defaults_to_traces_like_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 2
    assert "traces" in capsys.readouterr().err
    shutil.copytree(REPO / "examples" / "default-run", tmp_path / "traces")
    assert main(["report", "--section", "tasks", "--format", "json"]) == 0
    assert '"tasks": 5' in capsys.readouterr().out


def test_the_base_url_hint_names_the_clients_variable() -> None:
    assert base_url_hint("http://127.0.0.1:11434", "http://127.0.0.1:9", "anthropic").startswith(
        "export OLLAMA_HOST=http://127.0.0.1:9"
    )
    assert (
        base_url_hint("https://api.anthropic.com", "http://x", "anthropic")
        == "export ANTHROPIC_BASE_URL=http://x"
    )
    assert (
        base_url_hint("https://api.openai.com/v1", "http://x", "openai") == "export OPENAI_BASE_URL=http://x"
    )


def test_an_unknown_task_lists_the_tasks_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(REPO / "examples" / "default-run"), "--task", "calc-mu"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no task calc-mu" in err
    assert "tasks: calc-mul, dates-sse-between, everything-http-sum, multi-days-hours, time-tokyo" in err
