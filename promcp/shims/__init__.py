"""``promcp.instrument()`` / ``promcp.uninstrument()``: record the stages of your own MCP host with one line.

``instrument()`` patches the mcp SDK 2.x client side (see :mod:`promcp.shims._mcp` for the hook targets) and,
when asked, the OpenAI / Anthropic Python SDKs (:mod:`promcp.shims._llm`). Events go to a :class:`~promcp.Recorder`
(the promcp store, same dataset layout as ``promcp run``) and, when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set or a ``span_exporter`` is given, as OpenTelemetry spans: the SDK's
own ``MCP send …`` spans enriched with ``promcp.*`` attributes. ``docs/instrument.md`` is the user guide.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from promcp.content import DEFAULT_MAX_CONTENT_BYTES
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.recorder import Recorder
from promcp.shims import _config, _deferred, _join, _mcp, _spans
from promcp.shims._patch import Patches

__all__ = [
    "flush",
    "instrument",
    "is_instrumented",
    "record_chat",
    "record_session",
    "uninstrument",
    "wrap_anthropic",
    "wrap_chat",
    "wrap_openai",
]

#: LLM client wrappers (S1/S2/S5/S6), imported on first use: see promcp.shims._llm and docs/instrument.md.
_LLM_NAMES = frozenset({"record_chat", "wrap_anthropic", "wrap_chat", "wrap_openai"})


def __getattr__(name: str) -> Any:
    if name in _LLM_NAMES:
        from promcp.shims import _llm

        return getattr(_llm, name)
    raise AttributeError(f"module 'promcp.shims' has no attribute {name!r}")


SUPPORTED_MCP = ">=2.3,<2.4"


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.patches: Patches | None = None
        self.recorder: Recorder | None = None
        self.owns_recorder = False
        self.tracing: _spans.Tracing | None = None


_state = _State()


def is_instrumented() -> bool:
    return _state.patches is not None


def instrument(
    out: str | Path = "traces/",
    *,
    topology: str = "l-cust",
    tokenizer: str = DEFAULT_TOKENIZER,
    recorder: Recorder | None = None,
    llm: bool = True,
    span_exporter: Any = None,
    benchmark: str | None = None,
    content: str = "redacted",
    max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
) -> Recorder:
    """Start recording: patch the mcp client (and the OpenAI/Anthropic SDKs when ``llm``), install a recorder.

    ``out``/``topology``/``benchmark``: where and how a new :class:`Recorder` writes (ignored when ``recorder`` is
    given; a given recorder is installed process-wide but not closed by :func:`uninstrument`). ``tokenizer``: the
    promcp tokenizer name for footprints (``o200k_base``, ``cl100k_base``, ``gguf:<path>``…). ``span_exporter``: an
    OpenTelemetry ``SpanExporter`` to send spans to (default: OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, else no spans). ``content``: how the texts behind the counts
    are kept — ``redacted`` (default: secrets removed), ``full`` or ``none``; ``max_content_bytes`` caps each
    stored text (docs/events.md). Returns the recorder. Raises
    :class:`~promcp.errors.InstrumentationError` when already instrumented or when the installed mcp lacks a hook
    target (nothing is patched then).
    """
    from promcp import tokenizers
    from promcp.errors import InstrumentationError

    with _state.lock:
        if _state.patches is not None:
            raise InstrumentationError(
                "promcp.instrument(): already instrumented (call uninstrument() first)"
            )
        counter = tokenizers.get(tokenizer)  # fails early (TokenizerError) on a bad name
        patches = Patches()
        try:
            _mcp.install(patches)
            if llm:
                from promcp.shims import _llm

                _llm.install(patches)
        except BaseException:
            patches.undo()
            raise
        _config.settings.tokenizer = counter
        owns = recorder is None
        rec = recorder or Recorder(
            out,
            topology=topology,
            source="instrument",
            benchmark=benchmark,
            meta={"tokenizer": counter.name},
            content=content,
            max_content_bytes=max_content_bytes,
        )
        rec.install_global()
        _state.patches, _state.recorder, _state.owns_recorder = patches, rec, owns
        try:
            _state.tracing = _spans.setup(patches, span_exporter, rec)
        except Exception as exc:  # spans are optional: the recorder still gets every event
            import logging

            logging.getLogger(__name__).warning("promcp: OpenTelemetry export disabled: %s", exc)
        return rec


def record_session(
    session: Any,
    recorder: Recorder,
    *,
    server: str | None = None,
    transport: str | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> None:
    """Record one MCP session (a ``ClientSession``, or an entered ``Client``) into ``recorder`` — no process-wide
    recorder, other sessions untouched. For a harness that owns its recorders (e.g. one per run).

    Installs promcp's hooks if :func:`instrument` has not (``uninstrument()`` removes them). ``server`` names the
    server in the events (default: the server's own ``serverInfo.name``). ``transport`` is needed only for a session
    whose transport was opened before the hooks were installed (then its start-up events are not recorded either);
    open the transport after calling :func:`instrument` or ``record_session`` on an earlier session to get them.
    """
    from promcp import tokenizers
    from promcp.events import Transport

    kind = Transport(transport) if transport is not None else None
    target = session.session if hasattr(session, "_session") and hasattr(session, "session") else session
    with _state.lock:
        if _state.patches is None:
            counter = tokenizers.get(tokenizer)
            patches = Patches()
            try:
                _mcp.install(patches)
            except BaseException:
                patches.undo()
                raise
            _config.settings.tokenizer = counter
            _state.patches, _state.recorder, _state.owns_recorder = patches, None, False
        _mcp.tag_session(target, recorder, server, kind)


def flush(recorder: Recorder | None = None) -> None:
    """Journal every event recorded so far (the hooks hand events over when the caller's task next yields, and
    tokens are counted on the recorder's worker thread); returns when they are on disk. Flushes the recorder of
    :func:`instrument`, or ``recorder`` (call ``flush(rec)`` before ``rec.close()`` with :func:`record_session`)."""
    _deferred.drain()
    rec = recorder or _state.recorder
    if rec is not None:
        rec.flush()


def uninstrument() -> Path | None:
    """Undo :func:`instrument`: restore every patched attribute, flush spans, and close (finalize to Parquet) the
    recorder that ``instrument()`` created. Returns the run's Parquet path (None if the recorder was the caller's).
    Safe to call when not instrumented."""
    from promcp.recorder import _global_recorder

    _deferred.drain()
    with _state.lock:
        patches, rec, owns = _state.patches, _state.recorder, _state.owns_recorder
        _state.patches, _state.recorder, _state.owns_recorder = None, None, False
        if patches is None:
            return None
        patches.undo()
        tracing, _state.tracing = _state.tracing, None
        if tracing is not None:
            if rec is not None:
                rec.flush()  # every row journaled, so the last export carries it (see _spans.RowCarrier)
            tracing.close()
            if rec is not None:
                rec.on_journal(None)
        _join.join.clear()
        _config.reset()
        if rec is None:
            return None
        if owns:
            return rec.close()
        rec.flush()
        if _global_recorder is rec:
            import promcp.recorder as recorder_mod

            recorder_mod._global_recorder = None
        return None
