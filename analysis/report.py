"""The report: every attribution table of a dataset in one place (what ``promcp report`` prints).

:func:`report` selects runs and tasks, decides which tasks are complete (only those enter the attribution tables
unless ``include_incomplete``), computes the chosen sections and writes down, as notes, everything a reader needs
to trust the numbers: which tasks were left out and why, which latencies are unknown or overlap, which events had
no task id. Rendering is separate (:mod:`promcp.analysis.views.report`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pandas as pd

from promcp.analysis.cost import (
    CALL_COST_COLUMNS,
    PRICE_TABLE,
    Rates,
    cache_split,
    call_costs,
    cost_by_phase,
    schema_tax,
)
from promcp.analysis.engine import (
    IMPLICIT_TASK,
    TASK_EVENT_SQL,
    Events,
    as_arrow,
    complete,
    ident,
    query,
    select,
)
from promcp.analysis.load import attrs_of, load_content
from promcp.analysis.report_notes import (
    MODEL_CRASHED,
    NAMED_IN_NOTE,
    TaskFacts,
    task_notes,
    timing_notes,
    unclosed_runs_note,
)
from promcp.analysis.sections import DEFAULT_SECTIONS, SECTIONS
from promcp.analysis.tables import (
    input_origins,
    latency_segments,
    per_task,
    phase_attribution,
    resend_cost,
    session_init,
)
from promcp.analysis.task_sql import FACT_COLUMNS, PHASES
from promcp.analysis.tasks import errors, overflows
from promcp.analysis.tokenizer_compare import compare_tokenizers
from promcp.errors import ConfigError

#: Task ids an unknown ``--task`` error lists before "and N more".
KNOWN_IN_ERROR: Final = 20

#: Columns :func:`report` reads (loading only these keeps million-event reports fast).
REPORT_COLUMNS: Final = (
    "run_id",
    "topology",
    "benchmark",
    "model",
    "task_id",
    "round",
    "seq",
    "stage",
    "phase",
    "server",
    "tool",
    "transport",
    "tool_call_id",
    "t_start_ns",
    "t_end_ns",
    "tokens_in",
    "tokens_out",
    "footprint_tokens",
    "footprint_bytes",
    "tokenizer",
    "latency_ms",
    "status",
    "error_type",
    "resp_preview",
    "context_window",
    "in_system",
    "in_schemas",
    "in_user",
    "in_history",
    "in_tool_results",
    "parts",
    "attrs",
)


@dataclass
class Report:
    """Named result tables (pandas) of one dataset selection, and what a reader must know about them.

    ``tables`` by section name; ``notes`` about the whole report, ``table_notes`` about one section;
    ``excluded`` the tasks left out of the attribution tables (rows of :func:`~promcp.analysis.task_table`);
    ``approximations`` the approximate tokenizers behind the counts (label → what it is).
    """

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    events: int = 0
    runs: int = 0
    tasks: int = 0
    complete: int = 0
    by: list[str] = field(default_factory=list)
    include_incomplete: bool = False
    notes: list[str] = field(default_factory=list)
    table_notes: dict[str, list[str]] = field(default_factory=dict)
    excluded: pd.DataFrame = field(default_factory=pd.DataFrame)
    approximations: dict[str, str] = field(default_factory=dict)

    def note(self, section: str, text: str) -> None:
        self.table_notes.setdefault(section, []).append(text)


def report(
    data: Events,
    *,
    by: Sequence[str] = ("topology",),
    sections: Sequence[str] | None = None,
    tokenizers: Sequence[str] = (),
    resend_top: int = 15,
    runs: Sequence[str] | None = None,
    latest: int = 0,
    tasks: Sequence[str] | None = None,
    include_incomplete: bool = False,
    prices: Mapping[str, Rates] | None = None,
) -> Report:
    """Compute the report tables for a dataset path (or already loaded events).

    ``sections`` picks from :data:`SECTIONS` (default: :data:`DEFAULT_SECTIONS`, plus ``overflows`` when there
    are any, plus ``tokenizers`` when ``tokenizers`` names at least one tokenizer to compare over the captured
    content). ``runs`` (ids, unique prefixes or suffixes), ``latest`` (the N most recent runs) and ``tasks``
    (task ids) narrow the events first. Only complete tasks enter the attribution tables unless
    ``include_incomplete``; the others are named in a note (and listed by the ``tasks`` and ``errors`` sections).
    ``cost`` and ``cache`` are shown by default when any LLM call has a provider's cache split; ``prices`` (a
    user's price file, :func:`promcp.analysis.cost.load_prices`) overrides the price table per model.
    """
    wanted = list(sections) if sections is not None else list(DEFAULT_SECTIONS)
    if tokenizers and "tokenizers" not in wanted:
        wanted.append("tokenizers")
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        raise ConfigError(
            f"unknown report section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}",
            source="--section",
        )
    events = select(data, runs=runs, latest=latest, tasks=tasks)
    counts = query(
        "SELECT count(*) AS events, count(DISTINCT run_id) AS runs, "
        "count(*) FILTER (WHERE status = 'context_overflow') AS overflow, "
        "list(DISTINCT CAST(tokenizer AS VARCHAR)) FILTER (WHERE tokenizer LIKE 'approx:%') AS approx FROM ev",
        events,
    )
    task_rows = per_task(events, by)
    all_tasks = task_rows[list(FACT_COLUMNS)]
    if tasks:
        missing = sorted(set(tasks) - set(all_tasks["task_id"]))
        if missing:
            raise ConfigError(
                f"no task {', '.join(missing)} in this selection; {_known_tasks(data, runs, latest)}",
                source="--task",
            )
    out = Report(
        events=int(counts.at[0, "events"]),
        runs=int(counts.at[0, "runs"]),
        tasks=len(all_tasks),
        by=list(by),
        include_incomplete=include_incomplete,
    )
    approx = counts.at[0, "approx"]  # DuckDB hands a list column to pandas as an array (None when empty)
    for label in sorted(
        str(a) for a in (approx if approx is not None and not pd.api.types.is_scalar(approx) else [])
    ):
        from promcp.tokenizers import describe  # loaded only for a dataset counted by an approximation

        out.approximations[label] = describe(label) or label
    ok = all_tasks["outcome"] == "ok"
    out.complete = int(ok.sum())
    out.excluded = all_tasks[~ok].reset_index(drop=True)
    counted = events if include_incomplete else complete(events, all_tasks[["run_id", "task_id", "outcome"]])
    overflow = int(counts.at[0, "overflow"])
    if overflow and sections is None:
        wanted.append("overflows")
    if sections is None and _has_cache_split(events):  # provider usage with a cache split: what it cost
        wanted += ["cost", "cache", "schema_tax"]
    if sections is None and isinstance(data, str | Path) and _has_strategies(events):
        wanted.append("strategies")  # runs of several strategies: each against the baseline (docs/whatif.md)
    _task_notes(out, all_tasks, overflow)
    unclosed = unclosed_runs_note(data)
    out.notes += [unclosed] if unclosed else []
    builders: dict[str, Callable[[], pd.DataFrame]] = {
        "phases": lambda: phase_attribution(
            events, by, include_incomplete=include_incomplete, tasks=task_rows
        ),
        "segments": lambda: latency_segments(counted, by, include_incomplete=True),
        "init": lambda: session_init(events, [*by, "server", "transport"]),
        "origins": lambda: input_origins(counted, by, include_incomplete=True),
        "resend": lambda: resend_cost(counted, by, include_incomplete=True).head(resend_top),
        "tasks": lambda: all_tasks.reset_index(drop=True),
        "errors": lambda: errors(events),
        "overflows": lambda: overflows(events),
        "cost": lambda: _cost_section(out, counted, by, prices),
        "cache": lambda: cache_split(_llm_inputs(counted, by), by),
        "schema_tax": lambda: schema_tax(_llm_inputs(counted, by, outputs=True, tools=True), by, prices).head(
            resend_top
        ),
    }
    for name in wanted:
        if name == "tokenizers":
            _tokenizer_section(out, data, tokenizers)
        elif name == "strategies":
            _strategies_section(out, data, runs, latest, tasks)
        else:
            out.tables[name] = builders[name]()
    if "phases" in out.tables:
        _timing_notes(out, out.tables["phases"], all_tasks[ok] if not include_incomplete else all_tasks)
    return out


_COST_COLUMNS: Final = (*CALL_COST_COLUMNS, "source", "parts")


def _llm_inputs(
    events: Events, by: Sequence[str], *, outputs: bool = False, tools: bool = False
) -> pd.DataFrame:
    """The LLM events (input side, and output side when ``outputs``, tool calls when ``tools``) with the
    cost/cache columns; columns an older dataset lacks come back null."""
    stages = ("S1", "S5") + (("S2", "S6") if outputs else ()) + (("S3",) if tools else ())
    present = set(as_arrow(events).column_names)
    cols = list(dict.fromkeys([*by, *_COST_COLUMNS, *(("server", "tool") if tools else ())]))
    select = ", ".join(
        (f"CAST({ident(c)} AS VARCHAR) AS {ident(c)}" if c in _TEXT_COLUMNS else ident(c))
        if c in present
        else f"NULL AS {ident(c)}"
        for c in cols
    )
    frame = query(f"SELECT {select} FROM ev WHERE stage IN {stages!r}", events)
    for c in ("tokens_in", "tokens_out", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce")
    return frame


_TEXT_COLUMNS: Final = frozenset(
    {"run_id", "task_id", "topology", "model", "provider", "stage", "source", "server", "tool"}
)


def _has_strategies(events: Events) -> bool:
    """Whether the LLM calls ran more than one strategy (``attrs.strategy``; none is ``full``)."""
    if "attrs" not in as_arrow(events).column_names:
        return False
    found = query(
        "SELECT count(DISTINCT coalesce(nullif(regexp_extract(CAST(attrs AS VARCHAR), "
        "'\"strategy\":\"([^\"]*)\"', 1), ''), 'full')) AS n FROM ev WHERE stage IN ('S1', 'S5')",
        events,
    )
    return int(found.at[0, "n"]) > 1


def _strategies_section(
    out: Report, data: Events, runs: Sequence[str] | None, latest: int, tasks: Sequence[str] | None
) -> None:
    """The ``strategies`` section (:func:`promcp.analysis.strategies.dataset_table`, the table ``promcp diff``
    prints), or a note saying why there is none."""
    from promcp.analysis.strategies import dataset_table

    if not isinstance(data, str | Path):
        out.note("strategies", "needs a dataset on disk (the prediction reads its captured content)")
        return
    table, note = dataset_table(data, runs=runs, latest=latest, tasks=tasks)
    if table is None:
        out.notes += [f"strategies: {note}"] if note else []
        return
    out.tables["strategies"] = table
    if note:
        out.note("strategies", note)


def _has_cache_split(events: Events) -> bool:
    if "cache_read_tokens" not in as_arrow(events).column_names:
        return False
    found = query("SELECT count(*) AS n FROM ev WHERE cache_read_tokens IS NOT NULL", events)
    return bool(int(found.at[0, "n"]))


def _cost_section(
    out: Report, events: Events, by: Sequence[str], prices: Mapping[str, Rates] | None
) -> pd.DataFrame:
    calls = call_costs(_llm_inputs(events, by, outputs=True), prices)
    if by:
        llm = _llm_inputs(events, by)[[*by, "run_id", "task_id", "round"]].drop_duplicates(
            ["run_id", "task_id", "round"]
        )
        calls = calls.drop(columns=[c for c in by if c in calls.columns and c not in ("run_id", "task_id")])
        calls = calls.merge(llm, on=["run_id", "task_id", "round"], how="left")
    table = cost_by_phase(calls, by)
    priced = calls["total_usd"].notna()
    note = f"priced with {PRICE_TABLE}"
    if prices:
        note += f" and a price file ({len(prices)} model(s))"
    note += f": {int(priced.sum())} of {len(calls)} LLM call(s) priced"
    if not priced.all():
        reasons = calls.loc[~priced, "reason"].value_counts()
        ranked = sorted(
            reasons.items(), key=lambda item: (-int(item[1]), str(item[0]))
        )  # ties: by reason, not row order
        note += "; no price: " + "; ".join(f"{n} × {r}" for r, n in ranked)
    total = calls["total_usd"].sum(min_count=1)
    if pd.notna(total):
        note += f"; total ${total:,.4f}"
    out.note("cost", note)
    _reconcile(out, events, calls)
    return table


def _reconcile(out: Report, events: Events, calls: pd.DataFrame) -> None:
    """promcp's price next to what the client itself reported for the same calls (Claude Code ``costUSD``)."""
    if "attrs" not in as_arrow(events).column_names:
        return
    found = query(
        "SELECT CAST(run_id AS VARCHAR) AS run_id, CAST(task_id AS VARCHAR) AS task_id, round, attrs FROM ev "
        "WHERE stage IN ('S2', 'S6') AND attrs LIKE '%client_cost_usd%'",
        events,
    )
    if found.empty:
        return
    found["client_usd"] = [attrs_of(a).get("client_cost_usd") for a in found["attrs"]]
    merged = found.merge(calls, on=["run_id", "task_id", "round"], how="left")
    ours = merged["total_usd"].sum(min_count=1)
    theirs = float(merged["client_usd"].sum())
    ours_text = (
        "promcp has no price for them (see the price note)"
        if pd.isna(ours)
        else f"promcp prices them at ${ours:,.4f} (difference ${ours - theirs:+,.4f})"
    )
    out.note("cost", f"the client reported ${theirs:,.4f} for {len(merged)} of these call(s); {ours_text}")


