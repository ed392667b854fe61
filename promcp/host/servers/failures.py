"""What a failed request to an MCP server was, decided by the exception's type and the JSON-RPC error code — never
by its message — and named in the ``error_type`` vocabulary (:data:`promcp.events.ERROR_TYPES`).

=======================================================  ==================================  =====================
exception                                                a ``tools/call``                    a start-up step
=======================================================  ==================================  =====================
``MCPError`` (a JSON-RPC error, or the SDK's own codes)  by code (:func:`promcp.wire.mcp.     ``server_exited`` for
                                                         jsonrpc_failure`): ``timeout``,     ``CONNECTION_CLOSED``,
                                                         ``server_crashed``, ``mcp_error``   else ``protocol_error``
the connection ended (anyio ``ClosedResourceError``,     ``server_crashed``                  ``server_exited``
``BrokenResourceError``, ``EndOfStream``; an OS
``ConnectionError`` such as a broken pipe)
an answer that does not read (``json.JSONDecodeError``,  ``protocol_error``                  ``protocol_error``
pydantic's ``ValidationError``, ``UnicodeDecodeError``)
anything else                                            ``mcp_error``                       ``protocol_error``
=======================================================  ==================================  =====================

A task group wraps the error in an exception group: the first error inside it is the one classified.
"""

from __future__ import annotations

import json

import anyio
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from promcp.events import Status
from promcp.stages import Failure
from promcp.wire import mcp

__all__ = ["call_failure", "connection_ended", "describe", "startup_error_type"]

#: The connection is gone: the stream was closed or broke, or the OS says the peer went away.
_ENDED = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError)
#: The server answered something that does not read as the message it should be.
_UNREADABLE = (json.JSONDecodeError, ValidationError, UnicodeDecodeError)


def _leaf(exc: BaseException) -> BaseException:
    """The error an exception group wraps (its first, recursively), or ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups (anyio task groups wrap the real error)."""
    exc = _leaf(exc)
    return f"{type(exc).__name__}: {exc}"


def connection_ended(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection to the server is gone (closed streams, or the SDK's
    ``CONNECTION_CLOSED`` code)."""
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return mcp.jsonrpc_failure(exc.error.code)[1] == "server_crashed"
    return isinstance(exc, _ENDED)


def call_failure(exc: BaseException) -> Failure:
    """A failed ``tools/call``: a JSON-RPC error by its code (``attrs.jsonrpc_code`` keeps it), a connection that
    ended as ``server_crashed``, an unreadable answer as ``protocol_error``, else ``mcp_error``."""
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        status, error_type = mcp.jsonrpc_failure(leaf.error.code)
        return Failure(status, error_type, describe(leaf), {"jsonrpc_code": leaf.error.code})
    if isinstance(leaf, _ENDED):
        return Failure(Status.ERROR, "server_crashed", describe(leaf))
    if isinstance(leaf, _UNREADABLE):
        return Failure(Status.ERROR, "protocol_error", describe(leaf))
    return Failure(Status.ERROR, "mcp_error", describe(leaf))


def startup_error_type(exc: BaseException) -> str:
    """The ``error_type`` of a start-up step (``ping``, ``initialize``, ``tools/list``) that raised ``exc``: the
    server went away (``server_exited``), else it did not speak the protocol (``protocol_error``)."""
    return "server_exited" if connection_ended(exc) else "protocol_error"
