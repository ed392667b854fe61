"""Shared plumbing of the subcommands: error reporting, signals, consoles and progress bars, options more than
one command reads (``--model``)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from promcp._version import __version__
from promcp.cli._logging import promcp_logging
from promcp.errors import ConfigError, PromcpError, PromcpWarning

if (
    TYPE_CHECKING
):  # rich is imported on first use: ``promcp proxy mcp`` starts its server before anything heavy
    from rich.console import Console
    from rich.progress import Progress

#: Exit status for a usage or input error reported by promcp (argparse uses 2 too).
EXIT_USAGE = 2
#: Exit status after Ctrl-C / SIGTERM (128 + SIGINT), once recorded data has been finalized.
EXIT_INTERRUPTED = 130
#: Exit status after an internal error (a bug in promcp; sysexits' EX_SOFTWARE).
EXIT_INTERNAL = 70


@cache
def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@cache
def stdout() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def escape(text: str) -> str:
    """``text`` safe inside rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


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
    if issubclass(
        category, PromcpWarning
    ):  # deprecated, no longer issued by promcp: a caller's, said as one line
        logging.getLogger("promcp.warnings").warning("%s", message)
    else:
        stderr().print(
            warnings.formatwarning(message, category, filename, lineno, line), end="", markup=False
        )


_STYLES = {"warning": "[yellow]warning:[/] ", "error": "[bold red]error:[/] "}


def _say_line(label: str, text: str) -> None:
    """One line of the logging channel (promcp/cli/_logging.py) on the CLI's stderr console."""
    stderr().print(f"{_STYLES.get(label, '')}{escape(text)}", markup=True, highlight=False, soft_wrap=True)


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand: promcp errors → message + exit 2; Ctrl-C/SIGTERM → exit 130 after the command cleaned up."""
    previous = signal.getsignal(signal.SIGTERM)
    with contextlib.suppress(ValueError):  # not the main thread (e.g. called from a test thread)
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    old_show = warnings.showwarning
    warnings.showwarning = _show_warning
    channel = promcp_logging(quiet=bool(getattr(args, "quiet", False)), say=_say_line)
    channel.__enter__()
    try:
        return int(func(args) or 0)
    except PromcpError as exc:
        # escaped: the message is text, not markup ("[llm.model]", "[--listen]" must not vanish as unknown tags)
        for line in str(exc).splitlines() or [type(exc).__name__]:
            stderr().print(
                f"[bold red]error:[/] {escape(line)}", markup=True, highlight=False, soft_wrap=True
            )
        return EXIT_USAGE
    except KeyboardInterrupt:
        stderr().print("[yellow]interrupted[/]: recorded events were finalized", markup=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `promcp report | head`
        with contextlib.suppress(Exception):
            sys.stdout.close()
        return 0
    except (
        OSError
    ) as exc:  # the OS refused something promcp's own handling did not expect: one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        stderr().print(
            f"[bold red]error:[/] {escape(where + _describe(exc))}",
            markup=True,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_USAGE
    except MemoryError:
        stderr().print(
            "[bold red]error:[/] out of memory; data recorded before this point is in the dataset's journal",
            markup=True,
            highlight=False,
        )
        return EXIT_USAGE
    except Exception:  # an internal bug: show it, and say so
        stderr().print_exception()
        stderr().print(
            f"[bold red]internal error[/] in promcp {__version__}: this is a bug, not a problem with your "
            "input; please report it with the traceback above",
            markup=True,
            highlight=False,
        )
        return EXIT_INTERNAL
    finally:
        channel.__exit__(None, None, None)
        warnings.showwarning = old_show
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous)


def add_content_options(p: argparse.ArgumentParser) -> None:
    """``--content`` and ``--max-content-bytes``: how the texts behind the counts are stored (docs/events.md)."""
    from promcp.content import CONTENT_MODES, DEFAULT_CONTENT, DEFAULT_MAX_CONTENT_BYTES

    p.add_argument(
        "--content",
        choices=CONTENT_MODES,
        default=DEFAULT_CONTENT,
        help="store the prompts, tool schemas, results and answers behind the counts: redacted (default: secrets "
        "such as API keys, tokens, passwords and e-mail addresses removed), full (verbatim) or none",
    )
    p.add_argument(
        "--max-content-bytes",
        type=_byte_count,
        default=DEFAULT_MAX_CONTENT_BYTES,
        metavar="N",
        help=f"store at most N bytes of each text (a longer one is cut and marked truncated; 0: no cap; default "
        f"{DEFAULT_MAX_CONTENT_BYTES} = 4 MiB)",
    )


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 (no cap) or more")
    return value


@contextlib.contextmanager
def progress(*, bytes_mode: bool = False, disable: bool | None = None) -> Iterator[Progress]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal unless ``disable=False``).

    ``bytes_mode`` shows transferred size and speed (for parsing big files); otherwise items done / total.
    """
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

    columns: list[Any] = [TextColumn("[progress.description]{task.description}"), BarColumn()]
    if bytes_mode:
        columns += [DownloadColumn(), TransferSpeedColumn()]
    else:
        columns += [MofNCompleteColumn()]
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    if disable is None:
        disable = not stderr().is_terminal
    with Progress(*columns, console=stderr(), disable=disable, transient=False) as bar:
        yield bar


def _describe(exc: OSError) -> str:
    """An I/O error in words (imported here: the store pulls in pyarrow, which ``promcp proxy mcp`` must not
    load before its server is running)."""
    from promcp.store.files import describe

    return describe(exc)


def model_option(backend: str, model: str | None) -> str | None:
    """``--model`` as the backend wants it; a hint when the name belongs to another backend."""
    if model is None:
        return None
    if model.endswith(".gguf"):
        return str(Path(model).expanduser().resolve())
    if backend == "llama-cpp" and not Path(model).expanduser().is_file():
        hint = (
            f"{model!r} looks like an Ollama model name: add --backend ollama (Ollama serving it on this machine)"
            if ":" in model
            else f"{model!r} is neither a .gguf file nor a file here: give a GGUF path, or a network backend "
            "(--backend ollama|openai|anthropic) that serves this model"
        )
        raise ConfigError(f"the llama-cpp backend loads a GGUF file; {hint}", source="--model")
    return model
