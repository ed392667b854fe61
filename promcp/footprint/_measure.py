"""The tools tax of one server's listing: tokens per tool under each tokenizer, bytes, the largest fields, and what
the ``slim`` / ``dedup`` strategies would send instead.

Counting rules (docs/footprint.md):

* a tool's **schema tokens** are those of the INIT ``tools_discovery`` rule (:func:`promcp.stages.startup.
  tool_footprints` over :func:`promcp.wire.mcp.tool_text_of`: compact JSON of ``name``, ``description`` and the
  input schema as ``parameters``) — the number ``promcp run`` and ``promcp report`` show for the same server;
  ``bytes`` are that text's UTF-8 bytes, ``listed_bytes`` the tool's JSON as the server listed it (with its
  output schema, annotations, …);
* **fields**: the tool's description and each input parameter (``parameters.<name>``: compact JSON of
  ``{name: schema}``), counted under the first tokenizer;
* **strategies**: :mod:`promcp.analysis.whatif.strategies` ``full``, ``slim`` and ``dedup`` over the tools as the
  host sends them (name, description, input schema), each text counted and summed; ``saving`` = full − strategy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.events import Phase
from promcp.footprint._provider import ExactCount
from promcp.footprint._session import Listing, Target, list_tools

#: Strategies whose saving a footprint reports (routed strategies need a query: ``promcp whatif``).
FOOTPRINT_STRATEGIES = ("full", "slim", "dedup")
#: Start-up phases reported, in order.
STARTUP_PHASES = (Phase.SPAWN, Phase.READY, Phase.INITIALIZE, Phase.TOOLS_DISCOVERY)


@dataclass(frozen=True)
class ToolSize:
    name: str
    tokens: dict[str, int]  # tokenizer → schema tokens
    bytes: int  # of the rendered text
    listed_bytes: int  # of the tool's JSON as listed


@dataclass(frozen=True)
class FieldSize:
    tool: str
    field: str
    tokens: int
    bytes: int


@dataclass(frozen=True)
class StrategyCost:
    strategy: str
    tokenizer: str
    tokens: int
    saving: int


@dataclass
class Footprint:
    """One server's footprint; :meth:`summary` is the machine-readable header (``--format json`` meta)."""

    target: str
    server: str
    transport: str
    tokenizers: list[str]
    tools: list[ToolSize]
    fields: list[FieldSize]
    strategies: list[StrategyCost]
    startup_ms: dict[str, float | None]
    pages: int
    handshake: dict[str, Any] = field(default_factory=dict)
    wall_ms: float | None = None
    #: a provider's exact counts (``anthropic:count_tokens``: its total includes the tool-use prompt), by name
    exact: dict[str, ExactCount] = field(default_factory=dict)
    #: provider counts asked for that failed: name → the one-line reason (the other tokenizers are counted)
    errors: dict[str, str] = field(default_factory=dict)

    def total(self, tokenizer: str) -> int:
        if tokenizer in self.exact:
            return self.exact[tokenizer].total
        return sum(t.tokens[tokenizer] for t in self.tools)

    @property
    def local_tokenizer(self) -> str:
        """The first local tokenizer: the largest fields and the strategies are counted with it."""
        return next((n for n in self.tokenizers if n not in self.exact), self.tokenizers[0])

    @property
    def total_bytes(self) -> int:
        return sum(t.bytes for t in self.tools)

    def summary(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "target": self.target,
            "transport": self.transport,
            "tools": len(self.tools),
            "pages": self.pages,
            "tokenizers": list(self.tokenizers),
            "totals": {name: self.total(name) for name in self.tokenizers},
            **(
                {"exact": {n: {"model": e.model, "overhead": e.overhead} for n, e in self.exact.items()}}
                if self.exact
                else {}
            ),
            **({"errors": dict(self.errors)} if self.errors else {}),
            "bytes": self.total_bytes,
            "listed_bytes": sum(t.listed_bytes for t in self.tools),
            "startup_ms": dict(self.startup_ms),
            **{k: v for k, v in self.handshake.items() if v is not None},
        }


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def listed_dict(tool: Any) -> dict[str, Any]:
    """A typed ``Tool`` (or a raw dict) as the server listed it, camelCase keys."""
    if isinstance(tool, dict):
        return dict(tool)
    dumped: dict[str, Any] = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def host_tool(tool: Any) -> dict[str, Any]:
    """The part of a tool a host sends to the model: name, description, input schema (strategies' input)."""
    listed = listed_dict(tool)
    return {
        "name": listed.get("name"),
        "description": listed.get("description") or "",
        "inputSchema": listed.get("inputSchema") or {},
    }


