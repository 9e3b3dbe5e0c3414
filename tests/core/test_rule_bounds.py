"""Issue 15 item 4 (hostile numbers in rules) and item 9 (unknown class names): every number of
the rule schema is bounded and finite, a bad cached LLM answer is dropped, unknown classes warn."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from strived.errors import RuleError
from strived.rules import RuleScorer, parse_rule
from strived.rules.model import SoftScore, suggest_class
from tests.core.synth import synth_video


def _tc(**kw):
    d = {"type": "temporal_change", "field": "loc_x", "window_seconds": 2.0, "magnitude": 1.0}
    d.update(kw)
    return {"entity": {}, "soft_scores": [d]}


@pytest.mark.parametrize("doc, pointer", [
    (_tc(window_seconds=1e14), "/soft_scores/0/window_seconds"),
    (_tc(window_seconds=1e13), "/soft_scores/0/window_seconds"),
    (_tc(window_seconds=math.inf), "/soft_scores/0/window_seconds"),
    (_tc(window_seconds=math.nan), "/soft_scores/0/window_seconds"),
    (_tc(magnitude=math.inf), "/soft_scores/0/magnitude"),
    (_tc(magnitude=1e300), "/soft_scores/0/magnitude"),
    (_tc(weight=math.nan), "/soft_scores/0/weight"),
    (_tc(weight=1e9), "/soft_scores/0/weight"),
    ({"entity": {}, "soft_scores": [{"type": "monotonic_trend", "field": "distance", "direction": "decreasing",
                                     "min_duration_seconds": 1e20}]}, "/soft_scores/0/min_duration_seconds"),
    ({"entity": {}, "soft_scores": [], "hard_gates": [{"field": "distance", "op": "lt", "value": -math.inf}]},
     "/hard_gates/0/value"),
    ({"entity": {}, "soft_scores": [], "hard_gates": [{"field": "distance", "op": "lt", "value": 1e12}]},
     "/hard_gates/0/value"),
    ({"entity": {}, "soft_scores": [], "confidence": math.nan,
      "hard_gates": [{"field": "distance", "op": "lt", "value": 3}]}, "/confidence"),
])
def test_huge_or_nonfinite_numbers_are_pointer_errors(doc, pointer):
    with pytest.raises(RuleError) as ei:
        parse_rule(doc)
    assert pointer in [p for p, _ in ei.value.errors], ei.value.errors


def test_infinity_from_json_text_is_rejected():
    text = '{"entity": {}, "soft_scores": [{"type": "temporal_change", "field": "loc_x", ' \
           '"window_seconds": Infinity, "magnitude": 1}]}'
    with pytest.raises(RuleError) as ei:
        parse_rule(json.loads(text))
    assert ei.value.errors[0][0] == "/soft_scores/0/window_seconds"
    assert "finite" in ei.value.errors[0][1]


def test_deeply_nested_document_is_an_error_not_a_crash():
    d = {"entity": {}, "soft_scores": [], "hard_gates": [{"field": "distance", "op": "lt", "value": 3}],
         "description": None}
    x: list = []
    cur = x
    for _ in range(5000):
        cur.append([])
        cur = cur[0]
    d["description"] = x
    with pytest.raises(RuleError):
        parse_rule(d)


def test_largest_allowed_window_scores_and_a_huge_window_cannot_overflow():
    """The bound (3600 s) scores like any window longer than the video; a window far beyond it,
    built without the parser, no longer overflows the scorer's integer keys (it crashed)."""
    recs = [synth_video(f"v{k}", seed=k, duration_s=6) for k in range(4)]
    sc = RuleScorer.from_records(recs)
    big = parse_rule(_tc(window_seconds=3600.0))
    ref = sc.score(parse_rule(_tc(window_seconds=60.0))).scores
    np.testing.assert_allclose(sc.score(big).scores, ref)
    huge = parse_rule(_tc(window_seconds=60.0))
    object.__setattr__(huge.soft_scores[0], "window_s", 1e14)
    sc2 = RuleScorer.from_records(recs)
    np.testing.assert_allclose(sc2.score(huge).scores, ref)
    assert isinstance(huge.soft_scores[0], SoftScore)


