"""Benchmark: streamed Claude.ai import vs plain json.load on a generated 200 MB single-line export.

Each measurement runs in its own subprocess; peak memory is that process's ru_maxrss (RUSAGE_SELF). The parse
side runs the real importer path (SanitizedReader → ijson → claude_ai.parse_conversation) without token counting
or a Recorder, so both sides do "bytes → Python objects"; an `import` row adds events and tokens on a 20 MB file.
Usage: .venv/bin/python tests/perf/bench_import.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def generate(path: Path, mb: int) -> int:
    """A one-line conversations.json of about ``mb`` MB: 2026-style conversations with MCP tool blocks."""
    target = mb * 1_000_000
    written = 0
    i = 0
    with path.open("w", encoding="ascii") as f:
        f.write("[")
        while written < target:
            msgs = []
            parent = "00000000-0000-4000-8000-000000000000"
            for turn in range(6):
                h, a = f"h-{i}-{turn}", f"a-{i}-{turn}"
                msgs.append(
                    {
                        "uuid": h,
                        "parent_message_uuid": parent,
                        "sender": "human",
                        "created_at": "2026-03-20T13:04:16.932927Z",
                        "text": "",
                        "content": [{"type": "text", "text": f"question {turn} \u00e9\u4e2d " * 20}],
                        "attachments": [],
                        "files": [],
                    }
                )
                blocks = [
                    {
                        "type": "thinking",
                        "thinking": "reasoning " * 40,
                        "start_timestamp": "2026-03-20T13:04:17.1Z",
                        "stop_timestamp": "2026-03-20T13:04:18.2Z",
                    },
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}_{turn}",
                        "name": "Linear:list_issues",
                        "input": {"q": "x" * 50},
                        "integration_name": "Linear",
                        "mcp_server_url": "https://mcp.linear.app/mcp",
                        "is_mcp_app": False,
                        "start_timestamp": "2026-03-20T13:04:18.3Z",
                        "stop_timestamp": "2026-03-20T13:04:19.0Z",
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}_{turn}",
                        "name": "Linear:list_issues",
                        "content": [{"type": "text", "text": "issue ENG-1 " * 150}],
                        "is_error": False,
                        "start_timestamp": None,
                        "stop_timestamp": None,
                    },
                    {
                        "type": "text",
                        "text": "answer " * 120,
                        "start_timestamp": "2026-03-20T13:04:21.0Z",
                        "stop_timestamp": "2026-03-20T13:04:25.0Z",
                    },
                ]
                msgs.append(
                    {
                        "uuid": a,
                        "parent_message_uuid": h,
                        "sender": "assistant",
                        "created_at": "2026-03-20T13:04:26.0Z",
                        "text": "",
                        "content": blocks,
                    }
                )
                parent = a
            conv = {
                "uuid": f"conv-{i}",
                "name": "",
                "created_at": "2026-03-20T13:04:15Z",
                "updated_at": "2026-03-20T13:05:15Z",
                "chat_messages": msgs,
            }
            text = ("," if i else "") + json.dumps(conv, separators=(",", ":"))
            f.write(text)
            written += len(text)
            i += 1
        f.write("]")
    return i


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, path = sys.argv[1], Path(sys.argv[2])
t = time.perf_counter()
n = 0
if mode == "json.load":
    with path.open("rb") as f:
        n = len(json.load(f))
elif mode == "stream":
    from promcp.collectors import claude_ai
    from promcp.collectors._problems import Problems
    from promcp.collectors._stream import SanitizedReader, iter_array
    p = Problems(path.name)
    with path.open("rb") as f:
        r = SanitizedReader(f, p, path.name)
        for i, doc in enumerate(iter_array(r, p)):
            claude_ai.parse_conversation(doc, p, i, r.consumed)
            n += 1
else:
    from promcp.collectors import import_path
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        n = import_path(path, out).imported
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "items": n}))
"""


def measure(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--import-mb", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "conversations.json"
        convs = generate(big, args.mb)
        size = big.stat().st_size / 1e6
        base = measure("json.load", big)
        stream = measure("stream", big)
        small = Path(tmp) / "small.json"
        generate(small, args.import_mb)
        full = measure("import", small)
        small_mb = small.stat().st_size / 1e6
    rows = [
        ("json.load (whole file)", size, base),
        ("promcp stream parse", size, stream),
        (f"promcp import (events+tokens+Parquet, {args.import_mb} MB)", small_mb, full),
    ]
    print(f"file: {size:.1f} MB, one line, {convs} conversations; python {sys.version.split()[0]}")
    print(
        f"| {'what':<52} | {'MB/s':>7} | {'× json.load':>11} | {'peak RSS MB':>11} | {'% of json.load':>14} |"
    )
    print(f"|{'-' * 54}|{'-' * 9}|{'-' * 13}|{'-' * 13}|{'-' * 16}|")
    base_tp = size / base["seconds"]
    for name, mb, r in rows:
        tp = mb / r["seconds"]
        print(
            f"| {name:<52} | {tp:7.1f} | {tp / base_tp:11.2f} | {r['maxrss_kb'] / 1024:11.0f} | "
            f"{100 * r['maxrss_kb'] / base['maxrss_kb']:13.1f}% |"
        )


if __name__ == "__main__":
    main()
