"""``promcp doctor`` / ``promcp run --check``: what a run needs, checked in seconds before a long run.

Each check returns a :class:`Check` (name, outcome, one-line detail with the reason and the fix): loopback
networking, Node.js (for the npm servers), every MCP server a benchmark's tasks use (started, listed, stopped —
the same path as ``promcp run --dry-run``), the model of the embedded backend (present, sha256 verified, and loaded in a child process to evaluate a prompt long
enough for llama.cpp's batched path, so a native crash on this CPU shows up here with its signal and the fix), the
API key of a cloud backend (present; never printed) and the backend's endpoint (reachable; for Ollama, the model
pulled). Nothing is written to a dataset.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import httpx2 as httpx

from promcp.errors import ConfigError, LLMError, PromcpError
from promcp.host.config import Benchmark, TaskConfig

Outcome = Literal["ok", "fail", "skip"]

#: Node.js major version the npm servers need.
NODE_MIN: Final = 18
#: Seconds an endpoint probe may take.
PROBE_TIMEOUT_S: Final = 5.0
#: backend → (environment variable of its key, path probed below the base URL)
NETWORK_BACKENDS: Final = {
    "anthropic": ("ANTHROPIC_API_KEY", "/v1/models"),
    "openai": ("OPENAI_API_KEY", "/models"),
    "ollama": (None, "/api/tags"),
}


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str


def check_loopback() -> Check:
    """127.0.0.1 accepts a TCP connection (the HTTP/SSE servers and every stub listen there)."""
    try:
        with socket.create_server(("127.0.0.1", 0)) as srv:
            port = srv.getsockname()[1]
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                conn, _ = srv.accept()
                conn.close()
    except OSError as exc:
        return Check("loopback", "fail", f"cannot listen on / connect to 127.0.0.1: {exc}")
    return Check("loopback", "ok", "127.0.0.1 accepts TCP connections")


def check_node(required: bool) -> Check:
    node = shutil.which("node")
    if node is None:
        return Check(
            "node",
            "fail" if required else "skip",
            f"Node.js not found on PATH (the npm MCP servers need Node.js ≥ {NODE_MIN})",
        )
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("node", "fail", f"{node} --version failed: {exc}")
    version = out.stdout.strip()
    try:
        major = int(version.lstrip("v").split(".", 1)[0])
    except ValueError:
        return Check("node", "fail", f"cannot read the Node.js version {version!r}")
    if major < NODE_MIN:
        return Check("node", "fail", f"Node.js {version} is too old: the npm MCP servers need ≥ {NODE_MIN}")
    return Check("node", "ok", f"Node.js {version}")


def _uses_node(bench: Benchmark, names: Sequence[str]) -> bool:
    for name in names:
        cfg = bench.servers[name]
        for cmd in (cfg.command, cfg.start):
            if cmd is not None and Path(str(cmd.command)).name in ("node", "npx", "npm"):
                return True
    return False


def check_servers(bench: Benchmark, tasks: Sequence[TaskConfig], scratch: Path) -> list[Check]:
    """Start, list and stop every server ``tasks`` use (as ``promcp run --dry-run`` does), in ``scratch``.

    ``bench`` must have been loaded with its workspace at ``scratch / "workspace"``.
    """
    from promcp.host.runner import DryBackend, prepare_workspace, run_benchmark
    from promcp.recorder import Recorder

    workspace = scratch / "workspace"
    prepare_workspace(bench, workspace)
    with Recorder(scratch / "data", topology="l-cust", fsync="never") as rec:
        result = asyncio.run(
            run_benchmark(
                bench,
                tasks,
                recorder=rec,
                backend=DryBackend(bench),  # type: ignore[arg-type]
                workspace=workspace,
                log_dir=scratch / "logs",
                dry_run=True,
            )
        )
    out = []
    for started in result.servers_started:
        name, _, tools = started.partition(" ")
        out.append(Check(f"server {name}", "ok", f"started, listed {tools.strip('()')}, stopped"))
    out += [Check(f"server {name}", "fail", err) for name, err in result.server_errors.items()]
    return out


def check_model(backend: str, model: str | None) -> Check:
    """The embedded backend's GGUF file exists (and the default one passes its pinned sha256)."""
    if backend != "llama-cpp":
        return Check(
            "model", "skip", f"{backend}: the model is served by the endpoint ({model or 'its default'})"
        )
    from promcp.host.llm import llama_cpp

    try:
        if model in (None, "", "smollm2-135m", "default"):
            path = llama_cpp.default_model_path()
            if not path.is_file():
                return Check("model", "fail", f"default model file missing: {path}")
            llama_cpp.verify_sha256(path, llama_cpp.DEFAULT_MODEL_SHA256)
        else:
            path = Path(str(model)).expanduser()
            if not path.is_file():
                return Check("model", "fail", f"GGUF model file not found: {path}")
    except ConfigError as exc:
        return Check("model", "fail", str(exc))
    return check_inference(path)


