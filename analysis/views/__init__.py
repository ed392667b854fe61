"""promcp.analysis.views — every table the CLI prints, described once and rendered per output format.

A command builds a :class:`Document` (see :mod:`promcp.analysis.views.base`) and prints it with the renderer of the
chosen ``--format``::

    from promcp.analysis.views import get_renderer
    get_renderer("markdown").write(doc, sys.stdout)

Renderers: ``table`` (rich terminal, :mod:`.terminal`), ``markdown`` (:mod:`.markdown`), ``csv`` (:mod:`.csvdata`),
``json`` (:mod:`.jsondata`), ``html`` (:mod:`.htmldoc`: one self-contained page, and the one HTML table formatter).
A new format subclasses :class:`Renderer` and adds itself to :data:`RENDERERS`.

The HTML report page of ``promcp report --html`` (charts, task timelines, context fill, schema weight, what-if) is
:mod:`promcp.analysis.views.html`: the report document's tables through :func:`.htmldoc.table_html`, plus the
per-task data the charts draw.
"""

from __future__ import annotations

from typing import Any

from promcp.analysis.views.base import (
    MISSING,
    Column,
    Document,
    Missing,
    Renderer,
    Stat,
    Table,
    format_cell,
    format_number,
)
from promcp.analysis.views.csvdata import CsvRenderer
from promcp.analysis.views.htmldoc import HtmlRenderer
from promcp.analysis.views.jsondata import JsonRenderer
from promcp.analysis.views.markdown import MarkdownRenderer
from promcp.analysis.views.terminal import TaskProgress, TerminalRenderer

#: ``--format`` name → renderer class.
RENDERERS: dict[str, type[Renderer]] = {
    r.name: r for r in (TerminalRenderer, MarkdownRenderer, CsvRenderer, JsonRenderer, HtmlRenderer)
}


def get_renderer(name: str, **options: Any) -> Renderer:
    """The renderer for ``--format name``, constructed with its options (e.g. ``console=``, ``table=``)."""
    try:
        cls = RENDERERS[name]
    except KeyError:
        raise ValueError(f"unknown output format {name!r}; choose from {', '.join(RENDERERS)}") from None
    return cls(**options)


__all__ = [
    "MISSING",
    "RENDERERS",
    "Column",
    "CsvRenderer",
    "Document",
    "HtmlRenderer",
    "JsonRenderer",
    "MarkdownRenderer",
    "Missing",
    "Renderer",
    "Stat",
    "Table",
    "TaskProgress",
    "TerminalRenderer",
    "format_cell",
    "format_number",
    "get_renderer",
]
