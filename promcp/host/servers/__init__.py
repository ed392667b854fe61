"""The MCP servers of ``promcp run``: the pool that starts and keeps them (:mod:`.pool`), opening one phase by
phase (:mod:`.connect`), a running connection and its ``tools/call`` (:mod:`.connection`), the timed wire log of
its exchanges (:mod:`.wire_log`), and what a failure was (:mod:`.failures`)."""
