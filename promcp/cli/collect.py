"""``promcp collect``: receive OTLP/HTTP from agents (promcp.instrument(), OTel spans, Claude Code's and the Gemini
CLI's telemetry) into a dataset (docs/collect.md)."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from types import FrameType

from promcp.cli._common import add_content_options, stderr
from promcp.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "collect",
        help="receive OTLP/HTTP traces and telemetry (promcp.instrument(), OTel GenAI/MCP spans, Claude Code, "
        "Gemini CLI) into a dataset",
        description="An OTLP/HTTP receiver (POST /v1/logs, /v1/traces, /v1/metrics; protobuf or JSON; gzip). "
        "promcp.instrument()'s spans become the rows they carry, OTel MCP and GenAI spans the stages they stand "
        "for, Claude Code's and the Gemini CLI's telemetry LLM calls and tool calls (topology c-ots) as each "
        "prompt finishes; "
        "Ctrl-C or SIGTERM finalizes the dataset. Point an agent at it with OTEL_EXPORTER_OTLP_ENDPOINT="
        "http://127.0.0.1:4318. See docs/collect.md.",
    )
    p.add_argument(
        "--listen", default="127.0.0.1:4318", help="HOST:PORT to listen on (default 127.0.0.1:4318)"
    )
    p.add_argument(
        "--grpc",
        metavar="HOST:PORT",
        default=None,
        help="also receive OTLP/gRPC there (the OTLP default is 127.0.0.1:4317)",
    )
    p.add_argument("--out", type=Path, default=Path("traces"), help="dataset directory (default traces/)")
    p.add_argument(
        "--rotate",
        type=float,
        metavar="SECONDS",
        default=None,
        help="finalize the current run and start a new one every SECONDS (long-running collection)",
    )
    p.add_argument(
        "--idle",
        type=float,
        metavar="SECONDS",
        default=30.0,
        help="a prompt that received nothing for SECONDS is recorded (default 30)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on an address other than loopback (no TLS, no auth)",
    )
    add_content_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from promcp.cli.proxy_llm import parse_listen
    from promcp.collect import Collector
    from promcp.proxy._http import is_loopback

    host, port = parse_listen(args.listen)
    grpc = parse_listen(args.grpc, "--grpc") if args.grpc else None
    for key, where in (("--listen", host), ("--grpc", grpc[0] if grpc else None)):
        if where is not None and not is_loopback(where) and not args.allow_remote:
            raise ConfigError(
                f"{where} is not a loopback address: add --allow-remote to listen there", key=key
            )
    if args.rotate is not None and args.rotate <= 0:
        raise ConfigError("must be a number of seconds > 0", key="--rotate")
    err = stderr()
    try:
        collector = Collector(
            args.out,
            host=host,
            port=port,
            rotate_s=args.rotate,
            idle_s=args.idle,
            content=args.content,
            max_content_bytes=args.max_content_bytes,
            grpc=grpc,
        )
    except OSError as exc:
        raise ConfigError(
            f"cannot listen: {exc.strerror or exc}",
            key="--grpc" if grpc and "gRPC" in str(exc) else "--listen",
        ) from None
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    collector.start()
    h, p = collector.address
    err.print(
        f"promcp collect: listening on http://{h}:{p} (OTLP/HTTP: /v1/logs, /v1/traces, /v1/metrics)"
        f"{f' and {grpc[0]}:{collector.grpc_port} (OTLP/gRPC)' if grpc else ''}; "
        f"dataset {args.out}; Ctrl-C to stop",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    while not stop.wait(0.5):
        pass
    stats = collector.stop()
    if collector.stopped:
        err.print(collector.stopped, highlight=False, markup=False, soft_wrap=True)
    requests = ", ".join(f"{n} {k}" for k, n in sorted(stats.requests.items())) or "none"
    refused = [f"{n} × {s}" for s, n in sorted(stats.rejected.items())]
    refused += [f"{n} × gRPC {s}" for s, n in sorted(stats.grpc_rejected.items())]
    rejected = ", ".join(refused) or "none"
    left = dict(stats.unmapped)
    own = left.pop("promcp span (rows carried)", 0)  # their rows came on another span of the same sender
    unmapped = sum(left.values())
    by_client = ", ".join(f"{n} {client}" for client, n in sorted(stats.prompts.items()))
    prompts = f"{stats.tasks} prompt(s){f': {by_client}' if by_client else ''}"
    err.print(
        f"promcp collect: requests {requests}; rejected {rejected}; {stats.records} log record(s) "
        f"({prompts}) and {stats.spans} span(s) ({own} of promcp.instrument() with rows "
        f"carried, {unmapped} not mapped) → "
        f"{stats.events} event(s); {stats.metrics} metric(s) counted, not added; "
        f"{stats.duplicates} duplicate row(s) skipped; {stats.unplaced} tool result(s) without their call; "
        f"{stats.problems} problem(s); {stats.lost} acknowledged request(s) lost; "
        f"{stats.refused_connections} connection(s) refused; {len(stats.runs)} run(s) written",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return 0
