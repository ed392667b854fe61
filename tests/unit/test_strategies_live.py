"""The live side of the strategies: what one call sends given the catalog, the conversation so far and the router,
computed by the same payload functions the what-if counts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from promcp.errors import ConfigError
from promcp.strategies import live
from promcp.strategies import payloads as pl
from promcp.strategies.routing import Router

ADDR = {
    "type": "object",
    "title": "Address",
    "description": "A postal address with street, city, postcode and country fields",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "country": {"type": "string"}},
}


def tool(name: str, desc: str, props: dict[str, Any], server: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": desc,
        "inputSchema": {"type": "object", "properties": props},
        "server": server,
    }


CATALOG = [
    tool(
        "ship",
        "Ship a parcel to an address",
        {"to": ADDR, "weight": {"type": "number", "default": 1}},
        "post",
    ),
    tool("bill", "Send an invoice to an address", {"to": ADDR}, "post"),
    tool("weather", "Current weather for a city", {"city": {"type": "string"}}, "wx"),
    tool("forecast", "Weather forecast for the next days in a city", {"city": {"type": "string"}}, "wx"),
]


def bm25(tools: Sequence[Mapping[str, Any]]) -> Router:
    return Router(tools, "bm25")


def test_parse_strategy_reads_name_k_and_scorer_and_names_the_place_of_an_error() -> None:
    assert live.parse_strategy("slim") == live.StrategySpec("slim")
    assert live.parse_strategy("topk:5:bm25") == live.StrategySpec("topk", 5, "bm25")
    assert live.parse_strategy("topk:5:bm25").label == "topk:5:bm25"
    assert live.parse_strategy("two-phase").label == "two-phase:3"
    for bad, says in [
        ("topk:0", "at least 1"),
        ("topk:x", "whole number"),
        ("slim:3", "takes no parameter"),
        ("topk:3:cosine", "unknown scorer"),
        ("fastest", "unknown strategy"),
        ("result-fields", "oracle"),
    ]:
        with pytest.raises(ConfigError, match=says) as err:
            live.parse_strategy(bad, source="b.yaml", key="tasks[0].strategy", line=7)
        assert str(err.value).startswith("b.yaml:7 [tasks[0].strategy]: ")


@pytest.mark.parametrize("name", ["full", "slim", "dedup"])
def test_static_strategies_send_the_payload_the_what_if_counts(name: str) -> None:
    plan = live.plan_call(live.StrategySpec(name), CATALOG, live.Conversation("ship it"))
    payload = getattr(pl, name)(CATALOG)
    assert plan.payload == payload
    assert [json.dumps(d) for _i, d in plan.sent] == [json.dumps(d) for _i, d in payload.sent]
    assert plan.callable == frozenset(range(4))
    if name == "slim":
        assert "title" not in json.dumps(plan.sent[0][1]) and "default" not in json.dumps(plan.sent[0][1])
    if name == "dedup":  # the address schema repeats: one $defs block beside the tools, $refs inside them
        assert plan.extra and plan.extra[0][0] == live.DEFS_KEY and "$defs" in plan.extra[0][1]
        assert '"$ref":"#/$defs/d0"' in pl.dumps(plan.sent[0][1])
        texts = [pl.dumps(d) for _i, d in plan.sent] + [t for _k, t in plan.extra]
        assert tuple(texts) == payload.texts, "the live call carries exactly the projected texts"


def test_topk_sends_the_routed_k_and_keeps_a_tool_used_earlier() -> None:
    router = bm25(CATALOG)
    spec = live.StrategySpec("topk", 1, "bm25")
    plan = live.plan_call(spec, CATALOG, live.Conversation("weather forecast for Paris"), router)
    ranking, _ms = router.rank("weather forecast for Paris")
    assert plan.payload == pl.topk(CATALOG, ranking, 1)
    assert [i for i, _d in plan.sent] == [3] and plan.callable == {3} and plan.kept == ()
    assert plan.routing_ms is not None and plan.fallback is None
    used = live.plan_call(spec, CATALOG, live.Conversation("weather forecast for Paris", used=(0,)), router)
    assert [i for i, _d in used.sent] == [3, 0] and used.kept == (0,), "the tool used earlier stays visible"
    assert used.attrs()["strategy_kept"] == 1 and used.attrs()["strategy"] == "topk:1:bm25"


def test_a_router_failure_falls_back_to_the_full_list_and_says_why() -> None:
    class Broken(Router):
        def rank(self, query: str) -> tuple[list[int], float]:
            raise RuntimeError("model gone")

    spec = live.StrategySpec("topk", 1, "bm25")
    plan = live.plan_call(spec, CATALOG, live.Conversation("q"), Broken(CATALOG, "bm25"))
    assert plan.payload == pl.full(CATALOG) and plan.callable == frozenset(range(4))
    assert plan.fallback == "router failed: RuntimeError: model gone"
    assert plan.attrs()["strategy_fallback"] == plan.fallback
    router, error = live.make_router(
        spec, CATALOG, lambda _t, _s: (_ for _ in ()).throw(ImportError("no torch"))
    )
    assert router is None and error == "router unavailable: ImportError: no torch"
    plan = live.plan_call(spec, CATALOG, live.Conversation("q"), router, router_error=error)
    assert plan.fallback == error and len(plan.sent) == 4


def test_search_tool_offers_the_meta_tool_then_what_the_search_found() -> None:
    router = bm25(CATALOG)
    spec = live.StrategySpec("search-tool", 2, "bm25")
    first = live.plan_call(spec, CATALOG, live.Conversation("bill me"), router)
    assert first.meta_tools == ("search_tools",) and first.callable == frozenset()
    answer = live.search(spec, CATALOG, router, {"query": "invoice an address", "limit": 1})
    assert answer.found == (1,) and [t["name"] for t in json.loads(answer.text)] == ["bill"]
    ranking, _ = router.rank("invoice an address")
    assert answer.text == pl.dumps(pl.search_results(CATALOG, ranking, 1)), "the result the what-if counts"
    later = live.plan_call(spec, CATALOG, live.Conversation("bill me", found=answer.found), router)
    assert [d["name"] for _i, d in later.sent] == ["search_tools", "bill"] and later.callable == {1}
    assert live.search(spec, CATALOG, router, {"query": ""}).error == "invalid_arguments"
    capped = live.search(spec, CATALOG, router, {"query": "city", "limit": 10_000})
    assert len(capped.found) == len(CATALOG)  # min(limit, MAX_SEARCH_LIMIT, catalog)


def test_two_phase_sends_the_pool_the_k_best_and_load_tool() -> None:
    router = bm25(CATALOG)
    spec = live.StrategySpec("two-phase", 1, "bm25")
    plan = live.plan_call(spec, CATALOG, live.Conversation("ship a parcel"), router)
    assert plan.extra == ((live.POOL_KEY, pl.summary_pool(CATALOG)),)
    assert [d["name"] for _i, d in plan.sent] == ["ship", "load_tool"] and plan.callable == {0}
    loaded = live.load(CATALOG, {"name": "forecast"})
    assert loaded.found == (3,) and json.loads(loaded.text)["name"] == "forecast"
    assert live.load(CATALOG, {"name": "nope"}).error == "unknown_tool"
    after = live.plan_call(spec, CATALOG, live.Conversation("ship a parcel", found=loaded.found), router)
    assert after.callable == {0, 3}
