"""Sequence rules (issue 17): schema and pointer errors, exact scoring (fast = naive = exhaustive),
explanations with each step's unit and span, the engine's JSON."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest

from strived.errors import RuleError
from strived.rules import RuleScorer, parse_rule, rule_schema
from strived.rules.explain import explain_video, peak_span
from strived.rules.reference import fragment_cells, score_sequence_video, score_video
from strived.rules.kernels import T_EPS
from tests.core.synth import synth_video

LEAD_THEN_EGO = {
    "event": "lead_brake_then_ego_brake",
    "sequence": [
        {"name": "lead brakes", "entity": {"role": "object", "class_filter": ["car", "truck", "bus"]},
         "hard_gates": [{"field": "distance", "op": "lt", "value": 40}, {"field": "abs_loc_x", "op": "lt", "value": 2}],
         "soft_scores": [{"type": "temporal_change", "field": "distance", "window_seconds": 3, "magnitude": 6,
                          "direction": "negative"}]},
        {"name": "ego brakes", "entity": {"role": "ego"}, "gap": {"min_seconds": 0, "max_seconds": 4},
         "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 3, "magnitude": 3,
                          "direction": "negative"}]}]}

SAME_TRACK = {
    "sequence": [
        {"entity": {"class_filter": ["car"]},
         "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 2}]},
        {"entity": {"class_filter": ["car", "truck"]}, "same_track": True, "weight": 2,
         "gap": {"min_seconds": 0.5, "max_seconds": 3},
         "hard_gates": [{"field": "speed", "op": "gt", "value": 5}],
         "soft_scores": [{"type": "monotonic_trend", "field": "distance", "direction": "decreasing",
                          "min_duration_seconds": 0.5},
                         {"type": "temporal_change", "field": "speed", "window_seconds": 1, "magnitude": 1,
                          "weight": 0.5}]}],
    "absent": [{"entity": {"class_filter": ["pedestrian", "bicycle"]},
                "hard_gates": [{"field": "distance", "op": "lt", "value": 30}], "step": 0,
                "before_seconds": 0.5, "after_seconds": 1.0}]}

STOP_THEN_GO = {
    "sequence": [
        {"name": "stopped", "entity": {"role": "ego"}, "hard_gates": [{"field": "speed", "op": "lt", "value": 0.5}]},
        {"name": "pulls away", "entity": {"role": "ego"}, "gap": {"min_seconds": 0, "max_seconds": 8},
         "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 4, "magnitude": 3,
                          "direction": "positive"}]}]}

CLEAR_LANE = {
    "sequence": [
        {"entity": {"role": "ego"}, "soft_scores": [
            {"type": "temporal_change", "field": "heading", "window_seconds": 4, "magnitude": 0.2}]}],
    "absent": [{"name": "vehicle alongside", "entity": {"class_filter": ["car", "truck"]},
                "hard_gates": [{"field": "distance", "op": "lt", "value": 25},
                               {"field": "abs_loc_x", "op": "gt", "value": 1.5},
                               {"field": "abs_loc_x", "op": "lt", "value": 5.5}],
                "before_seconds": 2, "after_seconds": 1}]}

SEQ_RULES = [LEAD_THEN_EGO, SAME_TRACK, STOP_THEN_GO, CLEAR_LANE]


# ---------------------------------------------------------------------------- schema

def test_schema_shows_sequence_and_absent_and_roundtrips():
    s = rule_schema()
    assert "sequence" in s["properties"] and "absent" in s["properties"]
    step = s["properties"]["sequence"]["items"]["properties"]
    assert {"gap", "same_track", "weight", "entity", "hard_gates", "soft_scores"} <= set(step)
    json.dumps(s)
    for d in SEQ_RULES:
        r = parse_rule(d)
        assert r.is_sequence
        assert parse_rule(r.to_dict()) == r
        assert parse_rule(json.loads(json.dumps(r.to_dict()))).to_dict() == r.to_dict()
    r = parse_rule(CLEAR_LANE)
    assert r.absent[0].step == 0  # default: the last step
    assert set(parse_rule(LEAD_THEN_EGO).fields()) == {"distance", "abs_loc_x", "speed"}


def _step(**kw):
    d = {"entity": {"role": "ego"}, "soft_scores": [
        {"type": "temporal_change", "field": "speed", "window_seconds": 2, "magnitude": 2}]}
    d.update(kw)
    return d


@pytest.mark.parametrize("d, pointer", [
    ({"sequence": [_step(), _step()]}, "/sequence/1/gap"),
    ({"sequence": [_step(gap={"max_seconds": 2})]}, "/sequence/0/gap"),
    ({"sequence": [_step(), _step(gap={"min_seconds": 3, "max_seconds": 2})]}, "/sequence/1/gap/min_seconds"),
    ({"sequence": [_step(), _step(gap={"max_seconds": 2}, same_track=True)]}, "/sequence/1/same_track"),
    ({"sequence": [_step(), _step(gap={"max_seconds": 1e9})]}, "/sequence/1/gap/max_seconds"),
    ({"sequence": [_step(gap=None)]}, "/sequence/0/gap"),
    ({"sequence": [_step(weight=0)]}, "/sequence/0/weight"),
    ({"sequence": []}, "/sequence"),
    ({"sequence": [_step()], "entity": {}}, "/entity"),
    ({"sequence": [_step()], "soft_scores": [
        {"type": "temporal_change", "field": "speed", "window_seconds": 2, "magnitude": 2}]}, "/soft_scores"),
    ({"sequence": [_step(entity={"agg_mode": "consensus"})]}, "/sequence/0/entity/agg_mode"),
    ({"sequence": [_step(hard_gates=[{"field": "speed", "op": "gt", "value": 1, "min_time_fraction": 0.5}])]},
     "/sequence/0/hard_gates/0/min_time_fraction"),
    ({"sequence": [_step(soft_scores=[{"type": "temporal_change", "field": "loc_x", "window_seconds": 2,
                                       "magnitude": 1}])]}, "/sequence/0/soft_scores/0/field"),
    ({"sequence": [_step()], "absent": [{"entity": {}, "hard_gates": [
        {"field": "distance", "op": "lt", "value": 9}], "step": 1}]}, "/absent/0/step"),
    ({"sequence": [_step()], "absent": [{"entity": {}}]}, "/absent/0"),
    ({"sequence": [_step()], "absent": [{"entity": {}, "hard_gates": [], "before_seconds": -1}]},
     "/absent/0/before_seconds"),
    ({"entity": {}, "soft_scores": [], "hard_gates": [{"field": "distance", "op": "lt", "value": 3}],
      "absent": [{"entity": {}, "hard_gates": [{"field": "distance", "op": "lt", "value": 9}]}]}, "/absent"),
    ({"event": "x"}, ""),
])
def test_invalid_sequences_point_into_json(d, pointer):
    with pytest.raises(RuleError) as ei:
        parse_rule(d)
    assert pointer in [p for p, _ in ei.value.errors], ei.value.errors


# ---------------------------------------------------------------------------- exactness

def _tiny(vid, seed):
    return synth_video(vid, seed=seed, duration_s=0.9, n_tracks=3, nan_frac=0.1)


def _brute(rec, rule) -> float:
    """max over every assignment of (unit, frame) to the steps of the product formula."""
    cells = [list(fragment_cells(rec, s).items()) for s in rule.sequence]
    wsum = sum(s.weight for s in rule.sequence)
    neg = []
    for a in rule.absent:
        c = fragment_cells(rec, a)
        neg.append((a, [(float(rec.t[j]), q) for (_, j), q in c.items()]))
    best = 0.0
    for combo in itertools.product(*cells):
        ok = True
        for k in range(1, len(combo)):
            st = rule.sequence[k]
            (u0, j0), _ = combo[k - 1]
            (u1, j1), _ = combo[k]
            gap = float(rec.t[j1]) - float(rec.t[j0])
            if not (st.min_gap_s - T_EPS <= gap <= st.max_gap_s + T_EPS) or (st.same_track and u0 != u1):
                ok = False
                break
        if not ok:
            continue
        val = 1.0
        for k, ((_, _), q) in enumerate(combo):
            val *= q ** (rule.sequence[k].weight / wsum)
        for a, pts in neg:
            t = float(rec.t[combo[a.step][0][1]])
            val *= 1.0 - max([q for tt, q in pts if t - a.before_s - T_EPS <= tt <= t + a.after_s + T_EPS],
                             default=0.0)
        best = max(best, val)
    return best


def _random_fragment(rng: random.Random, role: str) -> dict:
    if role == "ego":
        gates = [{"field": "speed", "op": rng.choice(["gt", "lt"]), "value": rng.uniform(8, 12)}] \
            if rng.random() < 0.4 else []
        softs = [{"type": "temporal_change", "field": rng.choice(["speed", "yaw_rate", "heading"]),
                  "window_seconds": rng.choice([0.2, 0.35, 1.0]), "magnitude": rng.uniform(0.05, 2),
                  "direction": rng.choice([None, "positive", "negative"])}] if rng.random() < 0.85 else []
        return {"entity": {"role": "ego"}, "hard_gates": gates, "soft_scores": softs}
    cf = rng.choice([None, ["car"], ["car", "truck", "bus"], ["pedestrian", "bicycle"]])
    gates = [{"field": rng.choice(["distance", "abs_loc_x", "speed"]), "op": rng.choice(["lt", "gt"]),
              "value": rng.uniform(2, 35)}] if rng.random() < 0.4 else []
    softs = []
    for _ in range(rng.choice([0, 1, 1, 2])):
        if rng.random() < 0.7:
            softs.append({"type": "temporal_change", "field": rng.choice(["distance", "loc_x", "abs_loc_x", "speed",
                                                                          "loc_x_road", "abs_loc_x_road"]),
                          "window_seconds": rng.choice([0.2, 0.35, 1.0]), "magnitude": rng.uniform(0.2, 3),
                          "direction": rng.choice([None, "positive", "negative"]),
                          "weight": rng.choice([0.5, 1.0])})
        else:
            softs.append({"type": "monotonic_trend", "field": rng.choice(["distance", "loc_x"]),
                          "direction": rng.choice(["increasing", "decreasing"]),
                          "min_duration_seconds": rng.choice([0.1, 0.3]), "weight": 1.0})
    return {"entity": {"role": "object", "class_filter": cf, "selection": rng.choice(["any", "any", "closest"])},
            "hard_gates": gates, "soft_scores": softs}


def _random_rule(rng: random.Random, tiny: bool) -> dict:
    k = rng.choice([1, 2, 2, 3])
    steps = []
    for i in range(k):
        role = rng.choice(["ego", "object", "object"])
        s = _random_fragment(rng, role)
        s["weight"] = rng.choice([0.5, 1.0, 2.0])
        if i:
            lo = rng.choice([0.0, 0.0, 0.1, 0.3])
            s["gap"] = {"min_seconds": lo, "max_seconds": lo + rng.choice([0.0, 0.2, 0.5, 2.0] if tiny else [1.0, 3.0])}
            if role == "object" and steps[-1]["entity"]["role"] == "object" and rng.random() < 0.5:
                s["same_track"] = True
        steps.append(s)
    d = {"sequence": steps}
    if rng.random() < 0.5:
        a = _random_fragment(rng, rng.choice(["ego", "object"]))
        if not a["hard_gates"] and not a["soft_scores"]:
            a["hard_gates"] = [{"field": "speed", "op": "gt", "value": 10.0}]
        a.update({"step": rng.randrange(k), "before_seconds": rng.choice([0.0, 0.2, 1.0]),
                  "after_seconds": rng.choice([0.0, 0.3])})
        d["absent"] = [a]
    return d


def test_reference_equals_exhaustive_enumeration():
    rng = random.Random(7)
    recs = [_tiny(f"t{k}", 100 + k) for k in range(6)]
    n_pos = 0
    for _ in range(40):
        d = _random_rule(rng, tiny=True)
        r = parse_rule(d)
        for rec in recs:
            ref = score_sequence_video(rec, r)
            assert ref == pytest.approx(_brute(rec, r), abs=1e-12), json.dumps(d)
            n_pos += ref > 0
    assert n_pos > 40


def _check_agree(recs, docs):
    sc = RuleScorer.from_records(recs)
    ordered = sorted(recs, key=lambda r: r.info.id)
    n_pos = 0
    for d in docs:
        r = parse_rule(d)
        fast = sc.score(r).scores
        ref = np.array([score_video(x, r) for x in ordered])
        np.testing.assert_allclose(fast, ref, atol=1e-6, rtol=0, err_msg=json.dumps(d))
        n_pos += int((fast > 0).sum())
    return n_pos


def test_fast_equals_reference_on_tiny_and_random():
    rng = random.Random(11)
    tiny = [_tiny(f"t{k}", 200 + k) for k in range(8)]
    assert _check_agree(tiny, [_random_rule(rng, True) for _ in range(30)]) > 30
    recs = [synth_video(f"v{k:03d}", seed=k, duration_s=8) for k in range(10)]
    assert _check_agree(recs, SEQ_RULES + [_random_rule(rng, False) for _ in range(12)]) > 30


def test_fast_equals_reference_on_real(bench_records):
    from strived.events import EVENTS

    lib_seq = [e.form for e in EVENTS if "sequence" in e.form]
    assert len(lib_seq) >= 4
    n = _check_agree(bench_records, SEQ_RULES + lib_seq)
    assert n > 10


def test_one_step_single_soft_score_equals_the_plain_rule():
    """A one-step sequence with one soft score and no gate is the plain rule: the maximum over
    anchors of the per-frame trace is the pairwise maximum."""
    recs = [synth_video(f"v{k:03d}", seed=k, duration_s=8) for k in range(8)]
    sc = RuleScorer.from_records(recs)
    for soft in ({"type": "temporal_change", "field": "loc_x", "window_seconds": 1.5, "magnitude": 3},
                 {"type": "temporal_change", "field": "speed", "window_seconds": 2, "magnitude": 2,
                  "direction": "negative"},
                 {"type": "monotonic_trend", "field": "distance", "direction": "decreasing",
                  "min_duration_seconds": 0.5}):
        role = "ego" if soft["field"] == "speed" else "object"
        plain = parse_rule({"entity": {"role": role}, "soft_scores": [soft]})
        seq = parse_rule({"sequence": [{"entity": {"role": role}, "soft_scores": [soft]}]})
        np.testing.assert_allclose(sc.score(seq).scores, sc.score(plain).scores, atol=1e-12)


def test_order_gap_and_negation_semantics():
    """Planted events: A then B within the gap scores 1; B before A, or too late, scores 0; an
    object in the negation's scope inside its window zeroes the score, outside it does not."""
    from strived.records import Track, VideoInfo, VideoRecords

    def video(vid, t_lead, t_ego, ped_at=None, ped_n=5):
        t = np.arange(100) / 10.0
        speed = np.where(t < t_ego, 12.0, np.maximum(12.0 - 4.0 * (t - t_ego), 4.0))
        dist = np.where(t < t_lead, 30.0, np.maximum(30.0 - 8.0 * (t - t_lead), 10.0)).astype(np.float32)
        f = {"distance": dist, "loc_x": np.zeros(100, np.float32), "loc_z": dist,
             "lane_rel": np.zeros(100, np.float32), "bbox_area": np.full(100, 1e4, np.float32),
             "score": np.ones(100, np.float32)}
        tracks = [Track(1, "car", np.arange(100, dtype=np.int32), f)]
        if ped_at is not None:
            pos = np.arange(int(ped_at * 10), int(ped_at * 10) + ped_n, dtype=np.int32)
            g = {k: np.full(ped_n, 8.0, np.float32) for k in f}
            tracks.append(Track(2, "pedestrian", pos, g))
        ego = {"speed": speed, "yaw_rate": np.zeros(100), "accel": np.gradient(speed, t)}
        return VideoRecords(VideoInfo(vid, None, 10.0, 100), np.arange(100), t, ego, tracks)

    doc = json.loads(json.dumps(LEAD_THEN_EGO))
    doc["sequence"][1]["gap"]["max_seconds"] = 1.0
    rule = parse_rule({**doc, "absent": [
        {"entity": {"class_filter": ["pedestrian"]}, "hard_gates": [{"field": "distance", "op": "lt", "value": 20}],
         "step": 1, "before_seconds": 1, "after_seconds": 1}]})
    recs = [video("a_then", 2.0, 4.0), video("b_before", 7.0, 1.0), video("c_late", 1.0, 7.5),
            video("d_ped_in", 2.0, 4.0, ped_at=2.5, ped_n=75), video("e_ped_out", 2.0, 4.0, ped_at=8.0)]
    res = RuleScorer.from_records(recs).score(rule)
    got = dict(zip(res.video_ids, res.scores))
    assert got["a_then"] == pytest.approx(1.0)
    assert got["e_ped_out"] == pytest.approx(1.0)
    assert got["b_before"] == 0.0 and got["c_late"] == 0.0
    assert got["d_ped_in"] == 0.0
    for rec in recs:
        assert score_video(rec, rule) == pytest.approx(got[rec.info.id], abs=1e-9)
    ex = explain_video(recs[0], rule)
    lead, ego = ex.steps
    assert lead.track == 1 and lead.cls == "car" and ego.track == -1
    assert 2.0 <= lead.anchor_s <= ego.anchor_s <= lead.anchor_s + 1 + 1e-9
    assert lead.span_s[0] >= 2.0 - 1e-9 and ego.span_s[1] == ego.anchor_s
    assert ex.span_s == (min(lead.span_s[0], ego.span_s[0]), ego.anchor_s)
    assert ex.absent[0].factor == 1.0 and ex.absent[0].track is None
    exd = explain_video(recs[3], rule)
    assert exd.score == 0.0 and exd.steps == []


