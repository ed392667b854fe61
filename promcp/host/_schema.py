"""JSON Schema of the benchmark file (``promcp run``). ``docs/run.md`` prints it; :mod:`promcp.host.config`
validates every file against it before building the typed model, so errors name the key and the line."""

from __future__ import annotations

from typing import Any, Final

_COMMAND: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["command"],
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "cwd": {"type": "string"},
    },
}

SERVER: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "mode": {"enum": ["live", "replay"], "default": "live"},
        "transport": {"enum": ["stdio", "streamable_http", "sse"], "default": "stdio"},
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "cwd": {"type": "string"},
        "url": {"type": "string", "pattern": "^https?://"},
        "port": {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, {"const": "auto"}]},
        "start": _COMMAND,
        "catalog": {"type": "string"},
        "responses": {"type": "string"},
        "replay_server": {"type": "string"},
        "catalog_server": {"type": "string"},
    },
}

TASK: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "prompt", "servers"],
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]+$"},
        "prompt": {"type": "string", "minLength": 1},
        "servers": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "distraction_servers": {"type": "array", "items": {"type": "string"}},
        "expected_tools": {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:.+$"}},
        "max_rounds": {"type": "integer", "minimum": 1},
        "system_prompt": {"type": "string"},
        "strategy": {"type": "string", "minLength": 1},
    },
}

BENCHMARK_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "promcp benchmark file",
    "type": "object",
    "additionalProperties": False,
    "required": ["servers", "tasks"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "llm": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "backend": {"enum": ["llama-cpp", "ollama", "openai", "anthropic"], "default": "llama-cpp"},
                "model": {"type": "string"},
                "base_url": {"type": "string"},
                "api_key": {"type": "string"},
                "context_window": {"type": "integer", "minimum": 256},
                "tokenizer": {"type": "string"},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0},
                "options": {"type": "object"},
            },
        },
        "sampling": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "temperature": {"type": "number", "minimum": 0, "default": 0.0},
                "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "max_tokens": {"type": "integer", "minimum": 1, "default": 256},
                "seed": {"type": ["integer", "null"], "default": 0},
                "tool_choice": {"enum": ["auto", "required", "first", "none"], "default": "auto"},
            },
        },
        "system_prompt": {"type": "string"},
        "strategy": {"type": "string", "minLength": 1},
        "policy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "max_rounds": {"type": "integer", "minimum": 1, "default": 10},
                "retries": {"type": "integer", "minimum": 0, "default": 3},
                "backoff_s": {"type": "array", "items": {"type": "number", "minimum": 0}, "default": [1, 2]},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0, "default": 1500},
                "tool_timeout_s": {"type": "number", "exclusiveMinimum": 0, "default": 60},
                "discovery_timeout_s": {"type": "number", "exclusiveMinimum": 0, "default": 10},
                "startup_timeout_s": {"type": "number", "exclusiveMinimum": 0, "default": 30},
                "tool_execution": {"const": "sequential", "default": "sequential"},
                "streaming": {"const": False, "default": False},
                "ready_probe": {"type": "boolean", "default": True},
            },
        },
        "workspace": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "files": {"type": "object", "additionalProperties": {"type": "string"}},
                "git_repos": {
                    "type": "object",
                    "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
        },
        "servers": {"type": "object", "minProperties": 1, "additionalProperties": SERVER},
        "tasks": {"type": "array", "minItems": 1, "items": TASK},
    },
}
