import json

import numpy as np
import pytest

from strived.errors import RuleError
from strived.rulelib.hand_rules import HAND_RULES, hand_rule
from strived.rules import RuleScorer, parse_rule, rule_schema
from strived.rules.explain import explain_video, peak_span
from strived.rules.reference import score_video
from tests.core.synth import synth_video

CUT_IN = {"entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
          "hard_gates": [{"field": "distance", "op": "<", "value": 40.0}],
          "soft_scores": [{"field": "loc_x", "type": "max_change", "window_seconds": 4.0, "magnitude": 14.0}]}

RULES = [
    CUT_IN,
    {"entity": {"role": "ego"}, "soft_scores": [
        {"type": "temporal_change", "field": "heading", "window_seconds": 6, "min_delta": 0.5, "direction": "positive"}]},
    {"entity": {"class_filter": None, "agg_mode": "consensus"},
     "hard_gates": [{"field": "speed", "op": "gt", "value": 2}],
     "soft_scores": [{"type": "monotonic_trend", "field": "loc_x", "direction": "decreasing",
                      "min_duration_seconds": 1.0, "min_fraction": 0.2},
                     {"type": "temporal_change", "field": "speed", "window_seconds": 2, "min_delta": 1,
                      "direction": "negative", "weight": 0.5}]},
    {"entity": {"class_filter": ["car", "bus"], "selection": "closest"},
     "hard_gates": [{"field": "distance", "op": "le", "value": 35, "min_time_fraction": 0.3}],
     "soft_scores": [{"type": "temporal_change", "field": "distance", "window_seconds": 2.5, "magnitude": 6,
                      "direction": "negative"},
                     {"type": "temporal_change", "field": "abs_loc_x", "window_seconds": 1.5, "magnitude": 2,
                      "weight": 2.0}]},
    {"entity": {"class_filter": ["pedestrian"]}, "hard_gates": [{"field": "accel", "op": "lt", "value": -0.5}],
     "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 3, "magnitude": 3,
                      "min_fraction": 0.5}]},
    {"entity": {"class_filter": ["truck"]}, "hard_gates": [{"field": "lane_rel", "op": ">=", "value": 1}], "soft_scores": []},
    # gates held for a duration (an unbroken run of samples), on a track and on the ego series
    {"entity": {"class_filter": ["car", "truck"]},
     "hard_gates": [{"field": "distance", "op": "lt", "value": 35, "min_seconds": 2.0},
                    {"field": "speed", "op": "gt", "value": 1, "min_seconds": 1.0}],
     "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 3}]},
    # the lateral offset with the ego's rotation taken out (derived from loc_x, depth and heading)
    {"entity": {"class_filter": ["car", "truck"]}, "hard_gates": [{"field": "abs_loc_x", "op": "lt", "value": 3}],
     "soft_scores": [{"type": "temporal_change", "field": "abs_loc_x_road", "window_seconds": 2, "magnitude": 2,
                      "direction": "negative"},
                     {"type": "temporal_change", "field": "loc_x_road", "window_seconds": 3, "magnitude": 3,
                      "direction": "positive", "weight": 0.5},
                     {"type": "monotonic_trend", "field": "loc_x_road", "direction": "increasing",
                      "min_duration_seconds": 0.5, "weight": 0.5}]},
]


def test_schema_is_json_and_canonical_roundtrip():
    json.dumps(rule_schema())
    for d in RULES + list(HAND_RULES.values()):
        r = parse_rule(d)
        assert parse_rule(r.to_dict()) == r
        assert parse_rule(json.loads(json.dumps(r.to_dict()))).to_dict() == r.to_dict()


