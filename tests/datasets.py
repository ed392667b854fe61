"""A dataset root holds only Parquet under its Hive layout: every plain Parquet reader opens it.

:func:`reader_problems` opens a dataset root with ``pandas.read_parquet``, ``pyarrow.dataset`` and DuckDB's
``read_parquet('DIR/**/*.parquet', hive_partitioning = 1)`` and says what failed. ``tests/conftest.py`` runs it at
the end of every test session over each dataset the tests wrote under pytest's temporary directory, and
``tests/unit/test_dataset_layout.py`` over the datasets each writer produces.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EVENTS_GLOB = "topology=*/run_id=*/events.parquet"
#: A test that plants foreign files in a dataset on purpose marks its root with this (hidden) file.
PLANTED = ".planted-by-a-test"


def planted(root: Path) -> Path:
    """Mark ``root`` as a dataset a test spoiled on purpose: the session-end check leaves it out."""
    (root / PLANTED).write_text("foreign files planted on purpose\n")
    return root


def dataset_roots(base: Path) -> Iterator[Path]:
    """Every directory under ``base`` that holds finalized runs: ``topology=*/run_id=*/events.parquet`` or the packs
    ``promcp compact`` writes (``topology=*/pack-*.parquet``)."""
    seen: set[Path] = set()
    for events in [*base.rglob("events.parquet"), *base.rglob("pack-*.parquet")]:
        if events.name == "events.parquet":
            run_dir = events.parent
            topo_dir = run_dir.parent
            if not run_dir.name.startswith("run_id="):
                continue
        else:
            topo_dir = events.parent
        if not topo_dir.name.startswith("topology="):
            continue
        root = topo_dir.parent
        if root not in seen and not (root / PLANTED).exists():
            seen.add(root)
            yield root


def reader_problems(root: Path) -> list[str]:
    """What each plain Parquet reader says about ``root`` (empty: all three read the same number of rows)."""
    import duckdb
    import pandas as pd
    import pyarrow.dataset as ds

    rows: dict[str, int] = {}
    problems: list[str] = []
    readers = {
        "pandas.read_parquet": lambda: len(pd.read_parquet(root)),
        "pyarrow.dataset": lambda: ds.dataset(root, format="parquet").count_rows(),
        "duckdb read_parquet(**/*.parquet, hive_partitioning)": lambda: int(
            duckdb.sql(
                f"SELECT count(*) FROM read_parquet('{root.as_posix()}/**/*.parquet', hive_partitioning = 1)"
            ).fetchall()[0][0]
        ),
    }
    for name, read in readers.items():
        try:
            rows[name] = read()
        except Exception as e:  # what the reader says is the finding
            problems.append(f"{root}: {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    if len(set(rows.values())) > 1:
        problems.append(f"{root}: the readers disagree on the rows: {rows}")
    return problems


def wait_run(out: Path, run_id: str, timeout: float = 30.0, topology: str = "c-ots") -> Any:
    """Run ``run_id`` of dataset ``out`` as a DataFrame once it is merged (its file written and no part left) — a
    proxy's recorder or detached merge writes it just after the proxy exits."""
    import pandas as pd

    path = out / f"topology={topology}" / f"run_id={run_id}" / "events.parquet"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and not (out / "_journal" / f"{run_id}.parts").exists():
            return pd.read_parquet(path)
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} was not merged in {timeout} s: {sorted(map(str, out.rglob('*')))}")
