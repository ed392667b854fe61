"""A live ``topk`` run and the what-if's prediction from a recorded baseline route the same task to the same tools.

The live side: the host's catalog (``ToolSpec`` → ``catalog_of``, MCP's ``inputSchema`` form) planned on the task
prompt of its own run. The predicted side: a baseline run recorded by a real :class:`~promcp.recorder.Recorder`
(definitions captured in the host's ``parameters`` form, the prompt stored redacted as ``promcp run`` stores it),
projected by :func:`promcp.analysis.whatif.evaluate_dataset`. The two runs' prompts differ only in the workspace
path, which is named after each run — as the default benchmark's ``${WORKSPACE}`` is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promcp import tokenizers
from promcp.analysis import load, load_content, whatif
from promcp.events import Event, Origin, Part, Stage
from promcp.host.llm.base import ToolSpec
from promcp.host.strategy import StrategyState
from promcp.recorder import Recorder
from promcp.strategies.live import parse_strategy
from promcp.strategies.routing import Router, routing_query
from promcp.strategies.schema import render

TOK = "cl100k_base"
_LOG_TS = (
    "timestamp for filtering commits. Accepts: ISO 8601 format (e.g., '2024-01-15T14:30:25'), relative dates "
    "(e.g., '2 weeks ago', 'yesterday'), or absolute dates (e.g., '2024-01-15', 'Jan 15 2024')"
)
_SHA = "The commit sha that branch should {}contain. Do not pass anything to this param if no commit sha is specified"
_N_LINES = "If provided, returns only the {} N lines of the file"
#: mcp-server-git's and server-filesystem's tools as their tools/list describes them (names, descriptions and the
#: parameters' names and descriptions: what a tool is routed by; titles and defaults left out).
CATALOGS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "git": [
        ("git_status", "Shows the working tree status", {"repo_path": {"type": "string"}}),
        ("git_diff_unstaged", "Shows changes in the working directory that are not yet staged",
         {"repo_path": {"type": "string"}, "context_lines": {"type": "integer"}}),
        ("git_diff_staged", "Shows changes that are staged for commit",
         {"repo_path": {"type": "string"}, "context_lines": {"type": "integer"}}),
        ("git_diff", "Shows differences between branches or commits",
         {"repo_path": {"type": "string"}, "target": {"type": "string"}, "context_lines": {"type": "integer"}}),
        ("git_commit", "Records changes to the repository",
         {"repo_path": {"type": "string"}, "message": {"type": "string"}}),
        ("git_add", "Adds file contents to the staging area",
         {"repo_path": {"type": "string"}, "files": {"type": "array"}}),
        ("git_reset", "Unstages all staged changes", {"repo_path": {"type": "string"}}),
        ("git_log", "Shows the commit logs",
         {"repo_path": {"type": "string"}, "max_count": {"type": "integer"},
          "start_timestamp": {"description": f"Start {_LOG_TS}"}, "end_timestamp": {"description": f"End {_LOG_TS}"}}),
        ("git_create_branch", "Creates a new branch from an optional base branch",
         {"repo_path": {"type": "string"}, "branch_name": {"type": "string"}, "base_branch": {}}),
        ("git_checkout", "Switches branches", {"repo_path": {"type": "string"}, "branch_name": {"type": "string"}}),
        ("git_show", "Shows the contents of a commit, or of a file or directory given as <revision>:<path>",
         {"repo_path": {"type": "string"}, "revision": {"type": "string"}}),
        ("git_branch", "List Git branches",
         {"repo_path": {"description": "The path to the Git repository.", "type": "string"},
          "branch_type": {"description": "Whether to list local branches ('local'), remote branches ('remote') or "
                                         "all branches('all').", "type": "string"},
          "contains": {"description": _SHA.format("")}, "not_contains": {"description": _SHA.format("NOT ")}}),
    ],
    "filesystem": [
        ("read_file", "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.",
         {"path": {"type": "string"}, "tail": {"description": _N_LINES.format("last"), "type": "number"},
          "head": {"description": _N_LINES.format("first"), "type": "number"}}),
        ("read_text_file", "Read the complete contents of a file from the file system as text. Handles various "
         "text encodings and provides detailed error messages if the file cannot be read. Use this tool when you "
         "need to examine the contents of a single file. Use the 'head' parameter to read only the first N lines "
         "of a file, or the 'tail' parameter to read only the last N lines of a file. Operates on the file as "
         "text regardless of extension. Only works within allowed directories.",
         {"path": {"type": "string"}, "tail": {"description": _N_LINES.format("last"), "type": "number"},
          "head": {"description": _N_LINES.format("first"), "type": "number"}}),
        ("read_media_file", "Read a file and return it as a base64-encoded content block with its MIME type. "
         "Image and audio files are returned as image/audio content; any other file type is returned as an "
         "embedded resource. Only works within allowed directories.", {"path": {"type": "string"}}),
        ("read_multiple_files", "Read the contents of multiple files simultaneously. This is more efficient than "
         "reading files one by one when you need to analyze or compare multiple files. Each file's content is "
         "returned with its path as a reference. Failed reads for individual files won't stop the entire "
         "operation. Only works within allowed directories.",
         {"paths": {"type": "array", "description": "Array of file paths to read. Each path must be a string "
                    "pointing to a valid file within allowed directories."}}),
        ("directory_tree", "Get a recursive tree view of files and directories as a JSON structure. Each entry "
         "includes 'name', 'type' (file/directory), and 'children' for directories. Only works within allowed "
         "directories.", {"path": {"type": "string"}, "excludePatterns": {"type": "array"}}),
        ("list_directory", "Get a detailed listing of all files and directories in a specified path. Only works "
         "within allowed directories.", {"path": {"type": "string"}}),
    ],
}  # fmt: skip
#: The default benchmark's two prompts whose live routes once differed from the prediction.
PROMPTS = {
    "git": "Show the git status of the repository ${WORKSPACE}/repo.",
    "filesystem": "Read the file ${WORKSPACE}/files/notes.txt and tell me when the launch is.",
}
#: Workspaces named after two runs (``promcp run`` puts each run's workspace under its run id).
BASELINE_RUN, LIVE_RUN = "20261127T024413Z-7947be", "20261127T025732Z-da49a2"


def specs(server: str) -> list[ToolSpec]:
    return [
        ToolSpec(name, desc, {"type": "object", "properties": props}, server, name)
        for name, desc, props in CATALOGS[server]
    ]


def workspace(tmp: Path, run: str) -> str:
    return str(tmp / "data.scratch" / "workspaces" / run)


def record_baseline(out: Path, server: str, prompt: str) -> None:
    """One baseline call as ``promcp run`` records it: every definition in the host's ``parameters`` form."""
    count = tokenizers.get(TOK).count
    texts = {
        t.name: render(
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}, "parameters"
        )
        for t in specs(server)
    }
    with Recorder(out, run_id=BASELINE_RUN) as rec:
        hashes = {n: rec.put_text("schema", t) for n, t in texts.items()}
        tools = {n: {"tokens": count(t), "content": hashes[n]} for n, t in texts.items()}
        rec.emit(Event(stage=Stage.INIT, phase="tools_discovery", server=server, tokenizer=TOK,
                       attrs={"n_tools": len(texts), "tools": tools}))  # fmt: skip
        parts = [Part(Origin.SCHEMAS, f"{server}/{n}", count(t)) for n, t in texts.items()]
        parts.append(Part(Origin.USER, "prompt", count(prompt)))
        rec.emit(Event(stage=Stage.S1, round=1, task_id="t", tokenizer=TOK, model="m", parts=parts,
                       tokens_in=sum(p.tokens for p in parts), attrs={"content": rec.put_text("prompt", prompt)}))  # fmt: skip
        rec.emit(Event(stage=Stage.S6, round=1, task_id="t", tokenizer=TOK, model="m", tokens_out=3,
                       attrs={"content": rec.put_text("answer", "done")}))  # fmt: skip


