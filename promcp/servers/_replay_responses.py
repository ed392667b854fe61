"""Recorded ``tools/call`` responses for replay servers: a JSONL file, one recorded call per line.

Each line: ``{"server"?: NAME, "tool": NAME, "arguments"?: {...}, "result": CallToolResult, "latency_ms"?: N}``
(``result`` as on the wire: ``content``, ``structuredContent``, ``isError``, ``_meta``). A call is answered by the
line whose tool and arguments match exactly (arguments compared as canonical JSON), else by the tool's line without
``arguments`` (its default answer), else synthetically. Lines naming another ``server`` are ignored, so one file can
hold the recordings of several servers. Bad lines are a ConfigError naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promcp.errors import ConfigError
from promcp.servers._replay_synth import canonical


@dataclass(frozen=True)
class Recorded:
    result: dict[str, Any]
    latency_ms: float | None
    line: int


class Responses:
    def __init__(self) -> None:
        self.exact: dict[tuple[str, str], Recorded] = {}
        self.default: dict[str, Recorded] = {}

    def __len__(self) -> int:
        return len(self.exact) + len(self.default)

    def find(self, tool: str, arguments: Mapping[str, Any] | None) -> Recorded | None:
        return self.exact.get((tool, canonical(arguments))) or self.default.get(tool)


def load_responses(path: str | Path, server: str) -> Responses:
    path = Path(path)
    out = Responses()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read recorded responses: {exc}", source=path) from exc
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg}", source=path, line=n) from exc
        if not isinstance(rec, dict):
            raise ConfigError("a recorded call must be a JSON object", source=path, line=n)
        if rec.get("server", server) != server:
            continue
        tool, result = rec.get("tool"), rec.get("result")
        if not isinstance(tool, str) or not tool:
            raise ConfigError("a recorded call needs a string 'tool'", source=path, key="tool", line=n)
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            raise ConfigError(
                "'result' must be a CallToolResult object with a 'content' list",
                source=path,
                key="result",
                line=n,
            )
        latency = rec.get("latency_ms")
        if latency is not None and (not isinstance(latency, int | float) or latency < 0):
            raise ConfigError(
                "'latency_ms' must be a non-negative number", source=path, key="latency_ms", line=n
            )
        entry = Recorded(result, float(latency) if latency is not None else None, n)
        if "arguments" in rec:
            if not isinstance(rec["arguments"], dict):
                raise ConfigError("'arguments' must be a JSON object", source=path, key="arguments", line=n)
            out.exact[(tool, canonical(rec["arguments"]))] = entry
        else:
            out.default[tool] = entry
    return out
