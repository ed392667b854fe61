"""Where OTLP data lands: one run per sender and day, promcp's own rows back in their own run.

Used by ``promcp collect`` (live) and by ``promcp import`` of a Collector ``file`` exporter output holding traces,
so both write the same runs:

* rows carried by promcp's own spans (:func:`promcp.collectors.otlp_spans.carried_rows`) go into the run they were
  journaled in (same run id, topology, source, every column); a row already recorded (same ``seq``: an exporter's
  retry, a file imported twice) is skipped (a run's ``seq`` numbers are kept as ranges: exact at any length);
* events mapped from other spans go into ``otlp-spans-<service>-<host>-<YYYYMMDD>`` (topology ``c-cust``: a host
  someone instrumented), Claude Code's telemetry into ``otlp-logs-<service>-<host>-<YYYYMMDD>`` (``c-ots``), with
  ``service.name`` / ``host.name`` from the sender's resource and the UTC day of the event; a span already
  recorded (same trace id, span id and stage; a prompt: same task id) among the run's last million is skipped.

Runs are journaled as events arrive and finalized by :meth:`OtlpRuns.close` (a rotation, the collector's exit, the
end of an import). A run journal an earlier process left (a collector killed before it finalized) is adopted as a
part of the run, its keys count as recorded, and it is merged at close: a restart never overwrites it. A run that
already has a Parquet file — an earlier rotation, yesterday's collector, an earlier
import — is continued as a journal *part* and merged into it (promcp/store/parts.py; the merge orders the run by
start time and numbers ``seq`` again).
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from promcp.collectors.otlp_spans import CarriedRows
from promcp.content import DEFAULT_CONTENT, DEFAULT_MAX_CONTENT_BYTES
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.events import Event, Topology
from promcp.recorder import Recorder

__all__ = ["OtlpRuns", "run_key"]

log = logging.getLogger(__name__)

SPANS_SOURCE: Final = "otlp:spans"
LOGS_SOURCE: Final = "otlp:claude-code"
#: the Gemini CLI's telemetry (collectors/otlp_gemini.py): its own source, provider and tokenizer (Gemini's is not
#: available offline: the default one)
GEMINI_LOGS: Final = ("otlp:gemini-cli", "google", DEFAULT_TOKENIZER, "gemini-cli telemetry")
CLAUDE_LOGS: Final = (LOGS_SOURCE, "anthropic", "approx:claude", "claude-code telemetry")
#: the client each telemetry source is, as ``promcp collect``'s exit line names it
CLIENTS: Final = {GEMINI_LOGS[0]: "Gemini CLI", LOGS_SOURCE: "Claude Code"}
_SLUG = re.compile(r"[^A-Za-z0-9_.]+")


def _slug(value: Any, default: str) -> str:
    text = _SLUG.sub("-", str(value or "")).strip("-.")[:60]
    return text or default


def run_key(kind: str, resource: dict[str, Any], at_ns: int | None) -> str:
    """The run id of ``kind`` (``spans`` / ``logs``) data from a sender (its OTLP resource) on the day of ``at_ns``."""
    day = dt.datetime.fromtimestamp((at_ns or 0) / 1e9, dt.UTC).strftime("%Y%m%d") if at_ns else "undated"
    service = _slug(resource.get("service.name"), "unknown-service")
    host = _slug(resource.get("host.name") or resource.get("host.id"), "unknown-host")
    return f"otlp-{kind}-{service}-{host}-{day}"


class SeqRanges:
    """The ``seq`` numbers a run holds, as sorted half-open ranges: exact, and a few integers however long the run
    (a run's rows arrive nearly in order)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def __contains__(self, seq: object) -> bool:
        if not isinstance(seq, int):
            return False
        i = bisect.bisect_right(self.starts, seq) - 1
        return i >= 0 and seq < self.ends[i]

    def add(self, seq: int) -> None:
        if seq in self:
            return
        i = bisect.bisect_right(self.starts, seq)  # ranges [0, i) start at or before seq
        joins_left = i > 0 and self.ends[i - 1] == seq
        joins_right = i < len(self.starts) and self.starts[i] == seq + 1
        if joins_left and joins_right:
            self.ends[i - 1] = self.ends[i]
            del self.starts[i], self.ends[i]
        elif joins_left:
            self.ends[i - 1] = seq + 1
        elif joins_right:
            self.starts[i] = seq
        else:
            self.starts.insert(i, seq)
            self.ends.insert(i, seq + 1)

    def update(self, seqs: Iterable[Any]) -> None:
        for seq in seqs:
            self.add(int(seq))

    def __bool__(self) -> bool:
        return bool(self.starts)


class RecentKeys:
    """The last ``limit`` keys recorded (first in, first out): enough to recognise an exporter's retry or a file
    imported again without holding a whole day's keys in memory."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.limit = limit
        self._keys: dict[int, None] = {}  # insertion-ordered; keys as hashes (this process only)

    def __contains__(self, key: object) -> bool:
        return hash(key) in self._keys

    def update(self, keys: Iterable[Any]) -> None:
        for key in keys:
            self._keys[hash(key)] = None
        while len(self._keys) > self.limit:
            del self._keys[next(iter(self._keys))]

    def __bool__(self) -> bool:
        return bool(self._keys)


@dataclass
class _Run:
    recorder: Recorder
    seen: SeqRanges | RecentKeys
    builder: Any = None  # the import builder for Claude Code conversations (bound to this run's content)


class OtlpRuns:
    """The open runs of one collector or import."""

    def __init__(
        self,
        out: str | Path,
        *,
        content: str = DEFAULT_CONTENT,
        max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
    ) -> None:
        self.out = Path(out)
        self.content, self.max_content_bytes = content, max_content_bytes
        self.runs: dict[str, _Run] = {}
        self.duplicates = 0
        self.prompts: dict[str, int] = {}  # client → prompts (tasks) recorded from its telemetry
        #: how many mapped-span and prompt keys each run remembers for recognising duplicates (own rows: all)
        self.recent_keys = 1_000_000
        self._parts = 0

    # -- opening --------------------------------------------------------------------------------------------------

    def _existing(self, path: Path, column: str | Sequence[str]) -> SeqRanges | RecentKeys:
        """The keys already in the run's Parquet file ``path``: its ``seq`` ranges, or its last keys of ``column``."""
        seen: SeqRanges | RecentKeys = SeqRanges() if column == "seq" else RecentKeys(self.recent_keys)
        if not path.exists():
            return seen
        import pyarrow.parquet as pq

        cols = [column] if isinstance(column, str) else list(column)
        table = pq.read_table(path, columns=cols).to_pydict()
        if isinstance(seen, SeqRanges):
            seen.update(sorted(table["seq"]))
        elif isinstance(column, str):
            seen.update(table[column])
        else:
            seen.update(zip(*(table[c] for c in cols), strict=True))
        return seen

    @staticmethod
    def _seen_in_parts(folder: Path, column: str | Sequence[str], seen: SeqRanges | RecentKeys) -> None:
        """Add the keys of the journal parts left in ``folder`` (an earlier process's, not merged yet): a retry of
        what that process recorded is a duplicate too."""
        from promcp.errors import TraceError
        from promcp.store.journal import is_live, read_journal

        if not folder.is_dir():
            return
        cols = [column] if isinstance(column, str) else list(column)
        for part in sorted(folder.iterdir()):
            if part.suffix != ".jsonl" or is_live(part):
                continue
            try:
                events = read_journal(part, warn=False).events
            except TraceError:
                continue
            values = [tuple(_plain(getattr(e, c)) for c in cols) for e in events]
            if isinstance(seen, SeqRanges):
                seen.update(sorted(v[0] for v in values))
            else:
                seen.update(v[0] if isinstance(column, str) else v for v in values)

    def _open(
        self,
        run_id: str,
        *,
        topology: str,
        source: str,
        keys: str | Sequence[str],
        meta: dict[str, Any],
        benchmark: str | None = None,
        content: str | None = None,
        max_content_bytes: int | None = None,
    ) -> _Run:
        run = self.runs.get(run_id)
        if run is not None:
            return run
        from promcp.store.journal import JOURNAL_DIR, JOURNAL_SUFFIX
        from promcp.store.layout import run_file
        from promcp.store.parts import adopt_journal, parts_dir

        finalized = run_file(self.out, topology, run_id)
        seen = self._existing(finalized, keys)
        journal = self.out / JOURNAL_DIR / f"{run_id}{JOURNAL_SUFFIX}"
        # a journal an earlier (killed) process left becomes a part of the run: merged at close, never overwritten
        if adopt_journal(journal) is not None:
            log.info(
                "run %s: adopted the journal an earlier process left; merged into the run at close", run_id
            )
        self._seen_in_parts(parts_dir(self.out, run_id), keys, seen)
        part = None
        if finalized.exists() or journal.exists() or parts_dir(self.out, run_id).is_dir():
            self._parts += 1  # continue the run: a part merged into it at close
            part = f"collect-{os.getpid()}-{self._parts}"
        recorder = Recorder(
            self.out,
            topology=topology,
            source=source,
            run_id=run_id,
            benchmark=benchmark,
            meta=meta,
            content=content or self.content,
            max_content_bytes=max_content_bytes if content else self.max_content_bytes,
            part=part,
        )
        run = self.runs[run_id] = _Run(recorder, seen)
        return run

    # -- recording ------------------------------------------------------------------------------------------------

    def carried(self, carried: CarriedRows) -> int:
        """promcp's own rows into their run (rows already recorded are skipped); returns the rows written."""
        if not carried.rows:
            return 0
        h = carried.run
        first = carried.rows[0]
        run = self._open(
            first.run_id,
            topology=str(h.get("topology") or first.topology.value),
            source=str(h.get("source") or first.source),
            keys="seq",
            meta={**(h.get("meta") or {}), "collected": "otlp"},
            benchmark=h.get("benchmark"),
            content=h.get("content"),
            max_content_bytes=h.get("max_content_bytes"),
        )
        fresh = [r for r in carried.rows if r.seq not in run.seen]
        self.duplicates += len(carried.rows) - len(fresh)
        if fresh:
            run.seen.update(r.seq for r in fresh)
            run.recorder.append(fresh)
        return len(fresh)

    def mapped(self, resource: dict[str, Any], events: Sequence[Event]) -> int:
        """Events mapped from other instrumentations' spans into the sender's run of the day."""
        by_run: dict[str, list[Event]] = {}
        for e in events:
            by_run.setdefault(run_key("spans", resource, e.t_start_ns), []).append(e)
        written = 0
        for run_id, batch in by_run.items():
            run = self._open(
                run_id,
                topology=Topology.C_CUST.value,
                source=SPANS_SOURCE,
                keys=("trace_id", "span_id", "stage"),
                meta={"collector": "promcp collect", "mapping": "otel spans", **_sender(resource)},
            )
            # a span is unique by trace id and span id (span ids alone repeat across traces)
            fresh = [e for e in batch if (e.trace_id, e.span_id, e.stage.value) not in run.seen]
            self.duplicates += len(batch) - len(fresh)
            if fresh:
                run.seen.update((e.trace_id, e.span_id, e.stage.value) for e in fresh)
                run.recorder.emit_many(fresh)
                written += len(fresh)
        return written

    def conversations(self, conversations: Iterable[Any]) -> tuple[int, int]:
        """Claude Code and Gemini CLI conversations (one per finished prompt) into their sender's run of the day (the sender's
        resource is in the task's ``attrs["resource"]``): (events, tasks)."""
        from promcp import tokenizers
        from promcp.collectors._build import Builder

        events = tasks = 0
        for conv in conversations:
            resource = (conv.tasks[0].attrs.get("resource") if conv.tasks else None) or {}
            source, provider, tokenizer, mapping = (
                GEMINI_LOGS if resource.get("service.name") == "gemini-cli" else CLAUDE_LOGS
            )
            run = self._open(
                run_key("logs", resource, conv.created),
                topology=Topology.C_OTS.value,
                source=source,
                keys="task_id",
                meta={"collector": "promcp collect", "mapping": mapping, **_sender(resource)},
            )
            if run.builder is None:
                run.builder = Builder(
                    tokenizers.get(tokenizer), provider=provider, put_text=run.recorder.put_text
                )
            built = list(run.builder.events(conv))
            if built and built[0].task_id in run.seen:
                self.duplicates += len(built)
                continue
            run.seen.update(e.task_id for e in built)
            run.recorder.emit_many(built)
            events += len(built)
            tasks += len(conv.tasks)
            self.prompts[CLIENTS[source]] = self.prompts.get(CLIENTS[source], 0) + len(conv.tasks)
        return events, tasks

    # -- closing --------------------------------------------------------------------------------------------------

    def close(self) -> list[Path]:
        """Finalize every open run (a run with no event leaves no file); returns the Parquet files written."""
        written: list[Path] = []
        runs, self.runs = self.runs, {}
        for run_id, run in runs.items():
            rec = run.recorder
            if not rec.events:
                rec.discard()
                continue
            path = rec.close()
            if path is None:
                log.info("run %s: part recorded, merged when its other parts end", run_id)
            else:
                written.append(path)  # the caller says it (collect logs it; import prints its dataset)
        return written


def _plain(value: Any) -> Any:
    """An event field as its Parquet column holds it (an enum as its value)."""
    return getattr(value, "value", value)


def _sender(resource: dict[str, Any]) -> dict[str, Any]:
    return {
        k: resource[k]
        for k in ("service.name", "service.version", "host.name", "host.id")
        if resource.get(k) is not None
    }
