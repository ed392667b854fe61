"""The terminal renderer (rich): tables that fit the terminal's width without ever cutting a cell.

Width rules, in order, per table (``COLUMNS`` or the terminal decides the width; 80 when output is piped):

1. every column at its natural width when that fits;
2. otherwise headers switch to their short form (:attr:`Column.short`), numbers keep their full width (they never
   wrap), text columns and headers wrap at spaces (a word longer than its column folds onto the next line) and
   the spare width goes to the columns that need it most;
3. otherwise the table is split into column groups that each fit, repeating the key columns (``phase``,
   ``server``, …) in every group;
4. at widths where even one value column beside the keys does not fit, each row is printed as a record
   (``header: value`` lines).

:class:`TaskProgress` is the progress display of long commands: a live status line on a terminal, plain lines
(one per task) when stderr is a file or a pipe.
"""

from __future__ import annotations

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
#: A word (an id, a tool name) longer than this may be folded across lines rather than widen its column.
WORD_MAX_WIDTH: Final = 20


def _borders(n: int) -> int:
    """Characters a rich table with ``n`` columns adds around the cells: padding 1+1 per column, n+1 rules."""
    return 3 * n + 1


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _header(column: Column, short: bool) -> str:
    return column.short if short and column.short else column.title


def _fit(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int, keys: int = 1
) -> tuple[list[int], bool] | None:
    """Widths for ``columns`` within ``width`` (and whether short headers are used), or None when they cannot fit.

    Numbers keep their full width; the first ``keys`` text columns keep theirs up to half the width; other
    text wraps at spaces down to :data:`TEXT_MIN_WIDTH` (a word is folded only beyond :data:`WORD_MAX_WIDTH`).
    """
    n = len(columns)
    data_w = [max((cell_len(r[i]) for r in cells), default=0) for i in range(n)]
    natural = [max(data_w[i], cell_len(columns[i].title)) for i in range(n)]
    if sum(natural) + _borders(n) <= width:
        return natural, False
    heads = [_header(c, True) for c in columns]
    natural = [max(data_w[i], cell_len(heads[i])) for i in range(n)]
    mins = []
    for i, col in enumerate(columns):
        head = _longest_word(heads[i])
        if col.numeric:
            mins.append(max(data_w[i], head))
        elif i < keys:
            mins.append(max(min(data_w[i], max(width // 2, TEXT_MIN_WIDTH)), head, 1))
        else:
            word = max((_longest_word(r[i]) for r in cells), default=0)
            mins.append(max(min(data_w[i], TEXT_MIN_WIDTH), min(word, WORD_MAX_WIDTH), head, 1))
    spare = width - _borders(n) - sum(mins)
    if spare < 0:
        return None
    widths = list(mins)
    while spare > 0:  # one character at a time to the column furthest below its natural width
        gaps = [natural[i] - widths[i] for i in range(n)]
        i = max(range(n), key=lambda k: gaps[k])
        if gaps[i] <= 0:
            break
        widths[i] += 1
        spare -= 1
    return widths, True


def _groups(
    table: Table, cells: Sequence[Sequence[str]], width: int
) -> list[tuple[list[int], list[int], bool]] | None:
    """Column index groups that each fit ``width`` (key columns repeated) with their widths, or None if not even
    one value column fits beside the keys."""
    n = len(table.columns)
    keys = list(range(min(table.key_columns, n - 1)))
    rest = [i for i in range(n) if i not in keys]
    groups: list[tuple[list[int], list[int], bool]] = []
    current: list[int] = []
    fitted: tuple[list[int], bool] | None = None
    for i in rest:
        trial = [*keys, *current, i]
        cols = [table.columns[k] for k in trial]
        fit = _fit(cols, [[r[k] for k in trial] for r in cells], width, len(keys))
        if fit is None:
            if fitted is None:
                return None
            groups.append(([*keys, *current], *fitted))
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
        groups.append(([*keys, *current], *fitted))
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
        if not table.rows:
            con.print(Text(f"{table.title}: {table.empty}", style="dim"))
        else:
            # a line of its own: a title inside a table wraps badly
            con.print(Text(table.title, style="bold"))
            cells = table.cells()
            width = con.width
            fit = _fit(table.columns, cells, width, table.key_columns)
            if fit is not None:
                con.print(_rich_table(table.columns, cells, *fit))
            else:
                groups = _groups(table, cells, width)
                if groups is None:
                    self._records(table, cells)
                else:
                    for idx, widths, short in groups:
                        cols = [table.columns[i] for i in idx]
                        con.print(_rich_table(cols, [[r[i] for i in idx] for r in cells], widths, short))
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


def _rich_table(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], widths: list[int], short: bool
) -> Any:
    out = RichTable(header_style="bold", show_lines=False)
    for col, w in zip(columns, widths, strict=True):
        out.add_column(
            _header(col, short),
            justify="right" if col.numeric else "left",
            width=w,
            overflow="fold",
        )
    for row in cells:
        out.add_row(*(Text(v) for v in row))
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
