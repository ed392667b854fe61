"""The LLM proxy in front of a real model: the embedded llama.cpp model served on loopback as an OpenAI-compatible
API (tests/stubs/llama_openai.py), the openai Python SDK as the client, streamed and not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai import OpenAI

import promcp.analysis as pa
from promcp.events import Topology
from promcp.proxy.llm import LLMProxy
from promcp.recorder import Recorder
from tests.stubs.llama_openai import LlamaOpenAI

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_openai_sdk_through_the_proxy_to_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    with LlamaOpenAI() as model, Recorder(out, topology=Topology.C_OTS, source="proxy:llm") as rec:
        tokenizer = f"gguf:{model.model_path}"
        with LLMProxy(model.url, rec, tokenizer=tokenizer) as proxy:
            client = OpenAI(base_url=proxy.url, api_key="sk-local-not-a-real-key-0123456789")
            messages = [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "Name a color."},
            ]
            streamed = "".join(
                chunk.choices[0].delta.content or ""
                for chunk in client.chat.completions.create(model="smollm2", messages=messages, stream=True)
                if chunk.choices
            )
            plain = client.chat.completions.create(model="smollm2", messages=[*messages[1:]])
    assert streamed.strip()
    df = pa.load(out).sort_values("seq")
    assert df.stage.tolist() == ["S1", "S6", "S1", "S6"]
    s1, s6, p1, p6 = (row for _, row in df.iterrows())
    # streamed: no usage in llama.cpp's chunks, so the model's own vocabulary counts (an exact tokenizer)
    assert s1.token_source == "tokenizer" and s1.tokenizer.startswith("gguf:") and s1.tokens_in > 0
    assert s1.in_system > 0 and s1.in_user > 0
    assert s6.resp_preview == streamed[:240] and s6.tokens_out > 0 and s6.token_source == "tokenizer"
    assert json.loads(s6["attrs"])["stream_frames"] >= 3
    assert s1.latency_ms > 0 and s6.latency_ms > 0  # time to first byte, then the generation
    # not streamed: llama.cpp reports usage, which is the ground truth the origins are scaled to
    assert p1.token_source == "provider" and p1.tokens_in == plain.usage.prompt_tokens
    assert p1[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum() == p1.tokens_in
    assert p6.tokens_out == plain.usage.completion_tokens
    assert p6.resp_preview == (plain.choices[0].message.content or "")[:240]
