"""ChatGPT ``conversations.json`` → conversations (placeholder until the parser lands)."""

from __future__ import annotations

from typing import Any

from promcp.collectors._model import Conversation
from promcp.collectors._problems import Problems


def parse_conversation(
    doc: Any, problems: Problems, index: int = 0, offset: int | None = None
) -> Conversation:
    raise ValueError("ChatGPT import is not implemented yet")
