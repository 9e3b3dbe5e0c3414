"""Gates held for a duration (``min_seconds``): a physical quantity, so a true event is found in a
clip of any length ("we stand still for 6 s at the end of a 20 s drive"), where a share of the
clip (``min_time_fraction``) never could. Fast scorer == reference, schema, explanations,
sequences, calibration space and unknown handling."""

from __future__ import annotations

import json

import numpy as np
import pytest

from strived.errors import RuleError
from strived.rules import RuleScorer, parse_rule
from strived.rules.explain import explain_video, gate_witnesses, peak_span
from strived.rules.reference import longest_held_run, score_video
from tests.core.synth import synth_video

STILL_3S = {"event": "ego_stationary", "entity": {"role": "ego"},
            "hard_gates": [{"field": "speed", "op": "lt", "value": 0.5, "min_seconds": 3.0}],
            "soft_scores": []}
STILL_80PC = {"event": "ego_stationary", "entity": {"role": "ego"},
              "hard_gates": [{"field": "speed", "op": "lt", "value": 0.5, "min_time_fraction": 0.8}],
              "soft_scores": []}


def _drive(vid: str, stops: list[tuple[float, float]], duration_s: float = 20.0, seed: int = 0,
           jitter: bool = True):
    """A 10 fps clip driving at ~10 m/s, stopped (speed 0.1 m/s) over each [a, b) of ``stops``."""
    r = synth_video(vid, seed=seed, duration_s=duration_s, n_tracks=3, jitter=jitter)
    speed = np.full(len(r.t), 10.0)
    for a, b in stops:
        speed[(r.t >= a) & (r.t < b)] = 0.1
    r.ego["speed"] = speed
    return r


def _both(recs, rule_doc) -> dict[str, float]:
    """{video: score} from the fast scorer, checked equal to the reference scorer's."""
    rule = parse_rule(rule_doc)
    fast = RuleScorer.from_records(recs).score(rule)
    ref = {r.info.id: score_video(r, rule) for r in recs}
    got = dict(zip(fast.video_ids, fast.scores.tolist()))
    assert got == pytest.approx(ref, abs=1e-9)
    return got


def test_standing_still_6s_at_the_end_of_a_drive_is_found_a_1s_pause_is_not():
    end_stop = _drive("end_stop", [(14.0, 20.0)], seed=1)        # 6 s still at the end of 20 s
    pause = _drive("pause", [(8.0, 9.0)], seed=2)                  # a stop-line pause of 1 s
    two_short = _drive("two_short", [(3.0, 5.0), (10.0, 12.0)], seed=3)   # 2 + 2 s: no 3 s run
    recs = [end_stop, pause, two_short]
    assert _both(recs, STILL_3S) == {"end_stop": 1.0, "pause": 0.0, "two_short": 0.0}
    # the share of the clip never finds it: 6 s of 20 s is 30 %
    assert _both(recs, STILL_80PC) == {"end_stop": 0.0, "pause": 0.0, "two_short": 0.0}
    # the shipped forms (inventory and hand rule) find it too
    from strived.events import starting_rule
    from strived.rulelib.video_forms import video_form
    from strived.rulelib.hand_rules import hand_rule

    for form in (starting_rule("ego_stationary"), video_form("ego_stationary"),
                 hand_rule("ego_stationary")):
        assert _both(recs, form) == {"end_stop": 1.0, "pause": 0.0, "two_short": 0.0}, form
    # a longer clip (60 s, stopped 5 s in the middle) is no different: a duration, not a share
    long = _drive("long", [(30.0, 35.0)], duration_s=60.0, seed=4)
    assert _both([long], STILL_3S) == {"long": 1.0}


def test_run_boundaries_unknown_samples_and_epsilon():
    r = _drive("v", [(4.95, 7.95)], seed=5, duration_s=12.0, jitter=False)   # 0.1 s steps
    # samples 5.0 .. 7.9: the run lasts 2.9 s (last sample minus first)
    assert longest_held_run(r.t, r.ego["speed"], "lt", 0.5)[0] == pytest.approx(2.9)
    got = {s: _both([r], {**STILL_3S, "hard_gates": [{**STILL_3S["hard_gates"][0], "min_seconds": s}]})["v"]
           for s in (2.9, 2.9 + 5e-4, 3.0)}
    assert got == {2.9: 1.0, 2.9 + 5e-4: 1.0, 3.0: 0.0}     # inclusive to within 1 ms
    # one unknown sample in the middle breaks the run into 1.4 s + 1.4 s
    r.ego["speed"][65] = np.nan
    assert _both([r], {**STILL_3S, "hard_gates": [{**STILL_3S["hard_gates"][0], "min_seconds": 2.0}]}) == {"v": 0.0}
    assert _both([r], {**STILL_3S, "hard_gates": [{**STILL_3S["hard_gates"][0], "min_seconds": 1.4}]}) == {"v": 1.0}


