"""Recorded tool responses and the latency model of a replay server.

Responses file (JSON list, JSON object or JSONL), entries ``{"tool": name, "arguments"?: {...}, "server"?: name,
"result": CallToolResult dict | text | any JSON}``, or an object ``{tool: result | [result, ...]}``. A call gets the
entry whose ``arguments`` equal its own, else the tool's argument-less entries in turn (round robin). A plain text
or JSON result is wrapped as one text block. Entries naming another ``server`` are ignored.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.errors import ConfigError


def as_call_result(value: Any) -> dict[str, Any]:
    """A ``CallToolResult`` dict from a recorded value (already one, text, or any JSON)."""
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "isError": False}


@dataclass
class RecordedResponses:
    exact: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    by_tool: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _turn: dict[str, int] = field(default_factory=dict)

    def add(self, tool: str, arguments: Any, result: Any) -> None:
        res = as_call_result(result)
        if arguments is None:
            self.by_tool.setdefault(tool, []).append(res)
        else:
            self.exact[(tool, json.dumps(arguments, sort_keys=True))] = res

    def lookup(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        hit = self.exact.get((tool, json.dumps(arguments, sort_keys=True)))
        if hit is not None:
            return hit
        pool = self.by_tool.get(tool)
        if not pool:
            return None
        i = self._turn.get(tool, 0)
        self._turn[tool] = i + 1
        return pool[i % len(pool)]

    def __len__(self) -> int:
        return len(self.exact) + sum(len(v) for v in self.by_tool.values())


def load_responses(path: str | Path, server: str) -> RecordedResponses:
    """Read a responses file (see the module docstring); ConfigError names the file and entry."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read responses: {exc}", source=path) from None
    entries: list[tuple[str, Any]] = []
    try:
        data = json.loads(text)
        if isinstance(data, list):
            entries = [(f"[{i}]", e) for i, e in enumerate(data)]
        elif isinstance(data, dict) and "tool" in data and "result" in data:
            entries = [("[0]", data)]  # one entry (a one-line JSONL file)
        elif isinstance(data, dict):
            for tool, value in data.items():
                for j, v in enumerate(value if isinstance(value, list) else [value]):
                    entries.append((f"{tool}[{j}]", {"tool": tool, "result": v}))
        else:
            raise ConfigError("expected a list or an object of responses", source=path)
    except json.JSONDecodeError:
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    entries.append((f"line {n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"invalid JSON: {exc.msg}", source=path, line=n) from None
    out = RecordedResponses()
    for where, entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str) or "result" not in entry:
            raise ConfigError("a response needs 'tool' (string) and 'result'", source=path, key=where)
        if entry.get("server") not in (None, server):
            continue
        arguments = entry.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise ConfigError("'arguments' must be an object", source=path, key=f"{where}.arguments")
        out.add(entry["tool"], arguments, entry["result"])
    return out


@dataclass(frozen=True)
class LatencyModel:
    """Delay before answering a tools/call: ``low``..``high`` ms (uniform, seeded per call) + ``per_kb_ms`` per KB."""

    low_ms: float = 0.0
    high_ms: float = 0.0
    per_kb_ms: float = 0.0

    @classmethod
    def parse(cls, spec: str, per_kb_ms: float = 0.0) -> LatencyModel:
        """``"50"`` (fixed) or ``"20-80"`` (uniform), in milliseconds."""
        try:
            lo, _, hi = spec.partition("-")
            low = float(lo)
            high = float(hi) if hi else low
        except ValueError:
            raise ConfigError(
                f"latency {spec!r} is not MS or LOW-HIGH (milliseconds)", key="--latency-ms"
            ) from None
        if low < 0 or high < low:
            raise ConfigError(f"latency {spec!r}: need 0 <= LOW <= HIGH", key="--latency-ms")
        return cls(low, high, per_kb_ms)

    def delay_s(self, seed: int, result_bytes: int) -> float:
        base = (
            self.low_ms
            if self.high_ms == self.low_ms
            else random.Random(seed).uniform(self.low_ms, self.high_ms)
        )
        return (base + self.per_kb_ms * result_bytes / 1024) / 1000
