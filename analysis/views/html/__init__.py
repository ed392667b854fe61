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
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from promcp.analysis.scanned import ParquetEvents
from promcp.analysis.views.html._data import (
    SUMMARY_SECTIONS,
    TASK_SECTIONS,
    PageData,
    find_whatif,
    page_data,
)
from promcp.analysis.views.html._page import render
from promcp.analysis.views.html._tasks import Limits
from promcp.errors import ConfigError


def write_html(
    data: str | Path | pd.DataFrame | pa.Table | ParquetEvents, out: str | Path, **options: Any
) -> Path:
    """Write the HTML report of a dataset to ``out`` (atomically) and return its path.

    ``data`` is a dataset path (directory, run directory, ``events.parquet`` or journal) or loaded events;
    ``options`` are :func:`page_data`'s keywords: ``promcp report``'s selection and grouping (``by``, ``sections``,
    ``runs``, ``latest``, ``tasks``, ``include_incomplete``, ``tokenizers``, ``resend_top``), ``whatif`` (default:
    the result saved as ``_whatif.json`` in the dataset directory, if any) and ``limits``.
    """
    page = page_data(data, **options)
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