def test_unknown_class_names_warn_with_a_suggestion():
    r = parse_rule({"entity": {"class_filter": ["cars", "Truck", "bikes", "zeppelin"]},
                    "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2,
                                     "magnitude": 1}]})
    msgs = dict(r.warnings)
    assert "did you mean 'car'" in msgs["/entity/class_filter/0"]
    assert "/entity/class_filter/1" not in msgs            # 'Truck' is the known 'truck'
    assert "did you mean 'bicycle'" in msgs["/entity/class_filter/2"]
    assert "zeppelin" in msgs["/entity/class_filter/3"] and "did you mean" not in msgs["/entity/class_filter/3"]
    assert r.entity.class_filter == ("cars", "truck", "bikes", "zeppelin")  # accepted (a class of its own)
    seq = parse_rule({"sequence": [{"entity": {"class_filter": ["pedestrains"]}, "hard_gates": [
        {"field": "distance", "op": "lt", "value": 9}]}]})
    assert "did you mean 'pedestrian'" in dict(seq.warnings)["/sequence/0/entity/class_filter/0"]
    assert suggest_class("buses") == "bus" and suggest_class("person") == "pedestrian"
    assert parse_rule(_tc()).warnings == ()


def test_schema_cli_prints_class_warning(tmp_path, capsys):
    from strived.cli import main

    f = tmp_path / "r.json"
    f.write_text(json.dumps({"entity": {"class_filter": ["cars"]}, "soft_scores": [
        {"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 1}]}))
    assert main(["schema", str(f)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "did you mean 'car'" in err
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"entity": {}, "soft_scores": [], "description": "\xff\xfe"}')
    assert main(["schema", str(bad)]) == 1
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    assert main(["schema", str(deep)]) == 1


def test_engine_search_notices_unknown_class(tmp_path):
    from strived import engine
    from strived.store import Library

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([synth_video(f"v{k}", seed=k, duration_s=6) for k in range(3)])
    resp = engine.search(lib, "x", rule={"entity": {"class_filter": ["cars"]}, "soft_scores": [
        {"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 1}]}, sources=["rule"])
    assert any("did you mean 'car'" in n for n in resp.notices)


def test_bad_cached_llm_adapter_answer_is_dropped_and_offline_used(tmp_path):
    """An adapter answer with a 1e14 window cached by an older version (or a hostile endpoint)
    is never served: it fails validation, is deleted from the cache, and the query falls back to
    the offline adapter (the endpoint is down) with a valid rule."""
    from strived.llm import LLMClient, LLMConfig
    from strived.llm.local_server import free_port
    from strived.rulelib.library import RuleLibrary
    from strived.rulelib.resolve import resolve_rule

    cfg = LLMConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", enabled=True, timeout_s=2.0)
    client = LLMClient(cfg, cache=tmp_path / "c.sqlite")
    seen: list[tuple[str, str]] = []
    get = client.cache.get

    def spy(key):
        seen.append(key)
        return get(key)
    client.cache.get = spy
    lib = RuleLibrary.uncalibrated()
    query = "a scooter cuts in from the left in the snow"
    resolve_rule(query, lib, llm=client)                      # endpoint down: learn the match key
    match_key = seen[-1]
    client.cache.put(match_key, "rulelib.match", "m", {"event": "cut_in_left", "confidence": 0.3,
                                                       "reason": "cached"})
    seen.clear()
    resolve_rule(query, lib, llm=client)                      # now the adapter is asked: its key
    adapt_key = seen[-1]
    assert adapt_key != match_key
    bad = {"entity": {"class_filter": ["motorcycle"]}, "hard_gates": [],
           "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 1e14,
                            "magnitude": 2.0, "direction": "positive"}]}
    client.cache.put(adapt_key, "rulelib.adapt", "m", bad)
    assert client.cache.get(adapt_key) == bad
    r = resolve_rule(query, lib, llm=client)
    assert r.source == "offline" or r.rule.soft_scores[0].window_s <= 3600
    assert any("LLM adapter failed" in n for n in r.notices)
    assert client.cache.get(adapt_key) is None                # dropped
    recs = [synth_video(f"v{k}", seed=k, duration_s=6) for k in range(3)]
    RuleScorer.from_records(recs).score(r.rule)               # scores without crashing
