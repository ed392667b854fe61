"""dates: calendar arithmetic on ISO dates (YYYY-MM-DD). No clock is read, so answers never change."""

from __future__ import annotations

import datetime as dt

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from promcp.servers._serve import serve

mcp = MCPServer("dates", instructions="Calendar arithmetic on ISO dates (YYYY-MM-DD).", log_level="WARNING")


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError as exc:
        raise ToolError(f"not an ISO date (YYYY-MM-DD): {value!r}") from exc


@mcp.tool()
def days_between(start: str, end: str) -> int:
    """Number of days from start to end (negative if end is earlier). Dates are YYYY-MM-DD."""
    return (_date(end) - _date(start)).days


@mcp.tool()
def add_days(date: str, days: int) -> str:
    """The date that is `days` days after `date` (use a negative number to go back). Returns YYYY-MM-DD."""
    return (_date(date) + dt.timedelta(days=days)).isoformat()


@mcp.tool()
def weekday(date: str) -> str:
    """Day of the week of a date, e.g. Monday."""
    return _date(date).strftime("%A")


@mcp.tool()
def iso_week(date: str) -> str:
    """ISO year and week number of a date, e.g. 2024-W09."""
    year, week, _ = _date(date).isocalendar()
    return f"{year}-W{week:02d}"


if __name__ == "__main__":
    serve(mcp)
