"""The normalized shapes every provider's wire format is parsed into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from promcp.events import Origin, TokenSource


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of an LLM call's input as text: its origin and the stable key of docs/accounting.md.

    Keys: ``system``; a tool's name for ``schemas`` (sources rename it ``<server>/<tool>`` when they know the
    server); ``prompt`` for the first user message; ``msg:<index>`` (index in the request's message list) for
    history; the tool-call id for ``tool_results``.
    """

    origin: Origin
    key: str
    text: str


@dataclass
class ChatRequest:
    """An LLM request body, split into pieces by origin, in the order the provider renders the prompt.

    That order is the provider's prompt (and cache-prefix) order: OpenAI-style APIs put the leading system message
    first, then the tool definitions, then the conversation; the Anthropic Messages API renders tools, then system,
    then messages. ``assistant_turns`` counts the assistant turns already in the conversation (0: a first call).

    ``pieces`` hold what the model reads. A tool sent with ``defer_loading`` (Anthropic tool search) is not in the
    prompt until a tool search result references it: such definitions are in ``deferred`` (schema pieces, not part
    of the prompt) and their names in ``deferred_tools``; once referenced (``tool_reference`` blocks, ``loaded``),
    the definition is a schema piece like any other. ``tool_search`` names the tools that search the deferred ones.
    ``failed_results`` lists the tool-call ids whose result the client marked as an error (Anthropic ``is_error``).
    ``result_names`` maps a tool result's key to the name of the function it answers, where the wire format says
    (Gemini ``functionResponse.name``: a call the model sent without an id is matched to its result by name).
    ``side_call`` names a helper call the client makes beside the task (``json_mode``: structured output asked
    for without tools, as the Gemini CLI's model routing and checks do): recorded, but not a round of a task.
    """

    model: str | None = None
    pieces: list[Piece] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    assistant_turns: int = 0
    stream: bool = False
    deferred: list[Piece] = field(default_factory=list)
    deferred_tools: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    tool_search: list[str] = field(default_factory=list)
    failed_results: list[str] = field(default_factory=list)
    result_names: dict[str, str] = field(default_factory=dict)
    side_call: str | None = None
    n_tools: int | None = None  # callable tools, when not one per schema piece (Responses namespaces)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the parsed JSON object (``{}`` when the model's text is
    not one; ``raw_arguments`` keeps the text as emitted)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None

    @property
    def join_arguments(self) -> Any:
        """What the S2 → S3 join matches a ``tools/call`` on: the object, or the raw text when it was not one."""
        if self.arguments or self.raw_arguments is None:
            return self.arguments
        return self.raw_arguments


@dataclass(frozen=True)
class Usage:
    """Token usage of one call, normalized. ``input_tokens`` is the whole input INCLUDING cache reads and writes
    (Anthropic reports them apart: promcp adds them; OpenAI's ``prompt_tokens`` already includes
    ``cached_tokens``); the ``cache_*`` counts are subsets of it. ``reported`` keeps every field exactly as the
    provider reported it (nested objects kept), so nothing a provider says is lost before it becomes a column.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    #: Anthropic ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    #: reasoning / thinking output tokens (a subset of ``output_tokens``)
    reasoning_tokens: int | None = None
    source: TokenSource = TokenSource.PROVIDER
    reported: dict[str, Any] = field(default_factory=dict)

    @property
    def uncached_input_tokens(self) -> int | None:
        """Input tokens neither read from nor written to the cache."""
        if self.input_tokens is None:
            return None
        return max(self.input_tokens - (self.cache_read_tokens or 0) - (self.cache_write_tokens or 0), 0)


@dataclass
class Output:
    """A response, normalized: what the model said, the calls it asked for, and what the provider reported."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    response_id: str | None = None
    usage: Usage | None = None
    #: prefill duration as the server reports it (Ollama ``prompt_eval_duration``), ms
    prompt_ms: float | None = None
    #: other server-side durations (``generation_ms``, ``load_ms``, ``server_total_ms``), ms
    timings: dict[str, float] = field(default_factory=dict)
    thinking: str = ""
    #: an error the response itself reported (a 200 body with ``error``, a stream's ``error`` event)
    error: str | None = None
