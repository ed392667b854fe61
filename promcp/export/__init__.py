"""``promcp export``: a dataset's runs as OpenTelemetry traces to any OTLP destination (docs/export.md).

One trace per task (a root span per task, a span per stage event under it), OTel GenAI and MCP semantic-convention
attributes plus promcp's own under ``promcp.*``, and each event's row carried on its span in the format
``promcp.instrument()`` uses (:mod:`promcp.wire.carried`), so ``promcp collect`` writes the same events back.
Ids are stable (derived from run, task and ``seq``), so sending again is harmless; :class:`ExportState` remembers
what each destination acknowledged, so an interrupted export resumes. Runs are read one at a time, events in
batches: memory is bounded by the batch, not by the dataset.

Modules: :mod:`~promcp.export.spans` (event → span), :mod:`~promcp.export.runs` (a run → batches of spans),
:mod:`~promcp.export.send` (OTLP/HTTP protobuf or JSON, OTLP/gRPC), :mod:`~promcp.export.state` (resume).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from promcp._version import __version__
from promcp.errors import NotATraceError
from promcp.export.runs import RunSpans
from promcp.export.send import Sender
from promcp.export.spans import key_values
from promcp.export.state import ExportState
from promcp.stages.link import link_tool_calls
from promcp.store.discovery import discover
from promcp.wire import carried

__all__ = ["ExportResult", "Progress", "export_dataset"]

#: progress callback: (run id, spans sent of the run, its spans in all, spans sent this export, seconds so far)
Progress = Callable[[str, int, int, int, float], None]


@dataclass
class ExportResult:
    """What one export did."""

    runs: int = 0  # runs sent (wholly or the rest of them)
    skipped: int = 0  # runs the destination had acknowledged already
    spans: int = 0  # spans sent this time
    rejected: int = 0  # spans the destination said it rejected (OTLP partial success)
    seconds: float = 0.0
    run_ids: list[str] = field(default_factory=list)


def _request(spans: Sequence[Any], resource: Mapping[str, Any]) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(resource)),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name="promcp.export", version=__version__), spans=spans
                    )
                ],
            )
        ]
    )


def export_dataset(
    dataset: Path,
    sender: Sender,
    state: ExportState,
    *,
    project: str,
    runs: Sequence[str] = (),
    batch: int = 512,
    carry_rows: bool = True,
    prices: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> ExportResult:
    """Send the runs of ``dataset`` (all, or those named in ``runs``) through ``sender``, each resumed after what
    ``state`` says was acknowledged. Raises :class:`~promcp.errors.ExportError` when the destination fails (what was
    acknowledged before is in ``state``), :class:`~promcp.errors.NotATraceError` for a path without runs."""
    result = ExportResult()
    started = time.monotonic()
    files = discover(dataset, link=link_tool_calls)
    chosen = [RunSpans(f, batch_rows=batch, carry_rows=carry_rows, prices=prices) for f in files]
    if runs:
        wanted = set(runs)
        chosen = [r for r in chosen if r.run_id in wanted]
        missing = wanted - {r.run_id for r in chosen}
        if missing:
            raise NotATraceError(f"no run {sorted(missing)[0]!r} in the dataset", path=dataset)
    for run in chosen:
        run_id, fingerprint = run.run_id, run.fingerprint
        total = run.total()
        done = state.sent(run_id, fingerprint)
        if done >= total:
            result.skipped += 1
            continue
        resource: dict[str, Any] = {
            "service.name": "promcp",
            "service.version": __version__,
            "openinference.project.name": project,
        }
        if carry_rows:  # promcp collect takes the rows these spans carry instead of mapping them
            resource[carried.RUN_RESOURCE] = run_id
        sent = done
        for spans in run.spans(skip=done):
            sender.send(_request(spans, resource))
            sent += len(spans)
            result.spans += len(spans)
            state.record(run_id, fingerprint, sent, total)
            if progress is not None:
                progress(run_id, sent, total, result.spans, time.monotonic() - started)
        result.runs += 1
        result.run_ids.append(run_id)
    result.rejected = sender.rejected
    result.seconds = time.monotonic() - started
    return result
