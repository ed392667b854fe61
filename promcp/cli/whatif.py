"""``promcp whatif DATASET-or-CATALOG``: tokens per turn and routing quality under each schema strategy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promcp.cli._common import stderr, stdout
from promcp.errors import ConfigError, NotATraceError

if TYPE_CHECKING:
    from promcp.analysis.whatif import WhatifResult


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from promcp.analysis.views import RENDERERS
    from promcp.analysis.whatif import SCORERS, STRATEGIES

    p = sub.add_parser(
        "whatif",
        help="recompute the tools tax under schema-slimming and tool-routing strategies",
        description="For every recorded LLM call of a dataset, or every query of a tool catalog, recompute the "
        "tokens of the tool definitions (and tool results) under each strategy with the same tokenizer, with "
        "Recall@K and hidden tool calls where the expected tools are known. See docs/whatif.md.",
    )
    p.add_argument("path", help="promcp dataset (run/import output) or tool catalog (file or directory)")
    p.add_argument(
        "--strategy",
        action="append",
        choices=list(STRATEGIES),
        dest="strategies",
        help="strategy to evaluate (repeatable; default: all that apply; full is always the baseline)",
    )
    p.add_argument("--k", type=int, default=3, help="tools routed per turn for topk/two-phase (default: 3)")
    p.add_argument("--results", type=int, default=None, help="definitions one search returns (default: --k)")
    p.add_argument(
        "--scorer", choices=list(SCORERS), default="hybrid", help="retrieval scorer (default: hybrid)"
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer name (default: each recorded call's own; cl100k_base for catalogs)",
    )
    p.add_argument("--queries", default=None, help="JSONL queries for a catalog (default: the one beside it)")
    p.add_argument(
        "--format", choices=list(RENDERERS), default="table", help="output format (default: table)"
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="OUT.png",
        help="also write tokens per turn vs catalog size (catalog mode; a directory of catalogs gives 10→500+)",
    )
    p.set_defaults(func=_run)


def _is_catalog(path: Path) -> bool:
    from promcp.analysis.whatif._fixtures import QUERY_FILES

    if path.is_file():
        return path.suffix == ".json"
    if path.is_dir():
        if any(path.glob("topology=*")) or any(path.glob("run_id=*")) or (path / "_journal").is_dir():
            return False  # a promcp dataset (it may hold a saved what-if result, _whatif.json)
        names = {"benchmark_tools.json", "tools.json", *QUERY_FILES}
        return any((path / n).exists() for n in names) or any(path.glob("*.json"))
    return False


def catalog_paths(path: Path) -> list[Path]:
    """The catalogs a path stands for: itself, or every catalog file/directory inside a folder of catalogs."""
    from promcp.analysis.whatif._fixtures import _TOOL_FILES

    if path.is_file() or any((path / n).is_file() for n in _TOOL_FILES):
        return [path]
    found = [p for p in sorted(path.iterdir()) if p.suffix == ".json" and p.is_file()]
    found += [p for p in sorted(path.iterdir()) if p.is_dir() and any((p / n).is_file() for n in _TOOL_FILES)]
    if not found:
        raise ConfigError("no tool catalogs here", source=str(path))
    return found


def _run(args: argparse.Namespace) -> int:
    from promcp.analysis import whatif as wi

    if args.k < 1:
        raise ConfigError("must be at least 1", source="--k")
    path = Path(args.path)
    if not path.exists():
        raise ConfigError("no such file or directory", source=str(path))
    meta: dict[str, Any] = {"source": str(path), "k": args.k, "scorer": args.scorer}
    err = stderr()
    if _is_catalog(path):
        paths = catalog_paths(path)
        tools = wi.union_tools(paths)
        tok = args.tokenizer or "cl100k_base"
        qpath = Path(args.queries) if args.queries else (wi.query_file(paths[0]) if len(paths) == 1 else None)
        if qpath is not None:
            queries = wi.read_queries(qpath)
        else:  # no queries: route on a sample of the tools' own descriptions (no Recall is reported)
            step = max(1, len(tools) // 20)
            queries = [wi.Query(str(t.get("description") or "")) for t in tools[::step]]
        strategies = [s for s in (args.strategies or wi.CATALOG_STRATEGIES) if s in wi.CATALOG_STRATEGIES]
        if args.strategies and "result-fields" in args.strategies:
            err.print("[yellow]note:[/] result-fields needs recorded tool results; skipped for a catalog")
        with err.status(f"routing {len(queries)} queries over {len(tools)} tools"):
            router = (
                wi.Router(tools, args.scorer) if any(s in wi.strategies.ROUTED for s in strategies) else None
            )
            res = wi.evaluate_catalog(
                tools,
                queries,
                wi.counter(tok),
                k=args.k,
                n_results=args.results,
                strategies=strategies,
                router=router,
                tokenizer=tok,
            )
        turns = wi.turns_frame(res)
        meta |= {
            "mode": "catalog",
            "n_tools": len(tools),
            "queries": len(queries),
            "tokenizer": tok,
            "queries_file": str(qpath) if qpath else None,
        }
    else:
        if args.plot:
            raise ConfigError("--plot needs a catalog (tools per turn vs catalog size)", source="--plot")
        try:
            result = wi.whatif_dataset(
                path,
                k=args.k,
                n_results=args.results,
                scorer=args.scorer,
                strategies=args.strategies,
                tokenizer=args.tokenizer,
            )
        except NotATraceError as exc:
            raise ConfigError(
                f"neither a promcp dataset nor a tool catalog: {exc}", source=str(path)
            ) from None
        _emit(result, args.format)
        return 0
    result = wi.WhatifResult(wi.summarize(turns, order=list(dict.fromkeys(["full", *strategies]))), meta)
    if args.plot:
        with err.status(f"routing growing subsets of {len(tools)} tools"):
            result.scaling = wi.scaling(tools, wi.counter(meta["tokenizer"]), k=args.k, scorer=args.scorer)
        out = wi.plot_scaling(result.scaling, args.plot, tokenizer=meta["tokenizer"], k=args.k)
        err.print(f"wrote {out}")
    _emit(result, args.format)
    return 0


def _emit(result: WhatifResult, fmt: str) -> None:
    from promcp.analysis.views import get_renderer
    from promcp.analysis.views.whatif import whatif_document

    options: dict[str, Any] = {"console": stdout()} if fmt == "table" else {}
    get_renderer(fmt, **options).write(whatif_document(result), sys.stdout)