def _known_tasks(data: Events, runs: Sequence[str] | None, latest: int) -> str:
    """The task ids of the runs selected (what ``--task`` may name), for an error message."""
    known = query(
        f"SELECT DISTINCT task_id FROM ev WHERE {TASK_EVENT_SQL} ORDER BY task_id",
        select(data, runs=runs, latest=latest),
    )["task_id"].tolist()
    if not known:
        return "these runs hold no task"
    more = f" and {len(known) - KNOWN_IN_ERROR} more" if len(known) > KNOWN_IN_ERROR else ""
    return f"tasks: {', '.join(map(str, known[:KNOWN_IN_ERROR]))}{more}"


def _task_notes(out: Report, all_tasks: pd.DataFrame, overflow: int) -> None:
    messages = all_tasks["error"].dropna()  # the few failed tasks' (not a string operation per task)
    facts = TaskFacts(
        tasks=out.tasks,
        incomplete=len(out.excluded),
        named=list(out.excluded.head(NAMED_IN_NOTE).itertuples()),
        crashed=int(messages.str.startswith(f"{MODEL_CRASHED}:").sum()),
        implicit=int((all_tasks["task_id"] == IMPLICIT_TASK).sum()),
        events=out.events,
        overflow=overflow,
    )
    out.notes += task_notes(facts, out.include_incomplete)


def _timing_notes(out: Report, phases: pd.DataFrame, counted: pd.DataFrame) -> None:
    """Say why latency means and shares are what they are: unknown timings, overlapping intervals."""
    rows = list(phases[phases["phase"].isin(PHASES)].itertuples())
    wall = counted["wall_ms"].astype("float64")
    summed = counted["latency_ms"].astype("float64")
    overlap = counted[summed > wall * 1.001 + 1.0]
    for note in timing_notes(
        rows, out.by, len(overlap), float(overlap["latency_ms"].sum()), float(overlap["wall_ms"].sum())
    ):
        out.note("phases", note)


def _tokenizer_section(out: Report, data: Events, names: Sequence[str]) -> None:
    if not names:
        out.notes.append("tokenizer comparison needs --tokenizers NAME[,NAME…]")
    elif not isinstance(data, str | Path):
        out.notes.append("tokenizer comparison needs a dataset path (captured content)")
    else:
        content = load_content(data)
        if content.empty:
            out.notes.append("no captured content in this dataset: tokenizer comparison skipped")
        else:
            out.tables["tokenizers"] = compare_tokenizers(content["text"].tolist(), list(names))
