"""Scripted LLM upstreams for end-to-end runs of real clients (Claude Code, the openai SDK) through the proxy.

A script plays a model that uses one MCP tool: on each request it reads the conversation like a model would and
streams (SSE, one chunk per event, as the APIs do) the next step:

* Anthropic (Claude Code): when the target tool is deferred and not loaded yet, a ``ToolSearch`` call selecting
  it; then a ``tool_use`` of the target with the scripted arguments; once its result is in the conversation, a
  final text answer quoting the start of that result;
* OpenAI Chat Completions: a streamed tool call of the target (arguments in fragments), then the answer;
* OpenAI Responses (Codex): a ``function_call`` of the target — inside its ``namespace`` when the client offers the
  MCP server's tools as one (``mcp__<server>`` holding ``<tool>``, as Codex does) — then the answer; a WebSocket
  upgrade is refused with ``426`` as an upstream without WebSocket does, other paths get ``404``.

Usage is counted from the request, deterministically, the way a provider reports it: input ≈ request bytes / 4,
the part already seen by the previous call read from the cache, three quarters of the rest written to it. Every
response has its own id; ``sent`` keeps the exact bytes of each response, ``usage`` what each reported.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from tests.stubs.llm_http import Drip, Reply, Request
from tests.stubs.llm_streams import SSE_HEADERS, anthropic_stream, openai_chunk, sse


@dataclass
class Scripted:
    tool: str  # the tool the model calls, as the client names it (e.g. mcp__memory__create_entities)
    arguments: dict[str, Any]
    answer: str = "Done: "
    delay_s: float = 0.0  # between two stream events
    request_ids: bool = True  # send a request-id header (a gateway in front of the API may not)
    sent: list[bytes] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _previous_total: int = 0

    def _usage(self, req: Request, out_text: str) -> dict[str, Any]:
        total = max(len(req.raw) // 4, 1)
        read = min(self._previous_total, total)
        write = (total - read) * 3 // 4
        self._previous_total = total
        return {
            "input_tokens": total - read - write,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
            "output_tokens": max(len(out_text) // 4, 1) + 10,
        }

    def _reply(self, data: list[bytes], n: int) -> Reply:
        self.sent.append(b"".join(data))
        headers = {**SSE_HEADERS, "request-id": f"req_{n:04d}"} if self.request_ids else dict(SSE_HEADERS)
        return Reply(200, Drip(data, delay_s=self.delay_s), headers)

    # -- Anthropic Messages ---------------------------------------------------------------------------------------

    def anthropic(self, req: Request) -> Reply:
        body = req.body
        n = next(self._ids)
        tools = {t.get("name"): t for t in body.get("tools") or ()}
        results = _anthropic_results(body)
        target_calls = [i for i, name in results.items() if name == self.tool]
        if self.tool in results.values() and target_calls:
            text = self.answer + str(_anthropic_result_text(body, target_calls[-1]))[:60]
            step, call = "answer", None
        elif (self.tool in tools and not tools[self.tool].get("defer_loading")) or _loaded(body, self.tool):
            text, step, call = "Calling the tool.", "tool", (f"toolu_{n:04d}", self.tool, self.arguments)
        elif "ToolSearch" in tools:
            query = {"query": f"select:{self.tool}", "max_results": 5}
            text, step, call = "Searching the tools.", "search", (f"toolu_{n:04d}", "ToolSearch", query)
        else:
            text, step, call = "No tool for this.", "answer", None
        self.steps.append(step)
        usage = self._usage(req, text + json.dumps(call[2] if call else ""))
        self.usage.append(usage)
        return self._reply(_anthropic_events(n, text, call, usage), n)

    # -- OpenAI Chat Completions ----------------------------------------------------------------------------------

    def openai(self, req: Request) -> Reply:
        body = req.body
        n = next(self._ids)
        messages = body.get("messages") or []
        answered = [m for m in messages if m.get("role") == "tool"]
        chunks: list[dict[str, Any]] = [openai_chunk({"role": "assistant", "content": None})]
        if answered:
            text = self.answer + str(answered[-1].get("content"))[:60]
            self.steps.append("answer")
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                chunks.append(openai_chunk({"content": piece}))
            chunks.append(openai_chunk({}, finish="stop"))
        else:
            text = json.dumps(self.arguments)
            self.steps.append("tool")
            head = {
                "index": 0,
                "id": f"call_{n:04d}",
                "type": "function",
                "function": {"name": self.tool, "arguments": ""},
            }
            chunks.append(openai_chunk({"tool_calls": [head]}))
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                chunks.append(openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
            chunks.append(openai_chunk({}, finish="tool_calls"))
        a = self._usage(req, text)
        usage = {
            "prompt_tokens": a["input_tokens"]
            + a["cache_read_input_tokens"]
            + a["cache_creation_input_tokens"],
            "completion_tokens": a["output_tokens"],
            "total_tokens": 0,
            "prompt_tokens_details": {"cached_tokens": a["cache_read_input_tokens"]},
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self.usage.append(usage)
        for chunk in chunks:
            chunk["id"] = f"chatcmpl-{n:04d}"
        chunks.append({**openai_chunk(None, usage=usage), "id": f"chatcmpl-{n:04d}"})
        data = [sse([(None, c)]) for c in chunks] + [sse([(None, "[DONE]")])]
        return self._reply(data, n)


@dataclass
class ScriptedResponses(Scripted):
    """The same model on the Responses API. ``end_delay_s``: the chunked terminator comes that long after
    ``response.completed`` (a client that hangs up on ``response.completed`` closes before it)."""

    end_delay_s: float = 0.0

    def responses(self, req: Request) -> Reply:
        if not req.path.rstrip("/").endswith("/responses"):
            return Reply(404, {"error": {"message": f"no route {req.path}", "type": "not_found"}})
        if not req.raw:  # GET with Upgrade: websocket — this upstream has no WebSocket
            return Reply(426, {"error": {"message": "WebSocket not supported", "type": "upgrade_required"}})
        body = req.body
        n = next(self._ids)
        items = list(body.get("input") or ())
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        namespace, name = _namespaced(self.tool, _responses_tools(body))
        response_items: list[dict[str, Any]] = []
        if outputs:
            text = self.answer + _output_text(outputs[-1].get("output"))[:60]
            self.steps.append("answer")
            response_items.append(
                {
                    "id": f"msg_{n:04d}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        else:
            text = json.dumps(self.arguments)
            self.steps.append("tool")
            call: dict[str, Any] = {
                "id": f"fc_{n:04d}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_{n:04d}",
                "name": name,
                "arguments": text,
            }
            if namespace:
                call["namespace"] = namespace
            response_items.append(call)
        a = self._usage(req, text)
        total = a["input_tokens"] + a["cache_read_input_tokens"] + a["cache_creation_input_tokens"]
        usage = {
            "input_tokens": total,
            "input_tokens_details": {"cached_tokens": a["cache_read_input_tokens"]},
            "output_tokens": a["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": total + a["output_tokens"],
        }
        self.usage.append(usage)
        rid = f"resp_{n:04d}"
        done = {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": str(body.get("model") or "gpt-scripted"),
            "output": response_items,
            "usage": usage,
        }
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {**done, "status": "in_progress", "output": [], "usage": None},
                },
            ),
        ]
        for index, item in enumerate(response_items):
            events.append(
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "status": "in_progress"},
                    },
                )
            )
            if item["type"] == "message":
                text_ = item["content"][0]["text"]
                for piece in (text_[: len(text_) // 2], text_[len(text_) // 2 :]):
                    events.append(
                        (
                            "response.output_text.delta",
                            {
                                "type": "response.output_text.delta",
                                "output_index": index,
                                "content_index": 0,
                                "item_id": item["id"],
                                "delta": piece,
                            },
                        )
                    )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                )
            )
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        for seq, (_, event) in enumerate(events):
            event["sequence_number"] = seq
        data = [sse([e]) for e in events]
        self.sent.append(b"".join(data))
        drip = Drip(data, delay_s=self.delay_s, end_delay_s=self.end_delay_s)
        return Reply(200, drip, {**SSE_HEADERS, "x-request-id": f"req_{n:04d}"})


def _responses_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools of a Responses request: ``tools``, and those an ``additional_tools`` input item carries."""
    tools = list(body.get("tools") or ())
    for item in body.get("input") or ():
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += list(item.get("tools") or ())
    return tools


