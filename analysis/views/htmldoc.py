"""HTML (``--format html``): a document as one self-contained page — and the one HTML table formatter.

Every HTML table promcp writes comes from :func:`table_html`, the report page's summary, task and error tables
included: a cell's text is :func:`~promcp.analysis.views.base.format_cell`'s, so a number or a missing value
(:data:`~promcp.analysis.views.base.MISSING`, or a :class:`~promcp.analysis.views.base.Missing` reason such as
``not observable``) reads exactly as in the terminal. The page has no script and fetches nothing; its style sheet
(``document.css``, shared with the report page) is inline.

``promcp report --format html`` writes the full report page (charts included, :mod:`promcp.analysis.views.html`);
``whatif`` and ``diff`` write their document with this renderer.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Iterable
from importlib import resources
from typing import Any, Final

from promcp.analysis.views.base import Column, Document, Missing, Renderer, Table, format_cell, is_missing

#: Nothing is fetched: styles are inline, images are data: URLs, no connection is allowed (no script here).
CSP: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; connect-src 'none'; base-uri 'none'; "
    "form-action 'none'"
)


def esc(value: Any) -> str:
    """Text (or any value's text) escaped for HTML content and attributes."""
    return html.escape(str(value), quote=True)


@functools.cache
def style() -> str:
    """The style sheet of every promcp HTML page (tables, notes, page frame)."""
    return resources.files("promcp.analysis.views").joinpath("document.css").read_text(encoding="utf-8")


def _cell(value: Any, column: Column) -> str:
    classes = []
    if column.numeric:
        classes.append("num")
    if isinstance(value, Missing) or is_missing(value):
        classes.append("missing")
    attr = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{attr}>{esc(format_cell(value, column))}</td>"


def _head(column: Column) -> str:
    attrs = ' class="num"' if column.numeric else ""
    if column.help:
        attrs += f' title="{esc(column.help)}"'
    return f"<th{attrs}>{esc(column.title)}</th>"


def notes_html(notes: Iterable[str], cls: str = "notes") -> str:
    """Notes as a list (empty text when there are none)."""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<ul class="{cls}">{items}</ul>' if items else ""


def table_html(table: Table, *, table_id: str | None = None) -> str:
    """One titled table view: its title (``<h3>``), the table (or why it is empty) and its notes."""
    ident = esc(table_id or f"table-{table.name}")
    title = f"<h3>{esc(table.title)}</h3>"
    if not table.rows:
        body = f'<div class="note empty">{esc(table.empty)}</div>'
    else:
        head = "".join(_head(c) for c in table.columns)
        rows = "".join(
            "<tr>" + "".join(_cell(row.get(c.key), c) for c in table.columns) + "</tr>" for row in table.rows
        )
        body = f'<table class="data" id="{ident}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    return f'<div class="view" data-table="{esc(table.name)}">{title}{body}{notes_html(table.notes, "tnotes")}</div>'


def tables_html(tables: Iterable[Table]) -> str:
    """Several table views side by side where the width allows."""
    return '<div class="tables">' + "".join(table_html(t) for t in tables) + "</div>"


def page_html(title: str, body: str, *, head: str = "", csp: str = CSP) -> str:
    """A whole self-contained HTML document around ``body`` (``head``: extra style or script elements)."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{esc(title)}</title>
<style>{style()}</style>{head}
</head><body>
{body}
</body></html>
"""


class HtmlRenderer(Renderer):
    """A document as an HTML page: title and header line, notes, every table view (:func:`table_html`)."""

    name = "html"
    output_file_extension = "html"

    def render(self, doc: Document) -> str:
        header = f'<p class="lead">{esc(doc.header)}</p>' if doc.header else ""
        body = (
            f'<header class="page"><h1>{esc(doc.title)}</h1>{header}{notes_html(doc.notes)}</header>'
            f"<main>{tables_html(doc.tables)}</main>"
        )
        return page_html(doc.title, body)