def _fields(tools: Sequence[Any], count: Any) -> list[FieldSize]:
    out: list[FieldSize] = []
    for tool in tools:
        host = host_tool(tool)
        name = str(host["name"])
        desc = str(host["description"])
        if desc:
            out.append(FieldSize(name, "description", count(desc), len(desc.encode())))
        props = host["inputSchema"].get("properties") if isinstance(host["inputSchema"], dict) else None
        for prop, schema in (props or {}).items() if isinstance(props, dict) else ():
            text = _dump({prop: schema})
            out.append(FieldSize(name, f"parameters.{prop}", count(text), len(text.encode())))
    return out


def footprint_of(
    listing: Listing,
    tokenizer_names: Sequence[str],
    *,
    target: str = "",
    server: str = "server",
    transport: str = "stdio",
    top_fields: int = 10,
    exact: Sequence[ExactCount] = (),
) -> Footprint:
    """Count a listing (pure: no server is started). ``exact``: provider counts already made of the same tools
    (:func:`promcp.footprint._provider.exact_count`), shown beside the tokenizers' in ``tokenizer_names`` order."""
    from promcp import tokenizers
    from promcp.analysis.whatif import strategies
    from promcp.footprint._provider import split_names
    from promcp.stages.startup import tool_footprints
    from promcp.wire.mcp import tool_text_of

    exact_by = {e.name: e for e in exact}
    local, _asked = split_names(list(dict.fromkeys(tokenizer_names)))
    local = local or [DEFAULT_TOKENIZER]  # the fields and the strategies need a local count
    names = [n for n in dict.fromkeys(tokenizer_names) if n in local or n in exact_by] or local
    names += [n for n in local if n not in names]
    toks = {n: tokenizers.get(n) for n in local}
    rendered = [tool_text_of(t) for t in listing.tools]
    per_tok: dict[str, dict[str, int]] = {
        n: {name: int(info["tokens"]) for name, info in tool_footprints(rendered, tok).items()}
        for n, tok in toks.items()
    }
    per_tok.update({n: e.per_tool for n, e in exact_by.items()})
    listed = {str(listed_dict(t).get("name")): len(_dump(listed_dict(t)).encode()) for t in listing.tools}
    first = tool_footprints(rendered, toks[local[0]])
    tools = [
        ToolSize(
            name=name,
            tokens={n: int(per_tok[n].get(name, 0)) for n in names},
            bytes=int(info["bytes"]),
            listed_bytes=listed.get(name, 0),
        )
        for name, info in first.items()
    ]
    fields = sorted(_fields(listing.tools, toks[local[0]].count), key=lambda f: (-f.tokens, f.tool, f.field))
    host_tools = [host_tool(t) for t in listing.tools]
    payloads = {
        "full": strategies.full(host_tools),
        "slim": strategies.slim(host_tools),
        "dedup": strategies.dedup(host_tools),
    }
    costs: list[StrategyCost] = []
    for n, tok in toks.items():
        full = payloads["full"].tokens(tok.count)
        for strategy in FOOTPRINT_STRATEGIES:
            spent = full if strategy == "full" else payloads[strategy].tokens(tok.count)
            costs.append(StrategyCost(strategy, n, spent, full - spent))
    return Footprint(
        target=target,
        server=server,
        transport=transport,
        tokenizers=names,
        tools=tools,
        fields=fields[: max(top_fields, 0)],
        strategies=costs,
        startup_ms={p.value: listing.phase_ms(p) for p in STARTUP_PHASES} | {"total": listing.wall_ms},
        pages=listing.pages,
        handshake=listing.handshake,
        wall_ms=listing.wall_ms,
        exact=exact_by,
    )


def measure(
    target: Target,
    tokenizer_names: Sequence[str] = (DEFAULT_TOKENIZER,),
    *,
    timeout_s: float = 30.0,
    top_fields: int = 10,
) -> Footprint:
    """Start ``target``, list its tools, stop it, and count them (tokenizers are checked before the start). A
    provider count that fails (no key, the API) is left out and its reason kept in :attr:`Footprint.errors`."""
    from promcp import tokenizers
    from promcp.footprint._provider import ExactCountError, exact_count, split_names

    names = list(dict.fromkeys(tokenizer_names)) or [DEFAULT_TOKENIZER]
    local, asked = split_names(names)
    for name in local:
        tokenizers.get(name)  # an unknown name fails before any server starts
    cfg = target.config()
    listing = list_tools(target, timeout_s=timeout_s, tokenizer=(local or [DEFAULT_TOKENIZER])[0])
    exact: list[ExactCount] = []
    errors: dict[str, str] = {}
    host_tools = [host_tool(t) for t in listing.tools]
    for name in asked:
        try:
            exact.append(exact_count(name, host_tools, timeout_s=timeout_s))
        except ExactCountError as exc:
            errors[name] = exc.message
    fp = footprint_of(
        listing,
        names,
        target=target.describe(),
        server=target.name or listing.handshake.get("server_name") or target.label,
        transport=cfg.transport,
        top_fields=top_fields,
        exact=exact,
    )
    fp.errors = errors
    return fp
