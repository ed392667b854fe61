"""Run a Python program with promcp instrumentation, without editing it.

    PROMCP_OUT=traces/ PROMCP_TOPOLOGY=l-cust PROMCP_TOKENIZER=o200k_base \\
        python -m promcp.shims.auto my_host.py --its --own args

Environment: ``PROMCP_INSTRUMENT`` (default ``1``; ``0`` runs the program untouched), ``PROMCP_OUT`` (dataset
directory, default ``traces/``), ``PROMCP_TOPOLOGY`` (default ``l-cust``), ``PROMCP_TOKENIZER`` (default
``o200k_base``), ``PROMCP_CONTENT`` (``redacted``, ``full`` or ``none``; default ``redacted``),
``PROMCP_MAX_CONTENT_BYTES`` (per stored text; default 4 MiB, ``0`` no cap), plus the standard ``OTEL_EXPORTER_OTLP_*`` variables for span export. The run is finalized to
Parquet when the program ends (also on ``sys.exit`` and exceptions). ``-m module`` runs a module instead of a file.
"""

from __future__ import annotations

import os
import runpy
import sys

from promcp.defaults import DEFAULT_TOKENIZER


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    as_module = args[0] == "-m"
    if as_module:
        args = args[1:]
        if not args:
            print("promcp.shims.auto: -m needs a module name", file=sys.stderr)
            return 2
    target = args[0]
    enabled = os.environ.get("PROMCP_INSTRUMENT", "1").strip().lower() not in ("0", "false", "no", "off")
    if enabled:
        from promcp.content import DEFAULT_MAX_CONTENT_BYTES
        from promcp.shims import instrument

        max_bytes = os.environ.get("PROMCP_MAX_CONTENT_BYTES", "").strip()
        instrument(
            os.environ.get("PROMCP_OUT") or "traces/",
            topology=os.environ.get("PROMCP_TOPOLOGY") or "l-cust",
            tokenizer=os.environ.get("PROMCP_TOKENIZER") or DEFAULT_TOKENIZER,
            content=os.environ.get("PROMCP_CONTENT") or "redacted",
            max_content_bytes=int(max_bytes) if max_bytes.isdigit() else DEFAULT_MAX_CONTENT_BYTES,
        )
    sys.argv = list(args)
    code = 0
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        if enabled:
            from promcp.shims import uninstrument

            path = uninstrument()
            if path is not None:
                print(f"promcp: trace written to {path}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
