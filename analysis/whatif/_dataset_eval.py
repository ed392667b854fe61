"""What-if over a recorded dataset: every LLM input event (S1/S5) recomputed under each strategy.

The recorded call is the baseline. A strategy changes only the part of the call it acts on, so its tokens are
``tokens_in + (strategy payload - full payload)``, both payloads counted with the call's own tokenizer (the
``tokenizer`` column) over the captured texts. What the recording has to carry (see docs/whatif.md):

* schema texts: ``INIT tools_discovery`` events list the tools in ``attrs.tools``; the texts are the captured
  ``schema`` content (matched by ``attrs.tools[name].content`` when present, else by the tool name in the text);
* the routing query: the user prompt, from the task's S1 ``attrs.content`` (kind ``prompt``);
* tool results: S4 ``attrs.content``; what the model used afterwards: later S3 arguments (``req_preview``) and the
  answer (S6 ``attrs.content``, else ``resp_preview``).

A call whose schema texts are missing keeps the strategies that need them out of the table (and says so).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd

from promcp.analysis.cost import input_rates
from promcp.analysis.load import attrs_of
from promcp.analysis.whatif import strategies as st
from promcp.analysis.whatif._catalog_eval import hits, payloads, static_payloads
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.events import Phase, Stage
from promcp.strategies.routing import Router
from promcp.strategies.schema import form_of, render

DATASET_STRATEGIES = ("full", "slim", "dedup", "topk", "search-tool", "two-phase", "result-fields")
_LLM_INPUT = (Stage.S1.value, Stage.S5.value)


def _render_in(form: str, tool: Mapping[str, Any]) -> str:
    return render(tool, form)


def _form(keys: Sequence[str], tools_by_key: Mapping[str, Mapping[str, Any]]) -> str:
    """The wire form the call's definitions were captured in (counted in that form, so a projection of a host
    that sends ``parameters`` is not off by the key's tokens)."""
    forms = {str(t.get("_form", "mcp")) for k in keys if (t := tools_by_key.get(k)) is not None}
    return forms.pop() if len(forms) == 1 else "mcp"


