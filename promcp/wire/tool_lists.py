"""The function tools of an LLM request body, read out and written back, per wire format: what a proxy that
rewrites the tool list in flight (``promcp proxy llm --strategy``) needs to know of each provider's shapes.

A request's function tools are read as :class:`WireTool` — the name the model calls it by, and its definition in
MCP's own form (``name``, ``description``, ``inputSchema``), the form :mod:`promcp.strategies` works on — each at a
*slot* (its place in ``tools``). :func:`write_tools` puts new definitions back at their slots, keeping every other
key of the entry as the client sent it (``cache_control``, ``strict``, ``defer_loading``…), and drops the slots not
given. Tools that are not functions (Anthropic server tools, Responses built-ins, Gemini ``googleSearch``) are never
read nor touched.

================  ==============================================  =========================================
``api``           a function tool                                   its schema key
================  ==============================================  =========================================
``anthropic``     ``tools[i]``                                      ``input_schema``
``openai``        ``tools[i].function`` (also ``ollama``)          ``parameters``
``openai-responses``  ``tools[i]`` (``type: function``), or ``tools[i].tools[j]`` in a ``namespace``
                  (named as :func:`promcp.wire.openai_responses.namespaced` names it)  ``parameters``
``gemini``        ``tools[i].functionDeclarations[j]``              ``parametersJsonSchema`` or ``parameters``
================  ==============================================  =========================================

:func:`called_tools` names the tools the model already called in the conversation; :func:`add_system_text` puts a
text beside the system prompt (dedup's ``$defs`` block).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promcp.wire.openai_responses import namespaced

__all__ = ["FAMILIES", "WireTool", "add_system_text", "called_tools", "read_tools", "write_tools"]

#: The wire formats whose tool lists can be read and written here.
FAMILIES = ("anthropic", "openai", "ollama", "openai-responses", "gemini")

Slot = tuple[int, int | None]


@dataclass(frozen=True)
class WireTool:
    """One function tool of a request: where it is (``slot``), the name the model calls, its definition in MCP form."""

    slot: Slot
    name: str
    definition: dict[str, Any]


def _mcp(name: str, description: Any, schema: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "description": description if isinstance(description, str) else ""}
    out["inputSchema"] = schema if isinstance(schema, Mapping) else {}
    return out


def _gemini_schema_key(decl: Mapping[str, Any]) -> str:
    return "parametersJsonSchema" if "parametersJsonSchema" in decl else "parameters"


def read_tools(api: str, body: Mapping[str, Any]) -> list[WireTool]:
    """The function tools of ``body`` (a request of ``api``), in the order sent."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return []
    out: list[WireTool] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            continue
        if api == "anthropic":
            if (
                "input_schema" in tool
                and isinstance(tool.get("name"), str)
                and tool.get("type", "custom") == "custom"
            ):
                out.append(
                    WireTool(
                        (i, None),
                        tool["name"],
                        _mcp(tool["name"], tool.get("description"), tool["input_schema"]),
                    )
                )
        elif api in ("openai", "ollama"):
            fn = tool.get("function")
            if (
                tool.get("type", "function") == "function"
                and isinstance(fn, Mapping)
                and isinstance(fn.get("name"), str)
            ):
                out.append(
                    WireTool(
                        (i, None), fn["name"], _mcp(fn["name"], fn.get("description"), fn.get("parameters"))
                    )
                )
        elif api == "openai-responses":
            kind = tool.get("type")
            if kind == "function" and isinstance(tool.get("name"), str):
                out.append(
                    WireTool(
                        (i, None),
                        tool["name"],
                        _mcp(tool["name"], tool.get("description"), tool.get("parameters")),
                    )
                )
            elif kind == "namespace" and isinstance(tool.get("tools"), list):
                for j, inner in enumerate(tool["tools"]):
                    if (
                        isinstance(inner, Mapping)
                        and inner.get("type", "function") == "function"
                        and isinstance(inner.get("name"), str)
                    ):
                        name = namespaced(tool.get("name"), inner["name"])
                        out.append(
                            WireTool(
                                (i, j), name, _mcp(name, inner.get("description"), inner.get("parameters"))
                            )
                        )
        elif api == "gemini":
            decls = tool.get("functionDeclarations")
            if isinstance(decls, list):
                for j, decl in enumerate(decls):
                    if isinstance(decl, Mapping) and isinstance(decl.get("name"), str):
                        schema = decl.get(_gemini_schema_key(decl))
                        out.append(
                            WireTool(
                                (i, j), decl["name"], _mcp(decl["name"], decl.get("description"), schema)
                            )
                        )
    return out


