"""What the stage builders share: how a failure is described, and the content-capture callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from promcp.events import Status

#: ``put_text(kind, text) -> content hash``: captures a text once (``Recorder.put_text``); kinds used: ``prompt``,
#: ``answer``, ``schema``, ``result``.
PutText = Callable[[str, str], str]


@dataclass(frozen=True)
class Failure:
    """Why a measured step did not succeed: the event's ``status`` and ``error_type``, a one-line ``message``
    (stored as the event's preview, so it is truncated and redacted like every preview) and extra ``attrs``
    (e.g. ``jsonrpc_code``)."""

    status: Status
    error_type: str
    message: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, error_type: str, message: str | None = None, **attrs: Any) -> Failure:
        """A failure whose status follows from its type: ``…timeout`` → timeout, ``cancelled`` → cancelled."""
        return cls(failure_status(error_type), error_type, message, attrs)


def failure_status(error_type: str) -> Status:
    if error_type.endswith("timeout"):
        return Status.TIMEOUT
    if error_type == "cancelled":
        return Status.CANCELLED
    return Status.ERROR


def outcome(failure: Failure | None) -> dict[str, Any]:
    """The ``status`` / ``error_type`` columns of an event."""
    if failure is None:
        return {"status": Status.OK, "error_type": None}
    return {"status": failure.status, "error_type": failure.error_type}
