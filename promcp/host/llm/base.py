"""The LLM backend interface of the promcp host (``promcp run``): every backend implements :class:`LLMBackend`.

A backend turns a conversation plus tool definitions into one model response. The host (an asyncio agent loop,
because the mcp SDK client is asyncio) owns everything else: the conversation, MCP sessions, retries, events.

Contract
--------
``await backend.chat(messages, tools, sampling) -> Response``
    One LLM call, **no retries inside** (the host retries per the benchmark policy with :func:`call_with_retries`).
    ``messages`` is the whole conversation (system first); ``tools`` the tools offered on this call (empty: the
    model must answer). A blocking backend (llama.cpp) runs its work in a thread (``asyncio.to_thread``).
    Failures raise :class:`promcp.errors.LLMError` with ``error_type`` (``http_error``, ``timeout``,
    ``connection``, ``bad_response``, …) and ``status_code`` when HTTP; :func:`is_retryable` decides retries.

Attributes every backend sets
    ``name`` (registry name: ``llama-cpp``, ``ollama``, ``openai``, ``anthropic``), ``provider`` (the ``provider``
    column: ``llama.cpp``, ``ollama``, ``openai``, ``anthropic``, or the host of an OpenAI-compatible URL),
    ``model`` (the ``model`` column), ``tokenizer`` (a :mod:`promcp.tokenizers` object: the model's own vocabulary
    when known, e.g. ``gguf:<file>``, else ``tokenizers.get(tokenizers.for_model(model))``), ``context_window``
    (tokens, or ``None`` when unknown: then no overflow check is made).

Input tokens by origin
    Before each call the host asks ``backend.input_parts(messages, tools)`` for a list of
    :class:`~promcp.events.Part` (origin, key, tokens) - one part per message and per tool schema, counted with
    ``backend.tokenizer``. Keys follow docs/accounting.md: ``system``; ``prompt`` (user); ``msg:<index>``
    (history: assistant turns); the tool-call id (tool results); ``<server>/<tool>`` (schemas). The host uses
    the sum for the context-window check (a prompt that does not fit is a ``context_overflow`` event and is
    not sent). After the call:

    * ``response.usage.source == TokenSource.PROVIDER`` (cloud / Ollama usage): ``tokens_in`` is the provider's
      input total (``Usage.input_tokens``, which INCLUDES cache read/write tokens: :mod:`promcp.wire` normalises
      every provider's usage so); the parts are scaled to it (:mod:`promcp.stages.llm`, the one rule).
    * ``TokenSource.TOKENIZER`` (llama.cpp: exact counts under the model's vocabulary): the backend's
      ``input_parts`` already include the chat-template tokens of each message, so they sum to the prompt it
      evaluates; if ``usage.input_tokens`` differs anyway, the host scales the same way.

    The network backends count the pieces of the request body they send, split by :mod:`promcp.wire` (the same
    parser the instrumentation and the proxies use). The default :meth:`LLMBackend.input_parts` counts
    :meth:`LLMBackend.render_message` and :meth:`LLMBackend.render_tool` texts (the OpenAI-style rendering).

Timing
    ``Response.timing.total_ms`` is the call's wall time (monotonic); ``prompt_ms`` the prefill / time to first
    token when the backend knows it (llama.cpp, Ollama's ``prompt_eval_duration``), else ``None``. The stage
    builder splits the call there (prefill clamped to the total; input ``None`` with timing_quality ``none`` when
    the split is unknown).

Registry
    :func:`get_backend` ``(name, **opts)`` builds a backend by registry name; the modules of the network backends
    are imported lazily (``promcp.host.llm.ollama`` / ``.openai`` / ``.anthropic``, each defining the class named
    in :data:`BACKENDS`). ``opts`` come from the benchmark file's ``llm:`` section and CLI flags: ``model``,
    ``base_url``, ``api_key``, ``context_window``, ``tokenizer``, ``timeout_s``, and backend-specific extras; a
    backend raises :class:`~promcp.errors.ConfigError` for options it does not understand.
"""

from __future__ import annotations

import asyncio
import importlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from promcp.errors import ConfigError, LLMError
from promcp.events import Origin, Part, scale_parts
from promcp.tokenizers import CachedTokenizer
from promcp.wire import Output, ToolCall, Usage
from promcp.wire.mcp import tool_text
from promcp.wire.openai import calls_text

