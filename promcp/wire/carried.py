"""The rows ``promcp.instrument()`` carries on its OpenTelemetry spans to ``promcp collect``: one wire format, written
by :mod:`promcp.shims._spans` and read by :mod:`promcp.collectors.otlp_spans`.

=================================  ===========================================================================
attribute                          what it holds
=================================  ===========================================================================
``promcp.events`` (span)           a JSON array of journal rows (:func:`promcp.events.encode_events`), at most
                                   :data:`ROWS_PER_SPAN`, all of one run
``promcp.run`` (span)              the run's header as a JSON object: run id, topology, source, benchmark, meta,
                                   content mode
``promcp.run.id`` (resource)       the run id: this sender's spans carry their rows, so a receiver does not map
                                   them again
=================================  ===========================================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from promcp.events import Event, decode_events, encode_events

__all__ = ["EVENTS_ATTR", "ROWS_PER_SPAN", "RUN_ATTR", "RUN_RESOURCE", "decode", "encode"]

EVENTS_ATTR: Final = "promcp.events"
RUN_ATTR: Final = "promcp.run"
RUN_RESOURCE: Final = "promcp.run.id"
#: rows on one span (1,000 rows is ~1 MB of JSON, far below any receiver's request limit)
ROWS_PER_SPAN: Final = 1000


def encode(rows: Sequence[Event], run: str) -> dict[str, str]:
    """The span attributes carrying ``rows`` of the run whose header is the JSON text ``run``."""
    return {EVENTS_ATTR: encode_events(rows).decode(), RUN_ATTR: run}


def decode(attrs: dict[str, Any]) -> tuple[dict[str, Any], list[Event]] | None:
    """(run header, rows) a span's attributes carry; None when they carry none. Raises ``ValueError`` with the
    reason when they do not decode (e.g. cut short by ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) or mix runs."""
    data = attrs.get(EVENTS_ATTR)
    if data is None:
        return None
    try:
        rows = decode_events(data if isinstance(data, str | bytes) else "")
        run = json.loads(str(attrs.get(RUN_ATTR) or "{}"))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        raise ValueError(f"{EVENTS_ATTR} does not decode: {str(exc)[:160]}") from None
    if not isinstance(run, dict):
        raise ValueError(f"{RUN_ATTR} is not a JSON object")
    if len({r.run_id for r in rows}) > 1 or (rows and run.get("run_id") not in (None, rows[0].run_id)):
        raise ValueError("rows of several runs on one span")
    if rows and "run_id" not in run:
        run["run_id"] = rows[0].run_id
    return run, rows
