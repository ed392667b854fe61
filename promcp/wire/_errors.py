"""What an LLM API's error response says: the error type promcp records for an HTTP status, and the provider's own
message from an error body (the OpenAI, Anthropic, Ollama and Gemini shapes). Used by the host's network backends and by
the LLM proxy."""

from __future__ import annotations

import json

__all__ = ["error_message", "http_error_type"]

#: HTTP status → promcp ``error_type`` (Anthropic's 529 is "overloaded")
STATUS_TYPES: dict[int, str] = {
    400: "bad_request",
    401: "auth",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "too_large",
    429: "rate_limit",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "timeout",
    529: "overloaded",
}


def http_error_type(status: int) -> str:
    """The ``error_type`` of an HTTP error status (``http_error`` for one without a name of its own)."""
    return STATUS_TYPES.get(status, "http_error")


def error_message(body: bytes) -> str:
    """The provider's own error text from an error body (OpenAI, Anthropic and Ollama shapes), else the raw start."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            kind = err.get("type") or err.get("status") or err.get("code")
            msg = err.get("message") or json.dumps(err)[:300]
            return f"{kind}: {msg}" if kind else str(msg)
        if isinstance(err, str):
            return err
    return json.dumps(doc)[:300]
