"""The benchmark file of ``promcp run``: YAML (safe-loaded) → JSON Schema check → typed :class:`Benchmark`.

Every error is a :class:`~promcp.errors.ConfigError` naming the file, the key path (``tasks[3].servers``) and the
line. Strings may use ``${VAR}`` / ``${VAR:-default}``: the built-in variables ``WORKSPACE`` (the run's scratch
directory), ``BENCHMARK_DIR`` (the file's directory) and ``PYTHON`` (this interpreter), then the environment. A
server's own ``PORT`` (``port: auto`` picks a free loopback port) is visible in that server's strings.
Relative paths (a ``command`` containing ``/``, ``cwd``, ``llm.model`` ending in ``.gguf``, replay files) resolve
against the file's directory. The schema and every default are in :mod:`promcp.host._schema` and ``docs/run.md``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from promcp.errors import ConfigError
from promcp.host._schema import BENCHMARK_SCHEMA
from promcp.host.llm.base import RetryPolicy, Sampling
from promcp.strategies.live import StrategySpec, parse_strategy

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Policy:
    """The evaluation card's policies (defaults = the card)."""

    max_rounds: int = 10
    retries: int = 3
    backoff_s: tuple[float, ...] = (1.0, 2.0)
    timeout_s: float = 1500.0
    tool_timeout_s: float = 60.0
    discovery_timeout_s: float = 10.0
    startup_timeout_s: float = 30.0
    tool_execution: str = "sequential"
    streaming: bool = False
    ready_probe: bool = True

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(retries=self.retries, backoff_s=self.backoff_s)


@dataclass(frozen=True)
class Command:
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: str = "stdio"  # stdio | streamable_http | sse
    mode: str = "live"  # live | replay (replay: served from a recorded catalog by promcp.servers.replay)
    command: Command | None = None  # stdio: the server process
    url: str | None = None  # HTTP transports
    start: Command | None = None  # HTTP transports: optional process that serves ``url``
    port: int | None = None
    catalog: str | None = None
    responses: str | None = None
    replay_server: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class TaskConfig:
    id: str
    prompt: str
    servers: tuple[str, ...]
    distraction_servers: tuple[str, ...] = ()
    expected_tools: tuple[str, ...] = ()  # "server:tool"
    max_rounds: int | None = None
    system_prompt: str | None = None
    line: int | None = None
    #: the tool-tax mitigation its LLM calls apply (its own ``strategy:``, else the file's; ``None``: none)
    strategy: StrategySpec | None = None

    @property
    def all_servers(self) -> tuple[str, ...]:
        return self.servers + tuple(s for s in self.distraction_servers if s not in self.servers)


@dataclass(frozen=True)
class LLMConfig:
    backend: str = "llama-cpp"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    context_window: int | None = None
    tokenizer: str | None = None
    timeout_s: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def backend_opts(self) -> dict[str, Any]:
        opts: dict[str, Any] = dict(self.options)
        for key in ("model", "base_url", "api_key", "context_window", "tokenizer", "timeout_s"):
            value = getattr(self, key)
            if value is not None:
                opts[key] = value
        return opts


DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with access to tools. Use a tool when it helps answer the user's request, "
    "then answer briefly using the tool results."
)


@dataclass(frozen=True)
class Benchmark:
    name: str
    path: Path
    llm: LLMConfig
    sampling: Sampling
    policy: Policy
    servers: Mapping[str, ServerConfig]
    tasks: tuple[TaskConfig, ...]
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    workspace_files: Mapping[str, str] = field(default_factory=dict)
    workspace_git_repos: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: auto | required | none, or first: a tool call is required until the model has called one
    tool_choice: str = "auto"
    #: ``{key path: line}`` of the file, for errors found later (e.g. while the workspace is written)
    lines: Mapping[str, int] = field(default_factory=dict)

    def error(self, message: str, key: str) -> ConfigError:
        """A ConfigError naming this file, ``key`` and its line."""
        return ConfigError(message, source=self.path, key=key, line=self.lines.get(key))

    def select(self, task_ids: list[str] | None = None, limit: int | None = None) -> tuple[TaskConfig, ...]:
        """The tasks to run: ``task_ids`` (in file order; unknown ids are a ConfigError), then the first ``limit``."""
        tasks = self.tasks
        if task_ids:
            known = {t.id for t in tasks}
            unknown = [t for t in task_ids if t not in known]
            if unknown:
                raise ConfigError(f"unknown task id(s): {', '.join(unknown)}", source=self.path, key="--task")
            tasks = tuple(t for t in tasks if t.id in task_ids)
        if limit is not None:
            tasks = tasks[: max(limit, 0)]
        return tasks


