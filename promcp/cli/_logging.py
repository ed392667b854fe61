"""The one place promcp's problems reach a terminal: every library module logs to ``logging.getLogger(__name__)``
(all under ``promcp``), and while a command runs this handler prints each record as one line on stderr —
``warning: …`` / ``error: …`` — never a traceback (an exception attached to a record adds its type and message).
``--quiet`` leaves out what is only progress (INFO); problems are always said. Data a reader skipped (a corrupt
journal line, a foreign file) is such a warning too, so a Python caller of ``promcp.analysis`` sees it through
``logging`` (with no handler configured, Python's last-resort handler prints it on stderr).

No handler is installed on import: a program using promcp as a library configures logging its own way.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator

__all__ = ["OneLineHandler", "one_line", "promcp_logging", "without_progress"]

#: the logger every promcp module's logger is a child of
ROOT = "promcp"
#: how a level is labelled at the start of its line (INFO: no label)
LABELS = {logging.WARNING: "warning", logging.ERROR: "error", logging.CRITICAL: "error"}
#: prints one line: (label or "", text) — the CLI passes one that prints through its console
Say = Callable[[str, str], None]


def _plain(label: str, text: str) -> None:
    sys.stderr.write(f"{label}: {text}\n" if label else f"{text}\n")


def one_line(record: logging.LogRecord) -> str:
    """A record as one line of text: its message, and the type and message of an attached exception (no
    traceback); line breaks become spaces."""
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        text = f"{text}: {type(exc).__name__}: {exc}"
    return " ".join(text.split("\n"))


class OneLineHandler(logging.Handler):
    """Prints each record as one line on stderr through ``say`` (the CLI's console)."""

    def __init__(self, level: int, say: Say = _plain) -> None:
        super().__init__(level)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.say(LABELS.get(record.levelno, ""), one_line(record))
        except Exception:  # a handler never raises into the code that logged
            self.handleError(record)


@contextlib.contextmanager
def promcp_logging(*, quiet: bool = False, say: Say = _plain) -> Iterator[OneLineHandler]:
    """While a command runs: the ``promcp`` logger prints through one :class:`OneLineHandler` (INFO and up; WARNING
    and up with ``quiet``) and does not pass its records on to the root logger's handlers."""
    logger = logging.getLogger(ROOT)
    handler = OneLineHandler(logging.WARNING if quiet else logging.INFO, say)
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(handler.level)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _problems_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


@contextlib.contextmanager
def without_progress(*names: str) -> Iterator[None]:
    """While a command shows a progress display of its own: the INFO records of the ``names`` loggers are not
    printed (problems still are) — ``promcp footprint``'s spinner says which server it starts, so the server pool's
    "starting …" line would say it twice."""
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addFilter(_problems_only)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_problems_only)
