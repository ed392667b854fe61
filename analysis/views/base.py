"""The document every table-printing command produces, and the :class:`Renderer` base class that prints it.

A command (``promcp report``, ``whatif``, ``diff``, ``run``'s summary, ``doctor``) computes its numbers in
:mod:`promcp.analysis` and describes what to show as a :class:`Document`: a header, a sequence of titled
:class:`Table` views whose :class:`Column` s say how each value is formatted, notes, and the tidy data behind the
views. A :class:`Renderer` turns a document into text; one renderer exists per output format (terminal, Markdown,
CSV, JSON, HTML), and they share :func:`format_cell`, so a number or a missing value looks the same everywhere.

Human renderers (terminal, Markdown, HTML) show :attr:`Document.tables`; machine renderers (CSV, JSON) write
:attr:`Document.data` (raw numbers, long format) and :attr:`Document.meta`. This module is the stable seam between
analysis and views: it imports neither rich nor any command.

>>> doc = Document("promcp example", header="1 run")
>>> t = doc.add(Table("phases", "Tokens per task", [Column("phase"), Column("tokens", kind="number")]))
>>> t.rows.append({"phase": "context", "tokens": 1482.0})
>>> from promcp.analysis.views import get_renderer
>>> print(get_renderer("markdown").render(doc))  # doctest: +SKIP
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

if TYPE_CHECKING:  # imported where a frame is made: a document of plain rows prints without pandas
    import pandas as pd

#: How a value that is absent (None, NaN, NA) is shown by every human renderer.
MISSING: Final = "—"

Kind: TypeAlias = Literal["text", "number", "percent", "stat", "change"]


@dataclass(frozen=True)
class Stat:
    """A ``mean ± std (share %)`` cell: the paper's layout. ``std``/``share`` left out when None/NaN."""

    mean: float | None
    std: float | None = None
    share: float | None = None


@dataclass(frozen=True)
class Missing:
    """A value that is absent for a stated reason (e.g. ``not observable``); shown as the reason, null in data."""

    reason: str


@dataclass(frozen=True)
class Column:
    """One column of a table view.

    ``key`` names the value in each row; ``header`` is shown (default: ``key``; a narrow terminal wraps it at its
    spaces, so it stays whole words, never an abbreviation). ``kind`` decides formatting and alignment: ``text`` (left), ``number`` (thousands
    separators, ``digits`` decimals), ``percent`` (a number whose header says %), ``stat`` (a :class:`Stat`),
    ``change`` (a signed number, ``+12`` / ``-3``). ``help`` is a one-line explanation (HTML tooltips).
    """

    key: str
    header: str | None = None
    kind: Kind = "text"
    digits: int = 0
    help: str | None = None

    @property
    def title(self) -> str:
        return self.header if self.header is not None else self.key

    @property
    def numeric(self) -> bool:
        return self.kind != "text"


@dataclass
class Table:
    """A titled table view: columns, rows (dicts keyed by :attr:`Column.key`) and notes about this table.

    ``key_columns`` leading columns identify a row; a narrow terminal repeats them when it has to split the
    table. ``empty`` says why there are no rows (shown instead of the table). ``source`` names the
    :attr:`Document.data` entry the view shows, if any (machine renderers write that instead of the view).
    """

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    key_columns: int = 1
    empty: str = "no data"
    source: str | None = None

    def cells(self) -> list[list[str]]:
        """Every row formatted for display, in column order."""
        return [[format_cell(row.get(c.key), c) for c in self.columns] for row in self.rows]


@dataclass
class Document:
    """What a command prints: a title and header line, table views, notes, and the data behind them.

    ``meta`` holds the machine-readable facts of the header (counts, options); ``data`` the tidy tables by name
    (what ``--format csv --table NAME`` and ``--format json`` write). A table view without a ``data`` entry of its
    own name is written from its rows.
    """

    title: str
    header: str = ""
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    data: dict[str, pd.DataFrame] = field(default_factory=dict)

    def add(self, table: Table) -> Table:
        self.tables.append(table)
        return table

    def datasets(self) -> dict[str, pd.DataFrame]:
        """The tidy tables a machine renderer writes: :attr:`data`, plus views that have no data of their own."""
        import pandas as pd

        out = dict(self.data)
        for t in self.tables:
            if t.name not in out and (t.source is None or t.source not in out):
                out[t.name] = pd.DataFrame(
                    [{c.key: raw_value(r.get(c.key)) for c in t.columns} for r in t.rows],
                    columns=[c.key for c in t.columns],
                )
        return out


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    loaded = sys.modules.get("pandas")  # pandas' own missing marks exist only once pandas is loaded
    return loaded is not None and (value is loaded.NA or value is loaded.NaT)


def raw_value(value: Any) -> Any:
    """A cell's value for CSV/JSON: :class:`Stat` → its mean, :class:`Missing` → None."""
    if isinstance(value, Missing):
        return None
    if isinstance(value, Stat):
        return value.mean
    return None if is_missing(value) else value


def format_number(value: Any, digits: int = 0, *, signed: bool = False) -> str:
    """``1,234.5`` with thousands separators; the missing mark for absent values."""
    if isinstance(value, Missing):
        return value.reason
    if is_missing(value):
        return MISSING
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    text = f"{value:+,.{digits}f}" if signed else f"{value:,.{digits}f}"
    if text.lstrip("+-").strip("0.,") == "":  # -0.0 and +0.0 are 0
        text = f"{0:.{digits}f}"
    return text


def format_cell(value: Any, column: Column) -> str:
    """The one formatting rule of every human renderer."""
    if isinstance(value, Missing):
        return value.reason
    if isinstance(value, Stat):
        text = format_number(value.mean, column.digits)
        if text == MISSING:
            return text
        if not is_missing(value.std):
            text += f" ± {format_number(value.std, column.digits)}"
        if not is_missing(value.share):
            text += f" ({value.share:.1f}%)"
        return text
    if column.kind in ("number", "percent", "stat"):
        return format_number(value, column.digits if column.kind != "percent" else max(column.digits, 1))
    if column.kind == "change":
        return format_number(value, column.digits, signed=True)
    return MISSING if is_missing(value) else str(value)


class Renderer(ABC):
    """Base class of every output format (pyinstrument's ``renderers/base.py`` is the model).

    Subclasses set :attr:`name` (the ``--format`` value) and :attr:`output_file_extension`, take their options in
    ``__init__`` and implement :meth:`render`. :meth:`write` puts the text on a stream; a renderer that prints
    straight to a terminal (with colour) overrides it.
    """

    name: ClassVar[str]
    output_file_extension: ClassVar[str] = "txt"
    output_is_binary: ClassVar[bool] = False

    @abstractmethod
    def render(self, doc: Document) -> str:
        """The whole document as text."""

    def write(self, doc: Document, stream: IO[str]) -> None:
        stream.write(self.render(doc))
