"""Task boundaries from raw LLM traffic (promcp/proxy/llm/_conversations.py) and the after-the-fact S2 → S3 join
(promcp/stages/link.py)."""

from __future__ import annotations

from typing import Any

from promcp.events import Event, Stage, TimingQuality
from promcp.proxy.llm._conversations import Conversations
from promcp.stages.clock import FakeClock
from promcp.stages.link import link_tool_calls, mcp_tool_of, tool_calls_attr
from promcp.wire import ToolCall, arguments_digest, conversation_blocks

CALL = ToolCall("toolu_1", "mcp__memory__read_graph", {})


def blocks(*messages: tuple[str, Any]) -> list[str]:
    return conversation_blocks("anthropic", {"messages": [{"role": r, "content": c} for r, c in messages]})


def test_rounds_of_one_task_then_a_new_task_in_the_same_conversation() -> None:
    clock = FakeClock()
    convs = Conversations()
    first = convs.place("sess-1234567890", blocks(("user", "hi")))
    assert (first.task_id, first.round, first.new_task) == ("sess-123-001", 1, True)
    convs.answered(first, ok=True, tool_calls=[CALL], end=clock.now())
    use = {"type": "tool_use", "id": "toolu_1", "name": CALL.name, "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{}"}
    second = convs.place("sess-1234567890", blocks(("user", "hi"), ("assistant", [use]), ("user", [result])))
    assert (second.task_id, second.round, second.new_task) == ("sess-123-001", 2, False)
    assert second.answered == (CALL,) and second.answered_round == 1
    convs.answered(second, ok=True, tool_calls=[], end=clock.now())
    # after the final answer, the user asks again in the same conversation: a new task
    third = convs.place(
        "sess-1234567890",
        blocks(
            ("user", "hi"), ("assistant", [use]), ("user", [result]), ("assistant", "done"), ("user", "more?")
        ),
    )
    assert (third.task_id, third.round, third.new_task) == ("sess-123-002", 1, True)


def test_the_same_prompt_again_after_an_answer_is_a_new_task() -> None:
    convs = Conversations()
    first = convs.place(None, blocks(("user", "hi")))
    convs.answered(first, ok=True)
    again = convs.place(None, blocks(("user", "hi")))
    assert (again.task_id, again.round, again.new_task, again.retry) == ("task-002", 1, True, False)


def test_merged_assistant_turns_still_continue_the_conversation() -> None:
    """Claude Code merges consecutive assistant turns (and their results) between two calls of one task."""
    convs = Conversations()
    s1 = {"type": "tool_use", "id": "s1", "name": "ToolSearch", "input": {"query": "q"}}
    r1 = {"type": "tool_result", "tool_use_id": "s1", "content": "loaded"}
    g1 = {"type": "tool_use", "id": "g1", "name": "mcp__m__read", "input": {}}
    r2 = {"type": "tool_result", "tool_use_id": "g1", "content": "{}"}
    a = convs.place("s", blocks(("user", "go")))
    convs.answered(a, ok=True, tool_calls=[ToolCall("s1", "ToolSearch", {"query": "q"})])
    b = convs.place(
        "s", blocks(("user", "go"), ("assistant", [{"type": "text", "text": "A"}, s1]), ("user", [r1]))
    )
    convs.answered(b, ok=True, tool_calls=[ToolCall("g1", "mcp__m__read", {})])
    merged = [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}, s1, g1]
    c = convs.place("s", blocks(("user", "go"), ("assistant", merged), ("user", [r1, r2])))
    assert (c.task_id, c.round) == (a.task_id, 3) and [t.id for t in c.answered] == ["g1"]


def test_failed_call_retried_and_sessions_and_subagents_kept_apart() -> None:
    convs = Conversations()
    first = convs.place("A", blocks(("user", "task")))
    convs.answered(first, ok=False)
    retry = convs.place("A", blocks(("user", "task")))
    assert (retry.task_id, retry.round, retry.retry) == (first.task_id, 2, True)
    convs.answered(retry, ok=True, tool_calls=[ToolCall("t1", "Agent", {"prompt": "look"})])
    # the same prompt in another client session is another task
    other = convs.place("B", blocks(("user", "task")))
    assert other.task_id == "B-001" and other.new_task
    # while A waits for its Agent tool, two subagent conversations start: each its own task under A's
    sub1 = convs.place("A", blocks(("user", "look at x")))
    sub2 = convs.place("A", blocks(("user", "look at y")))
    assert (sub1.task_id, sub1.parent_task) == (f"{first.task_id}/sub1", first.task_id)
    assert sub2.task_id == f"{first.task_id}/sub2"
    convs.answered(sub1, ok=True, tool_calls=[ToolCall("r", "Read", {})])
    convs.answered(sub2, ok=True)
    r = {"type": "tool_result", "tool_use_id": "r", "content": "file"}
    u = {"type": "tool_use", "id": "r", "name": "Read", "input": {}}
    sub1b = convs.place("A", blocks(("user", "look at x"), ("assistant", [u]), ("user", [r])))
    assert (sub1b.task_id, sub1b.round) == (sub1.task_id, 2)


