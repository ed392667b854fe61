"""The S2 → S3 join: which model tool call a ``tools/call`` carries out, and which server offers which tool.

A source that sees both sides — the ``promcp.instrument()`` wrappers, an LLM proxy next to an MCP proxy — adds
every tool call the model returns (:meth:`ToolCallJoin.add`) and, when an MCP ``tools/call`` goes out without a
known tool-call id, takes the oldest pending call with the same tool name and the same arguments
(:meth:`ToolCallJoin.take`; arguments compared as canonical JSON, key order ignored). Tools listed by a server
(:meth:`ToolCallJoin.note_tools`) give schema parts their ``<server>/<tool>`` keys (:meth:`schema_keys`).

Thread-safe; bounded (the oldest pending calls are dropped past ``max_pending``). :meth:`take` runs on an MCP
call's path: it serializes the arguments only when a call of that tool name is pending (a dict lookup otherwise).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

from promcp.wire import canonical_json

__all__ = ["MAX_PENDING", "ToolCallJoin"]

MAX_PENDING = 4096


class ToolCallJoin:
    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self.lock = threading.Lock()
        self.calls: OrderedDict[tuple[str, str], deque[str]] = OrderedDict()
        self.names: dict[str, int] = {}  # tool name -> pending keys with that name
        self.servers: dict[str, str] = {}  # tool name -> the server that listed it
        self.max_pending = max_pending

    def add(self, name: str, arguments: Any, call_id: str) -> None:
        """Remember a tool call the model asked for."""
        key = (name, canonical_json(arguments))
        with self.lock:
            if key not in self.calls:
                self.names[name] = self.names.get(name, 0) + 1
            self.calls.setdefault(key, deque()).append(call_id)
            self.calls.move_to_end(key)
            while len(self.calls) > self.max_pending:
                self._drop(self.calls.popitem(last=False)[0])

    def _drop(self, key: tuple[str, str]) -> None:
        left = self.names.get(key[0], 0) - 1
        if left > 0:
            self.names[key[0]] = left
        else:
            self.names.pop(key[0], None)

    def take(self, name: str, arguments: Any) -> str | None:
        """The id of the oldest pending call with this name and these arguments (consumed), or None."""
        if name not in self.names:  # no lock: a stale read only delays the join to the next lookup
            return None
        key = (name, canonical_json(arguments))
        with self.lock:
            ids = self.calls.get(key)
            if not ids:
                return None
            call_id = ids.popleft()
            if not ids:
                del self.calls[key]
                self._drop(key)
            return call_id

    def note_tools(self, server: str, names: Iterable[str]) -> None:
        """Remember that ``server`` lists these tools."""
        with self.lock:
            for name in names:
                self.servers[name] = server

    def schema_keys(self) -> dict[str, str]:
        """tool name → schema part key ``<server>/<tool>`` for every tool a server listed."""
        with self.lock:
            return {name: f"{server}/{name}" for name, server in self.servers.items()}

    def clear(self) -> None:
        with self.lock:
            self.calls.clear()
            self.names.clear()
            self.servers.clear()
