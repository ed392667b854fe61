"""``promcp record -- CLIENT ARGS…``: run an off-the-shelf client with its LLM API and its MCP servers recorded into
one run (docs/record.md).

1. An LLM proxy (:class:`promcp.proxy.llm.LLMProxy`) starts on a free loopback port for each API family the client
   may use (Claude Code: Anthropic; the Gemini CLI: the Gemini API; any other command: Anthropic and OpenAI), forwarding to ``--upstream`` or to the
   URL the client would have used (its base-URL variable if set, else the public API).
2. The client's MCP servers are wrapped by ``promcp proxy mcp`` (promcp/proxy/mcp/clients.py). For Claude Code,
   the servers of its own configuration — user and local scope in ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR``),
   approved project servers of ``.mcp.json``, or the files given with ``--mcp-config`` — go into a generated file
   passed with ``--mcp-config FILE --strict-mcp-config``: nothing on disk is edited. A stdio server's command
   becomes ``promcp proxy mcp … -- COMMAND``; an HTTP server (``url``) gets an HTTP MCP proxy
   (:class:`promcp.proxy.mcp.http.McpHttpProxy`) started here, on a free loopback port, writing the same run. For
   the Gemini CLI, the servers of its user settings go wrapped into the settings of a private ``GEMINI_CLI_HOME``
   that links everything else to the real ``~/.gemini`` (:mod:`promcp.proxy.gemini_cli`). Other clients' servers are
   wrapped once with ``promcp proxy config --write`` (their proxies find this run through ``PROMCP_OUT`` /
   ``PROMCP_RUN_ID``, which the client passes on to the servers it starts). Codex (promcp/proxy/codex.py): its
   provider's base URL and every ``[mcp_servers.*]`` entry are redirected with ``-c key=value`` flags put in front
   of the user's arguments; nothing on disk is edited.
3. The client runs with the terminal attached and the base-URL variables pointing at the proxies. Ctrl-C reaches
   the client (as it always does: same process group); promcp waits for it. SIGTERM to promcp is passed on.
4. When the client exits, the LLM proxy's part is closed, the MCP proxies' parts are waited for (a client closes
   its servers as it exits), and the run is merged — the model's tool calls joined to the MCP ``tools/call``
   events (:mod:`promcp.stages.link`). The exit status is the client's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ConfigError
from promcp.proxy._group import ENV_OUT, ENV_RUN_ID
from promcp.proxy.codex import CodexSetup, codex_setup, is_codex, mcp_overrides
from promcp.proxy.gemini_cli import gemini_settings, is_gemini
from promcp.proxy.llm import DEFAULT_UPSTREAMS, LLMProxy
from promcp.proxy.mcp import frame_journal
from promcp.proxy.mcp.clients import CLIENTS, Wrapped, load_config, wrap_servers
from promcp.proxy.mcp.env_refs import EnvRefs
from promcp.proxy.mcp.http import McpHttpProxy
from promcp.proxy.mcp.stdio_recorder import record_orphans
from promcp.recorder import Recorder
from promcp.stages.link import link_tool_calls
from promcp.store.journal import is_live
from promcp.store.parts import finalize_group, parts_dir

#: temporary folders of `promcp record` (its MCP config: references to the servers' environment, not values):
#: <prefix><pid>-…
TEMP_PREFIX = "promcp-record-"


def _sweep_temp() -> None:
    """Remove the temporary folders of `promcp record` processes that no longer run (killed: SIGKILL skips the
    cleanup). They hold no credential (promcp/proxy/mcp/env_refs.py); this keeps /tmp tidy."""
    import shutil

    for folder in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"):
        pid = folder.name[len(TEMP_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


__all__ = [
    "BASE_URL_VARS",
    "ClientLaunch",
    "RecordOptions",
    "RecordResult",
    "claude_code_servers",
    "plan_launch",
    "record",
]

BASE_URL_VARS = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
}
_CLAUDE = frozenset({"claude", "claude-code"})
#: how long to wait for the MCP proxies to finish their parts once the client has exited
PARTS_WAIT_S = 15.0


@dataclass
class RecordOptions:
    command: list[str]
    recorder: Recorder
    upstream: str | None = None
    api: str | None = None
    wrap_mcp: bool = True
    tokenizer: str | None = None
    footprint_tokenizer: str = DEFAULT_TOKENIZER
    environ: Mapping[str, str] | None = None
    cwd: Path | None = None
    strategy: Any = None  # --strategy: a promcp.strategies.live.StrategySpec applied by the LLM proxies


@dataclass
class ClientLaunch:
    """What the client is started with."""

    argv: list[str]
    env: dict[str, str]
    wrapped: list[str] = field(default_factory=list)  # MCP servers that go through promcp proxy mcp
    unwrapped: list[str] = field(default_factory=list)  # servers left as they are (and why)
    http_proxies: list[McpHttpProxy] = field(default_factory=list)  # started for the client's HTTP servers


def is_claude_code(command: Sequence[str]) -> bool:
    return Path(command[0]).name in _CLAUDE


def _config_dir(env: Mapping[str, str]) -> Path:
    base = env.get("CLAUDE_CONFIG_DIR")
    return Path(base).expanduser() if base else Path(env.get("HOME") or Path.home())


def _json_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    return load_config(path, "claude-code")


def claude_code_servers(env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    """The MCP servers Claude Code would start in ``cwd``: user scope, local scope (``projects.<cwd>``) and the
    project's ``.mcp.json`` servers the user approved (``enabledMcpjsonServers`` / ``enableAllProjectMcpServers``);
    local overrides project overrides user, as in Claude Code."""
    state = _json_file(_config_dir(env) / ".claude.json")
    projects = state.get("projects") if isinstance(state.get("projects"), Mapping) else {}
    assert isinstance(projects, Mapping)
    here = {str(cwd), os.path.realpath(cwd)}
    local: Mapping[str, Any] = next((projects[p] for p in here if isinstance(projects.get(p), Mapping)), {})
    settings: dict[str, Any] = {}
    for name in ("settings.json", "settings.local.json"):
        settings.update(_json_file(cwd / ".claude" / name))
    approved = set(local.get("enabledMcpjsonServers") or []) | set(
        settings.get("enabledMcpjsonServers") or []
    )
    denied = set(local.get("disabledMcpjsonServers") or []) | set(
        settings.get("disabledMcpjsonServers") or []
    )
    all_ok = bool(settings.get("enableAllProjectMcpServers") or local.get("enableAllProjectMcpServers"))
    project = _json_file(cwd / ".mcp.json").get("mcpServers") or {}
    servers: dict[str, Any] = dict(state.get("mcpServers") or {})
    servers.update({k: v for k, v in project.items() if k not in denied and (all_ok or k in approved)})
    servers.update(local.get("mcpServers") or {})
    return servers


def _given_mcp_configs(argv: list[str]) -> tuple[list[str], list[str], bool]:
    """(argv without ``--mcp-config …`` and ``--strict-mcp-config``, the configs given, whether strict was asked)."""
    rest: list[str] = []
    configs: list[str] = []
    strict = False
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--strict-mcp-config":
            strict = True
        elif word == "--mcp-config" or word.startswith("--mcp-config="):
            if "=" in word:
                configs.append(word.split("=", 1)[1])
            else:
                while i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    i += 1
                    configs.append(argv[i])
        else:
            rest.append(word)
        i += 1
    return rest, configs, strict


def _servers_of(config: str, cwd: Path) -> dict[str, Any]:
    """The ``mcpServers`` of a ``--mcp-config`` value (a file, or a JSON string as Claude Code also accepts)."""
    text = config.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--mcp-config value is not JSON: {exc.msg}") from None
    else:
        doc = load_config((cwd / config).expanduser(), "claude-code")
    servers = doc.get("mcpServers") if isinstance(doc, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ConfigError("has no mcpServers object", source=config)
    return dict(servers)


def plan_launch(
    opts: RecordOptions,
    base_urls: Mapping[str, str],
    config_file: Path,
    *,
    start_http: Callable[[str, str], McpHttpProxy] | None = None,
) -> ClientLaunch:
    """The client's argv and environment (writes the generated MCP config to ``config_file`` for Claude Code).
    ``start_http(name, url)`` starts the proxy of an HTTP server (without it, HTTP servers are listed as not
    recorded: planning starts nothing)."""
    env = dict(os.environ if opts.environ is None else opts.environ)
    cwd = opts.cwd or Path.cwd()
    rec = opts.recorder
    env.update({ENV_OUT: str(rec.out.absolute()), ENV_RUN_ID: rec.run_id})
    for family, url in base_urls.items():
        env[BASE_URL_VARS[family]] = url
    launch = ClientLaunch(list(opts.command), env)
    if opts.wrap_mcp and is_gemini(opts.command):
        return _plan_gemini(launch, opts, cwd, config_file, start_http)
    if is_codex(opts.command):
        return _plan_codex(opts, launch, base_urls, start_http)
    if not (opts.wrap_mcp and is_claude_code(opts.command)):
        return launch
    rest, given, strict = _given_mcp_configs(launch.argv[1:])
    servers: dict[str, Any] = {}
    for config in given:
        servers.update(_servers_of(config, cwd))
    if not strict:
        servers = {**claude_code_servers(env, cwd), **servers}
    refs = EnvRefs("claude-code")  # the file holds references, the client's environment the values
    servers = refs.servers(_wrap(launch, servers, "claude-code", opts, start_http))
    launch.env.update(refs.values)
    # owner-only all the same; the folder is removed when record ends, and a folder a killed record left is
    # removed by the next one (_sweep_temp)
    fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"mcpServers": servers}, indent=2))
    launch.argv = [launch.argv[0], "--mcp-config", str(config_file), "--strict-mcp-config", *rest]
    return launch


def _wrap(
    launch: ClientLaunch,
    servers: Mapping[str, Any],
    client: str,
    opts: RecordOptions,
    start_http: Callable[[str, str], McpHttpProxy] | None,
) -> dict[str, Any]:
    """``servers`` wrapped for ``client`` (HTTP ones through proxies ``start_http`` starts); the names go into
    ``launch.wrapped`` / ``launch.unwrapped``."""
    rec = opts.recorder
    http_ok = start_http is not None

    def is_http(entry: Any) -> bool:
        return isinstance(entry, Mapping) and bool(entry.get("url") or entry.get("httpUrl"))

    to_wrap = {k: v for k, v in servers.items() if http_ok or not is_http(v)}
    launch.unwrapped += [f"{k} (an HTTP server: no proxy started)" for k in servers if k not in to_wrap]

    def listen(name: str, url: str) -> str:
        assert start_http is not None
        proxy = start_http(name, url)
        launch.http_proxies.append(proxy)
        return f"127.0.0.1:{proxy.port}"

    done = Wrapped({})
    wrapped, _ = wrap_servers(
        to_wrap,
        CLIENTS[client],
        out=rec.out,
        tokenizer=opts.footprint_tokenizer,
        run_id=rec.run_id,
        result=done,
        listen=listen if http_ok else None,
    )
    launch.wrapped = list(done.wrapped)
    launch.unwrapped += [f"{k} (neither a command nor a URL)" for k in done.kept]
    return {**servers, **wrapped}


def _plan_gemini(
    launch: ClientLaunch,
    opts: RecordOptions,
    cwd: Path,
    config_file: Path,
    start_http: Callable[[str, str], McpHttpProxy] | None,
) -> ClientLaunch:
    """The Gemini CLI: its servers wrapped in the settings of a private home (promcp/proxy/gemini_cli.py)."""
    settings = gemini_settings(launch.env, cwd)
    refs = EnvRefs("gemini")  # the settings file holds references, the client's environment the values
    servers = refs.servers(_wrap(launch, settings.servers, "gemini", opts, start_http))
    launch.env.update(refs.values)
    launch.unwrapped += [
        f"{name} (defined in {path}, which comes after the user's settings: not edited)"
        for name, path in settings.fixed.items()
    ]
    home = config_file.with_name("gemini-home")
    try:
        launch.env.update(settings.private_home(home, servers))
    except OSError as exc:
        raise ConfigError(
            f"cannot prepare the Gemini CLI's session folder: {exc.strerror or exc}", source=home
        ) from None
    return launch


def _families(command: Sequence[str]) -> list[str]:
    if is_claude_code(command):
        return ["anthropic"]
    if is_gemini(list(command)):
        return ["gemini"]
    return ["anthropic", "openai"]


def _plan_codex(
    opts: RecordOptions,
    launch: ClientLaunch,
    base_urls: Mapping[str, str],
    start_http: Callable[[str, str], McpHttpProxy] | None,
) -> ClientLaunch:
    """Codex: ``-c`` overrides in front of the user's arguments (promcp/proxy/codex.py); no file is edited."""
    setup = codex_setup(opts.command, launch.env)
    flags: list[str] = []
    if "openai" in base_urls:
        flags += setup.llm_overrides(base_urls["openai"])
    if opts.wrap_mcp:

        def listen(name: str, url: str) -> str:
            assert start_http is not None
            proxy = start_http(name, url)
            launch.http_proxies.append(proxy)
            return f"127.0.0.1:{proxy.port}"

        rec = opts.recorder
        plan = mcp_overrides(
            setup.servers,
            out=rec.out,
            run_id=rec.run_id,
            tokenizer=opts.footprint_tokenizer,
            listen=listen if start_http is not None else None,
            startup_grace=_int(setup.config.get("mcp_optional_startup_grace_ms")),
            passthrough=["PYTHONPATH"] if launch.env.get("PYTHONPATH") else [],
        )
        flags += plan.overrides
        launch.wrapped, launch.unwrapped = plan.wrapped, plan.unwrapped
    launch.argv = [launch.argv[0], *flags, *setup.rest]
    return launch


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _codex(opts: RecordOptions) -> CodexSetup:
    return codex_setup(opts.command, os.environ if opts.environ is None else opts.environ)