def test_responses_api_chained_by_previous_response_id() -> None:
    convs = Conversations()
    a = convs.place(None, conversation_blocks("openai-responses", {"input": "hi"}))
    convs.answered(a, ok=True, tool_calls=[ToolCall("c1", "f", {})], response_id="resp_1")
    item = [{"type": "function_call_output", "call_id": "c1", "output": "x"}]
    b = convs.place(
        None, conversation_blocks("openai-responses", {"input": item}), previous_response_id="resp_1"
    )
    assert (b.task_id, b.round) == ("task-001", 2)


# -- the join ----------------------------------------------------------------------------------------------------


def _s2(call: ToolCall, t_ms: float, task: str = "t-001", rnd: int = 1) -> Event:
    ns = int(1e15 + t_ms * 1e6)
    return Event(
        stage=Stage.S2,
        task_id=task,
        round=rnd,
        t_start_ns=ns - 1000,
        t_end_ns=ns,
        tokens_out=5,
        tool_call_id=call.id,
        attrs={"tool_calls": tool_calls_attr([call])},
    )


def _mcp(stage: Stage, t_ms: float, server: str, tool: str, args: Any, rpc: str = "3") -> Event:
    ns = int(1e15 + t_ms * 1e6)
    attrs = {"args_digest": arguments_digest(args)} if stage is Stage.S3 else None
    return Event(
        stage=stage,
        t_start_ns=ns,
        t_end_ns=ns + 10,
        latency_ms=0.01,
        server=server,
        tool=tool,
        mcp_method="tools/call",
        jsonrpc_id=rpc,
        footprint_tokens=3,
        attrs=attrs,
    )


def _derived(stage: Stage, call: ToolCall, t_ms: float, end_ms: float) -> Event:
    mcp = mcp_tool_of(call.name)
    return Event(
        stage=stage,
        task_id="t-001",
        round=1,
        t_start_ns=int(1e15 + t_ms * 1e6),
        t_end_ns=int(1e15 + end_ms * 1e6),
        timing_quality=TimingQuality.NONE if stage is Stage.S3 else TimingQuality.BOUNDED,
        latency_ms=None if stage is Stage.S3 else end_ms - t_ms,
        server=mcp[0] if mcp else None,
        tool=mcp[1] if mcp else call.name,
        tool_call_id=call.id,
        attrs={"derived": "next_request", "client_tool": mcp is None},
    )


def test_link_joins_mcp_calls_on_arguments_and_drops_the_derived_pair() -> None:
    a = ToolCall("toolu_a", "mcp__memory__open_nodes", {"names": ["x"]})
    b = ToolCall("toolu_b", "mcp__memory__open_nodes", {"names": ["y"]})
    bash = ToolCall("toolu_c", "Bash", {"command": "ls"})
    s2 = _s2(a, 0.0)
    s2 = s2.replace(attrs={"tool_calls": tool_calls_attr([a, b, bash])})
    events = [
        s2,
        # the client runs b first: arguments, not order, decide
        _mcp(Stage.S3, 5, "memory", "open_nodes", {"names": ["y"]}, rpc="7"),
        _mcp(Stage.S4, 6, "memory", "open_nodes", None, rpc="7"),
        _mcp(Stage.S3, 7, "memory", "open_nodes", {"names": ["x"]}, rpc="8"),
        _mcp(Stage.S4, 9, "memory", "open_nodes", None, rpc="8"),
        *(_derived(st, c, 0.0, 20.0) for c in (a, b, bash) for st in (Stage.S3, Stage.S4)),
        _mcp(Stage.S3, 500, "memory", "open_nodes", {"names": ["z"]}, rpc="9"),  # after the results went back
    ]
    out = link_tool_calls(events)
    ids = [(e.stage, e.tool_call_id, (e.attrs or {}).get("derived")) for e in out]
    assert (Stage.S3, "toolu_b", None) in ids and (Stage.S4, "toolu_b", None) in ids
    assert (Stage.S3, "toolu_a", None) in ids and (Stage.S4, "toolu_a", None) in ids
    assert (Stage.S3, "toolu_c", "next_request") in ids  # Bash: no MCP call, the derived pair stays
    assert not any(d and tid in ("toolu_a", "toolu_b") for _, tid, d in ids)
    joined = next(e for e in out if e.tool_call_id == "toolu_b" and e.stage is Stage.S3)
    assert joined.task_id == "t-001" and joined.round == 1 and joined.jsonrpc_id == "7"
    assert joined.attrs is not None and joined.attrs["join"]["quality"] == "arguments"
    late = next(e for e in out if e.jsonrpc_id == "9")
    assert late.tool_call_id is None and late.task_id is None  # outside the window: not joined
    assert link_tool_calls(out) == out  # idempotent


