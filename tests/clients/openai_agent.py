"""A small off-the-shelf-style agent: the openai Python SDK (streaming Chat Completions, base URL and key from the
environment, as any OpenAI client) plus one MCP server over stdio through the mcp SDK.

``python -m tests.clients.openai_agent MODEL PROMPT -- SERVER COMMAND…``: lists the server's tools, offers them to
the model, runs each tool call on the server, and prints the final answer. It knows nothing of promcp: run under
``promcp record --api openai``, its LLM traffic goes through the proxy (``OPENAI_BASE_URL``) and the server command
given is a ``promcp proxy mcp -- …`` wrapper.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from openai import OpenAI


async def main(model: str, prompt: str, server: list[str]) -> str:
    client = OpenAI()
    params = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = (await session.list_tools()).tools
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in listed
        ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        for _ in range(5):
            stream = client.chat.completions.create(
                model=model,
                messages=messages,
                tools=tools,
                stream=True,
                stream_options={"include_usage": True},
            )
            text, calls = "", {}
            for chunk in stream:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for tc in choice.delta.tool_calls or ():
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = tc.id or slot["id"]
                        if tc.function is not None:
                            slot["name"] = tc.function.name or slot["name"]
                            slot["arguments"] += tc.function.arguments or ""
            if not calls:
                return text
            ordered = [calls[i] for i in sorted(calls)]
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in ordered
                    ],
                }
            )
            for c in ordered:
                result = await session.call_tool(c["name"], json.loads(c["arguments"] or "{}"))
                out = "\n".join(getattr(b, "text", "") for b in result.content)
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    return "(no answer after 5 rounds)"


if __name__ == "__main__":
    sep = sys.argv.index("--")
    print(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[sep + 1 :])))