def _namespaced(tool: str, tools: list[dict[str, Any]]) -> tuple[str | None, str]:
    """(namespace, name) the client offers ``tool`` (``mcp__server__name``) under."""
    for entry in tools:
        if entry.get("type") == "namespace":
            for inner in entry.get("tools") or ():
                if f"{entry.get('name')}__{inner.get('name')}" == tool:
                    return str(entry["name"]), str(inner["name"])
    return None, tool


def _output_text(output: Any) -> str:
    """A tool result's text (past Codex's ``Wall time: … Output:`` header, which differs from run to run)."""
    if isinstance(output, list):
        text = " ".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    else:
        text = output if isinstance(output, str) else json.dumps(output)
    return text.split("Output:", 1)[-1].strip()


def _anthropic_results(body: dict[str, Any]) -> dict[str, str]:
    """tool_use id → tool name, for every call of the conversation that has its result."""
    names: dict[str, str] = {}
    answered: set[str] = set()
    for msg in body.get("messages") or ():
        content = msg.get("content")
        if isinstance(content, str):
            continue
        for block in content or ():
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                answered.add(block.get("tool_use_id"))
    return {i: name for i, name in names.items() if i in answered}


def _anthropic_result_text(body: dict[str, Any], call_id: str) -> Any:
    for msg in body.get("messages") or ():
        for block in msg.get("content") if isinstance(msg.get("content"), list) else ():
            if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                return block.get("content")
    return None


