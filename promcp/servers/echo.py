"""echo: the smallest tool round trips (echo, reverse, word count)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from promcp.servers._serve import serve

mcp = MCPServer("echo", instructions="Echo a text back, reverse it, or count its words.", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def reverse(text: str) -> str:
    """Return the text reversed character by character."""
    return text[::-1]


@mcp.tool()
def word_count(text: str) -> int:
    """Count the words (whitespace-separated) in the text."""
    return len(text.split())


if __name__ == "__main__":
    serve(mcp)
