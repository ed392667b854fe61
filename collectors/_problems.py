"""Problems found in an export: each reported once, with the file, conversation and byte offset or line."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: The kind of a problem no parser classified: an exception escaped one (a bug in promcp, not bad input).
INTERNAL: str = "internal_error"


class ShapeError(ValueError):
    """A parser refuses a value's shape (a conversation that is not an object…): reported as ``skipped``."""


@dataclass(frozen=True)
class Problem:
    """One thing in the input that could not be used as it was (the rest was kept)."""

    file: str
    kind: str  # short reason: truncated, too_deep, invalid_utf8, unknown_block, duplicate, skipped, … (INTERNAL: a bug)
    message: str
    conversation: str | None = None
    offset: int | None = None  # byte offset in the file (streamed arrays: the end of the chunk being read)
    line: int | None = None  # 1-based line (JSONL)
    place: str | None = None  # where, in words (``session.jsonl line 12``), when given by the parser

    def where(self) -> str:
        parts = [p for p in (self.file, self.place) if p]
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.offset is not None:
            parts.append(f"byte {self.offset}")
        if self.conversation:
            parts.append(f"conversation {self.conversation}")
        return ", ".join(parts) or "input"

    def __str__(self) -> str:
        return f"{self.where()}: {self.kind}: {self.message}"


@dataclass
class Problems:
    """Collects problems; the same (kind, conversation, detail or message) is kept once, repeats only counted."""

    file: str = ""
    items: list[Problem] = field(default_factory=list)
    repeats: Counter[tuple[str, str | None, str]] = field(default_factory=Counter)

    def add(
        self,
        kind: str,
        message: str,
        *,
        conversation: str | None = None,
        offset: int | None = None,
        line: int | None = None,
        where: str | None = None,
        detail: str | None = None,
    ) -> None:
        key = (kind, conversation, detail if detail is not None else message)
        self.repeats[key] += 1
        if self.repeats[key] == 1:
            self.items.append(Problem(self.file, kind, message, conversation, offset, line, where))

    def by_kind(self) -> dict[str, int]:
        """How many distinct problems of each kind were reported."""
        return dict(Counter(p.kind for p in self.items))

    def __len__(self) -> int:
        return len(self.items)
