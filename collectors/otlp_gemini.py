"""OTLP in, the Gemini CLI: its telemetry log events (settings ``telemetry.enabled``, ``otlpProtocol: "http"``) →
conversations the import builder turns into events. Fed by :class:`promcp.collectors.otlp.ClaudeCodeSessions`,
which hands it every record named ``gemini_cli.*``.

Grouped by ``session.id`` (a conversation) and ``prompt_id`` (a task):

============================ ============================================================================
``gemini_cli.user_prompt``   a task begins (the prompt text only with ``telemetry.logPrompts``)
``gemini_cli.api_response``  one LLM call of the agent (``role: main``): ``input_token_count`` (the whole
                             prompt, ``cached_content_token_count`` included: cache reads),
                             ``output_token_count`` + ``thoughts_token_count`` (reasoning), ``duration_ms``
                             (the call, exact, no prefill split), model; other roles (``utility_router``…)
                             are the CLI's side calls: counted (``side_calls``), not rounds of the task
``gemini_cli.tool_call``     S3/S4 of the last call before it in the prompt: ``duration_ms`` (exact),
                             ``success``, ``function_args``; MCP tools by ``tool_type: mcp`` and
                             ``mcp_server_name`` (``function_name`` is ``mcp_<server>_<tool>``)
============================ ============================================================================

Everything else (``api_request``, ``gen_ai.client.inference.operation.details``, ``model_routing``, ``config``…) is
counted and left out; the spans (``llm_call``, ``tool_call``) and metrics carry the same figures. The CLI sends no
system instruction or tool declarations in these events, so every input token the texts do not explain lands in
the unobserved ``system`` part, as in an import of its session log.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.events import TimingQuality, TokenSource
from promcp.wire import Usage, compact_json
from promcp.wire.gemini import mcp_tool_of

if TYPE_CHECKING:
    from promcp.collectors.otlp import LogRecord

__all__ = ["PREFIX", "GeminiCliSessions"]

PREFIX = "gemini_cli."


def _int(v: Any) -> int:
    try:
        return max(int(float(v)), 0)
    except (TypeError, ValueError):
        return 0


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass
class _Prompt:
    task: Task
    last_ns: int = 0
    side_calls: int = 0
    calls: list[Call] = field(default_factory=list)


class GeminiCliSessions:
    """Gemini CLI log records → one :class:`Conversation` per finished prompt, per session (the same life cycle
    as Claude Code's: finished by the session's next prompt, by :meth:`idle`, or at :meth:`flush`; at most
    ``max_open`` prompts held)."""

    def __init__(self, *, max_open: int = 10_000) -> None:
        self.max_open = max_open
        self.open: dict[tuple[str, str], _Prompt] = {}

    def add(self, rec: LogRecord, now_ns: int | None = None) -> list[Conversation]:
        name = rec.name.removeprefix(PREFIX)
        session = str(rec.attrs.get("session.id") or rec.resource.get("session.id") or "session")
        prompt_id = rec.attrs.get("prompt_id")
        done: list[Conversation] = []
        if name == "user_prompt":
            done += [self._finish(k) for k in [k for k in self.open if k[0] == session]]
        if prompt_id is None or name not in ("user_prompt", "api_response", "tool_call"):
            return done
        key = (session, str(prompt_id))
        prompt = self.open.get(key)
        if prompt is None:
            if len(self.open) >= self.max_open:
                done.append(self._finish(next(iter(self.open))))
            text = rec.attrs.get("prompt") if name == "user_prompt" else None
            shown = text if isinstance(text, str) else ""
            task = Task(
                prompt=shown, at=rec.time_ns, attrs={"prompt_id": str(prompt_id), "resource": rec.resource}
            )
            if not shown:
                task.attrs["prompt_missing"] = True
            prompt = self.open[key] = _Prompt(task)
        prompt.last_ns = time.time_ns() if now_ns is None else now_ns
        if name == "api_response":
            self._call(prompt, rec)
        elif name == "tool_call":
            self._tool(prompt, rec)
        return done

    def idle(self, now_ns: int, idle_s: float) -> list[Conversation]:
        quiet = [k for k, p in self.open.items() if now_ns - p.last_ns > idle_s * 1e9]
        return [self._finish(k) for k in quiet]

    def flush(self) -> list[Conversation]:
        return [self._finish(k) for k in list(self.open)]

    def _call(self, prompt: _Prompt, rec: LogRecord) -> None:
        a = rec.attrs
        if str(a.get("role") or "main") != "main":
            prompt.side_calls += 1
            return
        keys = (
            "input_token_count",
            "output_token_count",
            "cached_content_token_count",
            "thoughts_token_count",
        )
        thoughts = _int(a.get("thoughts_token_count"))
        usage = Usage(
            input_tokens=_int(a.get("input_token_count")),
            output_tokens=_int(a.get("output_token_count")) + thoughts,
            cache_read_tokens=_int(a.get("cached_content_token_count")),
            reasoning_tokens=thoughts,
            source=TokenSource.PROVIDER,
            reported={k: a[k] for k in (*keys, "tool_token_count", "total_token_count") if k in a},
        )
        call = Call(model=str(a.get("model") or "") or None, usage=usage)
        end, duration = rec.time_ns, _float(a.get("duration_ms"))
        if end is not None and duration is not None:
            call.span = Span(end - int(duration * 1e6), end, TimingQuality.EXACT)  # the whole call, no split
        prompt.calls.append(call)
        prompt.task.calls.append(call)

    def _tool(self, prompt: _Prompt, rec: LogRecord) -> None:
        if not prompt.calls:
            return  # a tool call with no model call before it in this prompt: nothing to join it to
        a = rec.attrs
        name = str(a.get("function_name") or "tool")
        server = str(a.get("mcp_server_name") or "") or None
        mcp = str(a.get("tool_type")) == "mcp"
        split = mcp_tool_of(name, [server] if server else ())
        tool = split[1] if mcp and split else name
        end, duration = rec.time_ns, _float(a.get("duration_ms"))
        start = end - int(duration * 1e6) if end is not None and duration is not None else None
        quality = TimingQuality.EXACT if start is not None else TimingQuality.NONE
        ok = str(a.get("success")).lower() == "true"
        args = a.get("function_args")
        try:
            arguments = compact_json(json.loads(args)) if isinstance(args, str) else ""
        except ValueError:
            arguments = args if isinstance(args, str) else ""
        prompt.calls[-1].tools.append(
            ToolUse(
                call_id=None,
                name=name,
                tool=tool,
                server=server if mcp else None,
                mcp=mcp,
                arguments=arguments,
                result="",
                is_error=not ok,
                call_span=Span(start, start, quality),
                result_span=Span(start, end, quality),
                attrs={"texts_observed": False, "decision": str(a.get("decision") or "")},
            )
        )

    def _finish(self, key: tuple[str, str]) -> Conversation:
        prompt = self.open.pop(key)
        if prompt.side_calls:
            prompt.task.attrs["side_calls"] = prompt.side_calls
        return Conversation(id=f"{key[0]}:{key[1]}", created=prompt.task.at, tasks=[prompt.task])
