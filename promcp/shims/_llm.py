"""LLM client wrappers: S1/S5 (input by origin) and S2/S6 (output) events from user code.

A wrapped call snapshots its request on the caller's path (shallow copies), times the call with the shims' clock,
parses the response (:mod:`promcp.wire`), remembers the model's tool calls for the S2 → S3 join
(:mod:`promcp.shims._join`) and hands the rest to the stage builder (:mod:`promcp.stages.llm`) on the recorder's
worker thread: the request is split into origins and counted there. Round: ``promcp.scope(round=…)`` when set, else
1 + the assistant turns already in the request. Streamed responses (``stream=True``) are recorded when the stream
ends, with the time to the first chunk as the prefill.

Supported: the OpenAI Python SDK (``chat.completions.create`` and ``responses.create``, sync and async), the
Anthropic Python SDK (``messages.create``, sync and async) — patched process-wide by ``promcp.instrument(llm=True)``
or per client with :func:`wrap_openai` / :func:`wrap_anthropic` — and any chat function of the host's own
(llama-cpp-python's ``create_chat_completion``, an Ollama ``/api/chat`` call, an OpenAI-compatible HTTP call) via
:func:`wrap_chat` or :func:`record_chat`.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from promcp import stages
from promcp import wire as wirefmt
from promcp.events import Status
from promcp.recorder import Recorder, current_recorder, current_scope
from promcp.shims import _deferred, _join, _spans
from promcp.shims._config import settings, tokenizer_for
from promcp.shims._patch import Patches, guard
from promcp.stages import Failure, Instant, LLMCall

__all__ = ["record_chat", "wrap_anthropic", "wrap_chat", "wrap_openai"]


class _Request:
    """The request, snapshotted on the caller's path (shallow list copies), parsed on the recorder's worker thread.

    Rendering tool schemas and messages to text costs ~1 ms for 50 tools: kept off the call's path like the counting.
    """

    _KEYS = ("model", "messages", "tools", "system", "input", "instructions")

    def __init__(
        self, api: wirefmt.API, provider: str, model: str | None, request: Mapping[str, Any]
    ) -> None:
        self.api, self.provider = api, provider
        self.snapshot: dict[str, Any] = {
            k: list(v) if isinstance(v, list | tuple) else v for k, v in request.items() if k in self._KEYS
        }
        requested = self.snapshot.get("model")
        self.model: str | None = model or (str(requested) if requested is not None else None)

    @functools.cached_property
    def parsed(self) -> wirefmt.ChatRequest:
        return wirefmt.parse_request(self.api, self.snapshot)


def _failure(exc: BaseException) -> Failure:
    name = type(exc).__name__
    if "timeout" in name.lower():
        return Failure(Status.TIMEOUT, "timeout", f"{name}: {exc}")
    if "cancel" in name.lower():
        return Failure(Status.CANCELLED, "cancelled", f"{name}: {exc}")
    return Failure(Status.ERROR, name, f"{name}: {exc}")


def _emit(
    rec: Recorder,
    request: _Request,
    out: wirefmt.Output | None,
    start: Instant,
    end: Instant,
    span: Any,
    exc: BaseException | None,
    prompt_ms: float | None = None,
) -> None:
    _deferred.drain()  # MCP events still deferred come first (journal order = call order)
    scope_round = current_scope().round
    for call in out.tool_calls if out else ():
        _join.join.add(call.name, call.join_arguments, call.id)
    failure = _failure(exc) if exc is not None else None
    if failure is None and out is None:
        failure = Failure(Status.ERROR, "unparsed_response")
    if span is not None:
        _spans.end_chat_span(
            span, out, type(exc).__name__ if exc is not None else None, str(exc) if exc else None
        )
    ids = _spans.span_ids(span)
    schema_keys = _join.join.schema_keys()

    @functools.cache
    def measured() -> LLMCall:  # on the recorder's worker: parse and count the request here
        parsed = request.parsed
        return LLMCall(
            provider=request.provider,
            model=request.model,
            round=scope_round or parsed.assistant_turns + 1,
            start=start,
            end=end,
            tokenizer=tokenizer_for(request.model),
            pieces=parsed.pieces,
            schema_keys=schema_keys,
            output=out,
            prompt_ms=prompt_ms,
            failure=failure,
            put_text=rec.put_text,
            span_ids=ids,
        )

    rec.emit_later(lambda: stages.llm_input_event(measured()))
    if failure is None:
        rec.emit_later(lambda: stages.llm_output_event(measured()))


def record_chat(
    *,
    provider: str,
    request: Mapping[str, Any],
    response: Any = None,
    error: BaseException | None = None,
    wire: wirefmt.API = "openai",
    model: str | None = None,
    started_ns: int | None = None,
    ended_ns: int | None = None,
    recorder: Recorder | None = None,
) -> None:
    """Record one chat call the host made itself (``request`` = the keyword arguments / JSON body it sent).

    ``wire`` names the request/response shape: ``openai`` (also llama-cpp-python's ``create_chat_completion`` and
    any OpenAI-compatible server), ``openai-responses``, ``ollama`` (``/api/chat``), ``anthropic``.
    ``started_ns``/``ended_ns`` are ``time.perf_counter_ns()`` readings around the call (default: now, i.e. no
    latency).
    """
    rec = recorder or current_recorder()
    if rec is None:
        return
    clock = settings.clock
    end = clock.at_mono(ended_ns) if ended_ns is not None else clock.now()
    start = clock.at_mono(started_ns) if started_ns is not None else end
    out = wirefmt.parse_response(wire, response) if response is not None and error is None else None
    _emit(rec, _Request(wire, provider, model, request), out, start, end, None, error)


def _begin(
    api: wirefmt.API, provider: str, model: str | None, kwargs: Mapping[str, Any]
) -> tuple[_Request, Any]:
    request = _Request(api, provider, model, kwargs)
    return request, guard(_spans.chat_span, provider, request.model)


def _done(
    rec: Recorder,
    api: wirefmt.API,
    pre: tuple[_Request, Any],
    start: Instant,
    resp: Any,
    exc: BaseException | None,
) -> None:
    request, span = pre
    out = wirefmt.parse_response(api, resp) if exc is None else None
    _emit(rec, request, out, start, settings.clock.now(), span, exc)


def wrap_chat(
    fn: Callable[..., Any], *, provider: str, wire: wirefmt.API = "openai", model: str | None = None
) -> Callable[..., Any]:
    """Wrap a chat function (sync or async) whose keyword arguments are the request and whose return value is the
    response in ``wire`` shape. With ``stream=True`` the caller gets a proxy of the stream: the call is recorded when
    the stream ends, and the time to the first chunk splits it into input (prefill) and output latency."""
    if getattr(fn, "__promcp_wrapped__", False):
        return fn
    api = wire

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = current_recorder()
            if rec is None:
                return await fn(*args, **kwargs)
            pre = guard(_begin, api, provider, model, kwargs)
            start = settings.clock.now()
            try:
                resp = await fn(*args, **kwargs)
            except BaseException as exc:
                if pre is not None:
                    guard(_done, rec, api, pre, start, None, exc)
                raise
            return _after(rec, api, pre, start, resp, bool(kwargs.get("stream")))

        async_wrapper.__promcp_wrapped__ = True  # type: ignore[attr-defined]
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = current_recorder()
        if rec is None:
            return fn(*args, **kwargs)
        pre = guard(_begin, api, provider, model, kwargs)
        start = settings.clock.now()
        stream = bool(kwargs.get("stream"))
        try:
            resp = fn(*args, **kwargs)
        except BaseException as exc:
            if pre is not None:
                guard(_done, rec, api, pre, start, None, exc)
            raise
        if inspect.isawaitable(resp):  # an async SDK method behind a sync decorator: record when awaited
            return _finish_later(resp, rec, api, pre, start, stream)
        return _after(rec, api, pre, start, resp, stream)

    wrapper.__promcp_wrapped__ = True  # type: ignore[attr-defined]
    return wrapper


async def _finish_later(
    awaitable: Any,
    rec: Recorder,
    api: wirefmt.API,
    pre: tuple[_Request, Any] | None,
    start: Instant,
    stream: bool,
) -> Any:
    try:
        resp = await awaitable
    except BaseException as exc:
        if pre is not None:
            guard(_done, rec, api, pre, start, None, exc)
        raise
    return _after(rec, api, pre, start, resp, stream)


def _after(
    rec: Recorder, api: wirefmt.API, pre: tuple[_Request, Any] | None, start: Instant, resp: Any, stream: bool
) -> Any:
    """Record a complete response now, or hand back a proxy that records the stream when it ends."""
    if pre is None:
        return resp
    if not stream:
        guard(_done, rec, api, pre, start, resp, None)
        return resp
    proxy = guard(_stream_proxy, rec, api, pre, start, resp)
    return proxy if proxy is not None else resp


def _stream_proxy(
    rec: Recorder, api: wirefmt.API, pre: tuple[_Request, Any], start: Instant, resp: Any
) -> Any:
    from promcp.shims._llmstream import AsyncStream, SyncStream

    acc = wirefmt.stream_accumulator(api)
    request, span = pre

    def finish(first: Instant | None, error: BaseException | None) -> None:
        out = acc.result()
        # time to the first chunk = the measured prefill split of the call
        prompt_ms = start.ms_to(first) if first is not None else None
        _emit(rec, request, out, start, settings.clock.now(), span, error, prompt_ms)

    cls = AsyncStream if hasattr(resp, "__anext__") else SyncStream
    return cls(resp, acc.feed, finish, settings.clock)


def _provider_of(client: Any, default: str) -> str:
    """``openai`` for api.openai.com; else the base URL's host (an OpenAI-compatible server is not OpenAI)."""
    base = str(getattr(client, "base_url", "") or "")
    if not base or "api.openai.com" in base or "api.anthropic.com" in base:
        return default
    from urllib.parse import urlsplit

    return urlsplit(base).hostname or default


