"""Keep the MCP servers' secrets out of the configuration files ``promcp record`` writes for a client.

``promcp record`` hands Claude Code a generated MCP configuration (``--mcp-config FILE``) and the Gemini CLI a
private settings file. A server's ``env`` (and an HTTP server's ``headers``) often holds the user's tokens, and a
``kill -9`` of ``record`` leaves the file behind. So the file holds no value: each literal piece of an ``env`` or
``headers`` value becomes a reference ``${PROMCP_MCP_ENV_<n>}`` and the value goes into the environment of the
client process ``record`` starts (never on disk, never in argv); the client expands the reference when it starts
the server, as it expands the user's own references. Verified with the real clients (docs/record.md "Secrets"):
Claude Code 2.1.150 – 2.1.330 and Gemini CLI expand ``${VAR}`` in these fields once (the value is not expanded
again, so a ``$`` in it survives).

A reference the user wrote (``${TOKEN}``, ``${TOKEN:-default}``; for the Gemini CLI also ``$TOKEN``) stays as it
is, in place: only the literal text around it is moved, so the client's single expansion pass yields exactly the
string it would have made of the user's value. ``promcp proxy mcp`` removes the ``PROMCP_MCP_ENV_*`` variables
from the environment of the server it starts, so a server does not see the other servers' secrets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TYPE_CHECKING = False  # no ``typing`` at run time: the stdio relay imports this module
if TYPE_CHECKING:
    from typing import Any

#: the variables that carry the values (removed by ``promcp proxy mcp`` before it starts the server)
PREFIX = "PROMCP_MCP_ENV_"
#: what each client treats as a reference (kept verbatim): Claude Code ``${…}`` (2.1.330 narrows it to
#: ``${NAME}`` / ``${NAME:-default}``; anything else it leaves as text, which a kept token also stays);
#: the Gemini CLI ``$NAME``, ``${NAME}``, ``${NAME:-default}``
REFERENCE = {
    "claude-code": re.compile(r"\$\{[^}]*\}"),
    "gemini": re.compile(r"\$(?:\w+|\{[^}]+?(?::-[^}]*)?\})"),
}
#: the keys of a server entry whose values are moved
SECRET_KEYS = ("env", "headers")


class EnvRefs:
    """Turns values into references for one client; ``values`` is what the client's environment must hold."""

    def __init__(self, client: str) -> None:
        self.syntax = REFERENCE[client]
        self.values: dict[str, str] = {}

    def ref(self, value: str) -> str:
        """``value`` with each literal piece replaced by a reference to a new variable."""
        out: list[str] = []
        pos = 0
        for match in self.syntax.finditer(value):
            if match.start() > pos:
                out.append(self._new(value[pos : match.start()]))
            out.append(match.group(0))
            pos = match.end()
        if pos < len(value):
            out.append(self._new(value[pos:]))
        return "".join(out)

    def _new(self, literal: str) -> str:
        name = f"{PREFIX}{len(self.values) + 1}"
        self.values[name] = literal
        return "${" + name + "}"

    def servers(self, servers: Mapping[str, Any]) -> dict[str, Any]:
        """``servers`` (name → entry) with every string in each entry's ``env`` and ``headers`` referenced."""
        out: dict[str, Any] = {}
        for name, entry in servers.items():
            if isinstance(entry, Mapping):
                entry = dict(entry)
                for key in SECRET_KEYS:
                    table = entry.get(key)
                    if isinstance(table, Mapping):
                        entry[key] = {k: self.ref(v) if isinstance(v, str) else v for k, v in table.items()}
            out[name] = entry
        return out


def without_refs(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables that carry referenced values."""
    return {k: v for k, v in environ.items() if not k.startswith(PREFIX)}
