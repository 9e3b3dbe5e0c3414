"""Offline matcher and adapter: bench-dev paraphrases, caps, side/class flips, validity."""

import time

import pytest

from strived.rules.model import parse_rule
from strived.rulelib.library import RuleLibrary, load_default_library
from strived.rulelib.matcher import match_offline
from strived.rulelib.resolve import resolve_rule

# paraphrases of each bench-dev query -> the library event it must land on
PARAPHRASES = {
    "cut_in_right": ["a car cuts in from the right just in front of us",
                     "a vehicle merges into our lane from the right side"],
    "cut_out": ["the car ahead leaves our lane", "the lead vehicle moves out of our lane"],
    "ego_turn_left": ["we turn left at the intersection", "the ego car turns left"],
    "ego_turn_right": ["the ego vehicle turns right", "we make a right turn at the junction"],
    "ego_lane_change": ["we change lanes", "the ego vehicle switches lanes"],
    "lead_brake": ["the car in front of us brakes", "the lead car is braking hard"],
    "ego_brake": ["we brake and slow down sharply", "the ego car brakes hard"],
    "pedestrian_crossing": ["a pedestrian crosses the street ahead", "pedestrians crossing in front"],
    "cyclist_crossing": ["a cyclist crossing the road ahead", "a bike crosses in front of us"],
    "crossing_vehicle": ["a vehicle crosses our path", "cross traffic at the junction"],
    "collision": ["a crash happens", "two cars collide", "a scooter crashes into a car"],
    "ego_collision": ["our car hits another vehicle", "we crash into a car"],
    "rear_end": ["we rear-end the vehicle ahead"],
    "overtaken_left": ["a car overtakes us on the left", "someone passes us on our left"],
    "overtaken_right": ["a vehicle overtakes us on the right"],
    "close_pass": ["a truck passes very close to us", "a bus passes dangerously close"],
    "ego_stationary": ["the ego car is standing still", "we are waiting at a red light"],
    "steady_driving": ["uneventful driving", "normal cruising where nothing happens"],
    # composed events (issue 17): temporal composition and scoped negation
    "lead_brake_then_ego_brake": ["the car ahead brakes and then we brake",
                                  "we brake after the vehicle in front of us brakes",
                                  "the lead car brakes, followed by our car braking"],
    "cut_in_then_ego_brake": ["a car cuts in and then we brake hard",
                              "we brake after a vehicle cuts in front of us"],
    "cut_in_then_brake": ["a car cuts in and then brakes", "a vehicle cuts in front of us and then slows down"],
    "stop_then_go": ["we stop and then pull away", "we come to a stop and then drive off again",
                     "after stopping, we start moving again"],
    "pedestrian_crossing_while_stopped": ["a pedestrian crosses while we are stopped",
                                          "pedestrians walk across the road while we wait"],
    "ego_brake_no_lead": ["we brake with no car ahead of us", "the ego car brakes without a vehicle in front"],
    "lane_change_clear": ["we change lanes into a clear lane", "a lane change with no car in the target lane"],
    "ego_pull_away": ["we pull away from a standstill", "the ego car starts moving"],
}


@pytest.mark.parametrize("event,queries", sorted(PARAPHRASES.items()))
def test_paraphrases_match(event, queries):
    for q in queries:
        assert match_offline(q).event == event, q


def test_bench_dev_queries_resolve(shared_dir):
    import json
    qs = json.loads((shared_dir / "data/bench-dev/queries.json").read_text())
    want = {"collision_two_wheeler": "collision", "collision_any": "collision",
            "close_pass_large": "close_pass", "uneventful_highway": "steady_driving",
            "uneventful": "steady_driving"}
    for q in qs:
        r = resolve_rule(q["text"])
        assert r.event == want.get(q["event"], q["event"]), q
        parse_rule(r.rule.to_dict())


def test_condition_modifier_caps_below_threshold():
    for q in ["snowy loss of control", "a car loses control for no apparent reason"]:
        m = match_offline(q)
        assert m.event == "loss_of_control" and m.confidence < 0.6
        r = resolve_rule(q)
        assert r.mode == "adapted" and any("condition" in n for n in r.notices)
    assert match_offline("a car loses control").confidence >= 0.6


