"""The terminal renderer (rich): tables that fit the terminal's width without ever cutting a cell.

Width rules, in order, per table (``COLUMNS`` or the terminal decides the width; 80 when output is piped):

1. every column at its natural width when that fits;
2. otherwise numbers keep their full width (they never wrap); text cells and headers wrap at spaces and after the
   separators of names (``-``, ``_``, ``/``, ``:``, ``.``) — never inside a word — and the spare width goes to the
   key columns, then to the columns that need it most (only a piece longer than :data:`WORD_MAX_WIDTH`, say a
   hash, may be folded);
3. otherwise the table is split into column groups that each fit, repeating the key columns (``phase``,
   ``server``, …) in every group;
4. at widths where even one value column beside the keys does not fit, each row is printed as a record
   (``header: value`` lines).

A table's title is never wrapped by the terminal: a title wider than it is broken at its own separators
(`` — ``, `` [``) into lines that each fit (a part still too wide breaks like a cell).

:class:`TaskProgress` is the progress display of long commands: a live status line on a terminal, plain lines
(one per task) when stderr is a file or a pipe.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import TracebackType
from typing import IO, Any, Final

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from promcp.analysis.views.base import Column, Document, Renderer, Table

#: A text column is not squeezed below this width while numbers keep theirs (it wraps instead).
TEXT_MIN_WIDTH: Final = 12
#: A piece of a name (between separators) longer than this may be folded rather than widen its column.
WORD_MAX_WIDTH: Final = 20
#: Where a name may break: after these characters (the separator stays at the end of the line), and at spaces.
_PIECES: Final = re.compile(r"\s+|[^\s\-_/:.,]*[\-_/:.,]+|[^\s\-_/:.,]+")


def _borders(n: int) -> int:
    """Characters a rich table with ``n`` columns adds around the cells: padding 1+1 per column, n+1 rules."""
    return 3 * n + 1


def _pieces(text: str) -> list[str]:
    """``text`` as the units a line may break between: runs of spaces, and name pieces ending in a separator."""
    return _PIECES.findall(text)


def _longest_piece(text: str) -> int:
    return max((cell_len(p) for p in _pieces(text) if not p.isspace()), default=0)


def _fold(piece: str, width: int) -> list[str]:
    """A piece wider than ``width`` (only one longer than :data:`WORD_MAX_WIDTH` can be) in chunks of ``width``."""
    out, line = [], ""
    for ch in piece:
        if line and cell_len(line + ch) > width:
            out.append(line)
            line = ""
        line += ch
    return [*out, line]


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces and after name separators only (a single
    piece wider than ``width`` is folded). Line breaks already in ``text`` are kept."""
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for piece in _pieces(para):
            if piece.isspace():
                if line and cell_len(line) + cell_len(piece) < width:
                    line += piece
                elif line:
                    lines.append(line)
                    line = ""
                continue
            if cell_len(line) + cell_len(piece) <= width:
                line += piece
                continue
            if line:
                lines.append(line.rstrip())
            *full, line = _fold(piece, width)
            lines += full
        lines.append(line.rstrip())
    return lines


def title_lines(title: str, width: int) -> list[str]:
    """A table title on lines that each fit ``width``, broken at its own separators (`` — ``, `` [``) first; a
    part still too wide is wrapped like a cell (at spaces and name separators)."""
    if cell_len(title) <= width:
        return [title]
    lines: list[str] = []
    for part in re.split(r"(?= — | \[)", title):
        if lines and cell_len(lines[-1]) + cell_len(part) <= width:
            lines[-1] += part
            continue
        lines += wrap(part.strip(" "), width)
    return lines


