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