def test_min_delta_is_half_magnitude_and_symbolic_ops():
    r = parse_rule({"entity": {}, "hard_gates": [{"field": "distance", "op": "<=", "value": 5}],
                    "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "min_delta": 3}]})
    assert r.soft_scores[0].magnitude == 6.0
    assert r.hard_gates[0].op == "le"
    assert r.to_dict()["soft_scores"][0]["magnitude"] == 6.0 and "min_delta" not in r.to_dict()["soft_scores"][0]


@pytest.mark.parametrize("d, pointer", [
    ({"entity": {}, "soft_scores": [{"type": "temporal_change", "field": "speedz", "window_seconds": 2, "magnitude": 1}]},
     "/soft_scores/0/field"),
    ({"entity": {}, "hard_gates": [{"field": "distance", "op": "==", "value": 3}], "soft_scores": []}, "/hard_gates/0/op"),
    ({"entity": {}, "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": -2, "magnitude": 1}]},
     "/soft_scores/0/window_seconds"),
    ({"entity": {}, "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 1,
                                     "weight": 0}]}, "/soft_scores"),
    ({"entity": {}, "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2}]},
     "/soft_scores/0/magnitude"),
    ({"entity": {"role": "ego"}, "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2,
                                                  "magnitude": 1}]}, "/soft_scores/0/field"),
    ({"entity": {"agg_mode": "all"}, "soft_scores": []}, "/entity/agg_mode"),
    ({"entity": {}, "soft_scores": [{"type": "monotonic_trend", "field": "loc_x", "direction": "up",
                                     "min_duration_seconds": 1}]}, "/soft_scores/0/direction"),
    ({"entity": {}, "soft_scores": [], "bogus": 1}, ""),
])
def test_invalid_rules_point_into_json(d, pointer):
    with pytest.raises(RuleError) as ei:
        parse_rule(d)
    assert pointer in [p for p, _ in ei.value.errors], ei.value.errors


def _check_agree(recs, rule_docs):
    sc = RuleScorer.from_records(recs)
    ordered = sorted(recs, key=lambda r: r.info.id)
    for d in rule_docs:
        r = parse_rule(d)
        fast = sc.score(r).scores
        ref = np.array([score_video(x, r) for x in ordered])
        np.testing.assert_allclose(fast, ref, atol=1e-6, err_msg=json.dumps(d))
        assert (fast > 0).any() or d is RULES[-1], "a rule that scores nothing compares nothing"


def test_fast_scorer_matches_naive_on_random():
    recs = [synth_video(f"v{k:03d}", seed=k, duration_s=12) for k in range(25)]
    _check_agree(recs, RULES)


def test_fast_scorer_matches_naive_on_real(bench_records):
    _check_agree(bench_records, RULES + [HAND_RULES[k] for k in ("cut_in_right", "ego_turn_left", "ego_brake",
                                                                  "ego_stationary", "lead_brake", "cut_out")])


def test_window_boundary_inclusive_and_time_based():
    """Windows use real sample times: a jump across a 0.6 s gap in the samples is inside a 0.6 s
    window (inclusive, despite float noise in 4.3 - 3.7) and outside a 0.5 s one."""
    from strived.records import Track, VideoInfo, VideoRecords

    t = np.array([0.0, 0.1, 0.2, 3.7, 4.3])  # a gap: frame times, not frame counts
    x = np.array([0.0, 0.0, 0.0, 0.0, 7.0], np.float32)
    f = {k: np.full(5, np.nan, np.float32) for k in ("distance", "loc_z", "lane_rel", "bbox_area", "score")}
    f["loc_x"] = x
    rec = VideoRecords(VideoInfo("a", None, 10.0, 50), np.array([0, 1, 2, 37, 43]), t,
                       {k: np.full(5, np.nan) for k in ("speed", "yaw_rate", "accel")},
                       [Track(1, "car", np.arange(5, dtype=np.int32), f)])
    sc = RuleScorer.from_records([rec])
    for window, want in ((0.6, 1.0), (0.5, 0.0), (4.3, 1.0)):
        r = parse_rule({"entity": {}, "soft_scores": [
            {"type": "temporal_change", "field": "loc_x", "window_seconds": window, "magnitude": 7.0}]})
        assert sc.score(r).scores[0] == pytest.approx(want)
        assert score_video(rec, r) == pytest.approx(want)


