from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from promcp import __version__
from promcp.cli import COMMAND_MODULES, build_parser


def _promcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_version() -> None:
    out = _promcp("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"promcp {__version__}"


def test_every_subcommand_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = set(sub.choices)  # type: ignore[arg-type]
    modules = {name.rstrip("_") for name in COMMAND_MODULES}  # import_ registers "import"
    assert modules <= names, f"registered: {sorted(names)}; modules: {COMMAND_MODULES}"
    for name in sorted(names):
        out = _promcp(name, "--help")
        assert out.returncode == 0, out.stderr
        assert f"usage: promcp {name}" in out.stdout


def test_report_on_a_missing_path_is_one_clear_line(tmp_path: Path) -> None:
    out = _promcp("report", str(tmp_path / "nope"))
    assert out.returncode == 2
    assert "error:" in out.stderr and "nope" in out.stderr and "no such file" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args", [["report", ".", "--format", "xml"], ["frobnicate"], ["record", "--bogus"], ["report", "--bogus"]]
)
def test_bad_arguments_exit_2(args: list[str]) -> None:
    out = _promcp(*args)
    assert out.returncode == 2 and "usage:" in out.stderr and "Traceback" not in out.stderr
    if args[-1] == "--bogus":  # a mistyped option prints the command's own usage
        assert f"usage: promcp {args[0]}" in out.stderr


def test_the_run_summary_says_why_a_task_did_not_finish(capsys: pytest.CaptureFixture[str]) -> None:
    from promcp.cli.run import _summary, _tasks_table
    from promcp.host.agent import TaskResult
    from promcp.host.runner import RunResult

    result = RunResult(
        tasks=[
            TaskResult("fine", rounds=2, answer="4"),
            TaskResult(
                "broken", status="error", rounds=0, error="server 'calc': start command exited (spawn_failed)"
            ),
        ]
    )
    assert _summary(result, None) == 0
    out = capsys.readouterr().out
    # the table has an error column; a long cell wraps after a separator, so read it without the rules and blanks
    assert "error" in out and "spawn_failed" in re.sub(r"[\s│]", "", out)
    errors = {row["task"]: row["error"] for row in _tasks_table(result).rows}
    assert errors == {"fine": None, "broken": "server 'calc': start command exited (spawn_failed)"}


def test_an_internal_bug_is_shown_and_named_as_one(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from promcp.cli._common import EXIT_INTERNAL, run_command

    def broken(args: argparse.Namespace) -> int:
        raise KeyError("a bug")

    assert run_command(broken, argparse.Namespace()) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "KeyError" in err and "this is a bug" in err and "please report it" in err
