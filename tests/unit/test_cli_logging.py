"""The CLI's one logging channel: promcp's loggers print one line each through one handler while a command runs,
never a traceback; ``--quiet`` leaves out progress only; nothing is installed for library callers."""

from __future__ import annotations

import logging
from pathlib import Path

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


def test_without_progress_drops_one_loggers_progress_while_a_command_shows_its_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from promcp.cli._logging import without_progress

    pool = logging.getLogger("promcp.host.servers.pool")
    with promcp_logging():
        with without_progress("promcp.host.servers.pool"):
            pool.info("starting calc")  # footprint's own status line says it
            pool.warning("server calc: timeout, retry 1/2")
            logging.getLogger("promcp.store.x").info("finalized x")
        pool.info("starting calc")
    assert capsys.readouterr().err.splitlines() == [
        "warning: server calc: timeout, retry 1/2",
        "finalized x",
        "starting calc",
    ]


def test_library_problems_reach_logging_not_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, recwarn: pytest.WarningsRecorder
) -> None:
    """One channel: a reader that skips a foreign file logs it on promcp.store.* (no ``warnings.warn``), so the CLI
    and a library caller see the same line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import promcp.analysis as pa_
    from promcp.events import Event, Stage
    from promcp.recorder import Recorder

    root = tmp_path
    with Recorder(root, run_id="ok") as rec:
        rec.emit(Event(stage=Stage.S3, task_id="t", round=1, footprint_tokens=1, latency_ms=0.5, tool="x"))
    pq.write_table(pa.table({"a": [1]}), root / "foreign.parquet")
    assert len(pa_.load(root)) == 1
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        name == "promcp.store.discovery" and level == logging.WARNING and "foreign.parquet" in text
        for name, level, text in said
    ), said
    assert not [w for w in recwarn if "foreign" in str(w.message)]
