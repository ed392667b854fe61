"""What-if over a catalog and its queries: tokens per turn and routing quality of every schema strategy."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promcp.analysis.whatif import strategies as st
from promcp.strategies.routing import Router

CATALOG_STRATEGIES = ("full", "slim", "dedup", "topk", "search-tool", "two-phase")


@dataclass(frozen=True)
class Query:
    """One turn to route: its text and, when known, the tools it should reach (keys or bare names)."""

    text: str
    expected: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TurnCost:
    """One strategy applied to one query."""

    query: int
    strategy: str
    tokens: int
    full_tokens: int
    visible: int
    expected: int
    hits: int
    routing_ms: float


@dataclass
class CatalogResult:
    turns: list[TurnCost] = field(default_factory=list)
    n_tools: int = 0
    tokenizer: str = ""
    k: int = 0
    scorer: str = ""
    build_ms: float = 0.0


def hits(expected: frozenset[str], visible: frozenset[str]) -> int:
    """How many expected tools are visible; an expected bare name matches any ``server/name`` key."""
    bare = {v.rsplit("/", 1)[-1] for v in visible}
    return sum(1 for e in expected if e in visible or e.rsplit("/", 1)[-1] in bare)


def payloads(
    tools: Sequence[Mapping[str, Any]],
    query: str,
    ranking: Sequence[int],
    *,
    k: int,
    n_results: int,
    strategies: Sequence[str],
    static: Mapping[str, st.Payload],
) -> dict[str, st.Payload]:
    """The payload of every requested strategy for one query (query-independent ones come from ``static``)."""
    out: dict[str, st.Payload] = {}
    for name in strategies:
        if name in static:
            out[name] = static[name]
        elif name == "topk":
            out[name] = st.topk(tools, ranking, k)
        elif name == "search-tool":
            out[name] = st.search_tool(tools, ranking, query, n_results)
        elif name == "two-phase":
            out[name] = st.two_phase(tools, ranking, k)
    return out


def static_payloads(tools: Sequence[Mapping[str, Any]], strategies: Sequence[str]) -> dict[str, st.Payload]:
    """Payloads that do not depend on the query (full, slim, dedup): computed once per catalog."""
    makers = {"full": st.full, "slim": st.slim, "dedup": st.dedup}
    return {name: makers[name](tools) for name in strategies if name in makers}


def evaluate_catalog(
    tools: Sequence[Mapping[str, Any]],
    queries: Sequence[Query],
    count: Callable[[str], int],
    *,
    k: int = 3,
    n_results: int | None = None,
    strategies: Sequence[str] = CATALOG_STRATEGIES,
    router: Router | None = None,
    tokenizer: str = "",
) -> CatalogResult:
    """Apply every strategy to every query; ``full`` is always computed as the baseline.

    ``n_results`` (search-tool's results per search) defaults to ``k``.
    """
    unknown = [s for s in strategies if s not in CATALOG_STRATEGIES]
    if unknown:
        raise ValueError(
            f"not a catalog strategy: {', '.join(unknown)} (choose from {', '.join(CATALOG_STRATEGIES)})"
        )
    wanted = list(dict.fromkeys(["full", *strategies]))
    routed = any(s in st.ROUTED for s in wanted)
    if routed and router is None:
        router = Router(tools)
    static = static_payloads(tools, wanted)
    static_tokens = {name: p.tokens(count) for name, p in static.items()}
    full_tokens = static_tokens["full"]
    result = CatalogResult(
        n_tools=len(tools),
        tokenizer=tokenizer,
        k=k,
        scorer=router.scorer if router else "",
        build_ms=router.build_ms if router else 0.0,
    )
    for qi, q in enumerate(queries):
        ranking: list[int] = []
        routing_ms = 0.0
        if routed and router is not None:
            ranking, routing_ms = router.rank(q.text)
        per = payloads(
            tools, q.text, ranking, k=k, n_results=n_results or k, strategies=wanted, static=static
        )
        for name, payload in per.items():
            tokens = static_tokens[name] if name in static_tokens else payload.tokens(count)
            result.turns.append(
                TurnCost(
                    query=qi,
                    strategy=name,
                    tokens=tokens,
                    full_tokens=full_tokens,
                    visible=len(payload.visible),
                    expected=len(q.expected),
                    hits=hits(q.expected, payload.visible),
                    routing_ms=routing_ms if name in st.ROUTED else 0.0,
                )
            )
    return result
