"""``promcp proxy llm``: a recording reverse proxy in front of an LLM API (docs/proxy-llm.md).

Point a client's base-URL variable at the address it prints (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``…); every
LLM call is forwarded unchanged and recorded (topology ``c-ots``, source ``proxy:llm``). It writes one part of a
run (promcp/proxy/_group.py): give MCP proxies the same ``--run-id`` (``promcp record`` does all of it) and their
``tools/call`` events are joined to the model's tool calls. Ctrl-C or SIGTERM stops it and finalizes the run.

This module is imported on ``promcp proxy``'s lean path: nothing heavy at import time.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from promcp.cli._common import add_content_options
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ConfigError

__all__ = [
    "BASE_URL_VARS",
    "add_recording_options",
    "api_family",
    "base_url_hint",
    "open_recorder",
    "parse_listen",
    "public_url",
    "strategy_meta",
    "strategy_of",
]

#: environment variables a client family reads its base URL from
BASE_URL_VARS = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


def add_parser(proxy_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = proxy_sub.add_parser(
        "llm",
        help="record an LLM API's traffic (Anthropic Messages, OpenAI Chat/Responses) through a reverse proxy",
        description="Forward every request to --upstream unchanged (streams event by event) and record each LLM "
        "call: input tokens by origin from the request body reconciled with the provider's usage (S1/S5), the "
        "answer or tool calls with time to first byte (S2/S6), tasks told from conversation continuity. Point the "
        "client's base-URL variable at the printed address. See docs/proxy-llm.md.",
    )
    p.add_argument(
        "--upstream",
        default="https://api.anthropic.com",
        metavar="URL",
        help="the API to forward to (default https://api.anthropic.com; e.g. https://api.openai.com/v1)",
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1 and a free port, printed on stderr)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --listen on an address other than loopback (anyone who reaches it spends your API key)",
    )
    add_recording_options(p)
    p.set_defaults(func=_run)


def add_recording_options(p: argparse.ArgumentParser) -> None:
    """Options shared with ``promcp record``."""
    p.add_argument("--out", type=Path, help="dataset directory (default: $PROMCP_OUT, else traces/)")
    p.add_argument("--run-id", help="run to write (default: $PROMCP_RUN_ID, else a new run)")
    p.add_argument(
        "--tokenizer",
        help="tokenizer of the local per-origin estimate (default: the model's; docs/tokens.md)",
    )
    p.add_argument(
        "--footprint-tokenizer",
        default=DEFAULT_TOKENIZER,
        help="tokenizer of tool-call footprints (S3/S4), as 'promcp proxy mcp --tokenizer' (default o200k_base)",
    )
    p.add_argument(
        "--strategy",
        metavar="NAME[:K[:SCORER]]",
        help="rewrite each request's tool list in flight: full, slim, dedup, topk (K best-routed tools for the "
        "conversation's prompt, plus those it used; SCORER hybrid, embedding or bm25), search-tool (the Anthropic "
        "API's own deferred loading and tool search); off unless given (docs/whatif.md)",
    )
    add_content_options(p)


def strategy_of(args: argparse.Namespace) -> Any:
    """``--strategy`` as a :class:`~promcp.strategies.live.StrategySpec` (``None`` when not given)."""
    if not getattr(args, "strategy", None):
        return None
    from promcp.proxy.llm._rewrite import check_proxy_strategy

    return check_proxy_strategy(args.strategy)


def strategy_meta(spec: Any) -> dict[str, Any]:
    """What a run records about the strategy its proxy applied (as ``promcp run`` records its own)."""
    if spec is None:
        return {}
    out: dict[str, Any] = {"strategy": spec.label}
    if spec.name == "topk":  # (search-tool through the proxy is the provider's own search: no router)
        out["routers"] = {spec.label: spec.router_info()}
    return out


def parse_listen(value: str, option: str = "--listen") -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{option} {value!r} is not HOST:PORT (e.g. 127.0.0.1:8080)", key=option)
    return host.strip("[]"), int(port)


def api_family(upstream: str) -> str:
    """``anthropic`` when the upstream is Anthropic's API (or any URL without ``/v1`` — Anthropic clients add it
    themselves), else ``openai``."""
    parts = urlsplit(upstream)
    if "anthropic" in (parts.hostname or ""):
        return "anthropic"
    return "openai" if parts.path.rstrip("/").endswith("/v1") else "anthropic"


#: Ollama's own port: its clients read ``OLLAMA_HOST``; OpenAI-compatible ones reach it under ``/v1``.
OLLAMA_PORT = 11434


def base_url_hint(upstream: str, url: str, family: str) -> str:
    """The line telling a user which variable points their client at the proxy."""
    parts = urlsplit(upstream)
    if parts.port == OLLAMA_PORT or parts.path.rstrip("/").endswith("/api"):
        return (
            f"export OLLAMA_HOST={url}   (Ollama clients; OpenAI-compatible ones: OPENAI_BASE_URL={url}/v1)"
        )
    return f"export {BASE_URL_VARS[family]}={url}"


def open_recorder(args: argparse.Namespace, meta: dict[str, Any]) -> Any:
    """The LLM proxy's part of the run named by ``--out`` / ``--run-id`` (or their environment variables)."""
    from promcp.proxy._group import ENV_OUT, ENV_RUN_ID, check_run_id
    from promcp.proxy.llm import SOURCE
    from promcp.recorder import Recorder, new_run_id

    out = args.out or Path(os.environ.get(ENV_OUT) or "traces")
    run_id = args.run_id or os.environ.get(ENV_RUN_ID) or new_run_id()
    try:
        check_run_id(run_id)
    except ValueError as exc:
        raise ConfigError(str(exc), key="--run-id") from None
    return Recorder(
        out,
        topology="c-ots",
        source=SOURCE,
        run_id=run_id,
        part="llm",
        content=args.content,
        max_content_bytes=args.max_content_bytes,
        meta=meta,
    )


def _run(args: argparse.Namespace) -> int:
    import time

    from promcp.cli._common import stderr
    from promcp.proxy.llm import LLMProxy

    host, port = parse_listen(args.listen)
    err = stderr()
    family = api_family(args.upstream)
    strategy = strategy_of(args)
    meta = {"upstream": public_url(args.upstream), "api": family, **strategy_meta(strategy)}
    rec = open_recorder(args, meta)
    try:
        with LLMProxy(
            args.upstream,
            rec,
            host=host,
            port=port,
            allow_remote=args.allow_remote,
            tokenizer=args.tokenizer,
            footprint_tokenizer=args.footprint_tokenizer,
            strategy=strategy,
        ) as proxy:
            rewriting = f"; tool lists rewritten: --strategy {strategy.label}" if strategy else ""
            err.print(
                f"promcp proxy llm: {proxy.url} → {public_url(args.upstream)}  (run {rec.run_id}{rewriting}; "
                "Ctrl-C stops)\n"
                f"  {base_url_hint(args.upstream, proxy.url, family)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    finally:
        path = rec.close()
    c = proxy.counters
    err.print(
        f"{c.calls} LLM call(s) in {len(c.by_task)} task(s), {c.failed} failed, {c.unparsed} unreadable"
        + (f", {c.lost} relayed but not recorded (the recording queue was full)" if c.lost else "")
        + f"; events: {path or rec.journal_path.parent}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return 0


def public_url(url: str) -> str:
    """``url`` without credentials (promcp.redact, imported on use: this module is loaded by the lean
    ``promcp proxy`` path, whose ``proxy mcp`` starts a server before anything heavy)."""
    from promcp.redact import public_url as strip

    return strip(url)
