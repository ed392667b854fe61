"""The embedded model in a child process, where its native crashes can be seen.

llama.cpp is C++: a fault in it (an illegal instruction, a general protection fault in a CPU kernel such as the AMX
matrix multiply) kills the process that runs it, Python and all. The host therefore keeps its own process for the
conversation, the MCP sessions and the journal, and runs inference in a child (``multiprocessing``, spawn start
``python -m promcp.host.llm._model_process``: a fresh interpreter that imports nothing of the caller's ``__main__``,
no inherited threads or locks; requests and answers go over a socket pair, an abort over a pipe). A crash then ends the **call**: the parent sees the
child's exit signal and raises :class:`ModelCrashed` (``error_type="model_crashed"``), the task fails with that
reason, and the run goes on; the next call starts a new child.

:func:`load_llama` is the one place the model's load options are decided, for the child and for the test stub that
serves the same model over HTTP. Among them ``use_extra_bufts = False``: llama.cpp's *extra buffer types* are the CPU
backend's alternative weight layouts, the AMX tile buffer (on CPUs that advertise ``amx_int8``) and the repacked
layouts. The AMX path faulted at ``ldtilecfg`` under a VM whose CPU lists AMX (docs/run.md, "The embedded model on
any CPU"); the option is a field of the C struct ``llama_model_params`` that ``Llama()`` does not expose (a keyword
argument of that name is silently swallowed by its ``**kwargs``), so it is set on the struct the model is loaded
with.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NoReturn

from promcp.errors import LLMError

#: how long a child may take to load the model before the load counts as failed
LOAD_TIMEOUT_S = 120.0
#: the most of a crashed child's fault log kept in the error (Python's faulthandler writes the stack there)
CRASH_LOG_BYTES = 4096


class ModelCrashed(LLMError):
    """The model's process died (a signal or an exit) while loading or evaluating; ``signal_name`` says which."""

    def __init__(self, message: str, *, signal_name: str | None, crash_log: str = "") -> None:
        super().__init__(message, error_type="model_crashed")
        self.signal_name = signal_name
        self.crash_log = crash_log


@contextlib.contextmanager
def _extra_bufts_off() -> Iterator[None]:
    """While loading: every ``llama_model_default_params()`` comes back with ``use_extra_bufts = False``."""
    import llama_cpp.llama_cpp as capi

    original = capi.llama_model_default_params

    def params() -> Any:
        p = original()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    capi.llama_model_default_params = params
    try:
        yield
    finally:
        capi.llama_model_default_params = original


def load_llama(path: Path, n_ctx: int, n_threads: int, seed: int) -> Any:
    """A ``llama_cpp.Llama`` for inference, with the load options promcp decides (see the module's docstring)."""
    import llama_cpp

    from promcp.tokenizers._gguf import quiet_stderr

    with quiet_stderr(), _extra_bufts_off():
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            n_batch=512,
            flash_attn=False,  # flash attention costs a multi-second warm-up on the first decode
            seed=seed,
            verbose=False,
        )


# -- the child ------------------------------------------------------------------------------------------------------


def _child_main(
    conn: Connection, abort_fd: int, path: str, n_ctx: int, n_threads: int, seed: int, fault_log: str
) -> None:
    """The child's loop: load, answer ``complete`` requests one at a time, exit when the parent goes away."""
    with open(fault_log, "w") as log:
        faulthandler.enable(file=log)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (it aborts the call)
        try:
            llm = load_llama(Path(path), n_ctx, n_threads, seed)
        except Exception as exc:
            conn.send(("error", "model_load", f"{type(exc).__name__}: {exc}"))
            return
        conn.send(("ready", None, None))
        grammars: dict[str, Any] = {}
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            if request is None:
                llm.close()
                return
            _aborted(abort_fd)  # an abort left from a call that had already ended
            try:
                conn.send(("ok", _complete(llm, request, grammars, abort_fd), None))
            except ValueError as exc:  # e.g. "Requested tokens exceed context window"
                conn.send(("error", "context_overflow", str(exc)))
            except Exception as exc:
                conn.send(("error", "llm_error", f"llama.cpp failed: {type(exc).__name__}: {exc}"))


def _aborted(fd: int) -> bool:
    """Whether the parent asked to stop (a byte on the abort pipe); reading drains it."""
    if not select.select([fd], [], [], 0)[0]:
        return False
    with contextlib.suppress(BlockingIOError, OSError):
        os.read(fd, 4096)
    return True


def _grammar(schemas: tuple[str, str], cache: dict[str, Any]) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    from promcp.tokenizers._gguf import quiet_stderr

    strict, loose = schemas
    grammar = cache.get(strict)
    if grammar is None:
        try:
            with quiet_stderr():
                grammar = LlamaGrammar.from_json_schema(strict, verbose=False)
        except Exception:  # a schema llama.cpp cannot convert: arguments as any JSON object instead
            with quiet_stderr():
                grammar = LlamaGrammar.from_json_schema(loose, verbose=False)
        cache[strict] = grammar
    return grammar


