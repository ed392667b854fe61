"""Attribute patching that can always be undone, and a guard that keeps tracing errors away from traced calls."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_MISSING = object()

#: Number of exceptions the hooks swallowed (tests read it; a user can log it).
errors: list[str] = []


def guard(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
    """Run a tracing step; on any exception log it once per kind and return None (the traced call goes on)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        msg = f"{getattr(fn, '__qualname__', fn)}: {type(exc).__name__}: {exc}"
        if len(errors) < 1000:
            errors.append(msg)
        log.debug("promcp hook failed: %s", msg, exc_info=True)
        return None


@dataclass
class Patches:
    """Every attribute replaced, with its original, restored in reverse order by :meth:`undo`."""

    applied: list[tuple[Any, str, Any]] = field(default_factory=list)

    def set(self, owner: Any, name: str, value: Any) -> None:
        original = owner.__dict__.get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        if original is _MISSING:
            original = getattr(owner, name)
        self.applied.append((owner, name, original))
        setattr(owner, name, value)

    def undo(self) -> None:
        while self.applied:
            owner, name, original = self.applied.pop()
            setattr(owner, name, original)