def test_explain_steps_on_real(bench_records):
    sc = RuleScorer.from_records(bench_records)
    for d in SEQ_RULES:
        r = parse_rule(d)
        res = sc.score(r)
        for vid, s in res.ranking(3):
            rec = sc.records(vid)
            ex = explain_video(rec, r)
            assert ex.score == pytest.approx(s, abs=1e-9)
            if s <= 0:
                continue
            assert len(ex.steps) == len(r.sequence)
            prod = 1.0
            wsum = sum(st.weight for st in r.sequence)
            for k, sm in enumerate(ex.steps):
                assert sm.span_s[0] <= sm.span_s[1] == sm.anchor_s
                prod *= sm.score ** (r.sequence[k].weight / wsum)
                if k:
                    gap = sm.anchor_s - ex.steps[k - 1].anchor_s
                    assert r.sequence[k].min_gap_s - 2e-3 <= gap <= r.sequence[k].max_gap_s + 2e-3
                    if r.sequence[k].same_track:
                        assert sm.track == ex.steps[k - 1].track
                if sm.role == "object":
                    assert rec.track(sm.track).cls == sm.cls
            for a in ex.absent:
                prod *= a.factor
            assert prod == pytest.approx(s, abs=1e-9)
            assert peak_span(rec, r, None) == ex.span_s
            steps, absent = ex.steps_dicts()
            json.dumps(steps), json.dumps(absent)


def test_engine_hits_carry_steps(tmp_path):
    from strived import engine
    from strived.store import Library

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([synth_video(f"v{k:03d}", seed=k, duration_s=8) for k in range(6)])
    resp = engine.search(lib, "lead brakes then we brake", rule=LEAD_THEN_EGO, sources=["rule"], top_k=5)
    assert resp.hits
    d = resp.to_dict()
    json.dumps(d)
    h = d["hits"][0]
    assert [s["name"] for s in h["steps"]] == ["lead brakes", "ego brakes"]
    assert h["steps"][1]["track"] == -1 and h["steps"][0]["track"] >= 0
    assert h["span_s"][0] <= h["steps"][0]["span_s"][0] + 1e-3 and h["span_s"][1] >= h["steps"][1]["anchor_s"] - 1e-3
    ex = engine.explain(lib, h["video_id"], LEAD_THEN_EGO)
    assert ex.score == pytest.approx(h["per_source"]["rule"]["score"], abs=1e-9)
