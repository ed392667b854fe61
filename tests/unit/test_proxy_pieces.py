"""Pieces of the MCP proxy alone: frame cutting, the observer's pairing and events (fake clock, exact latencies),
client config wrapping, and runs merged from several journal parts."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from promcp.analysis import load as pa_load
from promcp.errors import ConfigError
from promcp.events import Event, Phase, Stage, Transport
from promcp.proxy._group import resolve_target
from promcp.proxy.mcp.clients import load_config, strip_jsonc, wrap_config
from promcp.proxy.mcp.frames import LineFrames
from promcp.proxy.mcp.observer import CLIENT, SERVER, McpObserver, Seen
from promcp.recorder import Recorder
from promcp.stages import FakeClock
from promcp.stages.link import link_tool_calls
from promcp.store.parts import finalize_group, parts_dir


def test_frames_split_across_chunks_and_bounded() -> None:
    f = LineFrames(max_frame=16)
    assert f.feed(b'{"a":', 1, 2) == []
    (one, two) = f.feed(b'1}\n{"b":2}\n{"c"', 3, 4)
    assert (one.data, one.size, one.first_ns, one.last_ns, one.forwarded_ns) == (b'{"a":1}\n', 8, 1, 3, 4)
    assert two.data == b'{"b":2}\n' and two.first_ns == 3
    (big,) = f.feed(b":" + b"x" * 40 + b"}\n", 5, 6)
    assert big.data is None and big.size == 47 and big.edges.startswith(b'{"c"')


def _observer(tmp_path: Path, **kw: object) -> tuple[McpObserver, Recorder, FakeClock]:
    rec = Recorder(tmp_path, topology="c-ots", source="proxy:mcp", run_id="r", fsync="never")
    clock = FakeClock()
    return McpObserver(rec, server="s", transport=Transport.STDIO, clock=clock, **kw), rec, clock  # type: ignore[arg-type]


def _seen(clock: FakeClock, size: int = 10, ms: float = 0.0) -> Seen:
    first = clock.now()
    clock.advance(ms)
    last = clock.now()
    return Seen(size, first, last, last)


def _events(tmp_path: Path, rec: Recorder) -> pd.DataFrame:
    rec.close()
    return pd.read_parquet(tmp_path / "topology=c-ots" / "run_id=r" / "events.parquet")


def test_observer_pairs_requests_and_times_them_exactly(tmp_path: Path) -> None:
    obs, rec, clock = _observer(tmp_path)
    obs.message(
        CLIENT,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "x", "clientInfo": {"name": "c", "version": "1"}},
        },
        _seen(clock, 50),
    )
    clock.advance(12.5)
    obs.message(
        SERVER,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": "2025-11-25",
                "serverInfo": {"name": "srv", "version": "2"},
                "capabilities": {"tools": {}},
            },
        },
        _seen(clock, 90),
    )
    obs.message(CLIENT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, _seen(clock))
    clock.advance(3)
    obs.message(
        SERVER,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                "tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}],
                "nextCursor": "p2",
            },
        },
        _seen(clock, 200),
    )
    obs.message(SERVER, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, _seen(clock))
    obs.message(
        CLIENT, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "p2"}}, _seen(clock)
    )
    obs.message(SERVER, {"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}, _seen(clock))
    # the answer overtakes its request (the other relay thread was slower): still paired
    clock.advance(1)
    answer = _seen(clock, 70)
    request = Seen(40, answer.first.plus_ms(-4), answer.first.plus_ms(-4), answer.first.plus_ms(-3.5))
    obs.message(
        SERVER,
        {
            "jsonrpc": "2.0",
            "id": "c1",
            "result": {"content": [{"type": "text", "text": "hi"}], "isError": True},
        },
        answer,
    )
    obs.message(
        CLIENT,
        {
            "jsonrpc": "2.0",
            "id": "c1",
            "method": "tools/call",
            "params": {"name": "t", "arguments": {"a": 1}},
        },
        request,
    )
    obs.message(
        CLIENT, {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "t"}}, _seen(clock)
    )
    clock.advance(7)
    obs.ended(
        clock.now(), __import__("promcp.stages", fromlist=["Failure"]).Failure.of("server_crashed", "gone")
    )
    ev = _events(tmp_path, rec)
    init = ev[ev["phase"] == "initialize"].iloc[0]
    assert (
        init["latency_ms"] == 12.5
        and init["footprint_bytes"] == 90
        and init["protocol_version"] == "2025-11-25"
    )
    assert json.loads(init["attrs"])["client_name"] == "c"
    pages = ev[ev["phase"] == "tools_discovery"]
    first, second = (json.loads(a) for a in pages["attrs"])
    assert first["next_cursor"] == "p2" and second["cursor"] == "p2" and second["trigger"] == "list_changed"
    assert pages["latency_ms"].iloc[0] == 3.0 and pages["footprint_bytes"].iloc[0] > 0
    s3 = ev[ev["stage"] == "S3"]
    s4 = ev[ev["stage"] == "S4"]
    assert s3["latency_ms"].iloc[0] == pytest.approx(0.5) and s4["latency_ms"].iloc[0] == pytest.approx(3.5)
    assert (s4["status"].iloc[0], s4["error_type"].iloc[0]) == ("error", "tool_error")
    assert (s4["status"].iloc[1], s4["error_type"].iloc[1], s4["latency_ms"].iloc[1]) == (
        "error",
        "server_crashed",
        7.0,
    )
    assert "notifications/tools/list_changed" in set(ev.loc[ev["stage"] == "MCP", "mcp_method"])


def test_answer_read_before_the_request_write_returned_still_has_a_positive_s4(tmp_path: Path) -> None:
    """The relay thread stamps "forwarded" after its write returns; on a busy machine the other thread can read the
    answer first. The S4 then starts when that write began (the request's last byte arrived), never after its end."""
    obs, rec, clock = _observer(tmp_path)
    arrived = clock.now()
    clock.advance(0.2)
    answer_at = clock.now()
    clock.advance(0.3)
    request = Seen(40, arrived, arrived, clock.now())  # the write returned after the answer was read
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t", "arguments": {}}}
    obs.message(CLIENT, call, request)
    result = {"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "ok"}]}}
    obs.message(SERVER, result, Seen(30, answer_at, answer_at, answer_at))
    ev = _events(tmp_path, rec)
    s3, s4 = ev[ev["stage"] == "S3"].iloc[0], ev[ev["stage"] == "S4"].iloc[0]
    assert s4["latency_ms"] == pytest.approx(0.2) and s3["latency_ms"] == 0.0


def test_observer_cancel_timeout_late_answer_and_garbage(tmp_path: Path) -> None:
    obs, rec, clock = _observer(tmp_path, timeout_s=5)
    obs.message(
        CLIENT, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}, _seen(clock)
    )
    clock.advance(2)
    obs.message(
        CLIENT,
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "timed out after 2s"},
        },
        _seen(clock),
    )
    obs.message(SERVER, {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, _seen(clock))  # late
    obs.message(
        CLIENT,
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "x://y"}},
        _seen(clock),
    )
    clock.advance(6000)  # ms: past the 5 s --timeout
    assert obs.check_timeouts() == 1
    obs.unparsable(SERVER, _seen(clock, 12), "invalid_json", "not JSON")
    ev = _events(tmp_path, rec)
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert (s4["status"], s4["error_type"], s4["latency_ms"]) == ("timeout", "timeout", 2.0)
    mcp = ev[ev["stage"] == "MCP"]
    assert json.loads(mcp[mcp["jsonrpc_id"] == "1"]["attrs"].iloc[0])["late_response"] is True
    read = mcp[mcp["mcp_method"] == "resources/read"].iloc[0]
    assert (read["status"], read["latency_ms"], read["direction"]) == ("timeout", 6000.0, "client->server")
    assert "invalid_json" in set(mcp["error_type"])


