"""Benchmark: streamed Claude.ai import vs plain json.load on a generated 200 MB single-line export.

Each measurement runs in its own subprocess; peak memory is that process's ru_maxrss (RUSAGE_SELF). The parse
side runs the real importer path (SanitizedReader → ijson → claude_ai.parse_conversation) without token counting
or a Recorder, so both sides do "bytes → Python objects"; an `import` row adds events and tokens on a 20 MB file.
A second table imports hostile files (issue 17): 100,000-deep nesting in a Claude.ai array and in a Claude Code
JSONL line, a 100 MB string, alias-style repetition (one object repeated 200,000 times) and a NUL byte; each row is
the full ``import_path`` in its own process (time, peak RSS, what was imported and reported).
Usage: .venv/bin/python tests/perf/bench_import.py [--mb 200] [--hostile-only]
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
        s = import_path(path, out)
        n = s.imported
        kinds = s.problems.by_kind()
dt = time.perf_counter() - t
out = {"seconds": dt, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "items": n}
if mode == "import":
    out["problems"] = kinds
print(json.dumps(out))
"""

_CONV = (
    b'{"uuid":"c%d","chat_messages":[{"uuid":"h","sender":"human","content":[{"type":"text","text":"hi"}]},'
    b'{"uuid":"a","parent_message_uuid":"h","sender":"assistant","content":[{"type":"text","text":"yo"}]}]}'
)


def hostile_files(tmp: Path) -> list[tuple[str, Path]]:
    """Files a hostile or unlucky user imports (each after one valid conversation that must be kept)."""
    d = 100_000
    first = _CONV % 1
    files = {
        "100k-deep array (claude-ai)": (
            "deep.json",
            b"[" + first + b',{"uuid":"c2","chat_messages":' + b"[" * d + b"]" * d + b"}]",
        ),
        "100k-deep JSONL line (claude-code)": (
            "deep.jsonl",
            b'{"sessionId":"s","type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}\n'
            + b'{"x":'
            + b"[" * d
            + b"]" * d
            + b"}\n",
        ),
        "one 100 MB string": (
            "bigstr.json",
            b"["
            + first
            + b',{"uuid":"c2","chat_messages":[{"uuid":"h","sender":"human","content":'
            + b'[{"type":"text","text":"'
            + b"x y " * 25_000_000
            + b'"}]}]}]',
        ),
        "one object repeated 200,000 times": (
            "repeat.json",
            b"[" + first + b",[" + b",".join([b'{"a":[1,2,{"b":"lol lol lol"}]}'] * 200_000) + b"]]",
        ),
        "a NUL byte": ("nul.json", b"[" + first + b',{"uuid":"c2","chat_messages":[{"text":"a\x00b"}]}]'),
    }
    out = []
    for name, (file, data) in files.items():
        path = tmp / file
        path.write_bytes(data)
        out.append((name, path))
    return out


def hostile_table(tmp: Path) -> None:
    print(
        f"| {'hostile input':<36} | {'MB':>6} | {'seconds':>7} | {'peak RSS MB':>11} | imported | problems |"
    )
    print(f"|{'-' * 38}|{'-' * 8}|{'-' * 9}|{'-' * 13}|{'-' * 10}|{'-' * 10}|")
    for name, path in hostile_files(tmp):
        r = measure("import", path)
        kinds = ", ".join(f"{k}" for k in sorted(r.get("problems", {})))
        print(
            f"| {name:<36} | {path.stat().st_size / 1e6:6.1f} | {r['seconds']:7.2f} | "
            f"{r['maxrss_kb'] / 1024:11.0f} | {int(r['items']):8d} | {kinds} |"
        )


def measure(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--import-mb", type=int, default=20)
    ap.add_argument("--hostile-only", action="store_true", help="only the hostile-input table")
    args = ap.parse_args()
    if args.hostile_only:
        with tempfile.TemporaryDirectory() as tmp:
            hostile_table(Path(tmp))
        return
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
    print()
    with tempfile.TemporaryDirectory() as tmp:
        hostile_table(Path(tmp))


if __name__ == "__main__":
    main()
