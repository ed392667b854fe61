"""A what-if result: the per-strategy summary, what it was computed over, and (optionally) the scaling curve.

:func:`whatif_dataset` runs the whole evaluation over a recorded dataset (the one path ``promcp whatif DATASET``
and ``promcp report --html --whatif`` both run); :func:`promcp.analysis.views.whatif.whatif_document` turns a
result into the document every renderer prints (``--format json``: ``{…meta, "notes": […], "tables": {"summary":
[…], "scaling": […]}}``); :func:`read_result` reads that JSON back, so a report can show a what-if computed earlier
(``DATASET/_whatif.json``) without recomputing it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pandas as pd

from promcp.analysis.whatif._dataset_eval import (
    DATASET_STRATEGIES,
    evaluate_dataset,
    schema_tools,
    skipped_note,
)
from promcp.analysis.whatif._scaling import scaling
from promcp.analysis.whatif._summary import SUMMARY_COLUMNS, summarize
from promcp.errors import ConfigError
from promcp.strategies.routing import Router, Scorer

log = logging.getLogger(__name__)

#: Where ``promcp report --html`` looks for a saved what-if result inside a dataset directory.
#: A saved what-if result inside its dataset: ``_``-prefixed, so Parquet readers skip it (the dataset holds only
#: Parquet to them); ``whatif.json`` is still read from datasets saved before.
RESULT_FILE: Final = "_whatif.json"
LEGACY_RESULT_FILE: Final = "whatif.json"
SCALING_COLUMNS: Final = ("n_tools", "strategy", "tokens_per_turn")


def counter(name: str) -> Callable[[str], int]:
    """The count function of the tokenizer ``name`` (promcp's offline registry)."""
    from promcp import tokenizers

    return tokenizers.get(name).count


@dataclass
class WhatifResult:
    """``summary``: one row per strategy (:data:`SUMMARY_COLUMNS`); ``meta``: what it was computed over (mode,
    source, k, scorer, tokenizer, …); ``scaling``: tokens per turn versus catalog size, when computed."""

    summary: pd.DataFrame
    meta: dict[str, Any]
    scaling: pd.DataFrame | None = None


def whatif_dataset(
    path: str | Path,
    *,
    k: int = 3,
    n_results: int | None = None,
    scorer: Scorer = "hybrid",
    strategies: Sequence[str] | None = None,
    tokenizer: str | None = None,
    with_scaling: bool = False,
    runs: Sequence[str] | None = None,
    latest: int = 0,
    tasks: Sequence[str] | None = None,
) -> WhatifResult:
    """Evaluate every recorded LLM call of the dataset ``path`` under each strategy (``promcp whatif DATASET``).

    With ``with_scaling`` the dataset's own tool definitions (captured schema texts) are also routed at growing
    catalog sizes (:func:`~promcp.analysis.whatif.scaling`), under the first recorded tokenizer. ``runs``,
    ``latest`` and ``tasks`` narrow the dataset as :func:`promcp.analysis.report` does (``promcp report --html
    --whatif`` passes its selection), and are recorded in the result's meta.
    """
    from promcp.analysis.load import load, load_content

    events = load(path)
    if runs or latest or tasks:
        events = select_events(path, events, runs=runs, latest=latest, tasks=tasks)
    content = load_content(path)
    model = None

    def factory(tools: Sequence[Mapping[str, Any]]) -> Router:
        nonlocal model
        r = Router(tools, scorer, model=model)
        model = r.model
        return r

    wanted = list(strategies or DATASET_STRATEGIES)
    res = evaluate_dataset(
        events,
        content,
        counter,
        k=k,
        n_results=n_results,
        strategies=wanted,
        router_factory=factory,
        tokenizer=tokenizer,
    )
    note = skipped_note(res.skipped)
    if note is not None:
        log.warning("%s", note)
    turns = res.turns
    tokenizers = sorted(set(turns["tokenizer"])) if len(turns) else []
    full = turns[turns["strategy"] == "full"] if len(turns) else turns
    meta: dict[str, Any] = {
        "source": str(path),
        "k": k,
        "scorer": scorer,
        "mode": "dataset",
        "llm_calls": len(full),
        "zero_baseline_turns": int((full["full_tokens"] <= 0).sum()) if len(full) else 0,
        "tokenizer": ",".join(tokenizers) if tokenizers else tokenizer,
        "skipped": res.skipped,
    }
    meta |= {
        k: v for k, v in (("runs", list(runs or [])), ("latest", latest), ("tasks", list(tasks or []))) if v
    }
    summary = summarize(turns, order=list(dict.fromkeys(["full", *wanted]))) if len(turns) else None
    curve = None
    if with_scaling and tokenizers:
        texts = dict(zip(content["hash"], content["text"], strict=True)) if len(content) else {}
        kinds = dict(zip(content["hash"], content["kind"], strict=True)) if len(content) else {}
        tools = list(schema_tools(events, texts, kinds).values())
        if len(tools) >= 2:
            curve = scaling(tools, counter(tokenizers[0]), k=k, scorer=scorer, model=model)
    return WhatifResult(
        summary if summary is not None else pd.DataFrame(columns=SUMMARY_COLUMNS), meta, curve
    )


def select_events(
    path: str | Path,
    events: pd.DataFrame,
    *,
    runs: Sequence[str] | None,
    latest: int,
    tasks: Sequence[str] | None,
) -> pd.DataFrame:
    """The loaded events of the runs and tasks :func:`promcp.analysis.engine.select` picks (one selection rule)."""
    from promcp.analysis.engine import IMPLICIT_TASK, query, select

    chosen = query("SELECT DISTINCT run_id FROM ev", select(path, runs=runs, latest=latest))
    keep = events["run_id"].astype(str).isin(set(chosen["run_id"]))
    if tasks:
        task = events["task_id"].astype("string").fillna(IMPLICIT_TASK)
        keep &= (events["stage"].astype(str) == "INIT") | task.isin(list(tasks))
    return events[keep.to_numpy()].reset_index(drop=True)


def read_result(path: str | Path) -> WhatifResult:
    """A saved ``promcp whatif --format json`` document; :class:`~promcp.errors.ConfigError` naming the file when
    it is not one."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read what-if result: {exc.strerror or exc}", source=str(p)) from None
    except ValueError as exc:
        raise ConfigError(f"not a JSON what-if result: {exc}", source=str(p)) from None
    tables = doc.get("tables") if isinstance(doc, dict) else None
    if not isinstance(tables, dict) or not isinstance(tables.get("summary"), list):
        raise ConfigError("not a what-if result (no 'tables.summary' list; write it with "
                          "`promcp whatif … --format json`)", source=str(p))  # fmt: skip
    rows = [r for r in tables["summary"] if isinstance(r, dict) and isinstance(r.get("strategy"), str)]
    if len(rows) != len(tables["summary"]):
        raise ConfigError("what-if summary rows need a 'strategy' name", source=str(p))
    summary = pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)
    curve = None
    raw = tables.get("scaling")
    if isinstance(raw, list) and raw:
        frame = pd.DataFrame([r for r in raw if isinstance(r, dict)])
        if set(SCALING_COLUMNS) <= set(frame.columns):
            curve = frame[list(SCALING_COLUMNS)]
    meta = {k: v for k, v in doc.items() if k not in ("notes", "tables")}
    return WhatifResult(summary, meta, curve)
