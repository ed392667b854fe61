"""Linking a run's LLM side to its MCP side after the fact: the S2 → S3 → S4 → S5 chain of an off-the-shelf client
recorded by two kinds of processes (an LLM-API proxy and one MCP proxy per server).

The LLM proxy's S2 events list every tool call the model asked for in ``attrs.tool_calls`` (``id``, ``name`` as the
model saw it, ``args`` = :func:`promcp.wire.arguments_digest`), and it derives an S3 / S4 pair per call from the
next request, which carries the result (``attrs.derived``; the S4 ends when that request arrived). An MCP proxy's
S3 / S4 carry the server, the tool, the arguments' digest (``attrs.args_digest`` on either, or the S3's whole
arguments preview) and exact timing, but no task and no tool-call id. :func:`link_tool_calls` joins them:

* a ``tools/call`` S3 without a task is matched to a call of the same tool — the name itself, Claude Code's
  ``mcp__<server>__<tool>`` or the Gemini CLI's ``mcp_<server>_<tool>`` — that the model asked for before it started (``CLOCK_SLACK_MS`` of clock slack between
  processes) and whose result was not yet sent back to the model (the derived S4's end; ``MAX_WAIT_MS`` when there
  is none);
* among candidates, equal arguments win (``attrs.join.quality = "arguments"``), else the earliest call of that
  name (``"name"``; ``"name_ambiguous"`` when several were waiting);
* the matched S3 and its S4 take the call's task, round and tool-call id; the derived pair of that call is dropped,
  the exact one replaces it. Calls no MCP proxy saw keep their derived pair (built-in tools such as Bash or
  ToolSearch, marked ``attrs.client_tool``).

A pure function over events: run it again on its own output and nothing changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from promcp.events import Event, Stage
from promcp.wire import arguments_digest
from promcp.wire.gemini import tool_name as gemini_tool_name

__all__ = ["CLOCK_SLACK_MS", "MAX_WAIT_MS", "link_tool_calls", "mcp_tool_of", "tool_calls_attr"]

CLOCK_SLACK_MS = 50.0
MAX_WAIT_MS = 3_600_000.0
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")


def mcp_tool_of(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of a tool name in Claude Code's ``mcp__<server>__<tool>`` form, or in the ``<server>/<tool>``
    form promcp gives a Responses namespace's tool (:func:`promcp.wire.openai_responses.namespaced`; a provider's
    tool names never hold ``/``), else None."""
    server, sep, tool = name.partition("/")
    if sep and server and tool:
        return server, tool
    if not name.startswith("mcp__"):
        return None
    server, sep, tool = name[5:].partition("__")
    return (server, tool) if sep and server and tool else None


def tool_calls_attr(calls: Sequence[Any]) -> list[dict[str, str]]:
    """The ``attrs.tool_calls`` of an S2: id, name and arguments digest of each call (``wire.ToolCall``)."""
    return [{"id": c.id, "name": c.name, "args": arguments_digest(c.join_arguments)} for c in calls]


@dataclass
class _Plan:
    call_id: str
    name: str
    args: str | None
    task_id: str | None
    round: int | None
    asked_ns: int
    answered_ns: int | None = None
    taken: bool = False


def _names_match(name: str, server: str | None, tool: str | None) -> bool:
    if not tool:
        return False
    if name == tool:
        return True
    if server is not None and name == gemini_tool_name(server, tool):  # the Gemini CLI's mcp_<server>_<tool>
        return True
    mcp = mcp_tool_of(name)
    return (
        mcp is not None and server is not None and mcp in ((server, tool), (_NOT_NAME.sub("_", server), tool))
    )


def _digest_of(event: Event) -> str | None:
    attrs = event.attrs or {}
    if isinstance(attrs.get("args_digest"), str):
        return str(attrs["args_digest"])
    text = event.req_preview
    if text and "…(+" not in text:  # a whole preview (not cut) is the arguments' compact JSON
        try:
            return arguments_digest(json.loads(text))
        except ValueError:
            return None
    return None


def _plans(events: Sequence[Event]) -> dict[str, _Plan]:
    plans: dict[str, _Plan] = {}
    for e in events:
        calls = (e.attrs or {}).get("tool_calls") if e.stage is Stage.S2 else None
        for c in calls or ():
            if isinstance(c, dict) and c.get("id") and e.t_end_ns is not None:
                plans[str(c["id"])] = _Plan(
                    str(c["id"]), str(c.get("name", "")), c.get("args"), e.task_id, e.round, e.t_end_ns
                )
    for e in events:
        if e.tool_call_id not in plans or e.stage not in (Stage.S3, Stage.S4):
            continue
        if (e.attrs or {}).get("derived"):
            if e.stage is Stage.S4:
                plans[e.tool_call_id].answered_ns = e.t_end_ns
        else:  # joined already (an earlier pass, or a source that saw both sides)
            plans[e.tool_call_id].taken = True
    return plans


