"""Shared fixtures: where the shared reference data lives, and small dataset builders."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from promcp.events import Event
from promcp.recorder import Recorder

REPO = Path(__file__).resolve().parent.parent
#: Public reference data next to the repository (catalogs, tasks, exports). Tests read it in place and skip without it.
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present next to the repository")
    return SHARED_DATA


def write_dataset(root: Path, events: Iterable[Event]) -> Path:
    """Journal ``events`` through real Recorders (one per run) and finalize them into ``root``."""
    by_run: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        by_run.setdefault((e.run_id, e.topology.value), []).append(e)
    for (run_id, topology), evs in by_run.items():
        with Recorder(root, topology=topology, run_id=run_id, fsync="never") as rec:
            for e in evs:
                rec.emit(e)
    return root


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every dataset the session wrote (under pytest's temporary directory) opens in plain Parquet readers: a
    dataset root holds only Parquet under its Hive layout (tests/datasets.py). Datasets that promcp itself reads
    with a warning (tests that plant broken or foreign files on purpose) are left out."""
    import logging

    from tests.datasets import dataset_roots, reader_problems

    factory = getattr(session.config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None)
    if base is None or not Path(base).is_dir():
        return
    from promcp.analysis import load_table

    problems: list[str] = []
    checked = 0

    class Caught(logging.Handler):  # a reader's warnings (a skipped file…) are logged on promcp.*
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.records: list[logging.LogRecord] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record)

    logger = logging.getLogger("promcp")
    for root in dataset_roots(Path(base)):
        caught = Caught()
        logger.addHandler(caught)
        try:
            load_table(root, columns=["run_id"])
        except Exception:
            continue
        finally:
            logger.removeHandler(caught)
        if caught.records:
            continue
        checked += 1
        problems += reader_problems(root)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and (problems or checked):
        reporter.ensure_newline()
    if problems:
        if reporter is not None:
            reporter.write_line(
                f"datasets that plain Parquet readers cannot open ({len(problems)}):", red=True
            )
            for p in problems:
                reporter.write_line(f"  {p}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif reporter is not None and checked:
        reporter.write_line(f"{checked} dataset(s) written by the tests open in pandas, pyarrow and DuckDB")