def wrap_openai(client: Any) -> Any:
    """Record this OpenAI (or AsyncOpenAI) client's ``chat.completions.create`` (and ``responses.create``) calls;
    returns the client."""
    provider = _provider_of(client, "openai")
    completions = client.chat.completions
    completions.create = wrap_chat(completions.create, provider=provider, wire="openai")
    responses = getattr(client, "responses", None)
    if responses is not None and hasattr(responses, "create"):
        responses.create = wrap_chat(responses.create, provider=provider, wire="openai-responses")
    return client


def wrap_anthropic(client: Any) -> Any:
    """Record this Anthropic (or AsyncAnthropic) client's ``messages.create`` calls; returns the client."""
    messages = client.messages
    messages.create = wrap_chat(messages.create, provider="anthropic", wire="anthropic")
    return client


def _patch_method(patches: Patches, cls: Any, api: wirefmt.API, provider: str) -> None:
    """Patch ``cls.create`` (an SDK resource class) so every instance's calls are recorded."""
    orig = cls.__dict__["create"]
    # the SDKs' async create() sits behind a sync decorator (required_args): decide by the class, not by inspect
    is_async = inspect.iscoroutinefunction(orig) or cls.__name__.startswith("Async")

    def owner_provider(self: Any) -> str:
        client = getattr(self, "_client", None)
        return _provider_of(client, provider) if client is not None else provider

    if is_async:

        @functools.wraps(orig)
        async def acreate(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = wrap_chat(functools.partial(_acall, orig, self), provider=owner_provider(self), wire=api)
            return await bound(*args, **kwargs)

        patches.set(cls, "create", acreate)
    else:

        @functools.wraps(orig)
        def create(self: Any, *args: Any, **kwargs: Any) -> Any:
            return wrap_chat(functools.partial(orig, self), provider=owner_provider(self), wire=api)(
                *args, **kwargs
            )

        patches.set(cls, "create", create)


async def _acall(orig: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    return await orig(self, *args, **kwargs)


def install(patches: Patches) -> None:
    """Patch the OpenAI (Chat Completions, Responses) and Anthropic SDKs when installed."""
    if importlib.util.find_spec("openai") is not None:
        from openai.resources import responses as orr
        from openai.resources.chat import completions as oc

        _patch_method(patches, oc.Completions, "openai", "openai")
        _patch_method(patches, oc.AsyncCompletions, "openai", "openai")
        _patch_method(patches, orr.Responses, "openai-responses", "openai")
        _patch_method(patches, orr.AsyncResponses, "openai-responses", "openai")
    if importlib.util.find_spec("anthropic") is not None:
        from anthropic.resources import messages as am

        _patch_method(patches, am.Messages, "anthropic", "anthropic")
        _patch_method(patches, am.AsyncMessages, "anthropic", "anthropic")
