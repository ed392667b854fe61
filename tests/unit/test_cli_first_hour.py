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


def test_a_folder_import_names_the_exports_it_does_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "exports"
    shutil.copytree(EXPORTS / "claude-code-project", folder)
    shutil.copy(EXPORTS / "claude-ai-cases.json", folder)
    main(["import", str(folder), "--out", str(tmp_path / "ds")])
    out = capsys.readouterr().out
    assert "1 .json file(s) not read: claude-ai-cases.json" in out


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
