"""Tokens per turn versus catalog size, per strategy (the ``--plot`` figure)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from promcp.analysis.whatif._catalog_eval import CATALOG_STRATEGIES, Query, evaluate_catalog
from promcp.analysis.whatif._fixtures import load_tools
from promcp.strategies.routing import Encoder, Router
from promcp.strategies.schema import dumps, slim_tool

#: Catalog sizes on the x axis (the union's own size is appended).
SIZES = (10, 25, 50, 100, 200, 300, 400, 500)
#: Queries per size: descriptions of tools drawn from that subset (self-retrieval keeps every query answerable).
QUERIES_PER_SIZE = 8
SEED = 42


def union_tools(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The tools of several catalogs, each distinct definition once.

    Two entries are the same tool when their slimmed definitions are equal (so a re-listing that only adds
    ``title`` or ``outputSchema`` keys is not counted twice); the first catalog listing a tool wins.
    """
    seen: set[str] = set()
    out = []
    for path in paths:
        for tool in load_tools(path):
            key = dumps(slim_tool(tool))
            if key not in seen:
                seen.add(key)
                out.append(tool)
    return out


def scaling(
    tools: Sequence[Mapping[str, Any]],
    count: Callable[[str], int],
    *,
    k: int = 3,
    sizes: Sequence[int] = SIZES,
    strategies: Sequence[str] = CATALOG_STRATEGIES,
    scorer: str = "hybrid",
    model: Encoder | None = None,
) -> pd.DataFrame:
    """Mean tokens per turn of each strategy on nested random subsets of ``tools`` (seeded)."""
    rng = random.Random(SEED)
    order = list(tools)
    rng.shuffle(order)
    wanted = sorted({n for n in sizes if n < len(order)} | {len(order)})
    rows = []
    for n in wanted:
        subset = order[:n]
        picks = random.Random(SEED + n).sample(range(n), min(QUERIES_PER_SIZE, n))
        queries = [Query(str(subset[i].get("description") or subset[i].get("summary") or "")) for i in picks]
        router = Router(subset, scorer, model=model)  # type: ignore[arg-type, unused-ignore]
        result = evaluate_catalog(subset, queries, count, k=k, strategies=strategies, router=router)
        frame = pd.DataFrame([t.__dict__ for t in result.turns])
        for name, g in frame.groupby("strategy", sort=False):
            rows.append({"n_tools": n, "strategy": name, "tokens_per_turn": float(g["tokens"].mean())})
    return pd.DataFrame(rows)


def plot_scaling(frame: pd.DataFrame, out: str | Path, *, tokenizer: str, k: int) -> Path:
    """Write the tokens-per-turn-versus-catalog-size PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for name, g in frame.groupby("strategy", sort=False):
        ax.plot(g["n_tools"], g["tokens_per_turn"], marker="o", label=str(name))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tools in the catalog")
    ax.set_ylabel(f"tool-definition tokens per turn ({tokenizer})")
    ax.set_title(f"promcp whatif: tokens per turn vs catalog size (k={k})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path)
    plt.close(fig)
    return path