def test_adapter_flips_side_and_class():
    lib = RuleLibrary.uncalibrated()
    r = resolve_rule("a truck cuts in from the left", lib)
    d = r.rule.to_dict()
    assert r.mode == "adapted" and d["entity"]["class_filter"] == ["truck"]
    loc = [s for s in d["soft_scores"] if s["field"] == "loc_x"][0]
    assert loc["direction"] == "positive"          # from the left: loc_x rises towards 0
    # a right-side exemplar asked for the left side is mirrored
    from strived.rulelib.adapter import adapt_offline
    m = match_offline("a scooter overtakes us on the right")
    d2, _ = adapt_offline("a scooter overtakes us on the left", m, lib)
    gate = [g for g in d2["hard_gates"] if g["field"] == "loc_x"][0]
    assert gate["op"] == "lt" and gate["value"] < 0
    assert d2["entity"]["class_filter"] == ["motorcycle"]
    # closeness adds a distance gate; the adapted rule keeps the exemplar's scale
    r3 = resolve_rule("a bus passes extremely close", lib)
    g = [g for g in r3.rule.to_dict()["hard_gates"] if g["field"] == "distance"][0]
    assert g["value"] <= 3.0
    ego = resolve_rule("we turn left on a snowy road", lib).rule.to_dict()
    assert [s["direction"] for s in ego["soft_scores"] if s["field"] == "heading"] == ["positive"]


def test_default_library_and_speed():
    lib = load_default_library()
    assert lib.version.startswith("1.0+")
    assert len(lib.entries) >= 21
    unc = load_default_library(calibrated=False)
    assert all(e.rule == e.start_rule for e in unc.entries.values())
    qs = [q for v in PARAPHRASES.values() for q in v]
    t0 = time.perf_counter()
    for q in qs:
        resolve_rule(q, lib)
    per_query_ms = (time.perf_counter() - t0) / len(qs) * 1000
    assert per_query_ms < 20, per_query_ms


def test_adapted_rule_names_its_exemplar_without_reading_the_description():
    from strived.rulelib.adapter import adapt_offline_from
    from strived.rulelib.library import load_default_library
    from strived.rulelib.matcher import match_offline
    from strived.rulelib.resolve import resolve_rule

    lib = load_default_library()
    q = "a scooter overtakes us on the left"
    rule, _, exemplar = adapt_offline_from(q, match_offline(q, lib), lib)
    assert exemplar == "overtaken_left" and rule["event"].startswith("overtaken_left")
    rr = resolve_rule(q, library=lib)
    assert rr.mode == "adapted" and rr.exemplar_event == "overtaken_left"
    # the ego/other swap: the exemplar is the event actually adapted, not the matched one
    q2 = "the truck in front of us slows down hard"
    r2 = resolve_rule(q2, library=lib)
    assert r2.exemplar_event in lib.entries and r2.rule.event.startswith(r2.exemplar_event)


def test_highway_means_motorway_speed_not_only_free_flowing_fast_traffic():
    """'highway' gates the ego speed at 60 km/h (16.7 m/s, a common motorway minimum): a steady
    freeway clip at 17-18 m/s (bench-dev's comma2k19 windows run 16.6-19.8 m/s) is found, a city
    clip at 12 m/s is not."""
    import numpy as np

    from strived.records import VideoInfo, VideoRecords
    from strived.rules import RuleScorer

    def clip(vid, speed):
        n = 100
        t = np.arange(n) / 10.0
        ego = {"speed": speed + 0.5 * np.sin(t), "yaw_rate": np.zeros(n), "accel": 0.5 * np.cos(t)}
        info = VideoInfo(id=vid, path=None, fps=10.0, n_frames=n, width=1280, height=720, source="synthetic")
        return VideoRecords(info=info, frame_idx=np.arange(n, dtype=np.int64), t=t, ego=ego, tracks=[])

    rule = resolve_rule("normal highway cruising, just keeping the lane, no incidents", load_default_library()).rule
    gates = [g for g in rule.to_dict()["hard_gates"] if g["field"] == "speed"]
    assert gates and all(abs(g["value"] - 16.7) < 1e-9 for g in gates)
    scorer = RuleScorer.from_records([clip("freeway", 17.5), clip("city", 12.0)])
    got = dict(zip(scorer.video_ids, scorer.score(rule).scores))
    assert got["freeway"] > 0.5 and got["city"] == 0.0