def _upstreams(opts: RecordOptions) -> dict[str, str]:
    """API family → the URL its proxy forwards to."""
    env = os.environ if opts.environ is None else opts.environ
    if is_codex(opts.command):  # one API: the provider of its config, unless --upstream says otherwise
        if opts.api not in (None, "openai"):
            raise ConfigError("Codex speaks the OpenAI API: --api openai (or no --api)")
        return {"openai": opts.upstream or _codex(opts).upstream}
    families = _families(opts.command)
    if opts.api is not None:
        families = [opts.api]
    if opts.upstream is not None:
        if len(families) > 1:
            raise ConfigError(
                "--upstream needs --api anthropic|openai|gemini for a client that is not Claude Code or Gemini CLI"
            )
        return {families[0]: opts.upstream}
    return {f: env.get(BASE_URL_VARS[f]) or DEFAULT_UPSTREAMS[f] for f in families}


@contextlib.contextmanager
def _started(proxies: list[LLMProxy]) -> Iterator[None]:
    started: list[LLMProxy] = []
    try:
        for proxy in proxies:
            proxy.__enter__()
            started.append(proxy)
        yield
    finally:
        for proxy in started:
            proxy.__exit__(None, None, None)


def _run_client(argv: list[str], env: dict[str, str], cwd: Path | None) -> int:
    """Run the client attached to the terminal; Ctrl-C is the client's, SIGTERM is passed on to it."""
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd)
    except FileNotFoundError:
        raise ConfigError(f"cannot run {argv[0]!r}: no such program (is it on PATH?)") from None
    except PermissionError:
        raise ConfigError(f"cannot run {argv[0]!r}: permission denied") from None

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    old: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: leave the handlers alone
        old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        old[signal.SIGTERM] = signal.signal(signal.SIGTERM, forward)
        old[signal.SIGHUP] = signal.signal(signal.SIGHUP, forward)
    try:
        return proc.wait()
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


