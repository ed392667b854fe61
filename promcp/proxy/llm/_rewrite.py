"""``promcp proxy llm --strategy`` / ``promcp record --strategy``: a request's tool list rewritten in flight.

Off unless asked. Per LLM request of a family whose tools :mod:`promcp.wire.tool_lists` reads (Anthropic Messages,
OpenAI Chat Completions and Responses, Ollama, Gemini), the function tools the client sent become the catalog of
:func:`promcp.strategies.live.plan_call` — the one definition ``promcp run --strategy`` and ``promcp whatif`` use —
and the request goes upstream with what the plan sends, every other byte of meaning unchanged:

* ``slim`` / ``dedup``: every tool, slimmed / with shared sub-schemas as ``$ref`` (dedup's ``{"$defs":…}`` block is
  added to the system prompt, as the host adds it beside the tools);
* ``topk:K[:SCORER]``: the K best-routed tools for the conversation's first user prompt, plus every tool the model
  already called in it (``strategy_kept``); the client's order is kept;
* ``search-tool`` on the Anthropic API: the provider's own deferred loading — every function tool not called yet
  gets ``defer_loading: true`` and the Messages API's BM25 tool-search tool is added (with its beta header), unless
  the request already defers tools or carries a tool search (Claude Code's ``ToolSearch``): then it is forwarded as
  is, and the events say why (``strategy_skipped``);
* ``full``: forwarded as sent, events labelled (a baseline through the same proxy).

A router that cannot be built or fails, a request that cannot be rewritten: the request goes as the client sent it,
one log line per distinct reason, and each event says so (``strategy_fallback`` / ``strategy_skipped``). The client
always gets the upstream's response as it came. What was rewritten and why goes to the event
(:func:`client_split`): the strategy's attributes (:meth:`~promcp.strategies.live.CallPlan.attrs`), and both the
client's and the upstream's input split by origin, counted with the same tokenizer, so what a strategy saved is
measured on each call.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from promcp.errors import ConfigError
from promcp.events import Origin
from promcp.stages import LLMCall
from promcp.stages.llm import input_parts
from promcp.strategies import live
from promcp.strategies.payloads import META
from promcp.strategies.routing import Router
from promcp.strategies.schema import dumps
from promcp.wire import ChatRequest, Piece, anthropic, parse_request
from promcp.wire.json_bounds import loads as bounded_json
from promcp.wire.tool_lists import FAMILIES, add_system_text, called_tools, read_tools, write_tools

__all__ = [
    "PROXY_STRATEGIES",
    "TOOL_SEARCH",
    "TOOL_SEARCH_BETA",
    "Rewrite",
    "Rewriter",
    "check_proxy_strategy",
    "client_split",
]

log = logging.getLogger("promcp.proxy.llm")

#: What the proxy can apply (``two-phase`` needs a host that answers ``load_tool``: ``promcp run`` only).
PROXY_STRATEGIES: Final = ("full", "slim", "dedup", "topk", "search-tool")
#: The Messages API's own tool search (BM25 variant), added by ``search-tool`` on the Anthropic API.
TOOL_SEARCH: Final = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
#: The ``anthropic-beta`` value the tool search needs.
TOOL_SEARCH_BETA: Final = "advanced-tool-use-2025-11-20"
#: Routers kept (one per distinct catalog and scorer; building one may load the embedding model).
MAX_ROUTERS: Final = 16
#: Distinct reasons logged (each once); past it, events still say why, the log stays quiet.
MAX_REASONS: Final = 64

RouterFactory = Callable[[Sequence[Mapping[str, Any]], Any], Router]


def check_proxy_strategy(text: str, *, key: str = "--strategy") -> live.StrategySpec:
    """``NAME[:K[:SCORER]]`` for the LLM proxy, or a :class:`ConfigError` naming ``key``."""
    spec = live.parse_strategy(text, key=key)
    if spec.name not in PROXY_STRATEGIES:
        raise ConfigError(
            f"{spec.name} needs a host that serves load_tool (promcp run --strategy {spec.name}); the LLM proxy "
            f"applies {', '.join(PROXY_STRATEGIES)}",
            key=key,
        )
    return spec


@dataclass
class Rewrite:
    """What goes upstream for one request: the body, headers to set on it, and the event attributes. ``extra``:
    the texts the plan put beside the tools (``(key, text)``: dedup's ``$defs``), recorded as ``schemas``."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    extra: tuple[tuple[str, str], ...] = ()

    def changed(self, original: bytes) -> bool:
        return self.body is not original


class Rewriter:
    """Applies ``spec`` to the requests of a proxy (thread-safe: called from the proxy's worker threads)."""

    def __init__(self, spec: live.StrategySpec, router_factory: RouterFactory | None = None) -> None:
        self.spec = spec
        self.factory = router_factory
        self.warned: set[str] = set()
        self._routers: OrderedDict[tuple[Any, ...], tuple[Router | None, str | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._rank_lock = threading.Lock()  # one routing at a time: the embedding model is not shared safely

    def warm(self) -> threading.Thread | None:
        """Load the embedding model in the background now (a scorer that needs it), so the first request does not
        wait for the whole load; a failure is left for the first routing to report (and fall back)."""
        if self.spec.name != "topk" or self.spec.scorer == "bm25" or self.factory is not None:
            return None  # (the proxy's search-tool is the provider's own search: no router)

        def load() -> None:
            from promcp.strategies.routing import embedding_model

            try:
                embedding_model()
            except Exception:  # said by the router build, per request, with the fallback
                return

        thread = threading.Thread(target=load, name="promcp-embedding-load", daemon=True)
        thread.start()
        return thread

    def _say_once(self, reason: str) -> None:
        with self._lock:
            if reason in self.warned or len(self.warned) >= MAX_REASONS:
                return
            self.warned.add(reason)
        log.warning("promcp proxy llm --strategy %s: %s", self.spec.label, reason)

    def failed(self, body: bytes, exc: Exception) -> Rewrite:
        """What goes upstream when the rewrite itself failed: the request as sent, said once."""
        why = f"rewrite failed ({type(exc).__name__}: {exc}"[:200] + "): forwarded as sent"
        return self._as_sent(body, {"strategy": self.spec.label}, why)

    def _router(self, catalog: Sequence[Mapping[str, Any]]) -> tuple[Router | None, str | None]:
        key = (self.spec.scorer, *(dumps(t) for t in catalog))
        with self._lock:
            if key in self._routers:
                self._routers.move_to_end(key)
                return self._routers[key]
            found = live.make_router(self.spec, catalog, self.factory)
            self._routers[key] = found
            while len(self._routers) > MAX_ROUTERS:
                self._routers.popitem(last=False)
            return found

    def rewrite(self, api: str, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> Rewrite | None:
        """What to forward for a request of ``api`` with ``body`` (``None``: not a request this rewrites)."""
        if api not in FAMILIES:
            return None
        label = {"strategy": self.spec.label}
        encoding = next((v for k, v in headers if k == "content-encoding"), "identity").strip().lower()
        if encoding not in ("", "identity"):
            return self._as_sent(body, label, f"request body encoded with {encoding!r}: forwarded as sent")
        try:
            doc = bounded_json(body)
        except ValueError:
            return None  # the recorder says it is not readable
        if not isinstance(doc, dict):
            return None
        tools = read_tools(api, doc)
        if not tools:
            return Rewrite(body, attrs={**label, "strategy_tools": 0, "client_tools": 0})
        try:
            query = _prompt(api, doc)
        except (ValueError, TypeError, AttributeError):
            return None
        used_names = set(called_tools(api, doc))
        used = tuple(i for i, t in enumerate(tools) if t.name in used_names)
        base = {**label, "client_tools": len(tools)}
        if self.spec.name == "search-tool":
            return self._defer(api, doc, body, tools, used, headers, base)
        catalog = [t.definition for t in tools]
        router, error = self._router(catalog) if self.spec.routed else (None, None)
        if self.spec.routed and not query:
            router, error = None, "no user prompt to route on"
        with self._rank_lock:
            plan = live.plan_call(
                self.spec, catalog, live.Conversation(query, used), router, router_error=error
            )
        attrs = {**base, **plan.attrs()}
        if plan.fallback:
            self._say_once(f"{plan.fallback}; the full tool list is sent")
        new = {tools[i].slot: d for i, d in plan.sent if i != META}
        if all(new.get(t.slot) == t.definition for t in tools) and not plan.extra:
            return Rewrite(body, attrs=attrs)
        out = write_tools(api, doc, new)
        for _key, text in plan.extra:
            out = add_system_text(api, out, text)
        return self._encoded(out, body, attrs, plan.extra)

    def _defer(
        self,
        api: str,
        doc: dict[str, Any],
        body: bytes,
        tools: Sequence[Any],
        used: Sequence[int],
        headers: Sequence[tuple[str, str]],
        attrs: dict[str, Any],
    ) -> Rewrite:
        """``search-tool`` on the Anthropic API: the provider's deferred loading and its tool search."""
        if api != "anthropic":
            return self._as_sent(body, attrs, f"search-tool through the proxy is the Anthropic API's own tool "
                                 f"search; {api} requests are forwarded as sent")  # fmt: skip
        raw = doc.get("tools") or []
        if any(anthropic.is_tool_search(t) for t in raw):
            return self._as_sent(body, attrs, "the client brings its own tool search: forwarded as sent")
        if any(isinstance(t, Mapping) and t.get("defer_loading") is True for t in raw):
            return self._as_sent(body, attrs, "the client already defers tools: forwarded as sent")
        deferred = [t for i, t in enumerate(tools) if i not in used]
        if not deferred:
            return Rewrite(body, attrs={**attrs, "strategy_tools": len(tools)})
        slots = {t.slot for t in deferred}
        new_tools = [
            {**t, "defer_loading": True} if (i, None) in slots and isinstance(t, Mapping) else t
            for i, t in enumerate(raw)
        ]
        out = {**doc, "tools": [*new_tools, dict(TOOL_SEARCH)]}
        beta = next((v for k, v in headers if k == "anthropic-beta"), "")
        betas = [b.strip() for b in beta.split(",") if b.strip()]
        extra = {} if TOOL_SEARCH_BETA in betas else {"anthropic-beta": ",".join([*betas, TOOL_SEARCH_BETA])}
        attrs = {**attrs, "strategy_tools": len(tools) - len(deferred), "strategy_deferred": len(deferred)}
        if used:
            attrs["strategy_kept"] = len(used)
        rewrite = self._encoded(out, body, attrs, ())
        rewrite.headers.update(extra)
        return rewrite

    def _as_sent(self, body: bytes, attrs: Mapping[str, Any], why: str) -> Rewrite:
        self._say_once(why)
        return Rewrite(body, attrs={**attrs, "strategy_skipped": why})

    def _encoded(
        self, doc: Mapping[str, Any], body: bytes, attrs: dict[str, Any], extra: tuple[tuple[str, str], ...]
    ) -> Rewrite:
        try:
            data = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        except (ValueError, TypeError) as exc:
            return self._as_sent(body, attrs, f"rewritten body not encodable ({exc}): forwarded as sent")
        return Rewrite(data, attrs=attrs, extra=extra)


def _prompt(api: str, doc: Mapping[str, Any]) -> str:
    """The conversation's first user prompt (the routing query, as ``promcp run`` routes on the task prompt)."""
    request = parse_request(api, doc)
    return next((p.text for p in request.pieces if p.origin is Origin.USER), "")


def with_extra(request: ChatRequest, extra: Sequence[tuple[str, str]]) -> ChatRequest:
    """``request`` with each ``extra`` text the rewrite added to the system prompt as the ``schemas`` part it is
    (key ``$defs``), taken out of the system piece that holds it."""
    pieces = list(request.pieces)
    for key, text in extra:
        for n, piece in enumerate(pieces):
            if piece.origin is Origin.SYSTEM and text in piece.text:
                rest = piece.text.replace(text, "", 1).strip("\n")
                pieces[n : n + 1] = [*([Piece(Origin.SYSTEM, piece.key, rest)] if rest else []),
                                     Piece(Origin.SCHEMAS, key, text)]  # fmt: skip
                break
    return replace(request, pieces=pieces)


def client_split(call: LLMCall, client: ChatRequest) -> dict[str, Any]:
    """Event attributes comparing what the client sent with what went upstream (``call.pieces``), counted locally
    with the call's tokenizer: ``client_origins`` / ``upstream_origins`` (tokens by origin), ``client_tokens_in``
    and ``saved_tokens`` (client − upstream, the same tokenizer on both sides)."""
    sides = {"client": input_parts(replace(call, pieces=client.pieces)), "upstream": input_parts(call)}
    out: dict[str, Any] = {}
    for side, parts in sides.items():
        split: dict[str, int] = {}
        for part in parts:
            split[str(part.origin)] = split.get(str(part.origin), 0) + part.tokens
        out[f"{side}_origins"] = split
    client_total = sum(out["client_origins"].values())
    out["client_tokens_in"] = client_total
    out["saved_tokens"] = client_total - sum(out["upstream_origins"].values())
    return out


def prepare_hook(rewriter: Rewriter, exchange: Any) -> Callable[[bytes], tuple[bytes, Mapping[str, str]]]:
    """The core's ``prepare`` hook of one exchange: the rewrite, kept on the exchange for its events."""

    def prepare(body: bytes) -> tuple[bytes, Mapping[str, str]]:
        try:
            found = rewriter.rewrite(exchange.api, body, exchange.request.headers)
        except (
            Exception
        ) as exc:  # never the client's problem: the request goes as sent, and the event says why
            found = rewriter.failed(body, exc)
        exchange.rewritten = found
        return (found.body, found.headers) if found is not None else (body, {})

    return prepare


def forwarded_request(api: str, rewrite: Rewrite) -> ChatRequest:
    """The request as the upstream received it, with the texts the rewrite added counted as ``schemas``."""
    doc = bounded_json(rewrite.body)
    if not isinstance(doc, dict):
        raise ValueError("rewritten body is not a JSON object")
    return with_extra(parse_request(api, doc), rewrite.extra)


def rewrite_attrs(call: LLMCall, client: ChatRequest, rewrite: Rewrite) -> dict[str, Any]:
    """The input event's attributes of a call the strategy saw: its own, and the client/upstream splits."""
    out = dict(rewrite.attrs)
    if call.pieces is not client.pieces:
        out |= client_split(call, client)
    else:
        out["saved_tokens"] = 0
    return out
