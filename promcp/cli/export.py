"""``promcp export DATASET --otlp URL``: a dataset's runs as OpenTelemetry traces to an OTLP destination
(Arize Phoenix, Jaeger, Grafana Tempo, Langfuse, an OpenTelemetry Collector, ``promcp collect``; docs/export.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from promcp.cli._common import EXIT_INTERRUPTED, stderr
from promcp.errors import ConfigError, ExportError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="send a dataset's runs as OpenTelemetry traces (GenAI/MCP attributes) to an OTLP endpoint",
        description="Every run as traces: one trace per task, a span per stage event with OpenTelemetry GenAI and "
        "MCP semantic-convention attributes and promcp's own under promcp.*; each span also carries its event, "
        "so 'promcp collect' writes the same events back. Span ids are stable (sending again is harmless) and "
        "what the endpoint acknowledged is remembered (an interrupted export resumes). See docs/export.md.",
    )
    p.add_argument("dataset", type=Path, help="dataset directory (or one run's events.parquet / journal)")
    p.add_argument(
        "--otlp",
        metavar="URL",
        required=True,
        help="the OTLP endpoint: http(s)://HOST:PORT (/v1/traces is added for OTLP/HTTP unless the path ends with it)",
    )
    p.add_argument(
        "--protocol",
        choices=("http/protobuf", "http/json", "grpc"),
        default="http/protobuf",
        help="OTLP/HTTP with a protobuf (default) or JSON body, or OTLP/gRPC",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an HTTP header (gRPC metadata) to send, e.g. an API key (repeatable; never written to disk)",
    )
    p.add_argument(
        "--project",
        default=None,
        help="the project name for backends that group traces by project (resource attribute "
        "openinference.project.name; default: the dataset folder's name)",
    )
    p.add_argument(
        "--run", action="append", default=[], metavar="RUN_ID", help="export only this run (repeatable)"
    )
    p.add_argument(
        "--state",
        type=Path,
        default=None,
        metavar="FILE",
        help="where to remember what the endpoint acknowledged (default: DATASET.promcp-export.json beside the "
        "dataset)",
    )
    p.add_argument("--force", action="store_true", help="send every run again, whatever the state file says")
    p.add_argument(
        "--no-rows",
        dest="carry_rows",
        action="store_false",
        help="do not carry each event's row on its span (smaller spans; 'promcp collect' then maps them as "
        "foreign GenAI/MCP spans, losing columns)",
    )
    p.add_argument("--batch", type=int, default=512, metavar="N", help="spans per request (default 512)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="per request (default 10)")
    p.add_argument("--prices", type=Path, default=None, metavar="FILE", help="price file for promcp.cost.usd")
    p.set_defaults(func=_run)


def _headers(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{item.split('=')[0]!r}: expected NAME=VALUE", key="--header")
        out[name.strip()] = value.strip()
    return out


def _run(args: argparse.Namespace) -> int:
    from promcp.errors import NotATraceError
    from promcp.export import export_dataset
    from promcp.export.send import make_sender, traces_url
    from promcp.export.state import ExportState, default_state_path, destination_key
    from promcp.store.files import missing_reason

    if args.batch < 1:
        raise ConfigError("must be 1 or more", key="--batch")
    if args.timeout <= 0:
        raise ConfigError("must be a number of seconds > 0", key="--timeout")
    dataset: Path = args.dataset
    if not dataset.exists():
        raise NotATraceError(missing_reason(dataset), path=dataset)
    url = traces_url(args.otlp, args.protocol)
    prices = None
    if args.prices is not None:
        from promcp.analysis.cost import load_prices

        prices = load_prices(args.prices)
    state_path = args.state or default_state_path(dataset)
    state = ExportState(state_path, destination_key(args.protocol, url))
    if args.force:
        state.forget()
    project = args.project or dataset.resolve().name or "promcp"
    sender = make_sender(args.otlp, args.protocol, headers=_headers(args.header), timeout=args.timeout)
    err = stderr()
    live = err.is_terminal

    def progress(run_id: str, sent: int, total: int, spans: int, seconds: float) -> None:
        rate = spans / seconds if seconds > 0 else 0.0
        line = f"export: run {run_id}: {sent:,}/{total:,} spans ({rate:,.0f} spans/s)"
        if live:
            err.file.write(f"\r{line}\x1b[K")
            err.file.flush()
        elif sent == total:
            err.print(line, highlight=False, markup=False, soft_wrap=True)

    sent_before = [0]

    def counted(run_id: str, sent: int, total: int, spans: int, seconds: float) -> None:
        sent_before[0] = spans
        progress(run_id, sent, total, spans, seconds)

    try:
        result = export_dataset(
            dataset,
            sender,
            state,
            project=project,
            runs=args.run,
            batch=args.batch,
            carry_rows=args.carry_rows,
            prices=prices,
            progress=counted,
        )
    except ExportError as exc:
        raise ExportError(
            f"{exc}; {sent_before[0]:,} span(s) sent before are remembered in {state_path}: run the same "
            "command again to resume"
        ) from None
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: what was acknowledged is in the state file already
        err.print(
            f"interrupted: {sent_before[0]:,} span(s) sent are remembered in {state_path}: run the same command "
            "again to resume",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return EXIT_INTERRUPTED
    finally:
        if live:
            err.file.write("\n")
        sender.close()
    rate = result.spans / result.seconds if result.seconds > 0 else 0.0
    rejected = f"; {result.rejected:,} span(s) rejected by the endpoint" if result.rejected else ""
    err.print(
        f"promcp export: {result.spans:,} span(s) of {result.runs} run(s) sent to {sender.url} in "
        f"{result.seconds:.1f} s ({rate:,.0f} spans/s); {result.skipped} run(s) already sent{rejected}; "
        f"state {state_path}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return 1 if result.rejected else 0