def test_cut_in_rule_finds_real_cut_in(bench_records, bench_dev):
    queries = {q["id"]: q for q in json.loads((bench_dev / "queries.json").read_text())}
    q = queries["q01"]
    ids = {r.info.id for r in bench_records}
    truth = [v for v in q["relevant"] if v in ids]
    assert truth == ["av2_adcf7d18"]
    rule = parse_rule(hand_rule("cut_in_right"))
    res = RuleScorer.from_records(bench_records).score(rule)
    ranking = [v for v, s in res.ranking() if s > 0]
    assert ranking.index("av2_adcf7d18") < 3  # of 47 windows
    rec = next(r for r in bench_records if r.info.id == "av2_adcf7d18")
    ex = explain_video(rec, rule)
    assert rec.track(ex.peak_track).cls == "bus"  # the bus that pulls into the ego lane
    (a, b), (ta, tb) = ex.span_s, q["spans"]["av2_adcf7d18"][0]
    assert min(b, tb) - max(a, ta) > 0.5 * (tb - ta)
    # its lateral offset really moves towards 0 over the span
    tr = rec.track(ex.peak_track)
    t = rec.t[tr.pos]
    x = tr.fields["loc_x"]
    assert x[t <= a + 0.2].mean() > x[t >= b - 0.2].mean() + 1.0


def test_ego_turn_rule_finds_turns(bench_records, bench_dev):
    queries = {q["id"]: q for q in json.loads((bench_dev / "queries.json").read_text())}
    ids = {r.info.id for r in bench_records}
    for qid, event in (("q04", "ego_turn_left"), ("q05", "ego_turn_right")):
        q = queries[qid]
        truth = {v for v in q["relevant"] if v in ids}
        ambiguous = set(q.get("ambiguous", []))
        res = RuleScorer.from_records(bench_records).score(parse_rule(hand_rule(event)))
        ranked = [v for v, s in res.ranking() if s > 0 and v not in ambiguous]
        assert set(ranked[:len(truth)]) == truth, (qid, ranked[:6])


def test_explain_matches_score_and_traces(bench_records):
    sc = RuleScorer.from_records(bench_records)
    for d in (RULES[0], RULES[2], hand_rule("ego_brake")):
        r = parse_rule(d)
        res = sc.score(r)
        for vid, s in res.ranking(4):
            ex = sc.explain(vid, r)
            assert ex.score == pytest.approx(s, abs=1e-9)
            if s > 0:
                assert ex.span_s is not None and ex.span_s[0] <= ex.span_s[1]
                rec = sc.records(vid)
                ps = peak_span(rec, r, int(res.peak_track[res.video_ids.index(vid)]))
                assert ps is not None
            for tr in ex.traces:
                assert len(tr.t) == len(tr.combined)
                for name, arr in tr.soft.items():
                    assert arr.shape == tr.t.shape
                    if name in tr.unknown:     # no value on this unit: unknown (NaN), not 0
                        assert np.isnan(arr).all()
                    else:
                        assert (arr >= 0).all() and (arr <= 1).all()
            if r.entity.role == "object" and ex.traces:
                # each trace's soft maximum equals its per-track soft score
                for tr in ex.traces:
                    for c in r.soft_scores:
                        if c.field not in ("speed", "accel", "yaw_rate", "heading") and c.min_fraction is None \
                                and c.name not in tr.unknown:
                            assert tr.soft[c.name].max(initial=0) == pytest.approx(tr.soft_max[c.name], abs=1e-9)


def test_empty_corpus_and_no_candidates():
    sc = RuleScorer.from_records([])
    assert sc.score(parse_rule(CUT_IN)).scores.shape == (0,)
    recs = [synth_video("a", seed=1)]
    r = parse_rule({"entity": {"class_filter": ["tram"]}, "soft_scores": [
        {"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 1}]})
    assert RuleScorer.from_records(recs).score(r).scores.tolist() == [0.0]


def test_peak_span_without_peak_track_is_none(bench_records):
    rule = parse_rule(hand_rule("cut_in_right"))
    assert peak_span(bench_records[0], rule, None) is None
    assert peak_span(bench_records[0], rule, -1) is None
    ego = parse_rule(hand_rule("ego_brake"))
    span = peak_span(bench_records[0], ego, None)  # ego rules need no track
    assert span is None or span[0] <= span[1]
