"""Stage builders: plain measurements in, :class:`~promcp.events.Event` rows out — the one place each stage's
token, latency, origin and timing-quality rule lives (docs/accounting.md points here rule by rule).

Every live source — the ``promcp run`` host, the ``promcp.instrument()`` shims, a recording proxy, an OTLP
receiver — measures (instants from one :class:`Clock`, texts, usage, wire sizes, ids) and hands plain values to
these functions; the importers hand an exported conversation's calls to :mod:`promcp.stages.imported`. The builders hold no recorder and no SDK
object: they return events, and a source journals them (``Recorder.emit`` / ``emit_later``). Builders that count
tokens are meant to run inside ``Recorder.emit_later``, off the traced call's path.

=========================================  ===============================================================
builder                                    events
=========================================  ===============================================================
:func:`startup_event`                      INIT ``spawn`` / ``ready`` (or a start-up phase that failed)
:func:`initialize_event`                   INIT ``initialize`` / ``server/discover`` (``probe``: a refused discover)
:func:`tools_discovery_event`              INIT ``tools_discovery`` (one ``tools/list`` page)
:func:`llm_input_event`                    S1 / S5 of an :class:`LLMCall`
:func:`llm_output_event`                   S2 / S6 of an :class:`LLMCall` (None for a failed call)
:func:`context_overflow_event`             the S1 / S5 of a prompt that does not fit (never sent)
:func:`tool_request_event`                 S3 of a :class:`ToolsCall`
:func:`tool_result_event`                  S4 of a :class:`ToolsCall` (None when never sent)
:func:`message_event`                      MCP ``protocol``: other MCP traffic (resources, prompts, ping, …)
:func:`failed_step_event`                  a step that failed as a whole (a task, an unreadable request)
:func:`imported_input_event`               S1 / S5 of an exported call (:mod:`promcp.stages.imported`)
:func:`imported_output_event`              S2 / S6 of an exported call
:func:`imported_tool_events`               S3 + S4 of an exported tool use
=========================================  ===============================================================

:class:`ToolCallJoin` links a model's tool call (S2) to the ``tools/call`` that carries it out (S3/S4).
"""

from __future__ import annotations

from promcp.stages._common import Failure, PutText, failure_status
from promcp.stages.clock import SYSTEM_CLOCK, Clock, FakeClock, Instant
from promcp.stages.failed import failed_step_event
from promcp.stages.imported import (
    ImportContext,
    ImportedCall,
    ImportedToolUse,
    Interval,
    imported_input_event,
    imported_output_event,
    imported_output_text,
    imported_tool_events,
)
from promcp.stages.join import ToolCallJoin
from promcp.stages.llm import (
    LLMCall,
    context_overflow_event,
    input_parts,
    llm_call_events,
    llm_input_event,
    llm_output_event,
    output_text,
    usage_attrs,
    usage_columns,
)
from promcp.stages.protocol import message_event
from promcp.stages.startup import initialize_event, startup_event, tool_footprints, tools_discovery_event
from promcp.stages.tools import (
    Counted,
    ToolsCall,
    forwarded_text,
    tool_request_event,
    tool_result_event,
    tools_call_events,
)

__all__ = [
    "SYSTEM_CLOCK",
    "Clock",
    "Counted",
    "Failure",
    "FakeClock",
    "ImportContext",
    "ImportedCall",
    "ImportedToolUse",
    "Instant",
    "Interval",
    "LLMCall",
    "PutText",
    "ToolCallJoin",
    "ToolsCall",
    "context_overflow_event",
    "failed_step_event",
    "failure_status",
    "forwarded_text",
    "imported_input_event",
    "imported_output_event",
    "imported_output_text",
    "imported_tool_events",
    "initialize_event",
    "input_parts",
    "llm_call_events",
    "llm_input_event",
    "llm_output_event",
    "message_event",
    "output_text",
    "startup_event",
    "tool_footprints",
    "tool_request_event",
    "tool_result_event",
    "tools_call_events",
    "tools_discovery_event",
    "usage_attrs",
    "usage_columns",
]
