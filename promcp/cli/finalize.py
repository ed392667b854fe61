"""``promcp finalize DIR``: turn the journals a crashed or killed run left into the dataset's Parquet files (and
merge the journal parts of runs several processes recorded, once none of them is still writing).

Readers (``promcp report``, ``promcp.analysis.load``) never write: they read such journals in place. This command
is the explicit step that writes them (atomically; the journal is removed only once its Parquet file is in place).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from promcp.cli._common import stdout
from promcp.errors import NotATraceError
from promcp.stages.link import link_tool_calls
from promcp.store.files import missing_reason
from promcp.store.finalization import finalize, finalize_pending
from promcp.store.journal import is_journal, iter_journals
from promcp.store.parts import pending_groups


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "finalize",
        help="write the journals left by a crashed or killed run into the dataset's Parquet files",
        description="Finalize the journals (DIR/_journal/*.jsonl) of runs that ended without finalizing (killed, "
        "power loss, full disk), record the batches a killed 'promcp collect' acknowledged and left in DIR/_spool, "
        "and merge the journal parts proxies left. Runs still recording are left alone. Readers such as 'promcp report' read "
        "journals in place and never write; this command is the step that does.",
    )
    p.add_argument("path", type=Path, help="dataset directory (or one journal file)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    path: Path = args.path
    out = stdout()
    if path.is_file() and is_journal(path):
        done = [finalize(path, link=link_tool_calls)]
    elif path.is_dir():
        replayed = _replay_spool(path)
        replayed += _record_frame_journals(path)
        if not any(iter_journals(path)) and not pending_groups(path):
            if not replayed:
                out.print(f"{path}: no journal to finalize", highlight=False, soft_wrap=True)
            return 0
        done = finalize_pending(path, link=link_tool_calls)
    else:
        reason = missing_reason(path) if not path.exists() else "not a dataset directory or a journal file"
        raise NotATraceError(reason, path=path)
    for dest in done:
        out.print(f"finalized {dest}", highlight=False, soft_wrap=True)
    return 0


def _record_frame_journals(path: Path) -> int:
    """The frame journals stdio MCP proxies left with nobody recording them (a relay killed before its recorder
    started, or a recorder that died): recorded into parts of their runs, merged below with the others."""
    from promcp.proxy.mcp.stdio_recorder import record_orphans

    return record_orphans(path)


def _replay_spool(path: Path) -> int:
    """The batches a killed ``promcp collect`` acknowledged and had not recorded (DIR/_spool): recorded first, the
    run files that wrote said on stdout like the others."""
    from promcp._spool import leftovers

    if not leftovers(path):
        return 0
    import logging

    from promcp.collect import FINALIZED, replay_spool

    def not_finalized(record: logging.LogRecord) -> bool:
        return (
            record.msg != FINALIZED
        )  # said on stdout below; the rest reaches stderr through the one handler

    logger = logging.getLogger("promcp.collect")
    logger.addFilter(not_finalized)
    try:
        stats = replay_spool(path)
    finally:
        logger.removeFilter(not_finalized)
    if stats is None:
        return 0
    for dest in stats.runs:
        stdout().print(f"finalized {dest}", highlight=False, soft_wrap=True)
    return stats.replayed
