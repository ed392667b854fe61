"""Stream proxies for streamed LLM responses: the caller iterates as before; promcp sees every chunk.

A proxy forwards iteration, ``close()``, the context-manager protocol and every other attribute to the SDK's stream
object. It notes the instant of the first chunk (time to first token: the measured prefill split of the call) and
hands each chunk to a ``feed`` callable; when the stream ends — exhausted, closed, left through ``with``/``async
with``, or failed — it calls ``finish(first_chunk, error)`` exactly once. Feeding and finishing run under the
shims' guard: a tracing error never changes what the caller iterates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from promcp.shims._patch import guard
from promcp.stages import Clock, Instant

Feed = Callable[[Any], None]
Finish = Callable[[Instant | None, BaseException | None], None]


class _Base:
    def __init__(self, inner: Any, feed: Feed, finish: Finish, clock: Clock) -> None:
        self._promcp_inner = inner
        self._promcp_feed = feed
        self._promcp_finish = finish
        self._promcp_clock = clock
        self._promcp_first: Instant | None = None
        self._promcp_done = False

    def _promcp_chunk(self, chunk: Any) -> None:
        if self._promcp_first is None:
            self._promcp_first = self._promcp_clock.now()
        guard(self._promcp_feed, chunk)

    def _promcp_end(self, error: BaseException | None = None) -> None:
        if not self._promcp_done:
            self._promcp_done = True
            guard(self._promcp_finish, self._promcp_first, error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._promcp_inner, name)


class SyncStream(_Base):
    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self._promcp_inner)
        except StopIteration:
            self._promcp_end()
            raise
        except BaseException as exc:
            self._promcp_end(exc)
            raise
        self._promcp_chunk(chunk)
        return chunk

    def close(self) -> None:
        try:
            self._promcp_inner.close()
        finally:
            self._promcp_end()

    def __enter__(self) -> SyncStream:
        enter = getattr(self._promcp_inner, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            exit_ = getattr(self._promcp_inner, "__exit__", None)
            return exit_(*exc) if exit_ is not None else None
        finally:
            self._promcp_end(exc[1] if len(exc) > 1 and isinstance(exc[1], BaseException) else None)


class AsyncStream(_Base):
    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._promcp_inner.__anext__()
        except StopAsyncIteration:
            self._promcp_end()
            raise
        except BaseException as exc:
            self._promcp_end(exc)
            raise
        self._promcp_chunk(chunk)
        return chunk

    async def close(self) -> None:
        try:
            await self._promcp_inner.close()
        finally:
            self._promcp_end()

    async def __aenter__(self) -> AsyncStream:
        enter = getattr(self._promcp_inner, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            exit_ = getattr(self._promcp_inner, "__aexit__", None)
            return (await exit_(*exc)) if exit_ is not None else None
        finally:
            self._promcp_end(exc[1] if len(exc) > 1 and isinstance(exc[1], BaseException) else None)