def test_held_run_per_unit_equals_reference_on_random_corpora():
    """The vectorised per-unit longest run (columns) against plain loops, every track and ego
    series of random corpora with NaNs and gaps, several fields, operators and thresholds."""
    from strived.rules.reference import ego_series, track_series

    for seed in range(3):
        recs = [synth_video(f"r{seed}_{k:02d}", seed=100 * seed + k, duration_s=8 + 3 * k, nan_frac=0.1)
                for k in range(8)]
        cols = RuleScorer.from_records(recs).columns
        ordered = sorted(recs, key=lambda r: r.info.id)
        for fld, op, x in (("distance", "lt", 30.0), ("loc_x", "gt", 0.0), ("abs_loc_x", "le", 3.0),
                           ("speed", "gt", 10.0), ("yaw_rate", "lt", 0.03), ("accel", "ge", 0.0),
                           ("loc_x_road", "lt", 0.5), ("heading", "gt", 0.0)):
            got = cols.held_run(fld, op, x)
            want = []
            for r in ordered:
                if fld in ("speed", "yaw_rate", "accel", "heading"):
                    units = [(r.t, ego_series(r, fld))]
                else:
                    units = [(r.t[tr.pos], track_series(r, tr, fld))
                             for tr in sorted(r.tracks, key=lambda tr: tr.track_id)]
                for t, v in units:
                    best = longest_held_run(t, v, op, x)
                    want.append(0.0 if best is None else best[0])
            np.testing.assert_allclose(got, want, atol=1e-9, err_msg=f"{fld} {op} {x}")


