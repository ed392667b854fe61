"""The agent loop of one task: plan → tool call → result → context update, until an answer or the round limit.

Per round it records one LLM call as an input event (S1 on round 1, S5 later; tokens by origin) and an output event
(S2 when the model asked for a tool, S6 when it answered), then S3/S4 per tool call — measured here and in
:mod:`promcp.host.servers`, built by :mod:`promcp.stages`.
Tool calls are checked like a real client does (known tool, arguments valid against the tool's input schema); an
invalid call is recorded (S3, status error, not sent) and answered with an error message to the model. A prompt
that does not fit the context window is a ``context_overflow`` input event (counted, never sent) and ends the task.

With a strategy (``promcp run --strategy``, the benchmark's ``strategy:``) every LLM call sends what
:func:`promcp.strategies.live.plan_call` decides: the chosen definitions, the texts beside them (the ``$defs`` block,
the summary pool) as ``schemas`` parts, and the meta tools the host serves itself (``search_tools``, ``load_tool``:
S3/S4 events of server ``promcp``). A call to a tool the plan did not offer is refused like an unknown tool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema

from promcp import stages
from promcp.errors import LLMError, ServerError
from promcp.events import Origin, Stage, Status
from promcp.host.config import Policy, TaskConfig
from promcp.host.llm.base import (
    LLMBackend,
    Message,
    Response,
    Sampling,
    ToolCall,
    ToolSpec,
    call_with_retries,
)
from promcp.host.servers.connection import ServerConnection
from promcp.host.servers.pool import ServerPool
from promcp.host.strategy import RouterCache, StrategyState
from promcp.recorder import Recorder, scope
from promcp.stages import SYSTEM_CLOCK, Clock, Failure, LLMCall, ToolsCall
from promcp.wire import arguments_are_valid_json

if TYPE_CHECKING:
    from promcp.strategies.live import CallPlan, MetaResult, StrategySpec


@dataclass
class TaskResult:
    task_id: str
    status: str = "ok"  # ok | error | timeout | context_overflow | max_rounds | cancelled
    rounds: int = 0
    answer: str | None = None
    tools_called: list[str] = field(default_factory=list)  # "server:tool"
    expected_hit: bool | None = None
    error: str | None = None
    llm_ms: float = 0.0
    tool_ms: float = 0.0
    init_ms: float = 0.0  # starting servers this task needed
    wall_ms: float = 0.0

    @property
    def overhead_ms(self) -> float:
        """Time of the task outside LLM calls and tool execution (the harness's own cost)."""
        return max(self.wall_ms - self.init_ms - self.llm_ms - self.tool_ms, 0.0)


Progress = Callable[[str, dict[str, Any]], None]


def tool_specs(conns: Sequence[ServerConnection]) -> list[ToolSpec]:
    """Tools offered to the model for a task: plain names, ``server__tool`` where two servers share a name."""
    seen: dict[str, int] = {}
    for c in conns:
        for t in c.tools:
            seen[t.name] = seen.get(t.name, 0) + 1
    specs: list[ToolSpec] = []
    for c in conns:
        for t in c.tools:
            name = t.name if seen[t.name] == 1 else f"{c.name}__{t.name}"
            specs.append(ToolSpec(name, t.description or "", dict(t.input_schema or {}), c.name, t.name))
    return specs


class Agent:
    def __init__(
        self,
        *,
        backend: LLMBackend,
        pool: ServerPool,
        recorder: Recorder,
        policy: Policy,
        sampling: Sampling,
        tool_choice: str,
        system_prompt: str,
        progress: Progress | None = None,
        clock: Clock = SYSTEM_CLOCK,
        strategy: StrategySpec | None = None,
    ) -> None:
        self.clock = clock
        self.backend = backend
        self.pool = pool
        self.rec = recorder
        self.policy = policy
        self.sampling = sampling
        self.tool_choice = tool_choice
        self.system_prompt = system_prompt
        self.progress = progress or (lambda _k, _d: None)
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._prompt: str | None = None
        self.strategy = strategy  # ``--strategy``: wins over the tasks' own (the file's ``strategy:`` keys)
        self._routers: RouterCache = {}

    async def run(self, task: TaskConfig) -> TaskResult:
        result = TaskResult(task.id)
        t0 = time.perf_counter_ns()
        with scope(task_id=task.id, model=self.backend.model, provider=self.backend.provider):
            try:
                await self._run(task, result)
            finally:
                result.wall_ms = (time.perf_counter_ns() - t0) / 1e6
        if task.expected_tools:
            result.expected_hit = all(e in result.tools_called for e in task.expected_tools)
        return result

    async def _connect(self, task: TaskConfig, result: TaskResult) -> list[ServerConnection] | None:
        conns: list[ServerConnection] = []
        for name in task.all_servers:
            self.progress("stage", {"task": task.id, "stage": f"INIT {name}"})
            try:
                conns.append(await self.pool.get(name))
            except ServerError as exc:
                if name in task.servers:
                    result.status, result.error = "error", str(exc)
                    return None
                # a distraction server that cannot start only shrinks the tool list
        return conns

    async def _run(self, task: TaskConfig, result: TaskResult) -> None:
        t0 = time.perf_counter_ns()
        conns = await self._connect(task, result)
        result.init_ms = (time.perf_counter_ns() - t0) / 1e6
        if conns is None:
            return
        by_name = {c.name: c for c in conns}
        tools = tool_specs(conns)
        spec_by_name = {t.name: t for t in tools}
        messages: list[Message] = [
            Message("system", task.system_prompt or self.system_prompt, origin=Origin.SYSTEM, key="system"),
            Message("user", task.prompt, origin=Origin.USER, key="prompt"),
        ]
        self._prompt = task.prompt
        state = StrategyState.start(self.strategy or task.strategy, tools, self._routers)
        max_rounds = task.max_rounds or self.policy.max_rounds
        called_any = False
        for rnd in range(1, max_rounds + 1):
            result.rounds = rnd
            with scope(round=rnd):
                choice = self.tool_choice
                if choice == "first":
                    choice = "auto" if called_any else "required"
                self.progress(
                    "stage",
                    {"task": task.id, "round": rnd, "stage": (Stage.S1 if rnd == 1 else Stage.S5).value},
                )
                plan = state.plan(task.prompt) if state else None
                call_tools, call_messages, allowed = tools, messages, spec_by_name
                if plan is not None and state is not None:
                    call_tools, extra = state.specs(plan)
                    call_messages = [messages[0], *extra, *messages[1:]]
                    allowed = {tools[i].name: tools[i] for i in plan.callable}
                response = await self._llm_call(task, rnd, call_messages, call_tools, choice, result, plan)
                if response is None:
                    return
                if not response.tool_calls:
                    result.answer = response.content or ""
                    result.status = "ok"
                    return
                messages.append(
                    Message(
                        "assistant",
                        response.content or "",
                        tool_calls=list(response.tool_calls),
                        origin=Origin.HISTORY,
                        key=f"msg:{len(messages)}",
                    )
                )
                for call in response.tool_calls:  # sequential tool execution (evaluation card)
                    called_any = True
                    if plan is not None and state is not None and call.name in plan.meta_tools:
                        text, failed = self._meta_call(call, state.serve(call), result)
                    else:
                        text, failed = await self._tool_call(task, call, allowed, by_name, result)
                        if state is not None and call.name in allowed:
                            state.note_used(call.name)
                    messages.append(
                        Message(
                            "tool",
                            text,
                            tool_call_id=call.id,
                            name=call.name,
                            origin=Origin.TOOL_RESULTS,
                            key=call.id,
                            is_error=failed,
                        )
                    )
        result.status = "max_rounds"

    def _meta_call(self, call: ToolCall, answer: MetaResult, result: TaskResult) -> tuple[str, bool]:
        """A meta tool the host serves itself: one S3/S4 pair of server ``promcp`` (it is a tool call the model
        made and a result it reads: part of the tax)."""
        from promcp.strategies.live import META_SERVER

        start = self.clock.now()
        end = self.clock.now()
        attrs: dict[str, Any] = {"meta_tool": True}
        if answer.routing_ms is not None:
            attrs["routing_ms"] = round(answer.routing_ms, 3)
        if answer.found:
            attrs["found"] = len(answer.found)
        failure = Failure(Status.ERROR, answer.error, answer.text) if answer.error else None
        measure = ToolsCall(
            tool=call.name,
            start=start,
            end=end,
            tokenizer=self.backend.tokenizer,
            sent=start,
            received=end,
            server=META_SERVER,
            tool_call_id=call.id,
            arguments=call.arguments,
            result={"content": [{"type": "text", "text": answer.text}], "isError": bool(answer.error)},
            failure=failure,
            put_text=self.rec.put_text,
            attrs=attrs,
        )
        result.tools_called.append(f"{META_SERVER}:{call.name}")
        with scope(server=META_SERVER, tool=call.name, tool_call_id=call.id):
            self._emit_tool(measure)
        return answer.text, answer.error is not None

    # -- LLM --------------------------------------------------------------------------------------------------------

    async def _llm_call(
        self,
        task: TaskConfig,
        rnd: int,
        messages: list[Message],
        tools: list[ToolSpec],
        tool_choice: str,
        result: TaskResult,
        plan: CallPlan | None = None,
    ) -> Response | None:
        backend = self.backend
        plan_attrs = plan.attrs() if plan is not None else {}
        parts = backend.input_parts(messages, tools)
        now = self.clock.now()
        call = LLMCall(
            provider=backend.provider,
            model=backend.model,
            round=rnd,
            start=now,
            end=now,
            tokenizer=backend.tokenizer,
            parts=parts,
            n_tools=len(tools),
            context_window=backend.context_window,
            prompt_text=self._prompt,
            put_text=self.rec.put_text,
        )
        overflow = stages.context_overflow_event(call, parts)
        if overflow is not None:
            self.rec.emit(overflow)
            local = sum(p.tokens for p in parts)
            result.status, result.error = (
                "context_overflow",
                f"prompt of {local} tokens does not fit {backend.context_window}",
            )
            return None
        sampling = Sampling(
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            max_tokens=self.sampling.max_tokens,
            seed=self.sampling.seed,
            stop=self.sampling.stop,
            tool_choice=tool_choice if tools else "none",
        )
        retries: list[str] = []

        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            retries.append(f"{type(exc).__name__}: {exc}")
            self.progress("stage", {"task": task.id, "stage": f"LLM retry {attempt} in {delay:g}s"})

        call.start = self.clock.now()
        try:
            response = await call_with_retries(
                lambda: backend.chat(messages, tools, sampling), self.policy.retry, on_retry=on_retry
            )
        except LLMError as exc:
            call.end = self.clock.now()
            call.failure = Failure.of(exc.error_type, str(exc))
            call.attrs_in = {**plan_attrs, "attempts": len(retries) + 1, "retry_errors": retries}
            self.rec.emit(stages.llm_input_event(call))
            result.llm_ms += call.start.ms_to(call.end)
            result.status, result.error = "error", str(exc)
            return None
        call.end = self.clock.now()
        # the whole backend call (prompt rendering, grammar, thread hand-off) counts as LLM time for the task
        result.llm_ms += call.start.ms_to(call.end)
        self._emit_llm(call, response, retries, plan_attrs)
        return response

    def _emit_llm(
        self, call: LLMCall, response: Response, retries: list[str], plan_attrs: dict[str, Any] | None = None
    ) -> None:
        """The call's input and output events (the backend's own timer gives the call's duration)."""
        call.output = response.output()
        call.total_ms = response.timing.total_ms
        call.prompt_ms = response.timing.prompt_ms
        attrs_in: dict[str, Any] = dict(plan_attrs or {})
        attrs_in.update({k: response.attrs[k] for k in _INPUT_ATTRS if k in response.attrs})
        if retries:
            attrs_in.update({"attempts": len(retries) + 1, "retry_errors": retries})
        call.attrs_in = attrs_in
        call.attrs_out = {k: response.attrs[k] for k in _OUTPUT_ATTRS if k in response.attrs}
        for event in stages.llm_call_events(call):
            self.rec.emit(event)

    # -- tools ------------------------------------------------------------------------------------------------------

    def _validator(self, spec: ToolSpec) -> jsonschema.protocols.Validator:
        v = self._validators.get(spec.key)
        if v is None:
            schema = spec.input_schema or {"type": "object"}
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            try:
                cls.check_schema(schema)
            except jsonschema.SchemaError:
                cls = jsonschema.Draft202012Validator
                schema = {"type": "object"}
            v = cls(schema)
            self._validators[spec.key] = v
        return v

    async def _tool_call(
        self,
        task: TaskConfig,
        call: ToolCall,
        specs: dict[str, ToolSpec],
        conns: dict[str, ServerConnection],
        result: TaskResult,
    ) -> tuple[str, bool]:
        spec = specs.get(call.name)
        tok = self.backend.tokenizer
        if spec is None:
            return self._invalid_pair(
                call,
                None,
                "unknown_tool",
                f"Error: unknown tool {call.name!r}. Available tools: {', '.join(specs)}",
            )
        if not arguments_are_valid_json(call.raw_arguments):
            return self._invalid_pair(
                call,
                spec,
                "invalid_arguments",
                f"Error: the arguments of {call.name} are not a JSON object: {(call.raw_arguments or '')[:200]!r}",
            )
        errors = sorted(self._validator(spec).iter_errors(call.arguments), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            where = "/".join(map(str, e.path)) or "arguments"
            return self._invalid_pair(
                call,
                spec,
                "invalid_arguments",
                f"Error: invalid arguments for {call.name}: {where}: {e.message}",
            )
        conn = conns[spec.server]
        if not conn.alive:  # crashed or hung on an earlier call of this task: restart it
            try:
                conn = await self.pool.get(spec.server)
                conns[spec.server] = conn
            except ServerError as exc:
                return self._invalid_pair(
                    call, spec, exc.error_type, f"Error: server {spec.server!r} is unavailable: {exc}"
                )
        self.progress("stage", {"task": task.id, "stage": f"S3/S4 {spec.server}:{spec.tool}"})
        with scope(server=spec.server, tool=spec.tool, tool_call_id=call.id, transport=conn.transport.value):
            outcome, measure = await conn.call(
                spec.tool,
                call.arguments,
                self.policy.tool_timeout_s,
                tokenizer=tok,
                tool_call_id=call.id,
                put_text=self.rec.put_text,
            )
            result.tool_ms += measure.start.ms_to(measure.end)
            result.tools_called.append(f"{spec.server}:{spec.tool}")
            self._emit_tool(measure)
        return outcome.text, outcome.status is not Status.OK

    def _emit_tool(self, measure: ToolsCall) -> None:
        """S3 and S4 of a tools/call, tokens counted on the recorder's worker."""
        self.rec.emit_later(lambda: stages.tool_request_event(measure))
        if measure.sent is not None:
            self.rec.emit_later(lambda: stages.tool_result_event(measure))

    def _invalid_pair(self, *args: Any) -> tuple[str, bool]:
        """An invalid or unsendable call: the error text for the model, flagged as an error result."""
        return self._invalid(*args), True

    def _invalid(self, call: ToolCall, spec: ToolSpec | None, error_type: str, message: str) -> str:
        now = self.clock.now()
        raw = call.raw_arguments
        measure = ToolsCall(
            tool=spec.tool if spec else call.name,
            start=now,
            end=now,
            tokenizer=self.backend.tokenizer,
            server=spec.server if spec else None,
            tool_call_id=call.id,
            arguments=call.arguments,
            arguments_text=raw if raw and not arguments_are_valid_json(raw) else None,
            failure=Failure(Status.ERROR, error_type, message),
            put_text=self.rec.put_text,
            attrs={"sent": False, "message": message},
        )
        with scope(tool_call_id=call.id):
            self._emit_tool(measure)
        return message


#: backend extras that describe a call's input / output side (llama.cpp prefix reuse, Ollama server timings…)
_INPUT_ATTRS = ("prefill_tokens", "reused_prefix_tokens")
_OUTPUT_ATTRS = ("parse_error", "generation_ms", "load_ms", "server_total_ms", "request_id")
