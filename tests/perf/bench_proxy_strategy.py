"""What ``promcp proxy llm --strategy`` adds to each LLM call: time to the first response byte through a recording
proxy that rewrites the tool list, vs. the same recording proxy without ``--strategy`` — interleaved in one run (the
machine is shared and noisy), paired per round — and the memory the embedding model takes when a scorer needs it.

Upstream: bench_proxy_llm.py's loopback server (~0 service time, a 13-event Anthropic SSE stream), so nothing hides
the rewrite's own cost. Requests: an Anthropic Messages request carrying the official everything + filesystem +
memory servers' real tools (36, ../shared/data) and one of the default benchmark's task prompts (rotating). Per
strategy: median and p95 of the added time (ms, paired against the no-strategy proxy in the same round), the
definitions in the prompt the upstream received, and the schema tokens saved (o200k_base; a deferred definition is
not in the prompt). The embedding scorers (``topk:3:embedding``,
``topk:3``) run last, after the resident set was read before and after the model load.

    .venv/bin/python tests/perf/bench_proxy_strategy.py [ROUNDS] [--no-model]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "perf"))

from bench_proxy_llm import Client, start_upstream  # noqa: E402
from bench_strategies import catalog, pct, prompts, rss_mib  # noqa: E402

from promcp import tokenizers  # noqa: E402
from promcp.proxy.llm import LLMProxy  # noqa: E402
from promcp.proxy.llm._rewrite import Rewrite, forwarded_request  # noqa: E402
from promcp.recorder import Recorder  # noqa: E402
from promcp.strategies.live import parse_strategy  # noqa: E402
from promcp.strategies.schema import wire_tool  # noqa: E402
from promcp.wire import parse_request  # noqa: E402


def request(tools: list[dict[str, object]], prompt: str) -> bytes:
    defs = []
    for t in tools:
        w = wire_tool(t)
        defs.append(
            {"name": w["name"], "description": w.get("description", ""), "input_schema": w["inputSchema"]}
        )
    return json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 512,
            "stream": True,
            "system": "You are a helpful assistant.",
            "tools": defs,
            "messages": [{"role": "user", "content": prompt}],
        }
    ).encode()


COUNT = tokenizers.get("o200k_base").count


def schema_tokens(rewrite: Rewrite) -> int:
    """The schema tokens of the prompt the upstream received (deferred definitions are not in it)."""
    return sum(COUNT(p.text) for p in forwarded_request("anthropic", rewrite).pieces if p.origin == "schemas")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(args[0]) if args else 60
    with_model = "--no-model" not in sys.argv
    tools, queries = catalog(), prompts()
    bodies = [request(tools, q) for q in queries]
    client_schema = sum(
        COUNT(p.text)
        for p in parse_request("anthropic", json.loads(bodies[0])).pieces
        if p.origin == "schemas"
    )
    upstream = start_upstream()
    labels = ["slim", "dedup", "topk:3:bm25", "search-tool"]
    model_labels = ["topk:3:embedding", "topk:3"] if with_model else []
    table = Table(
        title=f"proxy llm --strategy: added time to first byte per call — {len(tools)} tools, "
        f"{len(queries)} prompts, {rounds} rounds (paired vs the recording proxy without --strategy)"
    )
    for col in (
        "strategy",
        "added p50 ms",
        "added p95 ms",
        "definitions in the prompt",
        "schema tokens saved %",
    ):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    memory = ""
    with tempfile.TemporaryDirectory() as tmp, Recorder(Path(tmp), topology="c-ots", fsync="group") as rec:
        url = f"http://127.0.0.1:{upstream}"
        base = LLMProxy(url, rec).__enter__()
        for group in (labels, model_labels):
            if not group:
                continue
            if group is model_labels:
                from promcp.strategies.routing import embedding_model

                before = rss_mib()
                t0 = time.perf_counter()
                embedding_model()
                memory = (
                    f"embedding model (all-MiniLM-L6-v2): loaded in {time.perf_counter() - t0:.1f} s, "
                    f"resident set +{rss_mib() - before:.0f} MiB (torch included)"
                )
            proxies = {
                label: LLMProxy(url, rec, strategy=parse_strategy(label)).__enter__() for label in group
            }
            clients = {"none": Client(base.http.port)} | {k: Client(p.http.port) for k, p in proxies.items()}
            added: dict[str, list[float]] = {k: [] for k in proxies}
            for r in range(rounds + 5):
                body = bodies[r % len(bodies)]
                ttfb = {k: c.request("/stream/v1/messages", body)[0] / 1000 for k, c in clients.items()}
                if r >= 5:  # warm-up: routers built, tokenizers loaded
                    for k in proxies:
                        added[k].append(ttfb[k] - ttfb["none"])
            for label, proxy in proxies.items():
                rewriter = proxy.recording.rewriter
                assert rewriter is not None
                done = [(rewriter.rewrite("anthropic", b), b) for b in bodies]  # what each request became
                defs = statistics.median(int(r.attrs.get("strategy_tools", 0)) for r, _b in done if r)
                saved = statistics.median(100 * (1 - schema_tokens(r) / client_schema) for r, _b in done if r)
                table.add_row(
                    label,
                    f"{statistics.median(added[label]):.2f}",
                    f"{pct(added[label], 0.95):.2f}",
                    f"{defs:.0f}",
                    f"{saved:.0f}",
                )
                proxy.__exit__(None, None, None)
        base.__exit__(None, None, None)
    console = Console(width=140)
    console.print(table)
    if memory:
        console.print(memory)


if __name__ == "__main__":
    main()
