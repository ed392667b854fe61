"""What the network backends share (``promcp.host.llm._http``): Retry-After, tool names on the wire, base URLs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx2 as httpx
import pytest

from promcp.errors import ConfigError, LLMError, LLMHTTPError
from promcp.host.llm._http import MAX_RETRY_AFTER_S, check_base_url, retry_after_s, wire_name
from promcp.host.llm.base import RetryPolicy, call_with_retries

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one wins (OpenAI sends both)
        ({"retry-after": "Sun, 22 Nov 2026 10:00:05 GMT"}, 5.0),  # an HTTP date
        ({"retry-after": "Sun, 22 Nov 2026 09:59:00 GMT"}, 0.0),  # in the past: no extra wait
        ({"retry-after": "86400"}, MAX_RETRY_AFTER_S),  # capped
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_s(httpx.Headers(headers), now=NOW) == seconds


def test_the_host_waits_at_least_retry_after() -> None:
    failures = [
        LLMHTTPError("429", error_type="rate_limit", status_code=429, retry_after_s=4.0),
        LLMHTTPError("503", error_type="server_error", status_code=503, retry_after_s=None),
        LLMHTTPError("429", error_type="rate_limit", status_code=429, retry_after_s=0.5),
    ]
    delays: list[float] = []

    async def call() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    async def sleep(s: float) -> None:
        delays.append(s)

    assert (
        asyncio.run(call_with_retries(call, RetryPolicy(retries=3, backoff_s=(1.0, 2.0)), sleep=sleep))
        == "ok"
    )
    assert delays == [4.0, 2.0, 2.0], "max(policy backoff, Retry-After) per attempt"
    assert isinstance(LLMHTTPError("x", error_type="auth", status_code=401), LLMError)


@pytest.mark.parametrize(
    "name",
    ["get_time", "time__get_time", "get-env", "x" * 64, "github.create_issue", "fs/read", "y" * 80, "時間"],
)
def test_wire_names_are_valid_unique_and_stable(name: str) -> None:
    wire = wire_name(name)
    assert len(wire) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in wire)
    assert wire == wire_name(name)
    if len(name) <= 64 and name.isascii() and all(c.isalnum() or c in "_-" for c in name):
        assert wire == name, "valid names are sent unchanged"
    else:
        assert wire != name


def test_sanitised_names_do_not_collide() -> None:
    assert wire_name("a.b") != wire_name("a/b") != wire_name("a_b")
    assert wire_name("a_b") == "a_b"


def test_base_url_is_checked() -> None:
    assert check_base_url("http://127.0.0.1:11434/", "ollama") == "http://127.0.0.1:11434"
    for bad in ("localhost:11434", "ftp://x", "https://", ""):
        with pytest.raises(ConfigError, match="not an http"):
            check_base_url(bad, "ollama")


def test_base_url_from_the_environment_when_not_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from promcp.host.llm.base import get_backend

    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11500")  # the ollama CLI's form: no scheme
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8111/")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert get_backend("ollama")._base_url == "http://127.0.0.1:11500"  # type: ignore[attr-defined]
    assert get_backend("anthropic", api_key="k")._base_url == "http://127.0.0.1:8111"  # type: ignore[attr-defined]
    openai = get_backend("openai")  # local: no key needed
    assert openai._base_url == "http://127.0.0.1:8080/v1" and openai.provider == "127.0.0.1"  # type: ignore[attr-defined]
    explicit = get_backend("openai", base_url="http://localhost:9000/v1")
    assert explicit._base_url == "http://localhost:9000/v1", "the benchmark file / CLI win"  # type: ignore[attr-defined]
