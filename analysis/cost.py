"""What the LLM calls of a dataset cost in US dollars.

An LLM call's price depends on the model and on how its input split: tokens read from the prompt cache, tokens
written to it, uncached input, and output. The events store that split exactly as the provider reported it
(``tokens_in``, ``cache_read_tokens``, ``cache_write_tokens`` and the 5-minute / 1-hour write split,
``tokens_out``). This module prices it when a dataset is read, so a price change or a private price list re-prices
old recordings without recording them again.

Prices come from ``genai-prices`` (Pydantic's maintained price table; its data ships with the package and is
used offline, never updated at run time), or from a user's JSON file (``--prices FILE``) that overrides it per
model::

    {"my-model": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}

(US dollars per million tokens; ``cache_read`` / ``cache_write`` default to ``input``). The cost is split the way
the phases are: the input side (uncached input + cache reads + cache writes) on the call's input event (S1/S5,
phase ``context``), the output on its output event (S2/S6). A call with no price has no cost (null, never 0),
with the reason: a local model (``l-cust``: the model runs on this machine, it has no price per token), no
provider usage (the split is unknown), or a model the table does not know.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pandas as pd

from promcp.errors import ConfigError
from promcp.events import LLM_INPUT_STAGES, Origin, Stage, Topology

__all__ = [
    "CALL_COST_COLUMNS",
    "COST_COLUMNS",
    "PRICE_TABLE",
    "UNATTRIBUTED",
    "Rates",
    "cache_split",
    "call_costs",
    "cost_by_phase",
    "input_rates",
    "load_prices",
    "prefix_split",
    "schema_tax",
    "table_rates",
]

#: The price table's name and version (shown with every cost table).
PRICE_TABLE: Final = f"genai-prices {importlib.metadata.version('genai-prices')}"
COST_COLUMNS: Final = ("input_usd", "output_usd", "total_usd")
#: The event columns :func:`call_costs` prices a call from (what a reader loads for it).
CALL_COST_COLUMNS: Final = (
    "run_id",
    "task_id",
    "round",
    "topology",
    "model",
    "provider",
    "stage",
    "tokens_in",
    "tokens_out",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
)
_INPUT = frozenset(s.value for s in LLM_INPUT_STAGES)
_OUTPUT = frozenset({Stage.S2.value, Stage.S6.value})
_PER_TOKEN = 1e-6  # rates are per million tokens
_ORIGIN_ORDER: Final = tuple(o.value for o in Origin)


@dataclass(frozen=True)
class Rates:
    """US dollars per million tokens of one model (a user's price file)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def price(self, uncached: int, read: int, write: int, output: int) -> tuple[float, float]:
        """(input side, output side) in US dollars."""
        read_rate = self.input if self.cache_read is None else self.cache_read
        write_rate = self.input if self.cache_write is None else self.cache_write
        inp = (uncached * self.input + read * read_rate + write * write_rate) * _PER_TOKEN
        return inp, output * self.output * _PER_TOKEN


def load_prices(path: str | Path) -> dict[str, Rates]:
    """A user's price file: ``{"model": {"input": …, "output": …, "cache_read": …, "cache_write": …}}``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the price file: {exc.strerror or exc}", source=path) from None
    except ValueError as exc:
        raise ConfigError(f"the price file is not JSON: {exc}", source=path) from None
    if not isinstance(data, dict):
        raise ConfigError("the price file must be a JSON object of model names", source=path)
    out: dict[str, Rates] = {}
    for model, spec in data.items():
        if not isinstance(spec, dict):
            raise ConfigError("expected an object of rates", source=path, key=str(model))
        unknown = set(spec) - {"input", "output", "cache_read", "cache_write"}
        if unknown:
            raise ConfigError(f"unknown rate {sorted(unknown)[0]!r}", source=path, key=str(model))
        values: dict[str, float | None] = {}
        for name in ("input", "output", "cache_read", "cache_write"):
            value = spec.get(name)
            if value is None and name in ("input", "output"):
                raise ConfigError(f"missing {name!r} (US dollars per million tokens)", source=path, key=model)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value < 0
            ):
                raise ConfigError(f"{name} must be a number ≥ 0", source=path, key=str(model))
            values[name] = None if value is None else float(value)
        out[str(model)] = Rates(**values)  # type: ignore[arg-type]
    return out


def _int(value: Any) -> int:
    return 0 if value is None or pd.isna(value) else int(value)


def _table_price(
    model: str, provider: str | None, uncached: int, read: int, write: int, write_1h: int, output: int
) -> tuple[float, float]:
    from genai_prices import Usage, calc_price

    counts = {
        "input_tokens": uncached + read + write,  # genai-prices' input total includes the cache
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": output,
    }
    if write_1h:  # 1-hour writes are priced apart (2× input for Anthropic vs 1.25× for 5-minute ones)
        counts["cache_write_1h_tokens"] = write_1h
    usage = Usage(**counts)
    try:
        result = calc_price(usage, model_ref=model, provider_id=provider)
    except LookupError:
        if provider is None:
            raise
        result = calc_price(usage, model_ref=model)  # a gateway's provider name: match the model alone
    return float(result.input_price), float(result.output_price)


def table_rates(model: str, provider: str | None = None) -> Rates | None:
    """The price table's base rates of ``model`` (US dollars per million tokens; long-context tiers aside), or
    None when the table does not know it."""
    from genai_prices import Usage, calc_price

    def price(**counts: int) -> tuple[float, float]:
        try:
            r = calc_price(Usage(**counts), model_ref=model, provider_id=provider)
        except LookupError:
            r = calc_price(Usage(**counts), model_ref=model)
        return float(r.input_price), float(r.output_price)

    million = 1_000_000
    try:
        base, out = price(input_tokens=million, output_tokens=million)
        read = price(input_tokens=million, cache_read_tokens=million)[0]
        write = price(input_tokens=million, cache_write_tokens=million)[0]
    except LookupError:
        return None
    return Rates(input=base, output=out, cache_read=read, cache_write=write)


def input_rates(
    row: Mapping[str, Any], cache: dict[str, Rates | None] | None = None
) -> tuple[float, float] | None:
    """US dollars per input token of one LLM input event: (at the plain input rate, as actually billed — the
    call's input cost over its input tokens, cache reads and writes included); None without a price."""
    if str(row.get("topology")) == Topology.L_CUST.value:
        return None
    model, tokens = _clean(row.get("model")), _int(row.get("tokens_in"))
    if model is None or not tokens:
        return None
    cache = {} if cache is None else cache
    if model not in cache:
        cache[model] = table_rates(model, _clean(row.get("provider")))
    rate = cache[model]
    if rate is None:
        return None
    plain = rate.input * _PER_TOKEN
    read_raw, write_raw = row.get("cache_read_tokens"), row.get("cache_write_tokens")
    if read_raw is None or pd.isna(read_raw):
        return plain, plain  # no cache split: billed as plain input
    read, write = _int(read_raw), _int(write_raw)
    billed = rate.price(max(tokens - read - write, 0), read, write, 0)[0]
    return plain, billed / tokens


def call_costs(events: pd.DataFrame, prices: Mapping[str, Rates] | None = None) -> pd.DataFrame:
    """One row per LLM call with its cost: ``run_id``, ``task_id``, ``round``, ``topology``, ``model``,
    ``input_usd``, ``output_usd``, ``total_usd`` (null when unknown), ``priced_by`` (``genai-prices x.y.z`` or the
    price file) and ``reason`` (why a cost is null).

    >>> import promcp.analysis as pa
    >>> pa.call_costs(pa.load("traces/claude"))[["model", "input_usd", "output_usd"]].sum(numeric_only=True)
    """
    cols = ["run_id", "task_id", "round", "topology", "model", "provider", "stage", "tokens_in", "tokens_out"]
    cache = ["cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens"]
    frame = events[[c for c in (*cols, *cache) if c in events.columns]].copy()
    for c in cache:
        if c not in frame:
            frame[c] = pd.NA
    stage = frame["stage"].astype(str)
    key = ["run_id", "task_id", "round"]
    inp = frame[stage.isin(_INPUT)].copy()
    out = frame[stage.isin(_OUTPUT)][[*key, "tokens_out", "stage"]].rename(
        columns={"tokens_out": "out_tokens", "stage": "out_stage"}
    )
    out["out_stage"] = out["out_stage"].astype(str)
    inp = inp.drop(columns="stage")
    for c in key:
        inp[c] = inp[c].astype(object)
        out[c] = out[c].astype(object)
    calls = inp.merge(out.drop_duplicates(key), on=key, how="left")
    rows: list[dict[str, Any]] = []
    for r in calls.to_dict("records"):
        row: dict[str, Any] = {c: r.get(c) for c in (*key, "topology", "model", "out_stage")}
        row.update(input_usd=None, output_usd=None, total_usd=None, priced_by=None, reason=None)
        model = r.get("model")
        model = None if model is None or pd.isna(model) else str(model)
        provider = r.get("provider")
        provider = None if provider is None or pd.isna(provider) else str(provider)
        if str(r.get("topology")) == Topology.L_CUST.value:
            row["reason"] = "local model: no price per token"
        elif model is None:
            row["reason"] = "no model recorded"
        elif pd.isna(r.get("tokens_in")) or pd.isna(r.get("cache_read_tokens")):
            row["reason"] = "no provider usage (cache split unknown)"
        else:
            read, write = _int(r["cache_read_tokens"]), _int(r["cache_write_tokens"])
            uncached = max(_int(r["tokens_in"]) - read - write, 0)
            output = _int(r.get("out_tokens"))
            try:
                if prices is not None and model in prices:
                    i, o = prices[model].price(uncached, read, write, output)
                    row["priced_by"] = "price file"
                else:
                    i, o = _table_price(
                        model, provider, uncached, read, write, _int(r["cache_write_1h_tokens"]), output
                    )
                    row["priced_by"] = PRICE_TABLE
            except LookupError:
                row["reason"] = f"no price for model {model!r} in {PRICE_TABLE} (add it with --prices FILE)"
            else:
                row.update(input_usd=i, output_usd=o, total_usd=i + o)
        rows.append(row)
    columns = [*key, "topology", "model", "out_stage", *COST_COLUMNS, "priced_by", "reason"]
    return pd.DataFrame(rows, columns=columns)


def schema_tax(
    events: pd.DataFrame, by: Sequence[str], prices: Mapping[str, Rates] | None = None
) -> pd.DataFrame:
    """The amortized schema tax: per tool definition, what re-sending it on every LLM call cost as billed (cache
    reads, writes and uncached tokens, by prefix position), what it would have cost without caching, and if it
    had been deferred behind a tool-search tool (sent, uncached, only from the round the tool was first called
    in the task: a never-called tool costs nothing). Calls of live sources with a cache split and a price only
    (an import does not show the prompt's order)."""
    inputs = events[events["stage"].astype(str).isin(_INPUT)]
    inputs = inputs[inputs["cache_read_tokens"].notna() & inputs["model"].notna()]
    first_call: dict[tuple[Any, Any, str], int] = {}
    s3 = events[events["stage"].astype(str) == Stage.S3.value]
    for r in s3.to_dict("records"):
        rnd = r.get("round")
        if rnd is None or pd.isna(rnd):
            continue
        for name in _tool_names(r.get("server"), r.get("tool")):
            k = (r["run_id"], r["task_id"], name)
            first_call[k] = min(first_call.get(k, int(rnd)), int(rnd))
    rates: dict[str, Rates | None] = {}
    sums: dict[tuple[Any, ...], dict[str, float]] = {}
    for r in inputs.to_dict("records"):
        if not _in_prompt_order(r):
            continue
        model = str(r["model"])
        if model not in rates:
            rates[model] = (prices or {}).get(model) or table_rates(model, _clean(r.get("provider")))
        rate = rates[model]
        if rate is None:
            continue
        read_rate = rate.input if rate.cache_read is None else rate.cache_read
        write_rate = rate.input if rate.cache_write is None else rate.cache_write
        parts = prefix_split(list(r["parts"]), _int(r["cache_read_tokens"]), _int(r["cache_write_tokens"]))
        for origin, key, read, write, uncached in parts:
            if origin != Origin.SCHEMAS.value:
                continue
            tokens = read + write + uncached
            cell = sums.setdefault(
                (*(r.get(k) for k in by), key),
                {
                    "calls": 0,
                    "tokens": 0,
                    "reads": 0,
                    "writes": 0,
                    "billed": 0.0,
                    "no_cache": 0.0,
                    "deferred": 0.0,
                },
            )
            cell["calls"] += 1
            cell["tokens"] += tokens
            cell["reads"] += read
            cell["writes"] += write
            cell["billed"] += (read * read_rate + write * write_rate + uncached * rate.input) * _PER_TOKEN
            cell["no_cache"] += tokens * rate.input * _PER_TOKEN
            called = first_call.get((r["run_id"], r["task_id"], key))
            if called is not None and _int(r.get("round")) >= called:
                cell["deferred"] += tokens * rate.input * _PER_TOKEN
    rows = [
        {
            **dict(zip(by, key[:-1], strict=True)),
            "schema": key[-1],
            "calls": int(c["calls"]),
            "tokens_per_call": c["tokens"] / c["calls"] if c["calls"] else float("nan"),
            "cache_reads": int(c["reads"]),
            "cache_writes": int(c["writes"]),
            "billed_usd": c["billed"],
            "no_cache_usd": c["no_cache"],
            "deferred_usd": c["deferred"],
        }
        for key, c in sums.items()
    ]
    columns = [*by, "schema", "calls", "tokens_per_call", "cache_reads", "cache_writes", "billed_usd"]
    frame = pd.DataFrame(rows, columns=[*columns, "no_cache_usd", "deferred_usd"])
    return frame.sort_values("billed_usd", ascending=False, kind="stable").reset_index(drop=True)


def _clean(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def _tool_names(server: Any, tool: Any) -> list[str]:
    """The keys a tool's schema part may carry: ``server/tool`` (host), the tool name, Claude Code's
    ``mcp__server__tool``."""
    tool, server = _clean(tool), _clean(server)
    if tool is None:
        return []
    names = [tool]
    if server is not None:
        names += [f"{server}/{tool}", f"mcp__{server}__{tool}"]
    return names


#: The cost table's phases: the input side is context, the output side the plan (S2) or the answer (S6).
COST_PHASES: Final = ("context", "llm_plan", "final_answer", "total")


def cost_by_phase(calls: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Cost per task by phase (``*by, phase, usd_mean, usd_std, usd_share``, the token table's layout) over the
    tasks whose every LLM call has a price; ``tasks`` counts them."""
    if calls.empty:
        return pd.DataFrame(columns=[*by, "phase", "usd_mean", "usd_std", "usd_share", "tasks"])
    frame = calls.copy()
    frame["context"] = frame["input_usd"]
    plan = frame["out_stage"].eq(Stage.S2.value)
    frame["llm_plan"] = frame["output_usd"].where(plan, 0.0)
    frame["final_answer"] = frame["output_usd"].where(~plan, 0.0)
    frame["priced"] = frame["total_usd"].notna()
    keys = [*by, "run_id", "task_id"]
    per_task = frame.groupby(keys, dropna=False, observed=True).agg(
        context=("context", "sum"),
        llm_plan=("llm_plan", "sum"),
        final_answer=("final_answer", "sum"),
        priced=("priced", "all"),
    )
    per_task = per_task[per_task["priced"]].reset_index()
    per_task["total"] = per_task[["context", "llm_plan", "final_answer"]].sum(axis=1)
    rows: list[dict[str, Any]] = []
    groups = per_task.groupby(list(by), dropna=False, observed=True) if by else [((), per_task)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        total = float(part["total"].sum())
        for phase in COST_PHASES:
            values = part[phase].astype("float64")
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "phase": phase,
                    "usd_mean": values.mean(),
                    "usd_std": values.std(ddof=1) if len(values) > 1 else float("nan"),
                    "usd_share": 100.0 * float(values.sum()) / total if total else float("nan"),
                    "tasks": len(values),
                }
            )
    return pd.DataFrame(rows)


#: Origin row of the cache tokens of calls whose prompt order is unknown (imports: the export does not show it).
UNATTRIBUTED: Final = "unattributed"


def prefix_split(parts: Sequence[Any], read: int, write: int) -> list[tuple[str, str, int, int, int]]:
    """``(origin, key, read, written, uncached)`` per part of one prompt: a prompt cache covers a prefix, so the
    reads are the first ``read`` tokens in prompt order, the writes the next ``write`` tokens, the rest uncached."""
    out: list[tuple[str, str, int, int, int]] = []
    for part in parts:
        origin, key, tokens = _part(part)
        r = min(tokens, read)
        w = min(tokens - r, write)
        read, write = read - r, write - w
        out.append((origin, key, r, w, tokens - r - w))
    return out


def _part(part: Any) -> tuple[str, str, int]:
    if isinstance(part, Mapping):
        return str(part["origin"]), str(part["key"]), int(part["tokens"] or 0)
    origin, key, tokens = part
    return str(getattr(origin, "value", origin)), str(key), int(tokens or 0)


def _in_prompt_order(row: Mapping[str, Any]) -> bool:
    """Whether a call's parts are in the order it was sent (live sources), not reassembled from an export."""
    source = str(row.get("source") or "")
    return not source.startswith("import:") and row.get("parts") is not None


def cache_split(events: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """LLM input tokens by cache status, per group and origin: cache reads, cache writes and uncached input of the
    calls with a provider's cache split, attributed to origins by prefix position where the prompt's order is
    known (host, instrumentation, proxies); an import's cache tokens are ``unattributed`` (its export does not
    show the prompt's order)."""
    frame = events[events["stage"].astype(str).isin(_INPUT)]
    frame = frame[frame["cache_read_tokens"].notna() & frame["tokens_in"].notna()]
    sums: dict[tuple[Any, ...], dict[str, int]] = {}
    for r in frame.to_dict("records"):
        group = tuple(r.get(k) for k in by)
        read, write = _int(r["cache_read_tokens"]), _int(r["cache_write_tokens"])
        if _in_prompt_order(r):
            split = [(o, read_, w, u) for o, _k, read_, w, u in prefix_split(list(r["parts"]), read, write)]
        else:
            split = [(UNATTRIBUTED, read, write, max(_int(r["tokens_in"]) - read - write, 0))]
        for origin, read_, w, u in split:
            cell = sums.setdefault((*group, origin), {"cache_read": 0, "cache_write": 0, "uncached": 0})
            cell["cache_read"] += read_
            cell["cache_write"] += w
            cell["uncached"] += u
    order = {o: i for i, o in enumerate([*_ORIGIN_ORDER, UNATTRIBUTED])}
    rows = []
    for key in sorted(sums, key=lambda k: (tuple(str(x) for x in k[:-1]), order.get(str(k[-1]), 99))):
        cell = sums[key]
        total = cell["cache_read"] + cell["cache_write"] + cell["uncached"]
        rows.append(
            {
                **dict(zip(by, key[:-1], strict=True)),
                "origin": key[-1],
                **cell,
                "input_tokens": total,
                "read_share": 100.0 * cell["cache_read"] / total if total else float("nan"),
            }
        )
    columns = [*by, "origin", "cache_read", "cache_write", "uncached", "input_tokens", "read_share"]
    return pd.DataFrame(rows, columns=columns)