__all__ = [
    "BACKENDS",
    "LLMBackend",
    "Message",
    "Response",
    "RetryPolicy",
    "Sampling",
    "Timing",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call_with_retries",
    "get_backend",
    "is_retryable",
    "scale_parts",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model. ``name`` is what the model sees and calls (unique across servers)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    server: str = ""  # MCP server the tool belongs to
    tool: str = ""  # the tool's own name on that server (``name`` may be qualified, e.g. ``time__get_time``)

    @property
    def key(self) -> str:
        """The ``schemas`` part key: ``<server>/<tool>``."""
        return f"{self.server}/{self.tool or self.name}"


@dataclass
class Message:
    """One conversation message, with the origin its tokens are attributed to.

    ``origin``/``key`` are set by the host: system → (system, "system"); the task prompt → (user, "prompt");
    assistant turns → (history, "msg:<index>"); tool results → (tool_results, <tool-call id>).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # role "tool": the call answered
    name: str | None = None  # role "tool": the tool's name as the model called it
    origin: Origin = Origin.HISTORY
    key: str = ""
    is_error: bool = False  # role "tool": the call failed (invalid, tool error, server down)


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 512
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    #: "auto" (model decides), "required" (must call a tool), "none" (must answer); the host sets it per call
    tool_choice: str = "auto"


@dataclass(frozen=True)
class Timing:
    total_ms: float
    prompt_ms: float | None = None  # prefill / time to first token, when known


@dataclass
class Response:
    """One model response. ``usage`` is :class:`promcp.wire.Usage` (``source`` PROVIDER for an API's counts,
    TOKENIZER for a local engine's own, NONE when nothing was reported)."""

    content: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    timing: Timing
    finish_reason: str | None = None
    model: str | None = None  # as reported by the provider
    attrs: dict[str, Any] = field(default_factory=dict)  # backend extras (e.g. request id, server timings)
    response_id: str | None = None

    def output(self) -> Output:
        """The response as the stage builder reads it."""
        return Output(
            text=self.content or "",
            tool_calls=list(self.tool_calls),
            finish_reason=self.finish_reason,
            model=self.model,
            response_id=self.response_id,
            usage=self.usage,
        )


class LLMBackend(ABC):
    """Base class of the host's LLM backends (see the module docstring for the contract)."""

    name: ClassVar[str]
    provider: str
    model: str
    tokenizer: CachedTokenizer
    context_window: int | None = None

    @abstractmethod
    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> Response:
        """One LLM call (no retries)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections/models (called once when the run ends)."""

    # -- counting ----------------------------------------------------------------------------------------------

    def render_message(self, message: Message) -> str:
        """The text of ``message`` as the model sees it, for counting (default: content, then calls as JSON)."""
        text = message.content
        if message.tool_calls:
            calls = calls_text([{"name": c.name, "arguments": c.arguments} for c in message.tool_calls])
            text = f"{text}\n{calls}" if text else calls
        return text

    def render_tool(self, tool: ToolSpec) -> str:
        """The text of one tool definition as sent to the model, for counting (default: compact JSON of name,
        description and parameters, :func:`promcp.wire.mcp.tool_text`)."""
        return tool_text(tool.name, tool.description, tool.input_schema)

    def input_parts(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Part]:
        """Input tokens of a call by origin, counted locally with ``self.tokenizer`` (system, schemas, rest)."""
        count = self.tokenizer.count
        parts: list[Part] = []
        rest = list(messages)
        if rest and rest[0].role == "system":
            parts.append(Part(rest[0].origin, rest[0].key or "system", count(self.render_message(rest[0]))))
            rest = rest[1:]
        parts.extend(Part(Origin.SCHEMAS, t.key, count(self.render_tool(t))) for t in tools)
        for i, m in enumerate(rest, start=1):
            parts.append(Part(m.origin, m.key or f"msg:{i}", count(self.render_message(m))))
        return parts


# -- retries ----------------------------------------------------------------------------------------------------

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_RETRY_TYPES = frozenset({"timeout", "connection", "rate_limit", "overloaded", "server_error"})


@dataclass(frozen=True)
class RetryPolicy:
    """The evaluation card's retry rule: ``retries`` extra attempts, waiting ``backoff_s[i]`` (last one repeats)."""

    retries: int = 3
    backoff_s: tuple[float, ...] = (1.0, 2.0)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if not self.backoff_s:
            return 0.0
        return self.backoff_s[min(attempt, len(self.backoff_s)) - 1]


def is_retryable(exc: BaseException) -> bool:
    """Whether an LLM failure is worth retrying (timeouts, connection errors, 408/429/5xx)."""
    if isinstance(exc, LLMError):
        return exc.status_code in _RETRY_STATUS or exc.error_type in _RETRY_TYPES
    return isinstance(exc, TimeoutError | ConnectionError)


T = TypeVar("T")


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Await ``fn()``; on a retryable failure wait per ``policy`` and try again (``on_retry(attempt, exc, delay)``)."""
    attempt = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            if attempt >= policy.retries or not is_retryable(exc):
                raise
            attempt += 1
            # a server's Retry-After (LLMHTTPError.retry_after_s, capped by the backend) wins when longer
            delay = max(policy.delay(attempt), getattr(exc, "retry_after_s", None) or 0.0)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await sleep(delay)


# -- registry ---------------------------------------------------------------------------------------------------

#: Registry name → "module:Class". Modules are imported on first use.
BACKENDS: dict[str, str] = {
    "llama-cpp": "promcp.host.llm.llama_cpp:LlamaCppBackend",
    "ollama": "promcp.host.llm.ollama:OllamaBackend",
    "openai": "promcp.host.llm.openai:OpenAIBackend",
    "anthropic": "promcp.host.llm.anthropic:AnthropicBackend",
}


def get_backend(name: str, **opts: Any) -> LLMBackend:
    """Build the backend registered as ``name`` with ``opts`` (raises ConfigError for an unknown name)."""
    target = BACKENDS.get(name)
    if target is None:
        raise ConfigError(
            f"unknown LLM backend {name!r}; choose one of: {', '.join(BACKENDS)}", key="llm.backend"
        )
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(
                f"LLM backend {name!r} is not available in this build", key="llm.backend"
            ) from exc
        raise
    cls = getattr(module, cls_name)
    backend: LLMBackend = cls(**opts)
    return backend
