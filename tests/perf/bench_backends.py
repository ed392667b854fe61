"""Own cost of the network LLM backends per call: time spent building the request and parsing the response, against
the HTTP round trip to a stub server on 127.0.0.1, and the host's local counting of the same call (the estimates).

Tools: the official everything + filesystem + memory servers' real tools/list (36 tools, ../shared/data); the
conversation is a round-3 call (prompt, two tool calls with their results). Prints one table; asserts nothing.
Usage: .venv/bin/python tests/perf/bench_backends.py [CALLS]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from promcp.events import Origin  # noqa: E402
from promcp.host.llm.base import LLMBackend, Message, Sampling, ToolCall, ToolSpec, get_backend  # noqa: E402
from tests.stubs.llm_http import (  # noqa: E402
    Reply,
    StubServer,
    anthropic_reply,
    ollama_reply,
    openai_tool_call,
)

CATALOG = REPO / ".." / "shared" / "data" / "catalogs" / "official-reference-servers.json"
SERVERS = ("everything", "filesystem", "memory")


def tools() -> list[ToolSpec]:
    doc = json.loads(CATALOG.read_text())
    return [
        ToolSpec(t["name"], t.get("description") or "", t["inputSchema"], s["server"], t["name"])
        for s in doc
        if s["server"] in SERVERS
        for t in s["tools"]
    ]


def conversation() -> list[Message]:
    result = json.dumps({"entries": [f"file_{i}.txt" for i in range(40)]})
    msgs = [
        Message(
            "system", "You are a helpful assistant with access to tools.", origin=Origin.SYSTEM, key="system"
        ),
        Message(
            "user",
            "List the workspace, then read notes.txt and summarise it.",
            origin=Origin.USER,
            key="prompt",
        ),
    ]
    for i, (tool, args) in enumerate(
        [("list_directory", {"path": "."}), ("read_text_file", {"path": "notes.txt"})]
    ):
        cid = f"call_{i}"
        msgs.append(Message("assistant", "", tool_calls=[ToolCall(cid, tool, args)], key=f"msg:{len(msgs)}"))
        msgs.append(Message("tool", result, tool_call_id=cid, name=tool, origin=Origin.TOOL_RESULTS, key=cid))
    return msgs


REPLIES = {
    "openai": lambda: Reply(200, openai_tool_call("read_text_file", '{"path":"notes.txt"}')),
    "ollama": lambda: Reply(200, ollama_reply(tool=("read_text_file", {"path": "notes.txt"}))),
    "anthropic": lambda: Reply(
        200,
        anthropic_reply(
            [{"type": "tool_use", "id": "toolu_1", "name": "read_text_file", "input": {"path": "notes.txt"}}],
            stop="tool_use",
        ),
    ),
}


async def measure(
    backend: LLMBackend, specs: list[ToolSpec], msgs: list[Message], calls: int
) -> dict[str, float]:
    own, wire = [], []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        resp = await backend.chat(msgs, specs, Sampling())
        total = (time.perf_counter_ns() - t0) / 1e6
        own.append(total - resp.timing.total_ms)
        wire.append(resp.timing.total_ms)
    await backend.aclose()
    return {"own": statistics.median(own), "wire": statistics.median(wire)}


def main() -> int:
    if not CATALOG.exists():
        print(f"skipped: {CATALOG} not found (../shared/data is not part of a fresh clone)")
        return 0
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    specs, msgs = tools(), conversation()
    table = Table(
        title=f"network backends: own cost per call ({calls} calls, {len(specs)} real tools, round 3)"
    )
    for col in (
        "backend",
        "request bytes",
        "build+parse ms",
        "HTTP round trip ms",
        "count cold ms",
        "count cached ms",
    ):
        table.add_column(col, justify="left" if col == "backend" else "right")
    for name, reply in REPLIES.items():
        with StubServer(lambda req, reply=reply: reply()) as stub:  # type: ignore[misc]
            base = stub.url + ("/v1" if name == "openai" else "")
            backend = get_backend(name, base_url=base, api_key="bench-key")
            t0 = time.perf_counter_ns()
            backend.input_parts(msgs, specs)
            cold = (time.perf_counter_ns() - t0) / 1e6
            t0 = time.perf_counter_ns()
            for _ in range(20):
                backend.input_parts(msgs, specs)
            cached = (time.perf_counter_ns() - t0) / 1e6 / 20
            m = asyncio.run(measure(backend, specs, msgs, calls))
            size = len(json.dumps(stub.requests[0].body, separators=(",", ":")))
        table.add_row(
            name, f"{size:,}", f"{m['own']:.3f}", f"{m['wire']:.2f}", f"{cold:.1f}", f"{cached:.2f}"
        )
    Console().print(table)
    print(
        "build+parse = chat() wall minus the POST (request encoding happens inside the POST); "
        "count = LLMBackend.input_parts (the host's local estimate), cold then content-hash cached."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
