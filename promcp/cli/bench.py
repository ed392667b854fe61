"""``promcp bench convert KIND INPUTS… -o benchmark.yaml``: public benchmark data → a promcp benchmark file.

KIND is ``mcp-bench`` (task files + ``--catalog`` the servers' tools dump), ``mcp-universe`` (benchmark YAMLs +
``--catalog`` captured tools/list), ``tool-rot`` / ``tool-attention`` (a routing catalog file or directory; its
queries beside it or ``--queries``). Every server of the output is a replay server (``mode: replay``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from promcp import bench
from promcp.catalogs import load_catalog
from promcp.cli._common import stderr, stdout
from promcp.errors import ConfigError

KINDS = ("mcp-bench", "mcp-universe", "tool-rot", "tool-attention")
#: ``promcp bench --help``: plain text (argparse wraps it to the terminal's width; no reST markup).
DESCRIPTION = (
    "promcp bench convert KIND INPUTS... -o benchmark.yaml turns public benchmark data into a promcp benchmark "
    "file. KIND is mcp-bench (task files + --catalog, the servers' tools dump), mcp-universe (benchmark YAMLs + "
    "--catalog, captured tools/list), tool-rot or tool-attention (a routing catalog file or directory; its "
    "queries beside it or --queries). Every server of the output is a replay server (mode: replay). "
    "See docs/paper-scale.md."
)
_QUERY_FILES = ("benchmark_queries.jsonl", "queries.jsonl", "fixtures/benchmark_queries.jsonl")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench",
        help="convert public MCP benchmarks (MCP-Bench, MCP-Universe, routing fixtures) to promcp benchmark files",
        description=DESCRIPTION,
    )
    actions = p.add_subparsers(dest="action", required=True)
    c = actions.add_parser("convert", help="write a benchmark file whose servers replay recorded catalogs")
    c.add_argument("kind", choices=KINDS)
    c.add_argument("inputs", nargs="+", type=Path, help="task files / benchmark YAMLs / a routing catalog")
    c.add_argument("-o", "--out", type=Path, required=True, help="benchmark YAML to write")
    c.add_argument(
        "--catalog",
        type=Path,
        action="append",
        help="tools dump / captured tools/list (mcp-bench: one; mcp-universe: repeatable, first match wins)",
    )
    c.add_argument("--queries", type=Path, help="routing queries JSONL (default: the one beside the catalog)")
    c.add_argument("--servers", help="mcp-bench: comma-separated server names to keep (default: all)")
    c.add_argument("--paper-subset", action="store_true", help="mcp-bench: the ProMCP paper's 15 servers")
    c.add_argument("--per-server", type=int, help="mcp-bench: at most N tasks per server group")
    c.add_argument("--limit", type=int, help="mcp-universe: tasks per benchmark file; routing: queries")
    c.add_argument("--prompt", choices=("fuzzy", "task"), default="fuzzy", help="mcp-bench prompt field")
    c.add_argument(
        "--no-distraction", action="store_true", help="mcp-bench: drop the frozen distraction servers"
    )
    c.add_argument("--max-rounds", type=int, help="max_rounds for every task")
    c.add_argument(
        "--replay-arg",
        action="append",
        default=[],
        help="argument for every replay server, e.g. --replay-arg=--latency-ms=20-80 (repeatable)",
    )
    c.add_argument("--model", help="llm.model of the output (a GGUF path or model name)")
    c.add_argument("--context-window", type=int, help="llm.context_window of the output")
    c.set_defaults(func=_convert)


def _convert(args: argparse.Namespace) -> int:
    out_dir = args.out.resolve().parent
    common = {"out_dir": out_dir, "replay_args": tuple(args.replay_arg), "max_rounds": args.max_rounds}
    if args.kind in ("mcp-bench", "mcp-universe"):
        if not args.catalog:
            raise ConfigError(f"{args.kind} needs --catalog (the servers' tools/list data)", key="--catalog")
        catalogs = [load_catalog(c) for c in args.catalog]
        if args.kind == "mcp-bench":
            if len(catalogs) != 1:
                raise ConfigError("mcp-bench takes one --catalog (its tools dump)", key="--catalog")
            only = list(bench.PAPER_MCP_BENCH_SERVERS) if args.paper_subset else None
            if args.servers:
                only = [s.strip() for s in args.servers.split(",") if s.strip()]
            conv = bench.convert_mcp_bench(
                args.inputs,
                catalogs[0],
                only_servers=only,
                per_server=args.per_server,
                prompt=args.prompt,
                distraction=not args.no_distraction,
                **common,
            )
        else:
            conv = bench.convert_mcp_universe(args.inputs, catalogs, limit_per_file=args.limit, **common)
    else:
        if len(args.inputs) != 1:
            raise ConfigError(f"{args.kind} takes one catalog (file or directory)", key="inputs")
        catalog = load_catalog(args.inputs[0])
        queries = args.queries or _beside(args.inputs[0])
        conv = bench.convert_routing(catalog, queries, limit=args.limit, **common)
    llm = {k: v for k, v in (("model", args.model), ("context_window", args.context_window)) if v is not None}
    if llm:
        conv.data = {
            "name": conv.data["name"],
            "llm": llm,
            **{k: v for k, v in conv.data.items() if k != "name"},
        }
    header = f"promcp bench convert {args.kind}: {conv.n_tasks} tasks on {conv.n_servers} replay servers"
    bench.write_benchmark(conv, args.out, header)
    for note in conv.notes:
        stderr().print(f"[yellow]note:[/] {note}", markup=True, highlight=False)
    stdout().print(
        f"wrote {args.out}: {conv.n_tasks} tasks, {conv.n_servers} replay servers", highlight=False
    )
    return 0


def _beside(path: Path) -> Path:
    folder = path if path.is_dir() else path.parent
    for name in _QUERY_FILES:
        if (folder / name).is_file():
            return folder / name
    raise ConfigError(
        f"no queries file ({', '.join(_QUERY_FILES)}) beside the catalog; give --queries", source=path
    )
