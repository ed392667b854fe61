"""What a failed request to an MCP server was, by exception type and JSON-RPC code (promcp/host/servers/failures.py):
the same message text classified differently by type, so the classification cannot rest on the text."""

from __future__ import annotations

import json

import anyio
import pydantic
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from promcp.events import ERROR_TYPES, Status
from promcp.host.servers.failures import call_failure, connection_ended, startup_error_type


def _validation_error() -> pydantic.ValidationError:
    class Result(pydantic.BaseModel):
        content: list[str]

    try:
        Result.model_validate({"content": 3})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("no error")


def _json_error() -> json.JSONDecodeError:
    try:
        json.loads("{not json")
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError("no error")


@pytest.mark.parametrize(
    ("exc", "status", "error_type", "ended"),
    [
        (MCPError(code=CONNECTION_CLOSED, message="Connection closed"), Status.ERROR, "server_crashed", True),
        (MCPError(code=REQUEST_TIMEOUT, message="timed out"), Status.TIMEOUT, "timeout", False),
        (MCPError(code=INVALID_PARAMS, message="the stream was closed"), Status.ERROR, "mcp_error", False),
        (anyio.ClosedResourceError(), Status.ERROR, "server_crashed", True),
        (anyio.BrokenResourceError(), Status.ERROR, "server_crashed", True),
        (anyio.EndOfStream(), Status.ERROR, "server_crashed", True),
        (BrokenPipeError(32, "Broken pipe"), Status.ERROR, "server_crashed", True),
        (ExceptionGroup("task group", [anyio.ClosedResourceError()]), Status.ERROR, "server_crashed", True),
        (_json_error(), Status.ERROR, "protocol_error", False),
        (_validation_error(), Status.ERROR, "protocol_error", False),
        (RuntimeError("the connection was closed"), Status.ERROR, "mcp_error", False),  # text is not a type
        (ValueError("json parse failed"), Status.ERROR, "mcp_error", False),
    ],
)
def test_a_failure_is_classified_by_type_and_code(
    exc: BaseException, status: Status, error_type: str, ended: bool
) -> None:
    failure = call_failure(exc)
    assert (failure.status, failure.error_type) == (status, error_type)
    assert failure.error_type in ERROR_TYPES
    assert connection_ended(exc) is ended
    assert startup_error_type(exc) == ("server_exited" if ended else "protocol_error")
    if isinstance(exc, MCPError):
        assert failure.attrs == {"jsonrpc_code": exc.error.code}