def test_link_by_name_when_arguments_are_unknown() -> None:
    call = ToolCall("toolu_q", "get_time", {"tz": "UTC"})
    s3 = _mcp(Stage.S3, 3, "time", "get_time", {"tz": "UTC"}).replace(attrs=None, req_preview=None)
    out = link_tool_calls([_s2(call, 0.0), s3, _mcp(Stage.S4, 4, "time", "get_time", None)])
    assert [e.tool_call_id for e in out] == ["toolu_q", "toolu_q", "toolu_q"]
    assert out[1].attrs is not None and out[1].attrs["join"]["quality"] == "name"
    # the whole arguments preview (not cut) is as good as a digest
    s3p = s3.replace(req_preview='{"tz":"UTC"}')
    assert link_tool_calls([_s2(call, 0.0), s3p])[1].attrs["join"]["quality"] == "arguments"  # type: ignore[index]


def test_link_reads_the_digest_the_mcp_proxy_puts_on_the_result() -> None:
    """The MCP proxy's S3 carries a preview of the arguments (cut when long), its S4 the arguments' digest."""
    big = {"text": "x" * 1000}
    a, b = ToolCall("toolu_a", "echo", {"text": "y" * 1000}), ToolCall("toolu_b", "echo", big)
    s2 = _s2(a, 0.0).replace(attrs={"tool_calls": tool_calls_attr([a, b])})
    s3 = _mcp(Stage.S3, 3, "e", "echo", big).replace(attrs=None, req_preview='{"text":"xxxx…(+900 chars)')
    s4 = _mcp(Stage.S4, 4, "e", "echo", None).replace(attrs={"args_digest": arguments_digest(big)})
    out = link_tool_calls([s2, s3, s4])
    assert [e.tool_call_id for e in out[1:]] == ["toolu_b", "toolu_b"]
    assert out[1].attrs is not None and out[1].attrs["join"]["quality"] == "arguments"


def test_a_result_journaled_after_its_call_was_joined_takes_the_call_s_link() -> None:
    """A proxy killed by its client hands its unfinished S4 to a helper, which journals it after the run's first
    merge joined the S3: the next merge gives the S4 the S3's task, round and tool-call id."""
    call = ToolCall("toolu_q", "get_time", {"tz": "UTC"})
    s3 = _mcp(Stage.S3, 3, "time", "get_time", {"tz": "UTC"}, rpc="4")
    first = link_tool_calls([_s2(call, 0.0), s3])
    assert first[1].tool_call_id == "toolu_q" and first[1].task_id == "t-001"
    s4 = _mcp(Stage.S4, 3.01, "time", "get_time", None, rpc="4")
    assert s4.task_id is None and s4.tool_call_id is None
    again = link_tool_calls([*first, s4])
    assert (again[2].task_id, again[2].round, again[2].tool_call_id) == ("t-001", 1, "toolu_q")
    assert again[2].attrs is not None and again[2].attrs["join"] == first[1].attrs["join"]  # type: ignore[index]
    other = _mcp(Stage.S4, 3.02, "time", "get_time", None, rpc="5")  # another call's result: left alone
    assert link_tool_calls([*first, other])[2].tool_call_id is None
    assert link_tool_calls(again) == again  # idempotent


def test_a_namespaced_call_joins_its_own_server_not_a_bare_name_twin() -> None:
    """Codex's ``mcp__everything`` namespace call is named ``everything/echo`` (wire/openai_responses.py): it joins
    the MCP call of server ``everything`` and tool ``echo`` — not another server's ``echo`` with the same arguments,
    which a bare-name match would have taken first."""
    call = ToolCall("call_1", "everything/echo", {"message": "hi"})
    assert mcp_tool_of(call.name) == ("everything", "echo") and mcp_tool_of("echo") is None
    twin = _mcp(Stage.S3, 2, "other", "echo", {"message": "hi"}, rpc="1")
    mine = _mcp(Stage.S3, 3, "everything", "echo", {"message": "hi"}, rpc="2")
    out = link_tool_calls([_s2(call, 0.0), twin, mine])
    assert [(e.server, e.tool_call_id) for e in out[1:]] == [("other", None), ("everything", "call_1")]
    assert out[2].attrs is not None and out[2].attrs["join"]["quality"] == "arguments"