#: the doctor's prompt: long enough for llama.cpp's batched prompt path (more than one 512-token batch), where the
#: CPU-specific matrix kernels run (the AMX crash of docs/run.md happened there, never on a short prompt)
PROBE_PROMPT_TOKENS = 600
MODEL_PROBE_TIMEOUT_S: Final = 300.0
REBUILD_HINT = (
    "rebuild llama.cpp for any CPU: CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON' "
    ".venv/bin/pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python==0.3.36 (docs/run.md)"
)


def check_inference(path: Path, *, prompt_tokens: int = PROBE_PROMPT_TOKENS) -> Check:
    """Load ``path`` in a child process as ``promcp run`` does and evaluate a long prompt there, with a timeout: a
    native crash of this CPU's llama.cpp kernels shows up here, named with its signal and the fix, not mid-run."""
    from promcp.host.llm._model_process import ModelCrashed, ModelProcess
    from promcp.host.llm.llama_cpp import DEFAULT_N_CTX

    size = f"{path.name} ({path.stat().st_size / 1e6:,.0f} MB)"
    model = ModelProcess(path, DEFAULT_N_CTX, 2, 0)
    try:
        t0 = time.perf_counter()
        done = model.complete(
            {
                "prompt": "Hello " * prompt_tokens,
                "max_tokens": 1,
                "temperature": 0.0,
                "top_p": 1.0,
                "seed": 0,
                "grammar": None,
                "stop": [],
            },
            timeout_s=MODEL_PROBE_TIMEOUT_S,
        )
        seconds = time.perf_counter() - t0
    except ModelCrashed as exc:
        return Check("model", "fail", f"{size}: {exc}; {REBUILD_HINT}")
    except LLMError as exc:
        return Check("model", "fail", f"{size}: {exc}")
    finally:
        model.close()
    n = int(done["n_p_eval"])
    rate = n / (done["t_p_eval_ms"] / 1000) if done["t_p_eval_ms"] else 0.0
    return Check(
        "model", "ok", f"{size}, a {n:,}-token prompt evaluated in {seconds:.1f} s ({rate:,.0f} tokens/s)"
    )


def check_api_key(backend: str, explicit: str | None, base_url: str) -> Check:
    env_var = NETWORK_BACKENDS.get(backend, (None, ""))[0]
    if env_var is None:
        return Check("api key", "skip", f"{backend} needs no API key")
    if explicit or os.environ.get(env_var):
        return Check("api key", "ok", f"{'llm.api_key' if explicit else env_var} is set (not shown)")
    if _is_loopback(base_url):
        return Check("api key", "skip", f"{env_var} not set; not needed for a local endpoint")
    return Check("api key", "fail", f"the {backend} backend needs an API key: set {env_var}")


def _is_loopback(url: str) -> bool:
    host = httpx.URL(url).host
    return host in ("127.0.0.1", "localhost", "::1")