def _fit(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int, keys: int = 1
) -> list[int] | None:
    """Widths for ``columns`` within ``width``, or None when they cannot fit.

    Numbers keep their full width; text and headers wrap at spaces and name separators down to their longest
    piece (at most :data:`WORD_MAX_WIDTH`; prose — text with spaces — not below :data:`TEXT_MIN_WIDTH`); the spare
    width makes columns whole — the key columns first, then the cheapest — and the rest goes to the columns
    furthest below their natural width.
    """
    n = len(columns)
    data_w = [max((cell_len(r[i]) for r in cells), default=0) for i in range(n)]
    natural = [max(data_w[i], cell_len(columns[i].title)) for i in range(n)]
    if sum(natural) + _borders(n) <= width:
        return natural
    mins = []
    for i, col in enumerate(columns):
        head = _longest_piece(col.title)
        if col.numeric:
            mins.append(max(data_w[i], head))
        else:  # prose (with spaces) keeps a readable width; names go down to their longest piece
            piece = max((_longest_piece(r[i]) for r in cells), default=0)
            prose = min(data_w[i], TEXT_MIN_WIDTH) if any(" " in r[i] for r in cells) else 0
            mins.append(max(prose, min(piece, WORD_MAX_WIDTH), head, 1))
    spare = width - _borders(n) - sum(mins)
    if spare < 0:
        return None
    widths = list(mins)
    # whole columns first: the keys (they name the row), then the cheapest; a column that cannot be made whole
    # gets what is left below
    for i in sorted(range(n), key=lambda k: (k >= keys, natural[k] - widths[k])):
        gap = natural[i] - widths[i]
        if 0 < gap <= spare:
            widths[i] += gap
            spare -= gap
    while spare > 0:  # the rest one character at a time to the column furthest below its natural width
        gaps = [natural[i] - widths[i] for i in range(n)]
        i = max(range(n), key=lambda k: gaps[k])
        if gaps[i] <= 0:
            break
        widths[i] += 1
        spare -= 1
    return widths


def _groups(
    table: Table, cells: Sequence[Sequence[str]], width: int
) -> list[tuple[list[int], list[int]]] | None:
    """Column index groups that each fit ``width`` (key columns repeated) with their widths, or None if not even
    one value column fits beside the keys."""
    n = len(table.columns)
    keys = list(range(min(table.key_columns, n - 1)))
    rest = [i for i in range(n) if i not in keys]
    groups: list[tuple[list[int], list[int]]] = []
    current: list[int] = []
    fitted: list[int] | None = None
    for i in rest:
        trial = [*keys, *current, i]
        cols = [table.columns[k] for k in trial]
        fit = _fit(cols, [[r[k] for k in trial] for r in cells], width, len(keys))
        if fit is None:
            if fitted is None:
                return None
            groups.append(([*keys, *current], fitted))
            current, fitted = [i], None
            trial = [*keys, i]
            fit = _fit(
                [table.columns[k] for k in trial], [[r[k] for k in trial] for r in cells], width, len(keys)
            )
            if fit is None:
                return None
        else:
            current.append(i)
        fitted = fit
    if current and fitted is not None:
        groups.append(([*keys, *current], fitted))
    return groups


