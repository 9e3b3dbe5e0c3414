"""LLMClient against a scripted fake OpenAI-compatible server and a closed port: retries,
validation, plain-text fallback, timeouts, and the router's offline fallback with a notice."""

from __future__ import annotations

import json
import time

import pytest

from strived.llm import LLMCache, LLMClient, LLMConfig, LLMInvalidAnswer, LLMUnavailable
from strived.retrieval.router import ROUTER_SCHEMA, offline_route, route

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 5}},
          "required": ["x"], "additionalProperties": False}


def _client(url, **kw):
    return LLMClient(LLMConfig(base_url=url, model="fake", enabled=True, **kw), cache=None)


def test_valid_answer_parsed_and_cached(fake_llm, tmp_path):
    fake_llm.replies = [(200, '{"x": 3}', 0)]
    cache = LLMCache(tmp_path / "c.sqlite")
    c = LLMClient(LLMConfig(base_url=fake_llm.base_url, model="fake", enabled=True), cache=cache)
    assert c.complete_json("sys", "u", SCHEMA, stage="t") == {"x": 3}
    assert c.complete_json("sys", "u", SCHEMA, stage="t") == {"x": 3}
    assert len(fake_llm.requests) == 1 and c.n_cache_hits == 1
    # The request carried the schema as structured output.
    rf = fake_llm.requests[0]["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == SCHEMA
    # A different stage or extra key part is a different question.
    c.complete_json("sys", "u", SCHEMA, stage="t", cache_key_parts=("v2",))
    assert len(fake_llm.requests) == 2


def test_garbage_then_valid_uses_one_retry(fake_llm):
    fake_llm.replies = [(200, "I think the answer is five-ish", 0), (200, 'Here: {"x": 5}', 0)]
    assert _client(fake_llm.base_url).complete_json("s", "u", SCHEMA) == {"x": 5}
    assert len(fake_llm.requests) == 2
    # The retry tells the model what was wrong.
    assert "invalid" in fake_llm.requests[1]["messages"][-1]["content"]


def test_invalid_json_twice_raises(fake_llm):
    fake_llm.replies = [(200, "{not json", 0)]
    with pytest.raises(LLMInvalidAnswer):
        _client(fake_llm.base_url).complete_json("s", "u", SCHEMA)
    assert len(fake_llm.requests) == 2


def test_non_json_http_body_is_handled(fake_llm):
    fake_llm.replies = [(200, b"<html>gateway says hi</html>", 0)]
    with pytest.raises((LLMInvalidAnswer, LLMUnavailable)):
        _client(fake_llm.base_url).complete_json("s", "u", SCHEMA)


def test_schema_violation_raises(fake_llm):
    fake_llm.replies = [(200, '{"x": 99}', 0)]
    with pytest.raises(LLMInvalidAnswer, match="/x"):
        _client(fake_llm.base_url).complete_json("s", "u", SCHEMA)


def test_response_format_rejected_falls_back_to_plain(fake_llm):
    fake_llm.replies = [(400, {"error": {"message": "response_format not supported"}}, 0),
                        (200, 'ok ```{"x": 1}```', 0)]
    assert _client(fake_llm.base_url).complete_json("s", "u", SCHEMA) == {"x": 1}
    second = fake_llm.requests[1]
    assert "response_format" not in second and "JSON Schema" in second["messages"][0]["content"]


def test_timeout(fake_llm):
    fake_llm.replies = [(200, '{"x": 1}', 3.0)]
    t0 = time.perf_counter()
    with pytest.raises(LLMUnavailable, match="no answer within"):
        _client(fake_llm.base_url, timeout_s=0.5).complete_json("s", "u", SCHEMA)
    assert time.perf_counter() - t0 < 2.5


def test_down_server(closed_port_url):
    with pytest.raises(LLMUnavailable, match="cannot connect"):
        _client(closed_port_url).complete_json("s", "u", SCHEMA)


def test_not_configured_is_unavailable():
    with pytest.raises(LLMUnavailable, match="no LLM endpoint configured"):
        LLMClient(LLMConfig(), cache=None).complete_json("s", "u", SCHEMA)


Q = "someone overtakes us on the left"


def test_router_llm_weights_used(fake_llm):
    fake_llm.replies = [(200, json.dumps({"motion": "a car passes on our left", "dense": 0.1,
                                          "rule": 1.0, "bm25": 0.0}), 0)]
    r = route(Q, _client(fake_llm.base_url))
    assert r.source == "llm" and r.notice is None
    assert r.weights == {"rule": 1.0, "dense": 0.1, "bm25": 0.0}
    assert fake_llm.requests[0]["response_format"]["json_schema"]["schema"] == ROUTER_SCHEMA
    # The query is in the prompt only as a quoted data string.
    assert json.dumps(Q) in fake_llm.requests[0]["messages"][1]["content"]


@pytest.mark.parametrize("bad", [
    {"motion": "m", "dense": 7.5, "rule": 1.0, "bm25": 0.0},     # out of range
    {"motion": "m", "dense": -1, "rule": 1.0, "bm25": 0.0},      # negative
    {"motion": "m", "dense": 0.0, "rule": 0.0, "bm25": 0.0},     # all zero
    {"motion": "m", "dense": "high", "rule": 1.0, "bm25": 0.0},  # not a number
])
def test_router_invalid_weights_fall_back(fake_llm, bad):
    fake_llm.replies = [(200, json.dumps(bad), 0)]
    r = route(Q, _client(fake_llm.base_url))
    # the fallback is the offline default: the router fitted on labelled queries (it ships)
    assert r.source == "fitted" and r.weights == route(Q).weights
    assert r.weights != {} and offline_route(Q).weights   # the word-list router still answers
    assert r.notice and "fitted router" in r.notice and "invalid" in r.notice


def test_router_down_server_falls_back(closed_port_url):
    r = route(Q, _client(closed_port_url))
    assert r.source == "fitted" and "unavailable" in r.notice


def test_router_timeout_falls_back(fake_llm):
    fake_llm.replies = [(200, "{}", 3.0)]
    t0 = time.perf_counter()
    r = route(Q, _client(fake_llm.base_url, timeout_s=0.4))
    assert r.source == "fitted" and "no answer within" in r.notice
    assert time.perf_counter() - t0 < 2.5
