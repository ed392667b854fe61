"""``promcp proxy``: recording proxies placed between an off-the-shelf client and what it talks to.

Subcommands defined here: ``mcp`` (stdio relay or HTTP reverse proxy in front of one MCP server) and ``config``
(a client's MCP configuration with every server wrapped by ``promcp proxy mcp``). Any module
``promcp/cli/proxy_<name>.py`` exposing ``add_parser(proxy_subparsers)`` adds its own subcommand (``proxy llm``)
without editing this file.

A client starts ``promcp proxy mcp`` once per server and waits for it, so this module imports nothing heavy: the
relay starts the server first and loads the recorder while the server boots (``promcp/cli/__init__.py`` takes a
lean path for ``promcp proxy``).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from promcp.cli._common import add_content_options, stderr
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ConfigError

_CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode", "gemini", "codex")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "proxy",
        help="record an off-the-shelf client's MCP (and LLM) traffic through a transparent proxy",
        description="Recording proxies for off-the-shelf clients (topology c-ots). 'promcp proxy mcp' stands "
        "between a client and one MCP server; 'promcp proxy config' rewrites a client's configuration so every "
        "server goes through it. See docs/proxy.md.",
    )
    proxy_sub = p.add_subparsers(dest="proxy_command", metavar="SUBCOMMAND", required=True)
    _add_mcp(proxy_sub)
    _add_config(proxy_sub)
    # the package folder's proxy_*.py, listed directly (pkgutil's scan imports inspect: ms of every MCP proxy's
    # start, which a client waits for)
    for name in sorted(p.stem for p in Path(__file__).parent.glob("proxy_*.py")):
        importlib.import_module(f"promcp.cli.{name}").add_parser(proxy_sub)


def _add_mcp(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="relay and record one MCP server (stdio: '-- COMMAND ARGS…'; HTTP: --upstream URL)",
        description="Stand between an MCP client and one server, relay every byte unchanged and record session "
        "start-up, tools/list, tools/call and every other message (topology c-ots, source proxy:mcp). "
        "stdio: 'promcp proxy mcp [options] -- COMMAND ARGS…' (the client starts this instead of the server). "
        "HTTP: 'promcp proxy mcp --upstream URL [--listen 127.0.0.1:PORT]'.",
    )
    p.add_argument(
        "--name", help="server name in the trace (default: the command's file name / the URL's host)"
    )
    p.add_argument("--out", type=Path, help="dataset directory (default: $PROMCP_OUT, else traces/)")
    p.add_argument(
        "--run-id",
        help="run to write (default: $PROMCP_RUN_ID, else one run per client session: stdio, the process that "
        "started the proxy; HTTP, each MCP session)",
    )
    p.add_argument(
        "--tokenizer",
        default=DEFAULT_TOKENIZER,
        help="tokenizer for footprints (default: o200k_base; see docs/tokens.md)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="record a request unanswered after SECONDS as timed out (the traffic is never touched)",
    )
    add_content_options(p)
    p.add_argument(
        "--max-frame",
        type=int,
        default=64 * 1024 * 1024,
        metavar="BYTES",
        help="messages larger than this are relayed and counted but not read (default 64 MiB)",
    )
    http = p.add_argument_group("HTTP (streamable HTTP and legacy SSE servers)")
    http.add_argument(
        "--upstream", metavar="URL", help="the real server's URL (e.g. http://127.0.0.1:3001/mcp)"
    )
    http.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where the proxy listens (default 127.0.0.1 and a free port, printed on stderr)",
    )
    http.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --listen on an address other than loopback (anyone who reaches it uses your server)",
    )
    http.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="also answer requests with this Host header (repeatable; default: loopback names only, others get "
        "403). It reaches the server unchanged, so the server's own Host check still applies",
    )
    http.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also answer browser requests from this Origin, e.g. https://app.example.com (repeatable; '*' any; "
        "default: loopback origins only, others get 403)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the server command and its arguments")
    p.set_defaults(func=_run_mcp)


def _run_mcp(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.max_frame <= 0:
        raise ConfigError("--max-frame must be a positive number of bytes")
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError("--timeout must be a positive number of seconds")
    if args.run_id is not None:
        from promcp.proxy._group import check_run_id

        try:
            check_run_id(args.run_id)
        except ValueError as exc:
            raise ConfigError(str(exc), key="--run-id") from None
    if args.upstream:
        if command:
            raise ConfigError("give either --upstream URL (HTTP) or '-- COMMAND' (stdio), not both")
        return _run_http(args)
    if not command:
        raise ConfigError("no server: 'promcp proxy mcp [options] -- COMMAND ARGS…' or '--upstream URL'")
    from promcp.proxy.mcp.stdio import StdioOptions, main_exit

    main_exit(
        StdioOptions(
            command,
            name=args.name,
            out=args.out,
            run_id=args.run_id,
            tokenizer=args.tokenizer,
            timeout_s=args.timeout,
            content=args.content,
            max_content_bytes=args.max_content_bytes,
            max_frame=args.max_frame,
        )
    )
    return 0  # pragma: no cover - main_exit leaves the process


def _run_http(args: argparse.Namespace) -> int:
    import os

    from promcp.cli.proxy_llm import parse_listen
    from promcp.proxy._group import DEFAULT_OUT, ENV_OUT, ENV_RUN_ID, check_run_id
    from promcp.proxy.mcp.http import McpHttpProxy, serve

    host, port = parse_listen(args.listen)
    out = args.out or Path(os.environ.get(ENV_OUT) or DEFAULT_OUT)
    run_id = args.run_id or os.environ.get(ENV_RUN_ID) or None
    if run_id is not None:
        try:
            check_run_id(run_id)
        except ValueError as exc:
            raise ConfigError(str(exc), key=ENV_RUN_ID) from None
    proxy = McpHttpProxy(
        args.upstream,
        out=out,
        name=args.name,
        run_id=run_id,
        tokenizer=args.tokenizer,
        timeout_s=args.timeout,
        content=args.content,
        max_content_bytes=args.max_content_bytes,
        max_message=args.max_frame,
        host=host,
        port=port,
        allow_remote=args.allow_remote,
        allow_hosts=args.allow_host,
        allow_origins=args.allow_origin,
    )
    note = f"run {run_id}" if run_id else "one run per client session"
    return serve(proxy, upstream=args.upstream, run_note=f"{note} in {out}")


def _add_config(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "config",
        help="print (or --write) a client's MCP config with every server wrapped by 'promcp proxy mcp'",
        description="Read an MCP client's configuration file and print it with every server wrapped: a stdio "
        "server's command becomes 'promcp proxy mcp … -- COMMAND ARGS'; an HTTP server's URL becomes a local "
        "listen URL, and the commands that start those HTTP proxies are printed on stderr. --write edits the "
        "file in place after copying it to FILE.promcp-backup; --undo puts the backup back. Where each client "
        "keeps its file: docs/proxy.md.",
    )
    p.add_argument("--client", required=True, choices=_CLIENTS, help="which client's file format")
    p.add_argument("file", nargs="?", type=Path, help="the config file (default: the client's usual place)")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("traces"),
        help="dataset directory every proxy writes to (default: traces/)",
    )
    p.add_argument("--port", type=int, default=8750, help="first local port for HTTP servers (default 8750)")
    p.add_argument("--tokenizer", help="--tokenizer for every wrapped server")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--write", action="store_true", help="edit the file in place (after a backup beside it)"
    )
    mode.add_argument("--undo", action="store_true", help="restore the file from its backup")
    p.add_argument(
        "--mcp-config",
        action="store_true",
        help="print only {\"mcpServers\": …} of the wrapped servers (for 'claude --mcp-config FILE')",
    )
    p.set_defaults(func=run_config)


def run_config(args: argparse.Namespace) -> int:
    """``promcp proxy config``: the client's configuration with its servers wrapped (promcp.proxy.mcp.clients
    rewrites it; this prints or writes it, keeping a backup)."""
    import json
    import os
    import shlex
    import sys

    from promcp.proxy.mcp.clients import (
        BACKUP_SUFFIX,
        CLIENTS,
        default_path,
        load_config,
        wrap_config,
        write_atomic,
    )

    client: str = args.client
    path: Path = args.file or default_path(client)
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if args.undo:
        if not backup.exists():
            raise ConfigError(f"no backup to restore ({backup.name} is not there)", source=path)
        os.replace(backup, path)
        stderr().print(f"restored {path} from {backup.name}", highlight=False, soft_wrap=True)
        return 0
    if not 0 < args.port < 65536:
        raise ConfigError("--port must be between 1 and 65535", key="--port")
    fmt = CLIENTS[client]
    if fmt.toml:
        if args.mcp_config:
            raise ConfigError(
                "--mcp-config is for Claude Code's JSON; Codex's config is TOML", key="--mcp-config"
            )
        from promcp.proxy.codex import wrap_toml

        load_config(path, client)  # a clear error for a missing file or bad TOML
        text, result = wrap_toml(
            path.read_text(encoding="utf-8"), out=args.out, tokenizer=args.tokenizer, port=args.port
        )
    else:
        config = load_config(path, client)
        result = wrap_config(config, client, out=args.out, tokenizer=args.tokenizer, port=args.port)
        doc = result.mcp_servers(fmt, os.getcwd()) if args.mcp_config else result.config
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    err = stderr()
    if args.write:
        if backup.exists():
            raise ConfigError(
                f"a backup ({backup.name}) is already there: run --undo first, or remove it", source=path
            )
        backup.write_bytes(path.read_bytes())
        os.chmod(backup, path.stat().st_mode & 0o777)
        write_atomic(path, text)
        err.print(f"wrote {path} (backup: {backup.name})", highlight=False, soft_wrap=True)
        if fmt.comments:
            err.print(
                "note: comments are not kept in the written file (the backup has them)", highlight=False
            )
    else:
        sys.stdout.write(text)
    if result.wrapped:
        err.print(f"wrapped: {', '.join(result.wrapped)}", highlight=False, soft_wrap=True)
    if result.kept:
        err.print(f"left as they were: {', '.join(result.kept)}", highlight=False, soft_wrap=True)
    if result.http_proxies:
        err.print("start these before the client (one per HTTP server):", highlight=False)
        for command in result.http_proxies:
            err.print(f"  {shlex.join(command)}", highlight=False, soft_wrap=True, markup=False)
    return 0