@pytest.mark.parametrize("server", sorted(CATALOGS))
def test_live_topk_sends_what_the_what_if_predicts_from_the_baseline(server: str, tmp_path: Path) -> None:
    base_prompt = PROMPTS[server].replace("${WORKSPACE}", workspace(tmp_path, BASELINE_RUN))
    live_prompt = PROMPTS[server].replace("${WORKSPACE}", workspace(tmp_path, LIVE_RUN))
    out = tmp_path / "traces"
    record_baseline(out, server, base_prompt)
    count = tokenizers.get(TOK).count

    def bm25(tools: Any, scorer: Any = "bm25") -> Router:
        return Router(tools, "bm25")

    turns = whatif.evaluate_dataset(
        load(out), load_content(out), lambda _n: tokenizers.get(TOK).count, k=3, strategies=["topk"],
        router_factory=bm25,
    ).turns.set_index("strategy")  # fmt: skip
    predicted_schemas = int(turns.loc["topk", "tokens"]) - count(base_prompt)

    state = StrategyState.start(parse_strategy("topk:3:bm25"), specs(server), {}, bm25)
    assert state is not None
    plan = state.plan(live_prompt)
    sent = [d for _i, d in plan.sent]
    assert len(sent) == 3 and plan.fallback is None
    assert sum(count(render(d, "parameters")) for d in sent) == predicted_schemas


def test_the_routing_query_keeps_a_paths_extension_and_drops_its_folders_and_placeholders() -> None:
    assert routing_query("Read the file /w/20261127T025732Z-da49a2/files/notes.txt and tell me.") == (
        "Read the file txt and tell me."
    )
    # the same prompt as a recording stores it, the path's middle redacted by the secret scan
    assert routing_query("Read the file /w/<secret>.txt and tell me.") == "Read the file txt and tell me."
    assert routing_query("Show the git status of '~/src/repo'.") == "Show the git status of"
    assert routing_query(r"Open C:\Users\ada\photo.PNG, ./a/b.json and ../up") == "Open PNG json and"
    assert routing_query("Use the api key <api-key> on https://example.com/v1") == (
        "Use the api key on https://example.com/v1"
    )