def link_tool_calls(events: Sequence[Event]) -> list[Event]:
    """``events`` with every MCP ``tools/call`` joined to the model's call it carries out (see the module)."""
    plans = _plans(events)
    if not plans:
        return list(events)
    slack = int(CLOCK_SLACK_MS * 1e6)
    calls = [
        i
        for i, e in enumerate(events)
        if e.stage is Stage.S3
        and e.mcp_method == "tools/call"
        and e.tool_call_id is None
        and not (e.attrs or {}).get("derived")
        and e.t_start_ns is not None
    ]
    results = _results(events, calls)
    joined: dict[int, tuple[_Plan, dict[str, Any]]] = {}  # index of an S3 or S4 -> plan, join attrs
    for i in sorted(calls, key=lambda i: events[i].t_start_ns or 0):
        s3 = events[i]
        start = s3.t_start_ns or 0
        waiting = [
            p
            for p in plans.values()
            if not p.taken
            and _names_match(p.name, s3.server, s3.tool)
            and p.asked_ns - slack <= start
            and start
            <= (p.answered_ns if p.answered_ns is not None else p.asked_ns + int(MAX_WAIT_MS * 1e6)) + slack
        ]
        if not waiting:
            continue
        s4 = results.get(i)
        digest = _digest_of(s3) or (_digest_of(events[s4]) if s4 is not None else None)
        same = [p for p in waiting if digest is not None and p.args == digest]
        plan = min(same or waiting, key=lambda p: p.asked_ns)
        quality = "arguments" if same else ("name" if len(waiting) == 1 else "name_ambiguous")
        plan.taken = True
        join: dict[str, Any] = {"quality": quality, "after_plan_ms": round((start - plan.asked_ns) / 1e6, 3)}
        joined[i] = (plan, join)
        if s4 is not None:
            joined[s4] = (plan, join)
    late = _late_results(events, set(joined))
    if not joined and not late:
        return list(events)
    linked_ids = {plan.call_id for plan, _ in joined.values()}
    out: list[Event] = []
    for i, e in enumerate(events):
        if (e.attrs or {}).get("derived") and e.tool_call_id in linked_ids:
            continue  # the exact pair replaces the derived one
        if i in late:  # a result that arrived after its call was joined by an earlier pass: the call's link
            s3 = events[late[i]]
            extra = {k: v for k, v in (s3.attrs or {}).items() if k in ("join", "llm_tool_name")}
            out.append(
                e.replace(
                    task_id=s3.task_id,
                    round=s3.round,
                    tool_call_id=s3.tool_call_id,
                    attrs={**(e.attrs or {}), **extra},
                )
            )
            continue
        found = joined.get(i)
        if found is None:
            out.append(e)
            continue
        linked, how = found
        attrs = {**(e.attrs or {}), "join": how, "llm_tool_name": linked.name}
        out.append(
            e.replace(task_id=linked.task_id, round=linked.round, tool_call_id=linked.call_id, attrs=attrs)
        )
    return out


def _late_results(events: Sequence[Event], taken: set[int]) -> dict[int, int]:
    """index of an unlinked S4 -> index of its S3 that an earlier pass already joined (the S4 came later: a proxy's
    hand-off journaled it after the first merge of the run)."""
    linked = [
        i
        for i, e in enumerate(events)
        if e.stage is Stage.S3
        and e.mcp_method == "tools/call"
        and e.tool_call_id is not None
        and not (e.attrs or {}).get("derived")
        and e.t_start_ns is not None
    ]
    return {s4: s3 for s3, s4 in _results(events, linked).items() if s4 not in taken}


def _results(events: Sequence[Event], calls: Sequence[int]) -> dict[int, int]:
    """index of an S3 -> index of its S4: same server, tool and JSON-RPC id, the first one after it."""
    waiting: dict[tuple[str | None, str | None, str | None], list[int]] = {}
    for j, e in enumerate(events):
        if e.stage is Stage.S4 and e.tool_call_id is None and not (e.attrs or {}).get("derived"):
            waiting.setdefault((e.server, e.tool, e.jsonrpc_id), []).append(j)
    pairs: dict[int, int] = {}
    for i in sorted(calls, key=lambda i: events[i].t_start_ns or 0):
        s3 = events[i]
        candidates = waiting.get((s3.server, s3.tool, s3.jsonrpc_id), [])
        later = [j for j in candidates if (events[j].t_start_ns or 0) >= (s3.t_start_ns or 0)]
        if later:
            best = min(later, key=lambda j: events[j].t_start_ns or 0)
            candidates.remove(best)
            pairs[i] = best
    return pairs