def _loaded(body: dict[str, Any], tool: str) -> bool:
    return f'"tool_name": "{tool}"' in json.dumps(body.get("messages") or [])


def _anthropic_events(
    n: int, text: str, call: tuple[str, str, dict[str, Any]] | None, usage: dict[str, Any]
) -> list[bytes]:
    """One streamed message (tests/stubs/llm_streams.py's shapes) with this id, text, call and usage."""
    tool = None
    if call is not None:
        raw = json.dumps(call[2])
        tool = (call[0], call[1], [raw[: len(raw) // 2], raw[len(raw) // 2 :]])
    events = anthropic_stream(
        text=text,
        tool=tool,
        input_tokens=usage["input_tokens"],
        cache_read=usage["cache_read_input_tokens"],
        cache_write_5m=usage["cache_creation_input_tokens"],
        cache_write_1h=0,
        output_tokens=usage["output_tokens"],
    )
    events[0][1]["message"].update(id=f"msg_{n:04d}", model="claude-scripted-1")
    return [sse([event]) for event in events]


@dataclass
class Delegating:
    """A model that hands two subtasks to Claude Code's ``Agent`` tool at once (two parallel subagents, each
    answered by this same upstream), then answers once both results are back."""

    subtasks: tuple[str, ...] = ("SUBTASK A: say done", "SUBTASK B: say done")
    steps: list[str] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def anthropic(self, req: Request) -> Reply:
        n = next(self._ids)
        messages = req.body.get("messages") or []
        first = messages[0]["content"] if messages else ""
        first_text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
        usage = {
            "input_tokens": 50,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "output_tokens": 20,
        }
        sub = next((s for s in self.subtasks if s in first_text), None)
        if sub is not None:
            self.steps.append(f"sub:{sub[:9]}")
            events = _anthropic_events(n, f"{sub[:9]} done.", None, usage)
        elif len(_anthropic_results(req.body)) >= len(self.subtasks):
            self.steps.append("answer")
            events = _anthropic_events(n, "All subtasks are done.", None, usage)
        else:
            self.steps.append("delegate")
            calls = [
                (
                    f"toolu_agent{i}",
                    "Agent",
                    {
                        "description": f"subtask {i}",
                        "prompt": s,
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                )
                for i, s in enumerate(self.subtasks)
            ]
            events = _anthropic_events(n, "Delegating.", calls[0], usage)
            stop = events[-2:]
            for index, (call_id, name, args) in enumerate(calls[1:], start=2):
                start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
                events[-2:] = [
                    sse(
                        [
                            (
                                "content_block_start",
                                {"type": "content_block_start", "index": index, "content_block": start},
                            )
                        ]
                    ),
                    sse(
                        [
                            (
                                "content_block_delta",
                                {"type": "content_block_delta", "index": index, "delta": delta},
                            )
                        ]
                    ),
                    sse([("content_block_stop", {"type": "content_block_stop", "index": index})]),
                    *stop,
                ]
        return Reply(200, Drip(events), {**SSE_HEADERS, "request-id": f"req_{n:04d}"})


# -- Gemini API (Gemini CLI) --------------------------------------------------------------------------------------


@dataclass
class ScriptedGemini:
    """A Gemini API model (``:streamGenerateContent?alt=sse`` and ``:generateContent``) that calls ``tool`` (as the
    client names it, e.g. ``mcp_everything_echo``) with ``arguments``, then answers quoting the function response.

    Streams one ``data:`` chunk per part, ``usageMetadata`` only on the last chunk (as the API does): prompt ≈
    request bytes / 4 of which the previous call's total is cached, output by the text length, some thoughts.
    A ``:generateContent`` call (a side call: model routing, a JSON helper) gets a small JSON text answer and is
    kept in ``side``; ``usage`` holds the ``usageMetadata`` of each streamed (task) call, ``sent`` its bytes.
    """

    tool: str
    arguments: dict[str, Any]
    answer: str = "Echoed: "
    delay_s: float = 0.0
    sent: list[bytes] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    side: list[dict[str, Any]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _previous_total: int = 0

    def _usage(self, req: Request, out_text: str) -> dict[str, Any]:
        total = max(len(req.raw) // 4, 1)
        cached = min(self._previous_total, total)
        self._previous_total = total
        out = max(len(out_text) // 4, 1) + 3
        thoughts = 7
        return {
            "promptTokenCount": total,
            "candidatesTokenCount": out,
            "totalTokenCount": total + out + thoughts,
            "cachedContentTokenCount": cached,
            "thoughtsTokenCount": thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
        }

    def gemini(self, req: Request) -> Reply:
        n = next(self._ids)
        model = req.path.split("/models/", 1)[-1].split(":", 1)[0]
        if ":streamGenerateContent" not in req.path:
            usage = {"promptTokenCount": 40, "candidatesTokenCount": 5, "totalTokenCount": 45}
            self.side.append({"path": req.path, "usage": usage})
            body = {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [
                                {"text": '{"complexity_reasoning": "One tool call.", "complexity_score": 10}'}
                            ],
                        },
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": usage,
                "modelVersion": model,
                "responseId": f"side-{n:04d}",
            }
            return Reply(200, body)
        self.bodies.append(req.body)
        response = _gemini_function_response(req.body, self.tool)
        if response is not None:
            text = self.answer + json.dumps(response)[:120]
            parts: list[dict[str, Any]] = [{"text": text[: len(text) // 2]}, {"text": text[len(text) // 2 :]}]
            step, finish = "answer", "STOP"
        else:
            text = json.dumps(self.arguments)
            call = {"name": self.tool, "args": self.arguments}
            parts = [
                {"text": "Calling the tool."},
                {"functionCall": call, "thoughtSignature": "c2lnbmF0dXJl"},
            ]
            step, finish = "tool", "STOP"
        self.steps.append(step)
        usage = self._usage(req, text)
        self.usage.append(usage)
        chunks = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            chunk: dict[str, Any] = {
                "candidates": [candidate],
                "modelVersion": model,
                "responseId": f"resp-{n:04d}",
            }
            if last:
                candidate["finishReason"] = finish
                chunk["usageMetadata"] = usage
            else:
                chunk["usageMetadata"] = {
                    "promptTokenCount": usage["promptTokenCount"],
                    "trafficType": "ON_DEMAND",
                }
            chunks.append(sse([(None, chunk)]))
        self.sent.append(b"".join(chunks))
        return Reply(200, Drip(chunks, delay_s=self.delay_s), {**SSE_HEADERS})


def _gemini_function_response(body: dict[str, Any], tool: str) -> Any:
    """The ``functionResponse.response`` of ``tool`` in the conversation, if the client sent one back."""
    for content in body.get("contents") or ():
        for part in content.get("parts") or ():
            fr = part.get("functionResponse")
            if isinstance(fr, dict) and fr.get("name") == tool:
                return fr.get("response")
    return None