# -- YAML with line numbers --------------------------------------------------------------------------------------


def _key(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _construct(
    node: yaml.Node, path: tuple[str | int, ...], lines: dict[str, int], loader: yaml.SafeLoader
) -> Any:
    lines[_key(path)] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for k_node, v_node in node.value:
            k = loader.construct_object(k_node, deep=True)
            if not isinstance(k, str):
                raise ConfigError(
                    f"keys must be strings, got {k!r}", key=_key(path), line=k_node.start_mark.line + 1
                )
            if k in out:
                raise ConfigError("duplicate key", key=_key((*path, k)), line=k_node.start_mark.line + 1)
            out[k] = _construct(v_node, (*path, k), lines, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(v, (*path, i), lines, loader) for i, v in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


#: The deepest nesting a benchmark file may use (real files nest about 6 levels).
MAX_YAML_DEPTH = 64
#: How many nodes aliases (``*name``) may add to the file by expansion ("billion laughs" stops here).
ALIAS_BUDGET = 10_000


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than :data:`MAX_YAML_DEPTH` and alias expansion beyond
    :data:`ALIAS_BUDGET` nodes, with the line where it happened, before anything is expanded."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded
        self._expanded = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            node = super().compose_node(parent, index)
            self._expanded += self._sizes.get(id(node), 1)
            if self._expanded > ALIAS_BUDGET:
                raise ConfigError(
                    f"aliases expand to more than {ALIAS_BUDGET:,} nodes (an alias bomb?); write the values out",
                    line=event.start_mark.line + 1,
                )
            return node
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ConfigError(
                f"nested more than {MAX_YAML_DEPTH} levels deep", line=event.start_mark.line + 1
            )
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes.get(id(v), 1) for v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = size
        return node


def load_yaml_with_lines(text: str, source: str | Path) -> tuple[Any, dict[str, int]]:
    """Safe-load one YAML document (bounded depth and alias expansion); also return ``{key path: line}``."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[str, int] = {}
        data = None if node is None else _construct(node, (), lines, loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ConfigError(
            f"invalid YAML: {exc.problem}", source=source, line=mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as exc:  # a reader error (a control character, bad encoding)
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    except ConfigError as exc:
        raise ConfigError(exc.message, source=source, key=exc.key, line=exc.line) from None
    finally:
        loader.dispose()
    return data, lines


# -- loading ------------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Loader:
    def __init__(
        self, path: Path, lines: dict[str, int], variables: Mapping[str, str], env: Mapping[str, str]
    ) -> None:
        self.path = path  # as the user named it (error messages)
        self.base = path.resolve().parent
        self.lines = lines
        self.variables = variables
        self.env = env

    def error(self, message: str, key: str) -> ConfigError:
        line = self.lines.get(key)
        probe = key
        while line is None and probe:
            probe = re.sub(r"(\[\d+\]|\.[^.\[]+|^[^.\[]+)$", "", probe)
            line = self.lines.get(probe)
        return ConfigError(message, source=self.path, key=key or None, line=line)

    def expand(self, value: Any, key: str, extra: Mapping[str, str] | None = None) -> Any:
        if isinstance(value, str):

            def sub(m: re.Match[str]) -> str:
                name, default = m.group(1), m.group(2)
                for scope in (extra or {}, self.variables, self.env):
                    if name in scope:
                        return str(scope[name])
                if default is not None:
                    return default
                raise self.error(f"${{{name}}} is not set (and has no ${{{name}:-default}})", key)

            return _VAR.sub(sub, value)
        if isinstance(value, list):
            return [self.expand(v, f"{key}[{i}]", extra) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.expand(v, f"{key}.{k}" if key else k, extra) for k, v in value.items()}
        return value

    def check_workspace_path(self, rel: str, key: str, *, in_repo: bool = False) -> None:
        """A path the run will write must be relative and stay inside the workspace (or its git repository)."""
        parts = Path(rel).parts
        if not rel or "\x00" in rel or Path(rel).is_absolute() or ".." in parts:
            raise self.error(f"workspace path {rel!r} must be relative and stay inside the workspace", key)
        if in_repo and ".git" in parts:
            raise self.error(f"{rel!r} would write into the repository's .git directory", key)

    def resolve_path(self, value: str) -> str:
        p = Path(value).expanduser()
        return str(p if p.is_absolute() else (self.base / p).resolve())

    def command(self, raw: dict[str, Any], key: str) -> Command:
        cmd = raw["command"]
        if cmd == "python":
            cmd = sys.executable
        elif "/" in cmd:
            cmd = self.resolve_path(cmd)
            if not Path(cmd).exists():
                raise self.error(f"command not found: {cmd}", f"{key}.command")
        else:
            # bare names: the interpreter's bin directory (venv-installed servers) first, then PATH
            local = Path(sys.executable).parent / cmd
            found = str(local) if local.exists() else shutil.which(cmd)
            if found is None:
                raise self.error(
                    f"command {cmd!r} not found next to {sys.executable} or on PATH", f"{key}.command"
                )
            cmd = found
        cwd = raw.get("cwd")
        return Command(
            command=cmd,
            args=tuple(raw.get("args", ())),
            env=dict(raw.get("env", {})),
            cwd=self.resolve_path(cwd) if cwd else None,
        )

    def server(self, name: str, raw: dict[str, Any]) -> ServerConfig:
        key = f"servers.{name}"
        port: int | None = None
        extra: dict[str, str] = {}
        if "port" in raw:
            port = free_port() if raw["port"] == "auto" else int(raw["port"])
            extra["PORT"] = str(port)
        raw = self.expand(raw, key, extra)
        mode = raw.get("mode", "live")
        transport = raw.get("transport", "stdio")
        if mode == "replay":
            for needed in ("catalog",):
                if needed not in raw:
                    raise self.error(f"a replay server needs {needed!r}", key)
            catalog = self.resolve_path(raw["catalog"])
            responses = self.resolve_path(raw["responses"]) if "responses" in raw else None
            replay_server = raw.get("catalog_server", raw.get("replay_server", name))
            # promcp.servers.replay serves it; ``args`` go to that server (--latency-ms, --result-bytes, ...)
            argv = ["-m", "promcp.servers.replay", "--catalog", catalog, "--server", replay_server]
            argv += ["--responses", responses] if responses else []
            argv += list(raw.get("args", ()))
            url = start = None
            if transport != "stdio":
                port = port or free_port()
                url = f"http://127.0.0.1:{port}/{'mcp' if transport == 'streamable_http' else 'sse'}"
                argv += ["--transport", transport.replace("_", "-"), "--port", str(port)]
                start = Command(command=sys.executable, args=tuple(argv))
            return ServerConfig(
                name=name,
                transport=transport,
                mode=mode,
                command=Command(command=sys.executable, args=tuple(argv)) if transport == "stdio" else None,
                url=url,
                start=start,
                port=port,
                catalog=catalog,
                responses=responses,
                replay_server=replay_server,
                line=self.lines.get(key),
            )
        if transport == "stdio":
            if "command" not in raw:
                raise self.error("a stdio server needs 'command'", key)
            if "url" in raw or "start" in raw:
                raise self.error("'url' and 'start' are for streamable_http/sse servers", key)
            return ServerConfig(
                name=name,
                transport=transport,
                command=self.command(raw, key),
                port=port,
                line=self.lines.get(key),
            )
        if "url" not in raw:
            raise self.error(f"a {transport} server needs 'url'", key)
        if "command" in raw:
            raise self.error(
                "an HTTP server's process goes under 'start: {command, args, env}'", f"{key}.command"
            )
        start = self.command(raw["start"], f"{key}.start") if "start" in raw else None
        return ServerConfig(
            name=name, transport=transport, url=raw["url"], start=start, port=port, line=self.lines.get(key)
        )

    def strategy(self, text: str | None, key: str) -> StrategySpec | None:
        if text is None:
            return None
        return parse_strategy(text, source=str(self.path), key=key, line=self.lines.get(key))

    def task(
        self,
        i: int,
        raw: dict[str, Any],
        servers: Mapping[str, ServerConfig],
        strategy: StrategySpec | None = None,
    ) -> TaskConfig:
        key = f"tasks[{i}]"
        raw = self.expand(raw, key)
        for field_name in ("servers", "distraction_servers"):
            for j, s in enumerate(raw.get(field_name, ())):
                if s not in servers:
                    raise self.error(
                        f"unknown server {s!r}; defined: {', '.join(servers)}", f"{key}.{field_name}[{j}]"
                    )
        used = set(raw["servers"])
        for j, spec in enumerate(raw.get("expected_tools", ())):
            server = spec.split(":", 1)[0]
            if server not in used:
                raise self.error(
                    f"expected tool {spec!r} names server {server!r}, which is not in this task's servers",
                    f"{key}.expected_tools[{j}]",
                )
        return TaskConfig(
            id=raw["id"],
            prompt=raw["prompt"],
            servers=tuple(raw["servers"]),
            distraction_servers=tuple(raw.get("distraction_servers", ())),
            expected_tools=tuple(raw.get("expected_tools", ())),
            max_rounds=raw.get("max_rounds"),
            system_prompt=raw.get("system_prompt"),
            line=self.lines.get(key),
            strategy=self.strategy(raw.get("strategy"), f"{key}.strategy") or strategy,
        )


def _schema_error(exc: jsonschema.ValidationError) -> tuple[str, str]:
    path = _key(tuple(exc.absolute_path))
    message = exc.message
    if exc.validator == "additionalProperties" and isinstance(exc.instance, dict):
        schema = exc.schema if isinstance(exc.schema, dict) else {}
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(exc.instance) - set(allowed))
        if extra:
            path = _key((*exc.absolute_path, extra[0]))
            message = f"unknown key {extra[0]!r}; allowed here: {', '.join(allowed)}"
    return message, path


#: How many schema problems one error lists (a file can be wrong in many places; the first ones are enough).
MAX_REPORTED = 10


def _validate(data: dict[str, Any], path: Path, lines: dict[str, int]) -> None:
    """Every schema problem of the file, each with its key path and line (one ConfigError listing them)."""
    validator = jsonschema.Draft202012Validator(BENCHMARK_SCHEMA)
    found: list[ConfigError] = []
    seen: set[tuple[str, str]] = set()
    for group in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        # a oneOf/anyOf failure: its most specific reason, not "is not valid under any of the given schemas"
        best = jsonschema.exceptions.best_match([group])
        message, key = _schema_error(best)
        if (key, message) not in seen:
            seen.add((key, message))
            found.append(_Loader(path, lines, {}, {}).error(message, key))
    if found:
        raise ConfigError.combine(found[:MAX_REPORTED], more=max(len(found) - MAX_REPORTED, 0))


def load(
    path: str | Path,
    *,
    workspace: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Benchmark:
    """Read, validate and type the benchmark file at ``path`` (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read benchmark file: {exc.strerror or exc}", source=path) from exc
    data, lines = load_yaml_with_lines(text, path)
    if not isinstance(data, dict):
        raise ConfigError(
            "the benchmark file must be a YAML mapping (servers:, tasks:, …)", source=path, line=1
        )
    _validate(data, path, lines)
    variables = {
        "BENCHMARK_DIR": str(path.resolve().parent),
        "PYTHON": sys.executable,
        "WORKSPACE": str(Path(workspace).resolve())
        if workspace
        else str(path.resolve().parent / ".promcp-workspace"),
    }
    ld = _Loader(path, lines, variables, os.environ if env is None else env)
    servers = {name: ld.server(name, raw) for name, raw in data["servers"].items()}
    tasks: list[TaskConfig] = []
    seen: set[str] = set()
    run_strategy = ld.strategy(ld.expand(data.get("strategy"), "strategy"), "strategy")
    for i, raw in enumerate(data["tasks"]):
        task = ld.task(i, raw, servers, run_strategy)
        if task.id in seen:
            raise ld.error(f"duplicate task id {task.id!r}", f"tasks[{i}].id")
        seen.add(task.id)
        tasks.append(task)
    llm_raw = ld.expand(data.get("llm", {}), "llm")
    if llm_raw.get("model", "").endswith(".gguf"):
        llm_raw["model"] = ld.resolve_path(llm_raw["model"])
    llm = LLMConfig(**llm_raw)
    s = data.get("sampling", {})
    sampling = Sampling(
        temperature=float(s.get("temperature", 0.0)),
        top_p=s.get("top_p"),
        max_tokens=int(s.get("max_tokens", 256)),
        seed=s.get("seed", 0),
    )
    p = data.get("policy", {})
    policy = Policy(**{**p, "backoff_s": tuple(float(b) for b in p.get("backoff_s", (1.0, 2.0)))})
    ws = ld.expand(data.get("workspace", {}), "workspace")
    for rel in ws.get("files", {}):
        ld.check_workspace_path(rel, f"workspace.files.{rel}")
    for repo, files in ws.get("git_repos", {}).items():
        ld.check_workspace_path(repo, f"workspace.git_repos.{repo}")
        for rel in files:
            ld.check_workspace_path(rel, f"workspace.git_repos.{repo}.{rel}", in_repo=True)
    return Benchmark(
        name=data.get("name", path.stem),
        path=path,
        llm=llm,
        sampling=sampling,
        policy=policy,
        servers=servers,
        tasks=tuple(tasks),
        system_prompt=ld.expand(data.get("system_prompt", DEFAULT_SYSTEM_PROMPT), "system_prompt"),
        workspace_files=ws.get("files", {}),
        workspace_git_repos=ws.get("git_repos", {}),
        tool_choice=s.get("tool_choice", "auto"),
        lines=lines,
    )