def test_wrap_every_client_format_once(tmp_path: Path) -> None:
    promcp = ["/x/promcp"]
    cc = {
        "mcpServers": {
            "fs": {"type": "stdio", "command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
            "web": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer t"}},
        },
        "projects": {"/p": {"mcpServers": {"m": {"command": "node", "args": ["m.js"]}}}},
    }
    w = wrap_config(cc, "claude-code", out=tmp_path, promcp=promcp, run_id="R")
    fs = w.config["mcpServers"]["fs"]
    assert fs["command"] == "/x/promcp" and fs["env"] == {"K": "v"} and fs["type"] == "stdio"
    assert fs["args"][-4:] == ["--", "npx", "-y", "srv"] and fs["args"][6:8] == ["--run-id", "R"]
    web = w.config["mcpServers"]["web"]
    assert web["url"] == "http://127.0.0.1:8750/mcp" and web["headers"] == {"Authorization": "Bearer t"}
    assert w.http_proxies[0][3:7] == ["--upstream", "https://h/mcp", "--listen", "127.0.0.1:8750"]
    assert w.config["projects"]["/p"]["mcpServers"]["m"]["args"][-2:] == ["node", "m.js"]
    again = wrap_config(w.config, "claude-code", out=tmp_path, promcp=promcp)
    assert again.config["mcpServers"]["fs"] == fs and set(again.kept) >= {"fs", "m"}
    vs = wrap_config(
        {"servers": {"a": {"type": "stdio", "command": "x"}}, "inputs": [{"id": "k"}]},
        "vscode",
        out=tmp_path,
        promcp=promcp,
    )
    assert vs.config["inputs"] == [{"id": "k"}] and vs.config["servers"]["a"]["command"] == "/x/promcp"
    desk = wrap_config(
        {"mcpServers": {"a": {"command": "x"}}, "globalShortcut": ""},
        "claude-desktop",
        out=tmp_path,
        promcp=promcp,
    )
    assert desk.config["globalShortcut"] == "" and desk.wrapped == ["a"]


def test_jsonc_and_bad_config(tmp_path: Path) -> None:
    assert json.loads(strip_jsonc('{\n // c\n "a": "//x", /* y */ "b": [1,],\n}')) == {"a": "//x", "b": [1]}
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {')
    with pytest.raises(ConfigError, match=r"bad.json:1.*not JSON"):
        load_config(bad, "cursor")


def test_parts_merge_in_time_order_and_again_later(tmp_path: Path) -> None:
    def part(name: str, starts: list[int]) -> Recorder:
        rec = Recorder(tmp_path, topology="c-ots", source="proxy:mcp", run_id="g", part=name, fsync="never")
        for t in starts:
            rec.emit(
                Event(
                    stage=Stage.INIT,
                    phase=Phase.SPAWN,
                    server=name,
                    t_start_ns=t,
                    t_end_ns=t + 1,
                    latency_ms=0.0,
                )
            )
        return rec

    a, b = part("a", [10, 30]), part("b", [20])
    assert a.close() is None  # b is still writing
    path = b.close()
    assert path is not None and not parts_dir(tmp_path, "g").exists()
    ev = pd.read_parquet(path)
    assert ev[["seq", "server"]].values.tolist() == [[0, "a"], [1, "b"], [2, "a"]]
    late = part("c", [15])
    late.close()
    ev = pd.read_parquet(path)
    assert ev["server"].tolist() == ["a", "c", "b", "a"] and ev["seq"].tolist() == [0, 1, 2, 3]
    assert finalize_group(tmp_path, "g", link=link_tool_calls) == path  # nothing left: the run file


def test_run_target_precedence(tmp_path: Path) -> None:
    env = {"PROMCP_OUT": str(tmp_path), "PROMCP_RUN_ID": "from-env"}
    assert resolve_target(None, None, env).run_id == "from-env"
    assert resolve_target(Path("x"), "flag", env).out == Path("x")
    assert resolve_target(None, None, {}).chosen_by == "client-session"
    with pytest.raises(ValueError):
        resolve_target(None, "../escape", {})


def test_parts_left_by_killed_processes_are_read_in_place_and_finalized_on_request(tmp_path: Path) -> None:
    """Readers never write: unmerged parts (their processes died before merging) read as one run; only
    `promcp finalize` merges them."""
    from promcp.cli import main
    from promcp.store.parts import pending_groups

    for name, t in (("a", 10), ("b", 20), ("c", 30)):
        rec = Recorder(tmp_path, topology="c-ots", source="proxy:mcp", run_id="k", part=name, fsync="never")
        rec.emit(Event(stage=Stage.INIT, phase=Phase.SPAWN, server=name, t_start_ns=t, t_end_ns=t + 1))
        rec.close(finalize_run=False)  # as if killed before the merge
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    ev = pa_load(tmp_path)
    assert ev["server"].tolist() == ["a", "b", "c"] and ev["seq"].tolist() == [0, 1, 2]
    assert set(ev["run_id"]) == {"k"}
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
    assert main(["finalize", str(tmp_path)]) == 0
    assert pending_groups(tmp_path) == []
    assert pd.read_parquet(next(tmp_path.glob("topology=c-ots/run_id=k/events.parquet")))[
        "server"
    ].tolist() == [
        "a",
        "b",
        "c",
    ]


def test_the_frame_journal_reads_back_what_the_relay_wrote_and_stops_at_a_cut_record(tmp_path: Path) -> None:
    """The stdio relay's frame journal (promcp/proxy/mcp/frame_journal.py): records read back in the order they were
    written across both directions, a record cut by a kill not read (and read once it is whole); the file is
    owner-only in an owner-only folder, and a journal nobody is on is an orphan."""
    import os
    import stat

    from promcp.proxy.mcp import frame_journal as fj

    folder = tmp_path / "_journal" / "r.parts"
    w = fj.JournalWriter(str(folder), "mcp-x")
    assert stat.S_IMODE(os.stat(w.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(folder.parent).st_mode) == 0o700
    w.record(fj.HEADER, payload=b"{}")
    w.chunk(0, 10, b'{"id":1,"method":"initialize"}\n')
    w.forwarded(0, 12)
    w.skipped(1, 30, 65536, b"tail")
    w.eof(1, 40)
    fd = os.open(w.path, os.O_RDONLY)
    assert fj.check_magic(fd)
    got = [rec for rec, _ in fj.read_records(fd, len(fj.MAGIC), 1 << 20)]
    assert [(r.kind, r.origin) for r in got] == [
        (fj.HEADER, 0), (fj.CHUNK, 0), (fj.FORWARDED, 0), (fj.SKIPPED, 1), (fj.EOF, 1),
    ]  # fmt: skip
    assert got[1].payload == b'{"id":1,"method":"initialize"}\n' and got[1].numbers[0] == 10
    assert got[2].numbers[0] == 12 and got[3].numbers[2] == 65536 and got[3].payload == b"tail"
    end = os.path.getsize(w.path)
    with open(w.path, "ab") as fh:  # a record whose payload is not all there yet
        fh.write(fj._HEAD.pack(fj.CHUNK, 1, 0, 5, 1, 2, 0, 0, 0, 0) + b"ab")
    assert [rec.kind for rec, _ in fj.read_records(fd, end, 1 << 20)] == []
    with open(w.path, "ab") as fh:
        fh.write(b"c\n\n")
    assert [rec.payload for rec, _ in fj.read_records(fd, end, 1 << 20)] == [b"abc\n\n"]
    assert fj.journals(str(folder)) == [w.path]
    assert fj.is_live(w.path)  # the relay is on it
    w.close()
    assert not fj.is_live(w.path)  # nobody is: an orphan
    os.close(fd)


def test_an_oversize_frame_skipped_in_the_middle_is_the_frame_the_relay_saw() -> None:
    """The relay journals only the count and last bytes of an oversize frame's middle; the recorder's framing
    (``LineFrames.skip``) gives the frame the relay's own framing would: its size, instants and edges."""
    whole, cut = LineFrames(max_frame=600), LineFrames(max_frame=600)
    head, middle, end = b"h" * 700, b"m" * 5000 + b"TAIL", b"e" * 10 + b"\n"
    assert whole.feed(head, 1, 2) == [] and cut.feed(head, 1, 2) == []
    assert whole.feed(middle, 3, 4) == []
    cut.skip(len(middle), middle[-512:])
    (a,) = whole.feed(end, 5, 6)
    (b,) = cut.feed(end, 5, 6)
    assert a == b and a.data is None and a.size == 5715 and b"TAIL" in a.edges


def test_the_console_scripts_fast_path_takes_plain_stdio_invocations_only() -> None:
    """``promcp proxy mcp … -- COMMAND`` as ``promcp record`` and ``proxy config`` write it goes straight to the
    relay; anything the fast path does not fully understand (HTTP, help, an abbreviation, a bad value) is left to
    the full command line, which explains it."""
    from promcp.proxy.mcp.stdio import parse_fast

    opts = parse_fast(
        ["--out", "/d", "--name", "fs", "--tokenizer=cl100k_base", "--run-id", "r", "--content", "none",
         "--max-content-bytes", "0", "--timeout", "2.5", "--max-frame", "1024", "--", "node", "s.js", "--x"]
    )  # fmt: skip
    assert opts is not None
    assert (opts.command, opts.name, opts.out, opts.run_id) == (["node", "s.js", "--x"], "fs", "/d", "r")
    assert (opts.tokenizer, opts.content, opts.max_content_bytes) == ("cl100k_base", "none", None)
    assert (opts.timeout_s, opts.max_frame) == (2.5, 1024)
    plain = parse_fast(["--", "cat"])
    assert (
        plain is not None
        and plain.max_content_bytes == -1
        and plain.tokenizer is None
        and plain.name == "cat"
    )
    for argv in (
        ["--upstream", "http://x", "--", "cat"],
        ["-h"],
        ["--time", "5", "--", "cat"],  # argparse's abbreviation: the full parser's business
        ["--timeout", "-1", "--", "cat"],
        ["--max-frame", "big", "--", "cat"],
        ["--content", "bogus", "--", "cat"],
        ["--out", "/d"],
        ["--"],
        ["--name"],
    ):
        assert parse_fast(argv) is None, argv


def test_a_frame_journal_that_cannot_be_recorded_stays_and_leaves_no_half_part(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged frame journal (a record claiming more than a chunk's bytes): the recording stops with one line,
    the journal stays for another try, and what was journaled from it is removed — a later recording of the whole
    journal must not count the session twice."""
    import json
    import logging
    import os

    from promcp.proxy.mcp import frame_journal as fj
    from promcp.proxy.mcp.stdio_recorder import record_orphans
    from promcp.store.parts import parts_dir

    folder = parts_dir(tmp_path, "r")
    w = fj.JournalWriter(str(folder), "mcp-x")
    header = {"out": str(tmp_path), "run_id": "r", "chosen_by": "flag", "name": "x", "command": "x",
              "tokenizer": None, "timeout_s": None, "content": "none", "max_content_bytes": -1,
              "max_frame": 1 << 20, "proxy_pid": 1}  # fmt: skip
    w.record(fj.HEADER, payload=json.dumps(header).encode())
    w.record(fj.SPAWNED, (10, 20, 1234, 1_767_225_600_000_000_000))
    w._write([fj._HEAD.pack(fj.CHUNK, 0, 0, 1 << 30, 30, 1, 0, 0, 0, 0)])  # damaged: 1 GiB announced
    w.close()
    with caplog.at_level(logging.WARNING, logger="promcp.proxy.mcp.stdio_recorder"):
        assert record_orphans(tmp_path, "r") == 0
    said = [r.getMessage() for r in caplog.records if r.name == "promcp.proxy.mcp.stdio_recorder"]
    assert os.path.exists(w.path) and len(said) == 1 and "damaged frame journal" in said[0]
    assert not list(folder.glob("*.jsonl"))  # the part it had begun is gone
