"""The scripted model of the README's tour, step 7: an Anthropic-compatible upstream on loopback for
``promcp record --upstream``, so a real Claude Code can be recorded offline.

    python examples/scripted_upstream.py --port 8765 &
    promcp record --out traces/claude --upstream http://127.0.0.1:8765 -- claude -p "..." --allowedTools TOOL

It plays the model of ``tests/stubs/scripted_llm.py`` (the one the tests record Claude Code with): a tool search
selecting the tool when Claude Code defers it, then a call of the tool with the given arguments, then an answer
quoting its result; usage is reported as a provider would (cache reads and writes included). Ctrl-C stops it.
Run it from a checkout of the repository (it uses the tests' stubs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/stubs

from tests.stubs.llm_http import StubServer
from tests.stubs.scripted_llm import Scripted

TOOL = "mcp__memory__create_entities"
ARGUMENTS = {
    "entities": [{"name": "promcp", "entityType": "project", "observations": ["records every stage"]}]
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=8765, help="loopback port (default 8765; 0 = a free one)")
    p.add_argument("--tool", default=TOOL, help=f"the tool the model calls, as the client names it ({TOOL})")
    p.add_argument("--arguments", default=json.dumps(ARGUMENTS), help="its arguments, JSON")
    p.add_argument("--answer", default="Saved: ", help="the start of the final answer")
    args = p.parse_args(argv)
    script = Scripted(args.tool, json.loads(args.arguments), answer=args.answer)
    with StubServer(script.anthropic, port=args.port) as stub:
        print(stub.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