class TerminalRenderer(Renderer):
    """Rich tables on a console; :meth:`render` returns the text, :meth:`print` writes it with colour."""

    name = "table"
    output_file_extension = "txt"

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    def render(self, doc: Document) -> str:
        with self.console.capture() as cap:
            self.print(doc)
        return cap.get()

    def write(self, doc: Document, stream: IO[str] | None = None) -> None:
        del stream  # the console knows where it writes
        self.print(doc)

    def print(self, doc: Document) -> None:
        con = self.console
        if doc.title or doc.header:
            con.print(Text.assemble((doc.title, "bold"), (f" — {doc.header}" if doc.header else "", "")))
        for table in doc.tables:
            self.print_table(table)
        for note in doc.notes:
            con.print(f"[yellow]note:[/] {escape(note)}")

    def print_table(self, table: Table) -> None:
        con = self.console
        width = con.width
        if not table.rows:
            con.print(Text(f"{table.title}: {table.empty}", style="dim"))
        else:
            # a line of its own: a title inside a table wraps badly
            for line in title_lines(table.title, width):
                con.print(Text(line, style="bold"), no_wrap=True, overflow="fold")
            cells = table.cells()
            fit = _fit(table.columns, cells, width, table.key_columns)
            if fit is not None:
                con.print(_rich_table(table.columns, cells, fit))
            else:
                groups = _groups(table, cells, width)
                if groups is None:
                    self._records(table, cells)
                else:
                    for idx, widths in groups:
                        cols = [table.columns[i] for i in idx]
                        con.print(_rich_table(cols, [[r[i] for i in idx] for r in cells], widths))
        for note in table.notes:
            con.print(f"[yellow]note:[/] {escape(note)}")

    def _records(self, table: Table, cells: Sequence[Sequence[str]]) -> None:
        keys = max(1, min(table.key_columns, len(table.columns)))
        for row in cells:
            self.console.print(Text(" · ".join(row[:keys]), style="bold"))
            for col, value in zip(table.columns[keys:], row[keys:], strict=True):
                line = f"  {col.title}: {value}"
                if cell_len(line) <= self.console.width:
                    self.console.print(Text(line))
                else:  # the value on a line of its own, so a number is never broken
                    self.console.print(Text(f"  {col.title}:"))
                    self.console.print(Text(f"    {value}"))


def _rich_table(columns: Sequence[Column], cells: Sequence[Sequence[str]], widths: list[int]) -> Any:
    out = RichTable(header_style="bold", show_lines=False)
    for col, w in zip(columns, widths, strict=True):
        out.add_column(
            Text("\n".join(wrap(col.title, w))),
            justify="right" if col.numeric else "left",
            width=w,
            no_wrap=True,
            overflow="fold",
        )
    for row in cells:
        out.add_row(*(Text("\n".join(wrap(v, w))) for v, w in zip(row, widths, strict=True)))
    return out


class TaskProgress:
    """Progress of a run of tasks on ``console`` (stderr): a live line on a terminal, plain lines otherwise.

    Events (``update(kind, data)``): ``task_start`` {task}, ``task_end`` {task, result} (``result`` has
    ``status``, ``rounds``, ``wall_ms`` and ``error``), ``stage`` {task?, round?, stage}, ``status`` {message}.
    """

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.ok = 0
        self.task = "-"
        self.round: int | None = None
        self.stage = "starting"
        self.live: Live | None = None
        self.plain = not console.is_terminal

    def __enter__(self) -> TaskProgress:
        if not self.plain:
            self.live = Live(self.renderable(), console=self.console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.live is not None:
            self.live.__exit__(typ, exc, tb)
            self.live = None

    def update(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "task_start":
            self.task, self.round, self.stage = data["task"], None, "start"
            self._line(f"task {self.done + 1}/{self.total} {self.task}: started")
        elif kind == "task_end":
            self.done += 1
            result = data["result"]
            self.ok += result.status == "ok"
            line = (
                f"task {self.done}/{self.total} {data['task']}: {result.status}, {result.rounds} round(s), "
                f"{result.wall_ms / 1000:.1f} s"
            )
            if result.error:
                line += f" — {result.error}"
            self._line(line)
        elif kind == "stage":
            self.task = data.get("task", self.task)
            self.round = data.get("round", self.round)
            self.stage = data["stage"]
        elif kind == "status":
            self.stage = data["message"]
            self._line(f"  {data['message']}")
        if self.live is not None:
            self.live.update(self.renderable())

    def _line(self, text: str) -> None:
        if self.plain:
            self.console.print(Text(text), soft_wrap=True)

    def renderable(self) -> Any:
        t = RichTable.grid(padding=(0, 2))
        t.add_row(
            f"[bold]tasks[/] {self.done}/{self.total} ({self.ok} answered)",
            f"[bold]task[/] {escape(str(self.task))}",
            f"[bold]round[/] {self.round or '-'}",
            f"[bold]stage[/] {escape(str(self.stage))}",
        )
        return t
