"""Shared plumbing of the subcommands: error reporting, signals, consoles and progress bars."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from promcp.errors import PromcpError, PromcpWarning

#: Exit status for a usage or input error reported by promcp (argparse uses 2 too).
EXIT_USAGE = 2
#: Exit status after Ctrl-C / SIGTERM (128 + SIGINT), once recorded data has been finalized.
EXIT_INTERRUPTED = 130

_stderr = Console(stderr=True, highlight=False)
_stdout = Console(highlight=False)


def stderr() -> Console:
    return _stderr


def stdout() -> Console:
    return _stdout


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    if issubclass(category, PromcpWarning):
        _stderr.print(f"[yellow]warning:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    else:
        _stderr.print(warnings.formatwarning(message, category, filename, lineno, line), end="", markup=False)


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand: promcp errors → message + exit 2; Ctrl-C/SIGTERM → exit 130 after the command cleaned up."""
    previous = signal.getsignal(signal.SIGTERM)
    with contextlib.suppress(ValueError):  # not the main thread (e.g. called from a test thread)
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    old_show = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        return int(func(args) or 0)
    except PromcpError as exc:
        # the message is text, not markup: a "[--listen]" key must not vanish as an unknown tag
        _stderr.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _stderr.print("[yellow]interrupted[/]: recorded events were finalized", markup=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `promcp report | head`
        with contextlib.suppress(Exception):
            sys.stdout.close()
        return 0
    finally:
        warnings.showwarning = old_show
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def progress(*, bytes_mode: bool = False, disable: bool | None = None) -> Iterator[Progress]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal unless ``disable=False``).

    ``bytes_mode`` shows transferred size and speed (for parsing big files); otherwise items done / total.
    """
    columns: list[Any] = [TextColumn("[progress.description]{task.description}"), BarColumn()]
    if bytes_mode:
        columns += [DownloadColumn(), TransferSpeedColumn()]
    else:
        columns += [MofNCompleteColumn()]
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    if disable is None:
        disable = not _stderr.is_terminal
    with Progress(*columns, console=_stderr, disable=disable, transient=False) as bar:
        yield bar
