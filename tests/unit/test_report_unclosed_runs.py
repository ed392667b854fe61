"""A run whose process died without closing it is named in the report's notes (issue 28): its events are read from
the journal as journaled, and the note says how to write them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from promcp.analysis.report import report

DIES = """
import os, sys
from promcp.events import Event
from promcp.recorder import Recorder
rec = Recorder(sys.argv[1], topology="l-cust", run_id="r-died", fsync="always")
rec.emit(Event(stage="S1", task_id="t1", round=1, tokens_in=100, latency_ms=5.0))
os._exit(0)  # no close(): as if killed
"""


def test_a_run_left_by_a_dead_process_is_named_in_the_notes(tmp_path: Path) -> None:
    out = tmp_path / "data"
    subprocess.run([sys.executable, "-c", DIES, str(out)], check=True)
    assert list(out.glob("_journal/*.jsonl"))
    rep = report(out)
    assert rep.events == 1
    notes = [n for n in rep.notes if "ended without their process closing them" in n]
    assert len(notes) == 1 and "r-died" in notes[0] and f"promcp finalize {out}" in notes[0]


def test_a_closed_run_gets_no_such_note(tmp_path: Path) -> None:
    from promcp.events import Event
    from promcp.recorder import Recorder

    out = tmp_path / "data"
    with Recorder(out, topology="l-cust", run_id="r-closed") as rec:
        rec.emit(Event(stage="S1", task_id="t1", round=1, tokens_in=100, latency_ms=5.0))  # type: ignore[arg-type]
    assert not any("ended without" in n for n in report(out).notes)
