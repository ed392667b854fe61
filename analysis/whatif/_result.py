"""A what-if result as one document: the per-strategy summary, what it was computed over, and (optionally) the
scaling curve — what ``promcp whatif --format json`` prints and what ``promcp report --html`` draws.

:func:`whatif_dataset` runs the whole evaluation over a recorded dataset (the ``promcp whatif DATASET`` path);
:func:`read_result` reads a saved ``--format json`` document back, so a report can show a what-if computed earlier
(``DATASET/whatif.json``) without recomputing it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pandas as pd

from promcp.analysis.whatif._dataset_eval import DATASET_STRATEGIES, evaluate_dataset, schema_tools
from promcp.analysis.whatif._retrieval import Router, Scorer
from promcp.analysis.whatif._scaling import scaling
from promcp.analysis.whatif._summary import SUMMARY_COLUMNS, summarize
from promcp.errors import ConfigError

#: Where ``promcp report --html`` looks for a saved what-if result inside a dataset directory.
RESULT_FILE: Final = "whatif.json"
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

    def document(self) -> dict[str, Any]:
        """The JSON document (``promcp whatif --format json``): meta keys, ``summary`` rows, ``scaling`` rows."""
        doc: dict[str, Any] = {**self.meta, "summary": _records(self.summary)}
        if self.scaling is not None:
            doc["scaling"] = _records(self.scaling)
        return doc


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in r.items()} for r in frame.to_dict(orient="records")]


def whatif_dataset(
    path: str | Path,
    *,
    k: int = 3,
    n_results: int | None = None,
    scorer: Scorer = "hybrid",
    strategies: Sequence[str] | None = None,
    tokenizer: str | None = None,
    with_scaling: bool = False,
) -> WhatifResult:
    """Evaluate every recorded LLM call of the dataset ``path`` under each strategy (``promcp whatif DATASET``).

    With ``with_scaling`` the dataset's own tool definitions (captured schema texts) are also routed at growing
    catalog sizes (:func:`~promcp.analysis.whatif.scaling`), under the first recorded tokenizer.
    """
    from promcp.analysis import load, load_content

    events = load(path)
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
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), list):
        raise ConfigError("not a what-if result (no 'summary' list; write it with "
                          "`promcp whatif … --format json`)", source=str(p))  # fmt: skip
    rows = [r for r in doc["summary"] if isinstance(r, dict) and isinstance(r.get("strategy"), str)]
    if len(rows) != len(doc["summary"]):
        raise ConfigError("what-if summary rows need a 'strategy' name", source=str(p))
    summary = pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)
    curve = None
    raw = doc.get("scaling")
    if isinstance(raw, list) and raw:
        frame = pd.DataFrame([r for r in raw if isinstance(r, dict)])
        if set(SCALING_COLUMNS) <= set(frame.columns):
            curve = frame[list(SCALING_COLUMNS)]
    meta = {k: v for k, v in doc.items() if k not in ("summary", "scaling")}
    return WhatifResult(summary, meta, curve)