def _wait_for_parts(rec: Recorder, timeout_s: float) -> list[Path]:
    """Wait until every other process's part of the run is finished; the parts still live after ``timeout_s``."""
    folder = parts_dir(rec.out, rec.run_id)
    deadline = time.monotonic() + timeout_s
    while True:
        live = [p for p in folder.glob("*.jsonl") if is_live(p)] if folder.is_dir() else []
        # a stdio MCP proxy's recorder finishes after the client killed the relay (its frame journal is there until
        # its events are journaled as a part of its own): wait for it too, or the run is merged without it; a
        # journal nobody is on any more (its relay killed before its recorder started) is recorded here
        if record_orphans(rec.out, rec.run_id):
            continue
        live += [Path(p) for p in frame_journal.journals(str(folder)) if frame_journal.is_live(p)]
        if not live or time.monotonic() >= deadline:
            return live
        time.sleep(0.05)


@dataclass
class RecordResult:
    exit_code: int
    run_file: Path | None
    launch: ClientLaunch
    proxies: list[LLMProxy]
    still_writing: list[Path]


def record(opts: RecordOptions) -> RecordResult:
    """Run the client with everything recorded; returns once the run is merged (or left for the last writer)."""
    if not opts.command:
        raise ConfigError(
            "no client: 'promcp record [options] -- COMMAND ARGS…' (e.g. 'promcp record -- claude')"
        )
    upstreams = _upstreams(opts)
    proxies = [
        LLMProxy(
            url,
            opts.recorder,
            tokenizer=opts.tokenizer,
            footprint_tokenizer=opts.footprint_tokenizer,
            strategy=opts.strategy,
        )
        for url in upstreams.values()
    ]
    rec = opts.recorder
    http_started: list[McpHttpProxy] = []

    def start_http(name: str, url: str) -> McpHttpProxy:
        proxy = McpHttpProxy(
            url,
            out=rec.out,
            name=name,
            run_id=rec.run_id,
            tokenizer=opts.footprint_tokenizer,
            content=rec.content,
            max_content_bytes=rec.max_content_bytes,
        )
        proxy.__enter__()
        http_started.append(proxy)
        return proxy

    _sweep_temp()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp, _started(proxies):
        base_urls = {family: proxy.url for family, proxy in zip(upstreams, proxies, strict=True)}
        try:
            launch = plan_launch(opts, base_urls, Path(tmp) / "mcp-config.json", start_http=start_http)
            for proxy in proxies:  # Gemini tool names mcp_<server>_<tool> are split on the known servers
                proxy.recording.mcp_servers = tuple(launch.wrapped)
            code = _run_client(launch.argv, launch.env, opts.cwd)
        finally:
            for http in http_started:  # ends their sessions and closes their part of the run
                http.__exit__(None, None, None)
    rec.close()  # merges now if the MCP proxies are done already
    live = _wait_for_parts(rec, PARTS_WAIT_S)
    path = finalize_group(rec.out, rec.run_id, link=link_tool_calls) if not live else None
    return RecordResult(code, path, launch, proxies, live)
