"""A relayed stream's recording, bounded however long the stream runs: :class:`HeadTail` (used by the LLM proxy and
the HTTP MCP proxy; every byte is relayed regardless — this bounds only what the recording side holds).

Frames are read as they come while there is room — the stream's first ``head_bytes`` (the LLM proxy: the start of
the answer, the tool calls it opens with), or, when the caller says so, while its reader keeps up (the MCP proxy:
while its recording worker's backlog is small). Past that, only the last ``tail_frames`` frames (at most
``tail_bytes``) are kept — where an LLM stream's usage and stop reason are, and an MCP stream's answer — and
read when the stream ends (or, for a reader that caught up, before the next frame read). Frames dropped from the
tail are counted (:attr:`HeadTail.skipped_frames` / :attr:`HeadTail.skipped_bytes`), never held.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

__all__ = ["HEAD_BYTES", "TAIL_BYTES", "TAIL_FRAMES", "HeadTail"]

T = TypeVar("T")

#: a stream's frames read as they come…
HEAD_BYTES = 1024 * 1024
#: …then only its last frames are kept, by count and by bytes
TAIL_FRAMES = 256
TAIL_BYTES = 1024 * 1024


class HeadTail(Generic[T]):
    """One stream's frames on their way to be read (see the module's docstring)."""

    def __init__(
        self, head_bytes: int = HEAD_BYTES, tail_frames: int = TAIL_FRAMES, tail_bytes: int = TAIL_BYTES
    ) -> None:
        self.head_bytes, self.tail_frames, self.tail_bytes = head_bytes, tail_frames, tail_bytes
        self._head = 0
        self._tail: deque[tuple[T, int]] = deque()
        self._tail_size = 0
        self.skipped_frames = 0  # frames between the head and the tail: counted, not read
        self.skipped_bytes = 0

    def take(self, frame: T, size: int, *, room: bool | None = None) -> list[T]:
        """The frames to read now, in order: ``frame`` (after any kept ones) while there is room — ``room`` when
        given, else the head's budget — or none (``frame`` is kept in the tail; the oldest kept one may be
        dropped and counted)."""
        if room if room is not None else self._head < self.head_bytes:
            self._head += size
            if not self._tail:
                return [frame]
            return [*self.rest(), frame]
        self._tail.append((frame, size))
        self._tail_size += size
        while len(self._tail) > self.tail_frames or (
            self._tail_size > self.tail_bytes and len(self._tail) > 1
        ):
            _old, old_size = self._tail.popleft()
            self._tail_size -= old_size
            self.skipped_frames += 1
            self.skipped_bytes += old_size
        return []

    @property
    def held(self) -> int:
        """Bytes kept in the tail now."""
        return self._tail_size

    def rest(self) -> list[T]:
        """The frames kept in the tail, oldest first (to read when the stream ends); the tail is empty after."""
        kept = [frame for frame, _ in self._tail]
        self._tail.clear()
        self._tail_size = 0
        return kept