def check_endpoint(backend: str, base_url: str, model: str | None, api_key: str | None) -> Check:
    """The backend's endpoint answers over HTTP (any status but a refused key counts as reachable)."""
    if backend not in NETWORK_BACKENDS:
        return Check("endpoint", "skip", f"{backend} runs in this process")
    env_var, path = NETWORK_BACKENDS[backend]
    key = api_key or (os.environ.get(env_var) if env_var else None)
    headers: dict[str, str] = {}
    if key and backend == "anthropic":
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    elif key:
        headers = {"authorization": f"Bearer {key}"}
    url = base_url.rstrip("/") + path
    try:
        resp = httpx.get(url, headers=headers, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return Check("endpoint", "fail", f"cannot reach {base_url}: {type(exc).__name__}: {exc}")
    if resp.status_code in (401, 403):
        return Check("endpoint", "fail", f"{base_url} refused the API key (HTTP {resp.status_code})")
    if backend == "ollama" and resp.status_code == 200 and model:
        names = _ollama_models(resp)
        if names is not None and model not in names and f"{model}:latest" not in names:
            return Check("endpoint", "fail", f"{base_url} has no model {model!r}: run `ollama pull {model}`")
    return Check("endpoint", "ok", f"{base_url} answers (HTTP {resp.status_code})")


def _ollama_models(resp: httpx.Response) -> set[str] | None:
    try:
        body: Any = resp.json()
        return {str(m.get("name")) for m in body.get("models", [])}
    except (ValueError, AttributeError):
        return None


def base_url_of(backend: str, explicit: str | None) -> str:
    """The URL a network backend would call (the same defaults and environment variables as the backend)."""
    from promcp.host.llm import anthropic, ollama, openai
    from promcp.host.llm._http import default_base_url

    if explicit:
        return explicit
    defaults = {
        "anthropic": ("ANTHROPIC_BASE_URL", anthropic.DEFAULT_BASE_URL),
        "openai": ("OPENAI_BASE_URL", openai.DEFAULT_BASE_URL),
        "ollama": ("OLLAMA_HOST", ollama.DEFAULT_BASE_URL),
    }
    env, default = defaults.get(backend, ("", ""))
    return default_base_url(env, default) if env else ""


def run_checks(
    benchmark: Path | None,
    task_ids: Sequence[str] | None,
    *,
    backend: str | None,
    model: str | None,
    base_url: str | None,
    servers: bool = True,
) -> list[Check]:
    """Every check for a run of ``benchmark``'s tasks (``task_ids``, default all) with ``backend`` (default: the
    file's; ``model``/``base_url`` override the file's as ``promcp run`` does). Servers only when ``servers``."""
    from promcp.host import config

    with tempfile.TemporaryDirectory(prefix="promcp-doctor-") as tmp:
        scratch = Path(tmp)
        bench = config.load(benchmark, workspace=scratch / "workspace") if benchmark is not None else None
        tasks = bench.select(list(task_ids) if task_ids else None, None) if bench is not None else []
        name = backend or (bench.llm.backend if bench is not None else "llama-cpp")
        same = bench is not None and name == bench.llm.backend
        model = model or (bench.llm.model if same and bench is not None else None)
        base_url = base_url or (bench.llm.base_url if same and bench is not None else None)
        api_key = bench.llm.api_key if same and bench is not None else None
        names = list(dict.fromkeys(s for t in tasks for s in t.all_servers))
        checks = [check_loopback(), check_node(bench is not None and _uses_node(bench, names))]
        url = base_url_of(name, base_url)
        checks.append(check_model(name, model))
        if name in NETWORK_BACKENDS:
            checks.append(check_api_key(name, api_key, url))
            checks.append(check_endpoint(name, url, model, api_key))
        if bench is not None and servers and names:
            try:
                checks += check_servers(bench, tasks, scratch)
            except PromcpError as exc:
                checks.append(Check("servers", "fail", str(exc)))
    return checks