RANDOM_RULES = [
    {"entity": {"class_filter": ["car", "truck"]},
     "hard_gates": [{"field": "distance", "op": "lt", "value": 32, "min_seconds": 3}],
     "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 2}]},
    {"entity": {"role": "ego"}, "hard_gates": [{"field": "speed", "op": "gt", "value": 10, "min_seconds": 3}],
     "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 2, "magnitude": 1}]},
    {"entity": {"class_filter": None, "selection": "closest"},
     "hard_gates": [{"field": "abs_loc_x", "op": "lt", "value": 4, "min_seconds": 1},
                    {"field": "yaw_rate", "op": "lt", "value": 0.05, "min_seconds": 1}],
     "soft_scores": [{"type": "monotonic_trend", "field": "distance", "direction": "decreasing",
                      "min_duration_seconds": 0.5}]},
    {"entity": {"class_filter": None, "agg_mode": "consensus"},
     "hard_gates": [{"field": "loc_x", "op": "ge", "value": -2, "min_seconds": 4},
                    {"field": "distance", "op": "lt", "value": 40, "min_time_fraction": 0.3}],
     "soft_scores": [{"type": "temporal_change", "field": "distance", "window_seconds": 1.5,
                      "magnitude": 3, "min_fraction": 0.2}]},
    {"entity": {"role": "ego"}, "hard_gates": [{"field": "yaw_rate", "op": "gt", "value": -0.06,
                                                "min_seconds": 2.0}], "soft_scores": []},
]


def test_fast_scorer_matches_reference_with_min_seconds_gates():
    for seed in range(2):
        recs = [synth_video(f"s{seed}_{k:03d}", seed=1000 * seed + k, duration_s=6 + k % 9, nan_frac=0.08)
                for k in range(20)]
        for d in RANDOM_RULES:
            got = _both(recs, d)
            assert 0 < sum(v > 0 for v in got.values()) < len(recs), json.dumps(d)   # it decides


def test_schema_min_seconds_errors_point_at_the_key():
    gate = {"field": "speed", "op": "lt", "value": 0.5}
    cases = [
        ({"entity": {"role": "ego"}, "soft_scores": [],
          "hard_gates": [{**gate, "min_seconds": 3, "min_time_fraction": 0.8}]}, "/hard_gates/0/min_seconds"),
        ({"entity": {"role": "ego"}, "soft_scores": [], "hard_gates": [{**gate, "min_seconds": 0}]},
         "/hard_gates/0/min_seconds"),
        ({"entity": {"role": "ego"}, "soft_scores": [], "hard_gates": [{**gate, "min_seconds": -1}]},
         "/hard_gates/0/min_seconds"),
        ({"entity": {"role": "ego"}, "soft_scores": [], "hard_gates": [{**gate, "min_seconds": "long"}]},
         "/hard_gates/0/min_seconds"),
        ({"sequence": [{"entity": {"role": "ego"}, "hard_gates": [{**gate, "min_seconds": 3}]}]},
         "/sequence/0/hard_gates/0/min_seconds"),
    ]
    for d, pointer in cases:
        with pytest.raises(RuleError) as ei:
            parse_rule(d)
        assert pointer in [p for p, _ in ei.value.errors], (d, ei.value.errors)
    # valid: canonical round trip, null means "in one frame", the description states the unit
    r = parse_rule(STILL_3S)
    assert r.hard_gates[0].min_seconds == 3.0 and r.to_dict()["hard_gates"][0]["min_seconds"] == 3.0
    assert parse_rule(json.loads(json.dumps(r.to_dict()))) == r
    assert "held for ≥3 s" in r.hard_gates[0].describe()
    none = parse_rule({**STILL_3S, "hard_gates": [{**gate, "min_seconds": None}]})
    assert none.hard_gates[0].min_seconds is None and "min_seconds" not in none.to_dict()["hard_gates"][0]
    from strived.rules import rule_schema

    props = rule_schema()["properties"]["hard_gates"]["items"]["properties"]["min_seconds"]
    assert props["exclusiveMinimum"] == 0 and "seconds" in props["description"]


def test_a_step_drops_min_seconds_and_video_forms_keep_the_single_pattern():
    from strived.events import as_step
    from strived.rulelib.video_forms import video_form

    step = as_step(STILL_3S, "stopped")
    assert "min_seconds" not in step["hard_gates"][0]
    parse_rule({"sequence": [step]})
    f = video_form("ego_stationary")
    assert "sequence" not in f and f["hard_gates"][0]["min_seconds"] == 3.0


def test_explanation_says_where_the_gate_held():
    r = _drive("end_stop", [(14.0, 20.0)], seed=1)
    rule = parse_rule(STILL_3S)
    e = explain_video(r, rule)
    assert e.score == 1.0 and e.hard_ok
    [w] = gate_witnesses(e, rule)
    stopped = r.t[r.t >= 14.0]
    assert w["met"] and w["track"] == -1
    assert (w["first_s"], w["last_s"]) == (float(stopped[0]), float(stopped[-1]))
    assert w["held_s"] == pytest.approx(stopped[-1] - stopped[0])
    # the event span of the gate-only rule is that run, not the whole clip
    assert peak_span(r, rule, None) == (float(stopped[0]), float(stopped[-1]))
    assert e.span_s == (float(stopped[0]), float(stopped[-1]))
    pause = _drive("pause", [(8.0, 9.0)], seed=2)
    e2 = explain_video(pause, rule)
    assert e2.score == 0.0 and not e2.hard_ok and gate_witnesses(e2, rule)[0]["met"] is False


def test_calibration_searches_min_seconds_on_a_grid_of_seconds():
    from strived.rulelib.fit.optimizer import HELD_SECONDS_GRID, _fragment_params

    params = {p.path: p for p in _fragment_params(STILL_3S, (), None)}
    p = params[("hard_gates", 0, "min_seconds")]
    assert p.kind == "duration" and set(HELD_SECONDS_GRID) <= set(p.grid) and 3.0 in p.grid
    assert all(v > 0 for v in p.grid)


def test_mostly_unknown_speed_is_unknown_not_a_non_match(tmp_path):
    """Availability: a min_seconds gate on ego speed known on under half of the clip cannot judge
    it (its gaps break every run): the video is unjudged, neither a match nor a non-match."""
    from strived import engine
    from strived.availability import measure_availability, unjudgeable
    from strived.store import Library

    lib = Library.open(tmp_path / "lib", create=True)
    recs = []
    for vid, known in (("full", 1.0), ("most", 0.9), ("little", 0.3)):
        r = synth_video(vid, seed=3)
        n = len(r.t)
        r.ego["speed"][:] = 0.0
        r.ego["speed"][int(round(known * n)):] = np.nan
        if vid == "little":                       # a value every other frame: no run at all
            r.ego["speed"][:] = np.nan
            r.ego["speed"][: int(round(known * n)) * 2: 2] = 0.0
        r.info.attrs["perception"] = {"perception_version": 2}
        r.info.attrs["availability"] = measure_availability(r)
        recs.append(r)
    lib.add_videos(recs)
    rule = parse_rule(STILL_3S)
    naive = {v: score_video(lib.get_video(v), rule) for v in ("full", "most", "little")}
    assert naive == {"full": 1.0, "most": 1.0, "little": 0.0}
    assert unjudgeable(lib.availability(), rule) == {"little": ["speed"]}
    resp = engine.search(lib, "the ego car is standing still", rule=STILL_3S, sources=("rule",))
    assert {h.video_id for h in resp.hits} == {"full", "most"}
    assert resp.rule_unjudged == {"little": ["speed"]}
    note = [n for n in resp.notices if "could not judge" in n]
    assert note and "ego speed known on too little of the clip: 1" in note[0]
    lib.close()
