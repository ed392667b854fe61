"""The S2 → S3 join state the hooks share: the LLM wrappers add the model's tool calls and the tools a server
listed; the MCP hooks take a call's id when a ``tools/call`` goes out without one (see
:class:`promcp.stages.ToolCallJoin`)."""

from __future__ import annotations

from promcp.stages import ToolCallJoin

join = ToolCallJoin()
