"""What ``use_extra_bufts = False`` (docs/run.md, "The embedded model on any CPU") costs in prompt evaluation.

Each setting runs in a fresh process (the option is decided when the model loads), the two alternating for
``--rounds`` rounds. A process loads the default model with one thread (no spin-waiting between threads, so the CPU
time is the work's and not the scheduler's), evaluates a ``--tokens``-token prompt ``--repeat`` times with an empty KV
cache, and reports tokens per CPU-second (``getrusage``, robust on a shared machine) and per wall-second (llama.cpp's
perf counters).

    .venv/bin/python tests/perf/bench_model_load_options.py [--rounds 3] [--tokens 600] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
from typing import Any


def _child(extra_bufts: bool, tokens: int, repeat: int) -> dict[str, Any]:
    import llama_cpp
    import llama_cpp.llama_cpp as capi

    from promcp.host.llm import _model_process
    from promcp.host.llm.llama_cpp import default_model_path

    path = default_model_path()
    if extra_bufts:  # llama.cpp's default: load without promcp's override
        from promcp.tokenizers._gguf import quiet_stderr

        with quiet_stderr():
            llm = llama_cpp.Llama(
                model_path=str(path), n_ctx=2048, n_threads=1, n_threads_batch=1, n_batch=512, verbose=False
            )
    else:
        llm = _model_process.load_llama(path, 2048, 1, 0)
    cpu_rates, wall_rates = [], []
    for i in range(repeat):
        llm.reset()
        with contextlib.suppress(AttributeError):
            llm._ctx.memory_clear(True)
        capi.llama_perf_context_reset(llm._ctx.ctx)
        before = resource.getrusage(resource.RUSAGE_SELF)
        llm.create_completion(f"{i} " + "Hello " * tokens, max_tokens=1, temperature=0.0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        perf = capi.llama_perf_context(llm._ctx.ctx)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        cpu_rates.append(perf.n_p_eval / cpu)
        wall_rates.append(perf.n_p_eval / (perf.t_p_eval_ms / 1000))
    info = llama_cpp.llama_print_system_info().decode()
    return {
        "use_extra_bufts": bool(llm.model_params.use_extra_bufts),
        "cpu": max(cpu_rates),
        "wall": max(wall_rates),
        "amx": "AMX_INT8 = 1" in info,
        "avx512": "AVX512 = 1" in info,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child == "on", args.tokens, args.repeat)))
        return
    results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for _ in range(args.rounds):
        for setting in ("on", "off"):
            cmd = [sys.executable, __file__, "--child", setting, "--tokens", str(args.tokens)]
            out = subprocess.run(
                [*cmd, "--repeat", str(args.repeat)], capture_output=True, text=True, check=True
            )
            results[setting].append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = results["on"][0]
    print(
        f"CPU: AVX-512 {'yes' if first['avx512'] else 'no'}, AMX {'yes' if first['amx'] else 'no'}; ", end=""
    )
    print(
        f"{args.tokens}-token prompt, 1 thread, best of {args.repeat} per process, {args.rounds} processes each"
    )
    print(f"{'extra buffer types':<34} {'tok/CPU-s median (min-max)':>28} {'tok/wall-s median':>18}")
    medians = {}
    for setting, label in (("on", "on (llama.cpp default)"), ("off", "off (promcp)")):
        cpu = [r["cpu"] for r in results[setting]]
        wall = [r["wall"] for r in results[setting]]
        medians[setting] = statistics.median(cpu)
        print(
            f"{label:<34} {statistics.median(cpu):>10,.0f} ({min(cpu):,.0f}-{max(cpu):,.0f}){'':>4}"
            f" {statistics.median(wall):>18,.0f}"
        )
    print(f"off / on (CPU-s rate): {medians['off'] / medians['on']:.3f}")


if __name__ == "__main__":
    main()
