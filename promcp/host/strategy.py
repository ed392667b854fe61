"""One task's strategy in the host: the catalog, the router, and what the conversation used and found so far.

The decisions are :mod:`promcp.strategies.live`'s (the one definition the what-if counts as well); this module only
turns them into what the backends take: :class:`~promcp.host.llm.base.ToolSpec` objects for the definitions sent and
system messages of origin ``schemas`` for the texts beside them (the ``$defs`` block, the summary pool).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promcp.events import Origin
from promcp.host.llm.base import Message, ToolCall, ToolSpec
from promcp.strategies import live
from promcp.strategies.payloads import META
from promcp.strategies.routing import Router

#: Routers by (scorer, tool keys), shared by the tasks of one run (building one embeds every tool once).
RouterCache = dict[tuple[str, tuple[str, ...]], tuple[Router | None, str | None]]


def catalog_of(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The task's tools as the strategies read them (``name`` as the model sees it, ``server`` for the key)."""
    return [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema, "server": t.server}
        for t in tools
    ]


@dataclass
class StrategyState:
    spec: live.StrategySpec
    tools: Sequence[ToolSpec]
    catalog: list[dict[str, Any]]
    router: Router | None = None
    router_error: str | None = None
    used: list[int] = field(default_factory=list)
    found: list[int] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        spec: live.StrategySpec | None,
        tools: Sequence[ToolSpec],
        routers: RouterCache,
        factory: Callable[[Sequence[Mapping[str, Any]], Any], Router] | None = None,
    ) -> StrategyState | None:
        """The state of a task run under ``spec`` (``None`` without a strategy: every tool as listed)."""
        if spec is None:
            return None
        catalog = catalog_of(tools)
        router: Router | None = None
        error: str | None = None
        if spec.routed:
            key = (spec.scorer, tuple(t.key for t in tools))
            if key not in routers:
                routers[key] = live.make_router(spec, catalog, factory)
            router, error = routers[key]
        return cls(spec, tools, catalog, router, error)

    def plan(self, query: str) -> live.CallPlan:
        conversation = live.Conversation(query, tuple(self.used), tuple(self.found))
        return live.plan_call(
            self.spec, self.catalog, conversation, self.router, router_error=self.router_error
        )

    def specs(self, plan: live.CallPlan) -> tuple[list[ToolSpec], list[Message]]:
        """The plan as backends take it: the tools offered, and the texts beside them as ``schemas`` messages."""
        out: list[ToolSpec] = []
        for i, d in plan.sent:
            if i == META:
                out.append(
                    ToolSpec(
                        str(d["name"]),
                        str(d["description"]),
                        dict(d["inputSchema"]),
                        live.META_SERVER,
                        str(d["name"]),
                    )
                )
            else:
                t = self.tools[i]
                out.append(
                    ToolSpec(
                        t.name,
                        str(d.get("description") or ""),
                        dict(d.get("inputSchema") or {}),
                        t.server,
                        t.tool,
                    )
                )
        extra = [Message("system", text, origin=Origin.SCHEMAS, key=key) for key, text in plan.extra]
        return out, extra

    def note_used(self, name: str) -> None:
        for i, t in enumerate(self.tools):
            if t.name == name and i not in self.used:
                self.used.append(i)

    def serve(self, call: ToolCall) -> live.MetaResult:
        """Answer a meta-tool call (``search_tools`` or ``load_tool``); what it returns stays callable."""
        if call.name == "search_tools":
            answer = live.search(
                self.spec, self.catalog, self.router, call.arguments, router_error=self.router_error
            )
        else:
            answer = live.load(self.catalog, call.arguments)
        self.found.extend(i for i in answer.found if i not in self.found)
        return answer
