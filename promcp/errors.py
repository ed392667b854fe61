"""promcp's exception hierarchy (public).

Every error promcp raises on purpose derives from :class:`PromcpError`, so callers can catch one type::

    PromcpError
    ├── ConfigError            a benchmark file, CLI argument or option is invalid (names file, key, line)
    ├── TraceError             a trace on disk is unusable
    │   ├── NotATraceError         the path holds no promcp journal or dataset
    │   ├── JournalError           a journal line is corrupt (names file and line)
    │   ├── RunInProgressError     a journal is still being written by a live process
    │   ├── SchemaVersionError     a file was written by a newer promcp schema
    │   └── StorageError           the disk refused a read or write (full, read-only, permissions): says what was kept
    ├── TokenizerError         an unknown tokenizer name, or a tokenizer file that fails to load or verify
    ├── ImportFormatError      an export file cannot be parsed (names file, conversation, offset)
    ├── ServerError            an MCP server failed to start, crashed, hung or spoke garbage
    ├── LLMError               an LLM backend failed after its retries
    │   └── LLMHTTPError           an LLM API answered with an HTTP error status (with its Retry-After hint)
    ├── WireFormatError        a provider's response lacks a field its wire format requires (names the path)
    ├── InstrumentationError   a hook target is missing from the installed mcp SDK
    └── ExportError            an OTLP destination of ``promcp export`` cannot be reached or refused the spans

Input that was partly usable (a skipped line, a skipped file) is not an error: it is logged as a warning on the
``promcp.*`` logger of the module that skipped it (``promcp.store.discovery``, ``promcp.store.journal``…), the one
channel every promcp problem goes through (docs/architecture.md, "Reporting problems"). :class:`PromcpWarning`, the
``warnings`` category such problems were issued as before, is kept for code that imports it; promcp no longer issues
it.
"""

from __future__ import annotations

from pathlib import Path


class PromcpError(Exception):
    """Base class of every error promcp raises on purpose."""


class ConfigError(PromcpError):
    """Invalid configuration: a benchmark file, CLI argument or option."""

    def __init__(
        self,
        message: str,
        *,
        source: str | Path | None = None,
        key: str | None = None,
        line: int | None = None,
    ) -> None:
        self.source = str(source) if source is not None else None
        self.key = key
        self.line = line
        #: the message without the place
        self.message = message
        where = ":".join(str(p) for p in (self.source, line) if p is not None)
        if key:
            where = f"{where} [{key}]" if where else f"[{key}]"
        super().__init__(f"{where}: {message}" if where else message)

    @classmethod
    def combine(cls, errors: list[ConfigError], *, more: int = 0) -> ConfigError:
        """One error listing several (one line each, each naming its place); the first one's place is kept."""
        if len(errors) == 1 and not more:
            return errors[0]
        first = errors[0]
        lines = [str(e) for e in errors]
        if more:
            lines.append(f"… and {more} more problem(s)")
        combined = cls(first.message, source=first.source, key=first.key, line=first.line)
        combined.args = ("\n".join(lines),)
        return combined


class TraceError(PromcpError):
    """A trace (journal or Parquet dataset) on disk cannot be used."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        super().__init__(f"{self.path}: {message}" if self.path else message)


class NotATraceError(TraceError):
    """The path exists but holds no promcp journal or dataset (or does not exist)."""


class JournalError(TraceError):
    """A journal line cannot be decoded."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None) -> None:
        self.line = line
        loc = f"line {line}: " if line is not None else ""
        super().__init__(f"{loc}{message}", path=path)


class RunInProgressError(TraceError):
    """A journal is still locked by the process recording it; it is finalized when that run ends."""


class SchemaVersionError(TraceError):
    """A file was written with a newer event schema than this promcp understands."""


class StorageError(TraceError):
    """The operating system refused a read or write of a dataset file (disk full, read-only, permissions).

    The message is one line: the path, the OS's reason, what was kept and how to finish.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, errno: int | None = None) -> None:
        self.errno = errno
        super().__init__(message, path=path)


class TokenizerError(PromcpError):
    """Unknown tokenizer name, or a tokenizer whose files are missing or fail verification."""


class ImportFormatError(PromcpError):
    """An export file (or a part of it) cannot be parsed."""


class ServerError(PromcpError):
    """An MCP server failed: did not start, crashed, hung past its timeout, or wrote non-protocol output."""

    def __init__(self, message: str, *, server: str | None = None, error_type: str = "server_error") -> None:
        self.server = server
        self.error_type = error_type
        super().__init__(f"server {server!r}: {message}" if server else message)


class LLMError(PromcpError):
    """An LLM backend call failed after the retry policy was exhausted."""

    def __init__(
        self, message: str, *, error_type: str = "llm_error", status_code: int | None = None
    ) -> None:
        self.error_type = error_type
        self.status_code = status_code
        super().__init__(message)


class LLMHTTPError(LLMError):
    """An LLM API answered with an HTTP error status; ``retry_after_s`` is its Retry-After hint (seconds), if any."""

    def __init__(
        self, message: str, *, error_type: str, status_code: int, retry_after_s: float | None = None
    ) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, error_type=error_type, status_code=status_code)


class WireFormatError(PromcpError):
    """A provider's request or response does not have the shape its wire format requires (strict parsing only).

    ``path`` names the missing or malformed field (``choices.0.message``, ``usage.input_tokens``…)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class InstrumentationError(PromcpError):
    """The installed mcp SDK lacks a hook target promcp.instrument() needs."""


class ExportError(PromcpError):
    """``promcp export``: the OTLP destination cannot be reached, or refused what was sent (says which and why)."""


class PromcpWarning(UserWarning):
    """Deprecated: no longer issued. Input that was partly usable (something skipped, the rest kept) is logged as a
    warning on a ``promcp.*`` logger instead; capture it with :mod:`logging` (pytest: ``caplog``). Kept so that code
    importing it or filtering on it still runs."""
