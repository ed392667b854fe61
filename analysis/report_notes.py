"""The notes under ``promcp report``'s tables, written from plain facts (counts, a few task rows): the report over
pandas frames (:mod:`promcp.analysis.report`) and the phases-only report computed in DuckDB
(:mod:`promcp.analysis.phase_report`) say the same thing in the same words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from promcp.analysis.engine import IMPLICIT_TASK

#: Incomplete tasks named in the exclusion note before "and N more".
NAMED_IN_NOTE: Final = 5
#: the error type of a call whose model process died (promcp/host/llm/_model_process.py)
MODEL_CRASHED = "model_crashed"


@dataclass
class TaskFacts:
    """What the task notes say: the tasks (``tasks``), the first :data:`NAMED_IN_NOTE` incomplete ones (``named``:
    objects with ``task_id``, ``outcome``, ``error``) of ``incomplete``, the tasks whose model crashed
    (``crashed``), the runs with an implicit task (``implicit``), the events and the overflowed LLM calls."""

    tasks: int
    incomplete: int
    named: Sequence[Any]
    crashed: int
    implicit: int
    events: int
    overflow: int


def task_notes(facts: TaskFacts, include_incomplete: bool) -> list[str]:
    """The report's notes about its tasks: which were left out, crashed models, implicit tasks, none at all,
    overflows."""
    notes: list[str] = []
    if facts.incomplete:
        named = ", ".join(
            f"{r.task_id} ({r.outcome}" + (f": {short(r.error)})" if isinstance(r.error, str) else ")")
            for r in facts.named[:NAMED_IN_NOTE]
        )
        more = f" and {facts.incomplete - NAMED_IN_NOTE} more" if facts.incomplete > NAMED_IN_NOTE else ""
        if include_incomplete:
            notes.append(f"the tables include {facts.incomplete} incomplete task(s): {named}{more}")
        else:
            notes.append(
                f"{facts.incomplete} of {facts.tasks} task(s) are not complete and are left out of the tables: "
                f"{named}{more}. --include-incomplete counts them; --errors lists every failure"
            )
    if facts.crashed:
        notes.append(
            f"the embedded model's process crashed in {facts.crashed} task(s) ({MODEL_CRASHED}; the run went on "
            "with a new one): `promcp doctor` checks the model on this CPU, docs/run.md 'The embedded model on any "
            "CPU' says what to do"
        )
    if facts.implicit:
        notes.append(
            f"{facts.implicit} run(s) recorded LLM or tool events without a task id: each run's are counted as one "
            f"task, {IMPLICIT_TASK!r}; wrap each request in promcp.scope(task_id=…) to count tasks separately"
        )
    if not facts.tasks:
        notes.append(
            "no task events (S1–S6) in this selection: only session start-up was recorded"
            if facts.events
            else "no events in this selection"
        )
    if facts.overflow:
        notes.append(
            f"{facts.overflow} LLM call(s) did not fit the context window (status context_overflow, not sent): "
            "see the context overflow table; their tasks are not complete"
        )
    return notes


def unclosed_runs_note(data: Any) -> str | None:
    """Runs whose process ended without closing them (killed, crashed, out of memory): read from their journal."""
    if not isinstance(data, str | Path) or not Path(data).is_dir():
        return None
    from promcp.store.journal import is_live, iter_journals

    ended = [j.stem for j in iter_journals(Path(data)) if not is_live(j)]
    if not ended:
        return None
    named = ", ".join(ended[:NAMED_IN_NOTE]) + (
        f" and {len(ended) - NAMED_IN_NOTE} more" if len(ended) > NAMED_IN_NOTE else ""
    )
    return (
        f"{len(ended)} run(s) ended without their process closing them (killed or crashed): {named}; their "
        f"events are read from the journal as journaled; `promcp finalize {data}` writes them"
    )


def timing_notes(
    phase_rows: Sequence[Any],
    by: Sequence[str],
    overlap: int,
    overlap_latency_ms: float,
    overlap_wall_ms: float,
) -> list[str]:
    """Why latency means and shares are what they are: unknown timings (``phase_rows``: the phase table's rows of
    the five phases, objects with ``phase``, ``tasks``, ``latency_ms_tasks`` and the ``by`` keys), overlapping
    intervals (``overlap`` tasks whose phase latencies add up to more than their wall time, and those sums)."""
    notes: list[str] = []
    unknown = [r for r in phase_rows if r.latency_ms_tasks < r.tasks]
    if phase_rows and not any(float(r.latency_ms_tasks) for r in phase_rows):
        notes.append(
            "no latency was recorded for these task(s) (no timing in the source): latency is unknown"
        )
    elif unknown:
        parts = ", ".join(
            f"{r.phase} in {int(r.tasks - r.latency_ms_tasks)} of {int(r.tasks)}"
            + (f" ({' / '.join(str(getattr(r, k)) for k in by)})" if by else "")
            for r in unknown
        )
        notes.append(
            f"latency unknown (no timing recorded) for {parts} task(s): means skip them, shares are of the "
            "measured time"
        )
    if overlap:
        notes.append(
            f"in {overlap} task(s) the recorded intervals overlap (bounded timings, e.g. from exports): their "
            f"phase latencies add up to {overlap_latency_ms:,.0f} ms against {overlap_wall_ms:,.0f} ms of wall "
            "time; shares are of the summed latencies"
        )
    return notes


def short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
