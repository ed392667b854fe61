"""Gemini CLI session logs (``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``, and the older
``session-<time>-<id>.json``) → one conversation each.

The ``.jsonl`` form is append-only: a header line (``sessionId``, ``projectHash``, ``startTime``, ``kind``), message
lines ``{id, timestamp, type: user|gemini|info|error…, content, thoughts, tokens, model, toolCalls}``, and patch
lines ``{"$set": {…}}`` that set fields of the session document (``lastUpdated``, or the whole ``messages`` list).
A message is written again, whole, under the same ``id`` when its tool calls are filled in: the last copy wins and
keeps the first one's place (that is how the format fills in tool calls: not reported as a problem). The ``.json`` form is the same
session as one document with a ``messages`` array.

What becomes what: a user message that is the CLI's ``<session_context>`` block is the conversation's hidden
context (``system``); any other user text starts a task; a user message of ``functionResponse`` parts is the
results going back. A ``gemini`` message is one LLM call: its text, its ``thoughts`` (subjects and descriptions) as
thinking, ``tokens`` as usage — ``input`` is the whole prompt with ``cached`` in it (cache reads), ``output`` the
answer and ``thoughts`` the reasoning on top (promcp's output = output + thoughts, as for the Gemini API,
:mod:`promcp.wire.gemini`) — and its ``toolCalls`` (``mcp_<server>_<tool>`` for MCP tools; ``result`` the
``functionResponse`` the model got back, ``status`` ``error`` for a failed call).

Timing, stated for what the file shows: timestamps are the CLI's clock when each message was written. A call runs
from the prompt or the results it answers to its message (``bounded``: client time included, no prefill split); a
tool call from its message to the results message (``bounded``: the CLI's scheduling and confirmation included).
The file has no system prompt and no tool definitions: the provider total's unexplained part is the ``system``
part ``unobserved`` (docs/import.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.collectors._problems import Problems
from promcp.collectors._stream import as_dict, as_list, as_text, clean_text, iter_jsonl, to_ns
from promcp.events import TimingQuality
from promcp.wire import Usage, compact_json
from promcp.wire.gemini import mcp_tool_of

__all__ = ["MAX_JSON_BYTES", "looks_like", "parse_file", "parse_session"]

#: an older single-document ``.json`` session is read whole: larger files are refused (one line, no traceback)
MAX_JSON_BYTES = 256 * 1024 * 1024
_SESSION_CONTEXT = "<session_context>"


def looks_like(text: str) -> bool:
    """Whether the first bytes (whitespace removed) are a Gemini CLI session log."""
    return '"projectHash"' in text and ('"sessionId"' in text or '"messages"' in text)


def _usage(tokens: Any) -> Usage | None:
    tokens = as_dict(tokens)

    def count(key: str) -> int | None:
        value = tokens.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    prompt, output, thoughts = count("input"), count("output"), count("thoughts")
    if prompt is None and output is None:
        return None
    return Usage(
        input_tokens=prompt,
        output_tokens=(output or 0) + (thoughts or 0),
        cache_read_tokens=count("cached"),
        reasoning_tokens=thoughts,
        reported=tokens,
    )


def _parts_text(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """(the text of a message's content, its functionResponse objects)."""
    if isinstance(content, str):
        return clean_text(content), []
    texts: list[str] = []
    responses: list[dict[str, Any]] = []
    for part in as_list(content):
        if isinstance(part, str):
            texts.append(clean_text(part))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(clean_text(part["text"]))
        elif isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            responses.append(part["functionResponse"])
    return "\n".join(texts), responses


def _result_text(result: Any) -> str:
    """What the model got back for a tool call: the ``functionResponse.response`` objects as compact JSON."""
    out = []
    for part in as_list(result):
        fr = as_dict(as_dict(part).get("functionResponse"))
        if fr:
            out.append(compact_json(fr.get("response", {})))
        elif isinstance(part, str):
            out.append(clean_text(part))
    return "\n".join(out)


def _thinking(thoughts: Any) -> str:
    out = []
    for t in as_list(thoughts):
        if isinstance(t, dict):
            out.append("\n".join(as_text(t.get(k)) for k in ("subject", "description") if t.get(k)))
        elif isinstance(t, str):
            out.append(t)
    return "\n".join(out)


class _Session:
    def __init__(self, conv: Conversation, problems: Problems) -> None:
        self.conv = conv
        self.problems = problems
        self.task: Task | None = None
        self.anchor: int | None = None
        self.waiting: list[ToolUse] = []

    def message(self, msg: dict[str, Any]) -> None:
        kind = as_text(msg.get("type"))
        ts = to_ns(msg.get("timestamp"))
        if kind == "user":
            self._user(msg.get("content"), ts)
        elif kind == "gemini":
            self._gemini(msg, ts)
        # info / error / warning messages are the CLI's own notes: nothing the model read or wrote

    def _user(self, content: Any, ts: int | None) -> None:
        text, responses = _parts_text(content)
        if responses:
            for use in self.waiting:
                start = use.call_span.start
                ok = start is not None and ts is not None and ts >= start
                use.result_span = Span(start, ts, TimingQuality.BOUNDED if ok else TimingQuality.NONE)
            self.waiting = []
            self.anchor = ts
        if text.lstrip().startswith(_SESSION_CONTEXT):
            self.conv.system = f"{self.conv.system}\n{text}" if self.conv.system else text
        elif text:
            self.task = Task(prompt=text, at=ts)
            self.conv.tasks.append(self.task)
            self.anchor = ts

    def _gemini(self, msg: dict[str, Any], ts: int | None) -> None:
        if self.task is None:
            self.problems.add(
                "no_prompt",
                "model messages before any prompt: a task with an unknown prompt was made",
                conversation=self.conv.id,
            )
            self.task = Task(prompt="", at=None, attrs={"prompt_missing": True})
            self.conv.tasks.append(self.task)
        text, _ = _parts_text(msg.get("content"))
        ordered = self.anchor is not None and ts is not None and ts >= self.anchor
        call = Call(
            output_text=text,
            thinking=_thinking(msg.get("thoughts")),
            span=Span(self.anchor, ts, TimingQuality.BOUNDED if ordered else TimingQuality.NONE),
            usage=_usage(msg.get("tokens")),
            model=as_text(msg.get("model")) or None,
        )
        for tc in as_list(msg.get("toolCalls")):
            if not isinstance(tc, dict):
                continue
            name = as_text(tc.get("name")) or "unknown"
            mcp = mcp_tool_of(name)
            result = tc.get("result")
            use = ToolUse(
                call_id=as_text(tc.get("id")) or None,
                name=name,
                tool=mcp[1] if mcp else name,
                server=mcp[0] if mcp else None,
                mcp=mcp is not None,
                arguments=compact_json(tc.get("args") if tc.get("args") is not None else {}),
                result=_result_text(result) if result is not None else None,
                is_error=as_text(tc.get("status")) == "error",
                call_span=Span(ts, ts, TimingQuality.NONE),
            )
            if as_text(tc.get("status")):
                use.attrs["client_status"] = as_text(tc.get("status"))
            call.tools.append(use)
            self.waiting.append(use)
        self.task.calls.append(call)
        self.anchor = ts


def _conversation(
    header: dict[str, Any], messages: Iterable[dict[str, Any]], problems: Problems, file: Path
) -> Conversation:
    conv = Conversation(
        id=as_text(header.get("sessionId")) or file.stem,
        created=to_ns(header.get("startTime")),
        updated=to_ns(header.get("lastUpdated")),
    )
    session = _Session(conv, problems)
    for msg in messages:
        session.message(msg)
    for task in conv.tasks:
        if conv.model is None:
            conv.model = next((c.model for c in task.calls if c.model), None)
    return conv


def parse_session(lines: Iterable[tuple[int, Any]], problems: Problems, file: Path) -> Conversation:
    """The lines of one ``.jsonl`` session: ``$set`` patches applied, re-written messages collapsed by id."""
    header: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}  # id -> the latest copy, in first-seen order
    for number, line in lines:
        if not isinstance(line, dict):
            problems.add(
                "bad_line", "a line that is not a JSON object skipped", line=number, detail="not-object"
            )
            continue
        patch = line.get("$set")
        if isinstance(patch, dict):
            for key, value in patch.items():
                if key == "messages" and isinstance(value, list):
                    messages = {}
                    for i, msg in enumerate(value):
                        if isinstance(msg, dict):
                            messages[as_text(msg.get("id")) or f"set{number}.{i}"] = msg
                else:
                    header[key] = value
            continue
        if "type" in line and ("id" in line or "timestamp" in line):
            messages[as_text(line.get("id")) or f"line{number}"] = line
        else:
            header.update({k: v for k, v in line.items() if k != "messages"})
            for i, msg in enumerate(as_list(line.get("messages"))):
                if isinstance(msg, dict):
                    messages[as_text(msg.get("id")) or f"line{number}.{i}"] = msg
    return _conversation(header, messages.values(), problems, file)


def parse_file(reader: Any, problems: Problems, file: Path) -> Iterator[Conversation]:
    """One session file, ``.jsonl`` or the older ``.json`` document, from ``reader`` (collectors/_stream.py)."""
    if file.suffix != ".json":
        yield parse_session(iter_jsonl(reader, problems), problems, file)
        return
    data = bytearray()
    while chunk := reader.read():
        data += chunk
        if len(data) > MAX_JSON_BYTES:
            problems.add("too_large", f"over {MAX_JSON_BYTES >> 20} MiB: not read", detail="json")
            return
    try:
        doc = json.loads(bytes(data))
    except ValueError as exc:
        problems.add("bad_json", f"not JSON: {exc}", detail="json")
        return
    if not isinstance(doc, dict):
        problems.add("bad_json", "not a JSON object (a Gemini CLI session is one)", detail="json")
        return
    yield parse_session([(1, doc)], problems, file)
