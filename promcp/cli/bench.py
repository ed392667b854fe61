"""``promcp bench``: convert public MCP benchmarks into promcp benchmark files; inspect tool catalogs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from promcp.cli._common import stderr, stdout
from promcp.errors import ConfigError

_KINDS = ("mcp-bench", "mcp-universe", "tool-rot", "tool-attention", "routing")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="convert MCP-Bench / MCP-Universe / routing fixtures to benchmark files; inspect tool catalogs",
        description="Paper-scale workloads offline: converters to promcp benchmark files whose servers are replay "
        "servers (recorded tools/list, recorded or synthetic tools/call), and a catalog inspector.",
    )
    bsub = p.add_subparsers(dest="bench_command", metavar="ACTION", required=True)

    c = bsub.add_parser("convert", help="write a promcp benchmark file from public benchmark data")
    c.add_argument("kind", choices=_KINDS)
    c.add_argument(
        "inputs",
        nargs="+",
        help="mcp-bench: task JSON file(s); mcp-universe: benchmark YAML(s); "
        "tool-rot/tool-attention/routing: the catalog file or directory",
    )
    c.add_argument("-o", "--out", required=True, help="benchmark YAML to write")
    c.add_argument(
        "--catalog",
        action="append",
        default=[],
        help="tool catalog(s) (mcp-bench: the tools dump; "
        "mcp-universe: captured tools/list files; repeatable)",
    )
    c.add_argument(
        "--prompt", choices=("fuzzy", "detailed"), default="fuzzy", help="mcp-bench prompt (default fuzzy)"
    )
    c.add_argument(
        "--distraction",
        choices=("frozen", "none"),
        default="frozen",
        help="mcp-bench: the task's frozen distraction servers, or none",
    )
    c.add_argument(
        "--paper-subset",
        action="store_true",
        help="mcp-bench: the ProMCP paper's 15 servers, single-server tasks (30 tasks, 151 tools)",
    )
    c.add_argument("--servers", default=None, help="mcp-bench: comma-separated server names to keep")
    c.add_argument("--single-only", action="store_true", help="mcp-bench: single-server tasks only")
    c.add_argument(
        "--tasks-per-server", type=int, default=None, help="mcp-bench: at most N tasks per server group"
    )
    c.add_argument(
        "--queries", default=None, help="routing: JSONL queries (default: the file beside the catalog)"
    )
    c.add_argument("--limit", type=int, default=None, help="keep at most N tasks")
    c.add_argument("--name", default=None, help="benchmark name (default: from the kind)")
    c.add_argument(
        "--model", default=None, help="llm.model to write (e.g. a .gguf path); default: the host's"
    )
    c.add_argument("--context-window", type=int, default=None, help="llm.context_window to write")
    c.add_argument("--max-tokens", type=int, default=None, help="sampling.max_tokens to write")
    c.set_defaults(func=_convert)

    k = bsub.add_parser("catalog", help="per-server tool counts and schema footprints of a tool catalog")
    k.add_argument("path", help="catalog file or directory")
    k.add_argument("--tokenizer", default="o200k_base", help="tokenizer name (default o200k_base)")
    k.add_argument("--servers", default=None, help="comma-separated server names (default: all)")
    k.add_argument("--paper-subset", action="store_true", help="the ProMCP paper's 15 MCP-Bench servers")
    k.add_argument("--format", choices=("table", "json"), default="table")
    k.set_defaults(func=_catalog)


def _split(value: str | None) -> list[str] | None:
    return [s.strip() for s in value.split(",") if s.strip()] if value else None


def _convert(args: argparse.Namespace) -> int:
    from promcp import bench

    out = Path(args.out)
    kind = args.kind
    if kind == "mcp-bench":
        if len(args.catalog) != 1:
            raise ConfigError(
                "mcp-bench needs exactly one --catalog (the servers' tools dump)", key="--catalog"
            )
        servers = list(bench.PAPER_SERVERS) if args.paper_subset else _split(args.servers)
        doc = bench.convert_mcp_bench(
            args.inputs,
            args.catalog[0],
            prompt=args.prompt,
            distraction=args.distraction,
            servers=servers,
            single_only=args.single_only or args.paper_subset,
            tasks_per_server=args.tasks_per_server,
            name=args.name or ("mcp-bench-paper" if args.paper_subset else "mcp-bench"),
        )
    elif kind == "mcp-universe":
        if not args.catalog:
            raise ConfigError(
                "mcp-universe needs --catalog (captured tools/list of its servers)", key="--catalog"
            )
        doc = bench.convert_mcp_universe(args.inputs, args.catalog, name=args.name or "mcp-universe")
    else:
        if len(args.inputs) != 1:
            raise ConfigError(f"{kind} takes one catalog (file or directory)", key="inputs")
        doc = bench.convert_routing(args.inputs[0], args.queries, name=args.name or f"routing-{kind}")
    if args.limit is not None:
        doc.tasks = doc.tasks[: args.limit]
        used = {s for t in doc.tasks for s in t["servers"] + t.get("distraction_servers", [])}
        doc.servers = {k: v for k, v in doc.servers.items() if k in used}
    if not doc.tasks:
        raise ConfigError("no task converted (see the skipped entries above)", source=args.inputs[0])
    if args.model:
        doc.llm["model"] = args.model
    if args.context_window:
        doc.llm["context_window"] = args.context_window
    if args.max_tokens:
        doc.sampling["max_tokens"] = args.max_tokens
    err = stderr()
    for what, why in doc.skipped:
        err.print(f"[yellow]skipped:[/] {what}: {why}", soft_wrap=True)
    header = (
        f"Converted by `promcp bench convert {kind}` (promcp). Replay servers: recorded tools/list; tools/call\n"
        "answers are synthetic unless a server has 'responses:'. Run: promcp run --topology l-cust THIS_FILE"
    )
    doc.write(out, header)
    n_dis = len({d for t in doc.tasks for d in t.get("distraction_servers", [])})
    err.print(
        f"wrote {out}: {len(doc.tasks)} tasks, {len(doc.servers)} replay servers"
        + (f" ({n_dis} as distraction)" if n_dis else "")
        + (f", {len(doc.skipped)} entries skipped" if doc.skipped else ""),
        soft_wrap=True,
    )
    return 0


def _catalog(args: argparse.Namespace) -> int:
    from promcp import tokenizers
    from promcp.bench import PAPER_SERVERS
    from promcp.catalogs import load_catalog

    cat = load_catalog(args.path)
    names = list(PAPER_SERVERS) if args.paper_subset else _split(args.servers)
    if names:
        cat = cat.subset(names)
    tok = tokenizers.get(args.tokenizer)
    fp = cat.footprint(tok)
    listed = {s.name: len(s.tools_list_bytes()) for s in cat.servers}
    if args.format == "json":
        rows = {
            name: {
                "n_tools": v["n_tools"],
                "tokens": v["tokens"],
                "bytes": v["bytes"],
                "tools_list_bytes": listed[name],
            }
            for name, v in fp.items()
        }
        stdout().print_json(
            json.dumps(
                {"catalog": str(cat.path), "format": cat.format, "tokenizer": tok.name, "servers": rows}
            )
        )
        return 0
    table = Table(title=f"{cat.path.name} ({cat.format}) — schema footprint under {tok.name}")
    for col in ("server", "tools", "tokens", "bytes", "tools/list bytes"):
        table.add_column(col, justify="left" if col == "server" else "right")
    for name, v in fp.items():
        table.add_row(name, str(v["n_tools"]), f"{v['tokens']:,}", f"{v['bytes']:,}", f"{listed[name]:,}")
    table.add_section()
    table.add_row(
        "total",
        str(sum(v["n_tools"] for v in fp.values())),
        f"{sum(v['tokens'] for v in fp.values()):,}",
        f"{sum(v['bytes'] for v in fp.values()):,}",
        f"{sum(listed.values()):,}",
    )
    stdout().print(table)
    dup = [t for t in cat.tools() if t.qualified_name != t.name]
    if dup:
        stdout().print(
            f"{len(dup)} tools share a name with another server's tool (namespaced as server__tool)."
        )
    return 0