def _complete(llm: Any, request: dict[str, Any], grammars: dict[str, Any], abort_fd: int) -> dict[str, Any]:
    import llama_cpp

    ctx = llm._ctx.ctx
    llama_cpp.llama_perf_context_reset(ctx)
    out = llm.create_completion(
        request["prompt"],
        max_tokens=request["max_tokens"],
        temperature=request["temperature"],
        top_p=request["top_p"],
        seed=request["seed"],
        grammar=_grammar(request["grammar"], grammars) if request.get("grammar") else None,
        stop=request.get("stop") or None,
        stopping_criteria=llama_cpp.StoppingCriteriaList([lambda _ids, _logits: _aborted(abort_fd)]),
    )
    perf = llama_cpp.llama_perf_context(ctx)
    return {
        "out": out,
        "n_p_eval": int(perf.n_p_eval),
        "t_p_eval_ms": float(perf.t_p_eval_ms),
        "t_eval_ms": float(perf.t_eval_ms),
    }


# -- the parent -----------------------------------------------------------------------------------------------------


def _signal_name(exitcode: int | None) -> str | None:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


class ModelProcess:
    """One model loaded in a child process; :meth:`complete` is one completion, :meth:`abort` stops it early.

    Calls are serialized (one model, one KV cache: consecutive prompts that share a prefix reuse it, as in-process).
    A child that dies is noticed within 0.1 s of its death; the call raises :class:`ModelCrashed` and the next call
    starts a fresh child.
    """

    def __init__(self, path: Path, n_ctx: int, n_threads: int, seed: int) -> None:
        self.path, self.n_ctx, self.n_threads, self.seed = path, n_ctx, n_threads, seed
        self._abort_w: int | None = None
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None
        self._fault_log: str | None = None
        self.starts = 0

    # the child ------------------------------------------------------------------------------------------------------

    def _start(self) -> None:
        fd, self._fault_log = tempfile.mkstemp(prefix="promcp-model-", suffix=".fault.log")
        os.close(fd)
        parent, child = socket.socketpair()
        abort_r, abort_w = os.pipe()
        os.set_blocking(abort_w, False)
        args = [str(self.path), str(self.n_ctx), str(self.n_threads), str(self.seed), self._fault_log]
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(child.fileno()), str(abort_r), *args],
                pass_fds=(child.fileno(), abort_r),
                stdin=subprocess.DEVNULL,
            )
        finally:
            child.close()
            os.close(abort_r)
        self._conn = Connection(parent.detach())
        self._abort_w = abort_w
        self.starts += 1
        kind, error_type, message = self._receive(LOAD_TIMEOUT_S, doing="loading the model")
        if kind == "error":
            self._stop()
            raise LLMError(f"cannot load GGUF model {self.path}: {message}", error_type=str(error_type))

    def _receive(self, timeout_s: float | None, *, doing: str) -> tuple[str, Any, Any]:
        assert self._conn is not None and self._proc is not None
        waited = 0.0
        while True:
            try:
                if self._conn.poll(0.1):
                    msg: tuple[str, Any, Any] = self._conn.recv()
                    return msg
            except (EOFError, OSError):
                pass  # the child closed its end: it is dying; its exit code says how
            waited += 0.1
            alive = self._proc.poll() is None
            if not alive or (timeout_s is not None and waited >= timeout_s):
                self._crashed(doing, timed_out=alive)

    def _crashed(self, doing: str, *, timed_out: bool) -> NoReturn:
        if timed_out:
            self._proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(5)
        exitcode = self._proc.returncode
        name = _signal_name(exitcode)
        log = self._read_fault_log()
        self._stop()
        how = (
            "did not answer in time and was stopped"
            if timed_out
            else (f"was killed by {name}" if name else f"exited with code {exitcode}")
        )
        hint = (
            " (a native crash in llama.cpp: `promcp doctor` checks the model on this CPU, docs/run.md says what to do)"
            if name in ("SIGSEGV", "SIGILL", "SIGBUS", "SIGFPE", "SIGABRT")
            else ""
        )
        raise ModelCrashed(f"the model process {how} while {doing}{hint}", signal_name=name, crash_log=log)

    def _read_fault_log(self) -> str:
        if not self._fault_log:
            return ""
        try:
            with open(self._fault_log, "rb") as f:
                return f.read(CRASH_LOG_BYTES).decode("utf-8", "replace")
        except OSError:
            return ""

    def _stop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        if self._abort_w is not None:
            with contextlib.suppress(OSError):
                os.close(self._abort_w)
        if self._fault_log:
            with contextlib.suppress(OSError):
                os.unlink(self._fault_log)
        self._proc = self._conn = self._fault_log = self._abort_w = None

    # the API --------------------------------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        with self._lock:
            if self._proc is None:
                self._start()

    def complete(self, request: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """``request``: prompt, max_tokens, temperature, top_p, seed, grammar (strict, loose JSON), stop."""
        with self._lock:
            if self._proc is None:
                self._start()
            assert self._conn is not None
            try:
                self._conn.send(request)
            except (OSError, ValueError):
                self._crashed("receiving a prompt", timed_out=False)
            kind, value, message = self._receive(timeout_s, doing="evaluating a prompt")
        if kind == "error":
            raise LLMError(str(message), error_type=str(value))
        result: dict[str, Any] = value
        return result

    def abort(self) -> None:
        if self._abort_w is not None:
            with contextlib.suppress(OSError):
                os.write(self._abort_w, b"x")

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else int(self._proc.pid)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._proc is not None and self._proc.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    self._conn.send(None)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(5)
            self._stop()


def main(argv: list[str]) -> None:
    conn_fd, abort_fd, path, n_ctx, n_threads, seed, fault_log = argv
    _child_main(
        Connection(int(conn_fd)), int(abort_fd), path, int(n_ctx), int(n_threads), int(seed), fault_log
    )


if __name__ == "__main__":
    main(sys.argv[1:])
