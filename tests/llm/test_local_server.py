"""The protocol against a real OpenAI-compatible server (xllamacpp + Gemma 3 270M on loopback).
The model is weak: these tests check schema-constrained output, caching and fallbacks, not wisdom."""

from __future__ import annotations

import pytest

from strived.llm import LLMCache, LLMClient, LLMConfig
from strived.retrieval.router import ROUTER_SCHEMA, SOURCES, route

pytestmark = pytest.mark.llm


def test_schema_constrained_answer_and_cache(llm_server, tmp_path):
    cache = LLMCache(tmp_path / "llm.sqlite")
    client = LLMClient(llm_server.config(timeout_s=120), cache=cache)
    r1 = route("a red car cuts in front of us from the right", client)
    assert r1.source == "llm", r1.notice
    assert set(r1.weights) == set(SOURCES)
    assert all(0.0 <= w <= 1.0 for w in r1.weights.values()) and sum(r1.weights.values()) > 0
    assert client.n_requests >= 1
    sent = client.n_requests
    r2 = route("a red car cuts in front of us from the right", client)
    assert r2.weights == r1.weights and r2.source == "llm"
    assert client.n_requests == sent and client.n_cache_hits == 1   # never reached the server
    # Same cache, same model name, but nothing listening: still answered from the cache.
    from strived.llm.local_server import free_port
    offline = LLMClient(LLMConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", enabled=True,
                                  model=llm_server.model), cache=cache)
    assert route("a red car cuts in front of us from the right", offline).weights == r1.weights


def test_router_prompt_schema_is_enforced_by_the_server(llm_server):
    client = LLMClient(llm_server.config(timeout_s=120), cache=None)
    ans = client.complete_json_ex("Answer as JSON.", "Query: \"we turn left\"", ROUTER_SCHEMA,
                                  stage="schema_probe", max_tokens=120)
    assert set(ans.data) == {"motion", "dense", "rule", "bm25"}
    assert not ans.from_cache and ans.model == llm_server.model
