"""The HTML report: one self-contained page where a reader sees the tools tax (``promcp report DATASET --html OUT``).

>>> from promcp.analysis.views.html import write_html
>>> write_html("examples/default-run", "report.html")        # every script, style and number inline
PosixPath('report.html')

Two steps with a clean seam: :func:`page_data` computes everything the page shows (a :class:`PageData`, no HTML:
the report's :class:`~promcp.analysis.views.base.Document` — the one ``promcp report`` prints — and the per-task
frames the charts draw; its JSON is embedded in the page as ``#promcp-data``), :func:`render` turns it into the
page. Every table in it is drawn by :func:`promcp.analysis.views.htmldoc.table_html`, the one HTML table formatter.
Charts are Vega-Lite specifications built with Altair and drawn by the Vega bundle vl-convert ships, inlined; the
page fetches nothing (its Content-Security-Policy forbids it).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from promcp.analysis.engine import ParquetEvents
from promcp.analysis.views.html._data import SUMMARY_SECTIONS, TASK_SECTIONS, PageData, page_data
from promcp.analysis.views.html._page import render
from promcp.analysis.views.html._tasks import Limits
from promcp.errors import ConfigError, PromcpWarning

if TYPE_CHECKING:
    from promcp.analysis.whatif import WhatifResult


def find_whatif(dataset: str | Path) -> WhatifResult | None:
    """The what-if result saved in a dataset directory (``DATASET/whatif.json``), if there is one.

    A saved file that is not a what-if result is left out with a :class:`~promcp.errors.PromcpWarning` naming it:
    the rest of the page does not depend on it.
    """
    from promcp.analysis.whatif import RESULT_FILE, read_result

    path = Path(dataset)
    candidate = path / RESULT_FILE if path.is_dir() else None
    if candidate is None or not candidate.is_file():
        return None
    try:
        return read_result(candidate)
    except ConfigError as exc:
        warnings.warn(f"{exc}; the page has no what-if section", PromcpWarning, stacklevel=2)
        return None


def write_html(
    data: str | Path | pd.DataFrame | pa.Table | ParquetEvents,
    out: str | Path,
    *,
    by: Sequence[str] = ("topology",),
    sections: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    latest: int = 0,
    tasks: Sequence[str] | None = None,
    include_incomplete: bool = False,
    tokenizers: Sequence[str] = (),
    resend_top: int = 15,
    whatif: WhatifResult | None = None,
    limits: Limits | None = None,
) -> Path:
    """Write the HTML report of a dataset to ``out`` (atomically) and return its path.

    ``data`` is a dataset path (directory, run directory, ``events.parquet`` or journal) or loaded events; the
    selection and grouping options are :func:`page_data`'s (``promcp report``'s flags); ``whatif`` is a what-if
    result to draw (default: the one saved as ``whatif.json`` in the dataset directory, if any); ``limits`` bounds
    the per-task detail.
    """
    if whatif is None and isinstance(data, str | Path):
        whatif = find_whatif(data)
    page = page_data(
        data,
        by=by,
        sections=sections,
        runs=runs,
        latest=latest,
        tasks=tasks,
        include_incomplete=include_incomplete,
        tokenizers=tokenizers,
        resend_top=resend_top,
        whatif=whatif,
        limits=limits,
    )
    text = render(page)
    target = Path(out)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(
            f"cannot write the HTML report: {exc.strerror or exc}", source=str(target)
        ) from None
    return target


__all__ = [
    "SUMMARY_SECTIONS",
    "TASK_SECTIONS",
    "Limits",
    "PageData",
    "find_whatif",
    "page_data",
    "render",
    "write_html",
]
