"""The CLI's one logging channel: promcp's loggers print one line each through one handler while a command runs,
never a traceback; ``--quiet`` leaves out progress only; nothing is installed for library callers."""

from __future__ import annotations

import logging

import pytest

from promcp.cli._logging import promcp_logging


def test_a_problem_is_one_line_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    log = logging.getLogger("promcp.store.somewhere")
    with promcp_logging():
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            log.exception("cannot write %s", "runs/x.parquet")
        log.warning("a journal line\nwith a break")
        log.info("finalized runs/x.parquet")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: cannot write runs/x.parquet: OSError: [Errno 28] No space left on device",
        "warning: a journal line with a break",
        "finalized runs/x.parquet",
    ]


def test_quiet_keeps_problems_and_drops_progress(capsys: pytest.CaptureFixture[str]) -> None:
    log = logging.getLogger("promcp.collectors.x")
    with promcp_logging(quiet=True):
        log.info("imported 3 sessions")
        log.warning("skipped line 4")
    assert capsys.readouterr().err.splitlines() == ["warning: skipped line 4"]


def test_the_handler_is_gone_after_the_command() -> None:
    logger = logging.getLogger("promcp")
    before = (list(logger.handlers), logger.level, logger.propagate)
    with promcp_logging():
        assert len(logger.handlers) == len(before[0]) + 1 and not logger.propagate
    assert (list(logger.handlers), logger.level, logger.propagate) == before
