"""Finalizing: a run's journal (finished, interrupted or killed) turned into its Parquet file, and every journal
a dataset holds (``promcp finalize``). A journal whose run already has a Parquet file is merged into it as a part
(:mod:`promcp.store.parts`) with the join the caller passes (``link``)."""

from __future__ import annotations

import logging
from pathlib import Path

from promcp.errors import (
    JournalError,
    RunInProgressError,
    SchemaVersionError,
    StorageError,
    TraceError,
)
from promcp.store.files import describe, storage_error
from promcp.store.journal import _fsync_dir, claim, is_live, iter_journals, read_journal
from promcp.store.layout import dataset_root_of_journal, finalized_run_file
from promcp.store.merged import Link, already_in_run_file
from promcp.store.parquet import gc_paused, write_run

__all__ = ["finalize", "finalize_pending"]

log = logging.getLogger(__name__)


def finalize(journal: Path, *, link: Link, keep_journal: bool = False) -> Path:
    """Turn a journal (finished, interrupted or killed) into the run's Parquet file; return its path.

    ``link`` joins the events when the journal is merged into a run file that already exists (a part of it).
    Valid lines are kept and problems are logged (``promcp.store.journal``, one warning per problem). The journal is removed only after
    the Parquet file is safely in place (``keep_journal`` keeps it). A disk that refuses the write raises
    :class:`StorageError` and leaves the journal as it was.
    """
    adopted = _merge_into_existing_run(journal, link)
    if adopted is not None:
        return adopted
    with claim(journal) as free:
        if not free:
            if not journal.exists():  # finalized meanwhile by someone else: that run file is the answer
                done = finalized_run_file(journal)
                if done is not None:
                    return done
                raise TraceError("journal disappeared before it was finalized", path=journal)
            raise RunInProgressError("a process is still recording this run", path=journal)
        root = dataset_root_of_journal(journal)
        # Hundreds of thousands of small objects live at once here: the cyclic GC would rescan them over and
        # over (measured: 2.5x slower). None of them form cycles, so pause it for the duration.
        with gc_paused():
            contents = read_journal(journal)
            n_events = len(contents.events)
            try:
                dest = write_run(
                    root,
                    contents.header,
                    contents.events,
                    contents.blobs.values(),
                    journal_lines=contents.lines,
                )
            except OSError as exc:
                raise storage_error(
                    exc,
                    root,
                    "cannot write the run's Parquet file: {reason}; nothing was lost: the journal "
                    f"{journal} keeps all {n_events} event(s); make room (or make the folder writable), then "
                    f"run `promcp finalize {root}`",
                ) from None
            finally:
                del contents
        if not keep_journal:
            try:
                journal.unlink()
            except OSError as exc:
                raise StorageError(
                    f"the run was written to {dest}, but its journal could not be removed ({describe(exc)}); "
                    "readers use the Parquet file and ignore the journal; delete it when the disk allows",
                    path=journal,
                    errno=exc.errno,
                ) from None
            _fsync_dir(journal.parent)
    return dest


def _merge_into_existing_run(journal: Path, link: Link) -> Path | None:
    """A journal whose run already has a Parquet file holding other events (a collector restarted after a kill
    wrote one for the same run id): merged into it as a part, never written over it; None when the run has no
    Parquet file yet or already holds this journal (the caller finalizes or removes it as usual)."""
    existing = finalized_run_file(journal)
    if existing is None or not journal.exists() or already_in_run_file(journal, existing):
        return None
    from promcp.store.parts import adopt_journal, finalize_group  # only for a run merged from parts

    if adopt_journal(journal) is None:
        raise RunInProgressError("a process is still recording this run", path=journal)
    return finalize_group(dataset_root_of_journal(journal), journal.stem, link=link) or existing


def finalize_pending(root: Path, *, link: Link) -> list[Path]:
    """Finalize every journal left under dataset ``root`` that no live process is writing; return the run files
    (``link`` joins the events of runs merged from parts).

    This is the explicit step (``promcp finalize DIR``): readers never finalize, they read journals in place.
    A journal whose run file already holds it (a finalize interrupted after the rename) is removed; one whose run
    file holds other events (a restarted process wrote it) is merged into it, never dropped; the journal parts
    of runs several processes recorded are merged (promcp/store/parts.py).
    """
    done: list[Path] = []
    for journal in iter_journals(root):
        if is_live(journal):
            log.warning("%s: a process is still recording this run; left for it to finalize", journal)
            continue
        existing = finalized_run_file(journal)
        if existing is not None and already_in_run_file(journal, existing):
            try:
                journal.unlink()
            except OSError as exc:
                raise storage_error(
                    exc,
                    journal,
                    f"already finalized as {existing}, but the journal could not be removed ({{reason}})",
                ) from None
            done.append(existing)
            continue
        try:
            done.append(finalize(journal, link=link))
        except (JournalError, SchemaVersionError) as exc:
            log.warning("%s; journal left in place", exc)
    from promcp.store.parts import finalize_groups

    # runs several processes recorded, once none of them is still writing
    return done + finalize_groups(root, link=link)
