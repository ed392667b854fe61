"""The runs of a dataset as spans, one run at a time and one batch of events at a time (bounded memory).

A run is read twice: first a few columns (task ids and times: each task's root span; the LLM columns: each call's
cost), then its events in batches of Parquet rows, each turned into spans. Nothing but those small per-task and
per-call tables is held for a whole run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from promcp.events import LLM_INPUT_STAGES, LLM_OUTPUT_STAGES, Event
from promcp.export.spans import NO_TASK, Cost, TaskSpan, event_span, task_span
from promcp.store.parquet import RunFile
from promcp.store.parts import events_from_table

__all__ = ["RunSpans", "run_header"]

_TIME_COLUMNS = ["task_id", "t_start_ns", "t_end_ns"]
_INPUT = frozenset(s.value for s in LLM_INPUT_STAGES)
_OUTPUT = frozenset(s.value for s in LLM_OUTPUT_STAGES)


def run_header(run: Mapping[str, Any]) -> dict[str, Any]:
    """The header rows carry for ``promcp collect`` (as ``promcp.instrument()`` sends it)."""
    keys = ("run_id", "topology", "source", "benchmark", "meta", "content", "max_content_bytes")
    return {k: run.get(k) for k in keys if run.get(k) is not None}


def _key(task: Any, rnd: Any) -> tuple[str, int | None]:
    t = NO_TASK if task is None or (isinstance(task, float) and math.isnan(task)) else str(task)
    r = None if rnd is None or (isinstance(rnd, float) and math.isnan(rnd)) else int(rnd)
    return t, r


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


@dataclass
class RunSpans:
    """One run of a dataset, read for export."""

    file: RunFile
    batch_rows: int = 1024
    carry_rows: bool = True
    prices: Mapping[str, Any] | None = None
    _tasks: tuple[list[TaskSpan], int | None] | None = field(default=None, init=False, repr=False)
    _pack_rows: pa.Table | None = field(default=None, init=False, repr=False)

    @property
    def run_id(self) -> str:
        return str(self.file.run.get("run_id") or self.file.path.parent.name.removeprefix("run_id="))

    @property
    def fingerprint(self) -> str:
        """What changes when the run does (its file rewritten, a journal grown; a run moved unchanged into a pack
        keeps its former file's)."""
        if self.file.packed and self.file.origin:
            return self.file.origin
        try:
            st = self.file.path.stat()
        except OSError:
            return "?"
        return f"{st.st_size}:{st.st_mtime_ns}"

    def _packed(self) -> pa.Table:
        """This run's rows of a pack (promcp compact), read once."""
        if self._pack_rows is None:
            from promcp.store.packs import read_run

            self._pack_rows = read_run(self.file.path, self.run_id)
        return self._pack_rows

    def _columns(self, names: list[str]) -> pa.Table:
        if self.file.packed:
            table = self._packed()
            return table.select([n for n in names if n in table.column_names])
        if self.file.table is not None:
            table = self.file.table
            return table.select([n for n in names if n in table.column_names])
        schema = pq.read_schema(self.file.path)
        return pq.read_table(self.file.path, columns=[n for n in names if n in schema.names])

    def _batches(self) -> Iterator[pa.RecordBatch]:
        if self.file.packed:
            yield from self._packed().to_batches(max_chunksize=self.batch_rows)
            return
        if self.file.table is not None:
            yield from self.file.table.to_batches(max_chunksize=self.batch_rows)
            return
        with pq.ParquetFile(self.file.path) as f:
            yield from f.iter_batches(batch_size=self.batch_rows)

    def count(self) -> int:
        if self.file.packed:
            return int(self._packed().num_rows)
        if self.file.table is not None:
            return int(self.file.table.num_rows)
        with pq.ParquetFile(self.file.path) as f:
            return int(f.metadata.num_rows)

    def total(self) -> int:
        """How many spans the run is: one per task, one per event."""
        return len(self.tasks()[0]) + self.count()

    def tasks(self) -> tuple[list[TaskSpan], int | None]:
        """Each task's root span (in first-seen order) and the run's earliest known time."""
        if self._tasks is None:
            self._tasks = self._read_tasks()
        return self._tasks

    def _read_tasks(self) -> tuple[list[TaskSpan], int | None]:
        cols = self._columns(_TIME_COLUMNS).to_pydict()
        found: dict[str, TaskSpan] = {}
        first: int | None = None
        n = len(cols.get("t_start_ns", []))
        tasks = cols.get("task_id") or [None] * n
        for task, s, t in zip(
            tasks, cols.get("t_start_ns") or [None] * n, cols.get("t_end_ns") or [None] * n, strict=True
        ):
            key = NO_TASK if task is None else str(task)
            span = found.get(key)
            if span is None:
                span = found[key] = TaskSpan(self.run_id, key, None, None)
            span.events += 1
            for v in (s, t):
                if v is None:
                    continue
                span.start_ns = v if span.start_ns is None else min(span.start_ns, v)
                span.end_ns = v if span.end_ns is None else max(span.end_ns, v)
                first = v if first is None else min(first, v)
        return list(found.values()), first

    def costs(self) -> dict[tuple[str, int | None, str], Cost]:
        """(task, round, ``in`` / ``out``) → the cost of that side of the LLM call (promcp.analysis.cost)."""
        from promcp.analysis.cost import CALL_COST_COLUMNS, call_costs

        frame = self._columns(list(CALL_COST_COLUMNS)).to_pandas()
        if frame.empty or "stage" not in frame or not frame["stage"].astype(str).isin(_INPUT).any():
            return {}
        if "run_id" not in frame:
            frame["run_id"] = self.run_id
        out: dict[tuple[str, int | None, str], Cost] = {}
        for r in call_costs(frame, self.prices).to_dict("records"):
            task, rnd = _key(r.get("task_id"), r.get("round"))
            reason, by = r.get("reason"), r.get("priced_by")
            reason = reason if isinstance(reason, str) else None
            by = by if isinstance(by, str) else None
            out[(task, rnd, "in")] = Cost(_num(r.get("input_usd")), reason, by)
            out[(task, rnd, "out")] = Cost(_num(r.get("output_usd")), reason, by)
        return out

    def spans(self, skip: int = 0) -> Iterator[list[Any]]:
        """The run's spans in a fixed order — every task's root span, then one span per event in file order — as
        lists of at most ``batch_rows``, the first ``skip`` left out (spans already sent)."""
        tasks, first = self.tasks()
        anchor = first if first is not None else int(self.file.run.get("created_ns") or 0)
        header = (
            json.dumps(run_header(self.file.run), sort_keys=True, default=str) if self.carry_rows else None
        )
        costs = self.costs()
        position = 0
        roots = [task_span(t, anchor, self.file.run) for t in tasks]
        for i in range(0, len(roots), self.batch_rows):
            chunk = roots[i : i + self.batch_rows]
            position += len(chunk)
            if position > skip:
                yield chunk[max(0, len(chunk) - (position - skip)) :]
        for batch in self._batches():
            if position + batch.num_rows <= skip:  # sent before: only keep the time anchor moving
                position += batch.num_rows
                anchor = _last_time(batch, anchor)
                continue
            events: list[Event] = events_from_table(batch)
            out = []
            for e in events:
                position += 1
                known = e.t_end_ns if e.t_end_ns is not None else e.t_start_ns
                if position > skip:
                    out.append(event_span(e, anchor, run_header=header, cost=self._cost(costs, e)))
                if known is not None:
                    anchor = known
            if out:
                yield out

    @staticmethod
    def _cost(costs: Mapping[tuple[str, int | None, str], Cost], e: Event) -> Cost | None:
        stage = e.stage.value
        side = "in" if stage in _INPUT else "out" if stage in _OUTPUT else None
        if side is None:
            return None
        return costs.get((e.task_id if e.task_id is not None else NO_TASK, e.round, side))


def _last_time(batch: pa.RecordBatch, anchor: int) -> int:
    """The time of the last event of ``batch`` that has one (its end, else its start), else ``anchor``."""
    names = batch.schema.names
    n = batch.num_rows
    ends = batch.column("t_end_ns").to_pylist() if "t_end_ns" in names else [None] * n
    starts = batch.column("t_start_ns").to_pylist() if "t_start_ns" in names else [None] * n
    for end, start in zip(reversed(ends), reversed(starts), strict=True):
        known = end if end is not None else start
        if known is not None:
            return int(known)
    return anchor