def _parse_tool(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    form = form_of(obj)
    if form == "openai":  # OpenAI {"type":"function","function":…}
        obj = obj["function"]
    return {**obj, "_form": form} if isinstance(obj, dict) and isinstance(obj.get("name"), str) else None


def schema_tools(
    events: pd.DataFrame, texts: Mapping[str, str], kinds: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """``"<server>/<tool>"`` → tool dict, from the discovery events and the captured schema texts."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for h, text in texts.items():
        if kinds.get(h) == "schema":
            tool = _parse_tool(text)
            if tool is not None:
                by_name.setdefault(tool["name"], []).append(tool)
    out: dict[str, dict[str, Any]] = {}
    disc = events[(events["stage"] == Stage.INIT.value) & (events["phase"] == Phase.TOOLS_DISCOVERY.value)]
    for server, attrs in zip(disc["server"], disc["attrs"], strict=True):
        for name, info in (attrs_of(attrs).get("tools") or {}).items():
            tool = None
            if isinstance(info, dict) and info.get("content") in texts:
                tool = _parse_tool(texts[info["content"]])
            elif len(by_name.get(name, [])) == 1:
                tool = by_name[name][0]
            if tool is not None:
                out[f"{server}/{name}"] = {**tool, "server": server}
    for name, tools in by_name.items():  # schemas seen without a discovery event: key by bare name
        if len(tools) == 1:
            out.setdefault(name, tools[0])
    return out


@dataclass
class DatasetResult:
    turns: pd.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)  # why → LLM calls left out (see skipped_note)


def skipped_note(skipped: Mapping[str, int]) -> str | None:
    """What :attr:`DatasetResult.skipped` means, in one line (None: nothing was left out). ``whatif_dataset`` logs
    it as a warning; the live-strategy comparison makes it a note of its section."""
    if not skipped:
        return None
    detail = ", ".join(f"{s}: {n}" for s, n in skipped.items())
    return f"LLM calls left out for lack of captured schema texts or prompt ({detail}); see docs/whatif.md"


def _framing(
    full: Any,
    parts: Sequence[tuple[str, str, int]],
    attrs: Any,
    count: Callable[[str], int],
    as_sent: Callable[[Any], str],
) -> dict[int, int]:
    """Tool index → the tokens the host adds around that definition in its prompt (recorded part − the definition
    as rendered): promcp's llama.cpp host writes one definition per line, and the line's newline is counted in the
    tool's ``schemas`` part. A strategy that drops a tool drops its framing too, so the prediction counts it (the
    live ``topk`` run then equals it). Zero for parts scaled to a provider's usage (``origin_scale``), whose
    difference is the scaling, not framing."""
    if attrs_of(attrs).get("origin_scale") is not None:
        return {}
    recorded = [tokens for origin, _key, tokens in parts if origin == "schemas"]
    if len(recorded) != len(full.sent):
        return {}
    return {i: tokens - count(as_sent(d)) for (i, d), tokens in zip(full.sent, recorded, strict=True)}


def _as_prompted(
    payload: Any, count: Callable[[str], int], as_sent: Callable[[Any], str], framing: Mapping[int, int]
) -> int:
    """A payload's tokens as the host's prompt holds them: each definition rendered, plus its framing."""
    return int(payload.tokens(count, as_sent)) + sum(framing.get(i, 0) for i, _d in payload.sent)


def _parts(value: Any) -> list[tuple[str, str, int]]:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return []
    out = []
    for p in value:
        if isinstance(p, dict):
            out.append((str(p["origin"]), str(p["key"]), int(p["tokens"])))
        else:
            out.append((str(p[0]), str(p[1]), int(p[2])))
    return out


def evaluate_dataset(
    events: pd.DataFrame,
    content: pd.DataFrame,
    counter: Callable[[str], Callable[[str], int]],
    *,
    k: int = 3,
    n_results: int | None = None,
    strategies: Sequence[str] = DATASET_STRATEGIES,
    router_factory: Callable[[Sequence[Mapping[str, Any]]], Router] = Router,
    tokenizer: str | None = None,
) -> DatasetResult:
    """One row per (LLM input event, strategy); ``counter(name)`` gives the count function of a tokenizer."""
    wanted = list(dict.fromkeys(["full", *strategies]))
    texts = dict(zip(content["hash"], content["text"], strict=True)) if len(content) else {}
    kinds = dict(zip(content["hash"], content["kind"], strict=True)) if len(content) else {}
    tools_by_key = schema_tools(events, texts, kinds)
    stage = events["stage"].astype(str)
    calls = events[stage.isin(_LLM_INPUT) & (events["status"].astype(str) == "ok")]
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    routers: dict[tuple[str, ...], Router] = {}
    price_cache: dict[str, Any] = {}

    def skip(name: str) -> None:
        skipped[name] = skipped.get(name, 0) + 1

    for (run_id, task_id), task in events[events["task_id"].notna()].groupby(
        ["run_id", "task_id"], observed=True
    ):
        tstage = task["stage"].astype(str)
        prompt = next(
            (texts.get(attrs_of(a).get("content", "")) for a in task.loc[tstage == Stage.S1.value, "attrs"]),
            None,
        )
        s3 = task[tstage == Stage.S3.value]
        called: dict[int, set[str]] = {}
        for rnd, server, tool in zip(s3["round"], s3["server"], s3["tool"], strict=True):
            called.setdefault(int(rnd), set()).add(f"{server}/{tool}")
        results: dict[str, str] = {}
        for cid, a in zip(
            task.loc[tstage == Stage.S4.value, "tool_call_id"],
            task.loc[tstage == Stage.S4.value, "attrs"],
            strict=True,
        ):
            text = texts.get(attrs_of(a).get("content", ""))
            if cid and text is not None:
                results[str(cid)] = text
        used = [str(x) for x in s3["req_preview"].dropna()]
        for a, prev in zip(
            task.loc[tstage == Stage.S6.value, "attrs"],
            task.loc[tstage == Stage.S6.value, "resp_preview"],
            strict=True,
        ):
            answer = texts.get(attrs_of(a).get("content", ""))
            used.append(answer if answer is not None else str(prev or ""))
        task_calls = calls[(calls["run_id"] == run_id) & (calls["task_id"] == task_id)].sort_values("round")
        for _, ev in task_calls.iterrows():
            name = tokenizer or ev["tokenizer"] or DEFAULT_TOKENIZER
            count = counter(str(name))
            parts = _parts(ev["parts"])
            schema_keys = [key for origin, key, _ in parts if origin == "schemas"]
            tools = [tools_by_key.get(key) or tools_by_key.get(key.rsplit("/", 1)[-1]) for key in schema_keys]
            have_tools = all(t is not None for t in tools) and bool(tools)
            tool_list: list[dict[str, Any]] = [
                {**t, "server": key.split("/", 1)[0]} if "/" in key else t
                for t, key in zip(tools, schema_keys, strict=True)
                if t is not None
            ]
            expected = frozenset(called.get(int(ev["round"]), set()))
            base = int(ev["tokens_in"]) if pd.notna(ev["tokens_in"]) else 0
            common = {"run_id": run_id, "task": task_id, "round": int(ev["round"]), "tokenizer": name}
            rates = input_rates(ev.to_dict(), price_cache)
            common["plain_rate"], common["billed_rate"] = rates if rates is not None else (None, None)
            rows.append(
                {
                    **common,
                    "strategy": "full",
                    "tokens": base,
                    "full_tokens": base,
                    "expected": len(expected),
                    "hits": len(expected),
                    "routing_ms": 0.0,
                }
            )
            schema_strategies = [s for s in wanted if s not in ("full", "result-fields")]
            if schema_strategies and not have_tools:
                for s in schema_strategies:
                    skip(s)
            elif schema_strategies:
                static = static_payloads(tool_list, ["full", *schema_strategies])
                as_sent = partial(_render_in, _form(schema_keys, tools_by_key))
                framing = _framing(static["full"], parts, ev["attrs"], count, as_sent)
                full_tokens = _as_prompted(static["full"], count, as_sent, framing)
                ranking: list[int] = []
                ms = 0.0
                routed = [s for s in schema_strategies if s in st.ROUTED]
                if routed and prompt is None:
                    for s in routed:
                        skip(s)
                    schema_strategies = [s for s in schema_strategies if s not in st.ROUTED]
                elif routed:
                    key = tuple(schema_keys)
                    if key not in routers:
                        routers[key] = router_factory(tool_list)
                    ranking, ms = routers[key].rank(prompt or "")
                per = payloads(
                    tool_list,
                    prompt or "",
                    ranking,
                    k=k,
                    n_results=n_results or k,
                    strategies=schema_strategies,
                    static=static,
                )
                for s, payload in per.items():
                    rows.append(
                        {
                            **common,
                            "strategy": s,
                            "tokens": base + _as_prompted(payload, count, as_sent, framing) - full_tokens,
                            "full_tokens": base,
                            "expected": len(expected),
                            "hits": hits(expected, payload.visible),
                            "routing_ms": ms if s in st.ROUTED else 0.0,
                        }
                    )
            if "result-fields" in wanted:
                delta = 0
                for origin, part_key, tokens in parts:
                    if origin == "tool_results" and part_key in results:
                        delta += count(st.result_fields(results[part_key], used)) - tokens
                rows.append(
                    {
                        **common,
                        "strategy": "result-fields",
                        "tokens": base + delta,
                        "full_tokens": base,
                        "expected": len(expected),
                        "hits": len(expected),
                        "routing_ms": 0.0,
                    }
                )
    columns = [
        "run_id",
        "task",
        "round",
        "tokenizer",
        "strategy",
        "tokens",
        "full_tokens",
        "expected",
        "hits",
        "routing_ms",
    ]
    frame = pd.DataFrame(rows, columns=[*columns, "plain_rate", "billed_rate"])
    return DatasetResult(_with_dollars(frame)[[*columns, *DOLLAR_COLUMNS]], skipped)


#: Dollar columns of a what-if turn (null when the call has no price: a local model, an unknown one).
DOLLAR_COLUMNS = ("usd", "full_usd", "usd_cached", "full_usd_cached")


def _with_dollars(frame: pd.DataFrame) -> pd.DataFrame:
    """Each turn's input in US dollars, without caching (every token at the input rate) and with it. With caching,
    the recorded call is what was billed; a strategy that keeps the prompt's prefix (slimmed or deduplicated
    schemas: the same tool list on every call; filtered results: after the prefix) keeps that call's billed rate
    per token; a strategy that changes the tool list per call (routing, search tool, two-phase) breaks the cached
    prefix (tool definitions lead the prompt), so its tokens are billed as plain input."""
    plain, billed = frame["plain_rate"].astype("float64"), frame["billed_rate"].astype("float64")
    breaks = frame["strategy"].isin(list(st.ROUTED))
    frame["usd"] = frame["tokens"] * plain
    frame["full_usd"] = frame["full_tokens"] * plain
    frame["usd_cached"] = frame["tokens"] * billed.where(~breaks, plain)
    frame["full_usd_cached"] = frame["full_tokens"] * billed
    return frame