def _apply(entry: Mapping[str, Any], definition: Mapping[str, Any], schema_key: str) -> dict[str, Any]:
    """``entry`` with the description and schema of ``definition`` (keys the definition dropped are dropped)."""
    out = dict(entry)
    if "description" in definition:
        out["description"] = definition["description"]
    else:
        out.pop("description", None)
    if "inputSchema" in definition:
        out[schema_key] = definition["inputSchema"]
    return out


def write_tools(api: str, body: Mapping[str, Any], new: Mapping[Slot, Mapping[str, Any]]) -> dict[str, Any]:
    """A copy of ``body`` whose function tools are ``new`` (slot → MCP-form definition): a slot not in ``new`` is
    dropped, a container left empty (a namespace, a Gemini tool) too; other tools stay as sent."""
    out = dict(body)
    tools = body.get("tools")
    if not isinstance(tools, list):
        return out
    slots = {t.slot for t in read_tools(api, body)}
    result: list[Any] = []
    for i, tool in enumerate(tools):
        if api in ("anthropic", "openai", "ollama") or (
            api == "openai-responses" and isinstance(tool, Mapping) and tool.get("type") == "function"
        ):
            if (i, None) not in slots:
                result.append(tool)
            elif (i, None) in new:
                if api in ("openai", "ollama"):
                    result.append(
                        {**tool, "function": _apply(tool["function"], new[(i, None)], "parameters")}
                    )
                else:
                    key = "input_schema" if api == "anthropic" else "parameters"
                    result.append(_apply(tool, new[(i, None)], key))
            continue
        inner_key = "tools" if api == "openai-responses" else "functionDeclarations"
        inner = tool.get(inner_key) if isinstance(tool, Mapping) else None
        if not isinstance(inner, list) or not any((i, j) in slots for j in range(len(inner))):
            result.append(tool)
            continue
        kept = []
        for j, decl in enumerate(inner):
            if (i, j) not in slots:
                kept.append(decl)
            elif (i, j) in new:
                key = "parameters" if api == "openai-responses" else _gemini_schema_key(decl)
                kept.append(_apply(decl, new[(i, j)], key))
        if kept:
            result.append({**tool, inner_key: kept})
    out["tools"] = result
    return out


def called_tools(api: str, body: Mapping[str, Any]) -> list[str]:
    """The names of the tools the model called earlier in the conversation of ``body``, first call first."""
    names: dict[str, None] = {}
    if api == "gemini":
        for content in body.get("contents") or ():
            for part in (content.get("parts") if isinstance(content, Mapping) else None) or ():
                call = part.get("functionCall") if isinstance(part, Mapping) else None
                if isinstance(call, Mapping) and isinstance(call.get("name"), str):
                    names[call["name"]] = None
        return list(names)
    if api == "openai-responses":
        items = body.get("input")
        for item in items if isinstance(items, list) else ():
            if isinstance(item, Mapping) and item.get("type") == "function_call" and item.get("name"):
                names[namespaced(item.get("namespace"), item.get("name"))] = None
        return list(names)
    for msg in body.get("messages") or ():
        if not isinstance(msg, Mapping) or msg.get("role") != "assistant":
            continue
        if api == "anthropic":
            content = msg.get("content")
            for block in content if isinstance(content, list) else ():
                if (
                    isinstance(block, Mapping)
                    and block.get("type") == "tool_use"
                    and isinstance(block.get("name"), str)
                ):
                    names[block["name"]] = None
        else:
            for call in msg.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                    names[fn["name"]] = None
    return list(names)


def add_system_text(api: str, body: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of ``body`` with ``text`` as one more block of the system prompt (after the client's own)."""
    out = dict(body)
    if api == "anthropic":
        system = body.get("system")
        blocks = (
            [{"type": "text", "text": system}] if isinstance(system, str) and system else list(system or ())
        )
        out["system"] = [*blocks, {"type": "text", "text": text}]
    elif api in ("openai", "ollama"):
        messages = list(body.get("messages") or ())
        lead = 0
        while (
            lead < len(messages)
            and isinstance(messages[lead], Mapping)
            and messages[lead].get("role") in ("system", "developer")
        ):
            lead += 1
        out["messages"] = [*messages[:lead], {"role": "system", "content": text}, *messages[lead:]]
    elif api == "openai-responses":
        instructions = body.get("instructions")
        out["instructions"] = (
            f"{instructions}\n\n{text}" if isinstance(instructions, str) and instructions else text
        )
    elif api == "gemini":
        system = copy.deepcopy(body.get("systemInstruction") or body.get("system_instruction"))
        key = (
            "system_instruction"
            if "system_instruction" in body and "systemInstruction" not in body
            else "systemInstruction"
        )
        if isinstance(system, str):
            system = {"parts": [{"text": system}]}
        if not isinstance(system, dict):
            system = {"parts": []}
        system["parts"] = [*(system.get("parts") or []), {"text": text}]
        out[key] = system
    return out
