"""Video-profile rule forms: on perceived video an object event's gates must hold on the track
that moves (strived.events.video_form), not on any track of the clip."""

import pytest

from strived.records import VideoInfo, VideoRecords
from strived.rulelib import library as L
from strived.events import EVENT_KEYS, starting_rule
from strived.rulelib.video_forms import VIDEO_JOLT, VIDEO_JOLT_GAP_S, VIDEO_SPEED_FLOOR_MPS, VIDEO_STAY_S, video_form
from strived.rules.model import parse_rule
from strived.rules.scorer import RuleScorer

FPS = 10.0


def _clip(vid: str, tracks: dict[int, list[tuple[float, float]]]) -> VideoRecords:
    """A 6 s clip; ``tracks``: track id -> per-frame (distance, loc_x) for every frame."""
    n = int(6 * FPS)
    frames = []
    for j in range(n):
        objs = [{"track": tid, "cls": "car", "distance": float(v[j][0]), "loc_x": float(v[j][1])}
                for tid, v in tracks.items()]
        frames.append({"i": j, "t": j / FPS, "ego": {"speed": 10.0, "yaw_rate": 0.0, "accel": 0.0},
                       "objects": objs})
    info = VideoInfo(id=vid, path=None, fps=FPS, n_frames=n, attrs={"perception": {"perception_version": 2}})
    return VideoRecords.from_frames(info, frames)


N = int(6 * FPS)
STILL_IN_LANE = [(20.0, 0.2)] * N                                   # lead car, not moving sideways
SWEEP_FAR_RIGHT = [(30.0, 14.0 - 8.0 * j / N) for j in range(N)]    # far right, never in the lane
SWEEP_FAR_OUT = [(30.0, 6.0 + 8.0 * j / N) for j in range(N)]       # far right, moving away
CUT_IN = [(15.0, 4.0 - 3.8 * min(1.0, j / 30)) for j in range(N)]   # right lane -> ego lane in 3 s
CUT_OUT = [(15.0, 0.2 + 3.8 * min(1.0, j / 30)) for j in range(N)]  # ego lane -> right lane in 3 s
# crossing traffic: 6 m/s sideways, through the ego lane (|loc_x| < 1.5 m) in 0.5 s around t = 1.5 s
CROSS_RL = [(15.0, 9.0 - 6.0 * j / FPS) for j in range(N)]          # right -> left
CROSS_LR = [(15.0, -9.0 + 6.0 * j / FPS) for j in range(N)]         # left -> right


@pytest.fixture
def scorer():
    return RuleScorer.from_records([
        _clip("decoy", {1: STILL_IN_LANE, 2: SWEEP_FAR_RIGHT}),
        _clip("decoy_out", {1: STILL_IN_LANE, 2: SWEEP_FAR_OUT}),
        _clip("cutin", {1: CUT_IN}),
        _clip("cutout", {1: CUT_OUT}),
        _clip("cross_rl", {1: CROSS_RL}),
        _clip("cross_lr", {1: CROSS_LR}),
    ])


def _scores(scorer, form) -> dict[str, float]:
    res = scorer.score(parse_rule(form))
    return dict(zip(res.video_ids, res.scores))


def test_video_forms_parse_and_keep_non_object_events():
    for k in EVENT_KEYS:
        f = video_form(k)
        parse_rule(f)
        base = starting_rule(k)
        if "sequence" in base or base.get("entity", {}).get("role") == "ego":
            # ego forms keep their numbers, except speed gates below what video resolves
            floored = [{**g, "value": VIDEO_SPEED_FLOOR_MPS} if g["field"] == "speed" and g["op"] in ("lt", "le")
                       and 0 <= g["value"] < VIDEO_SPEED_FLOOR_MPS else g for g in base.get("hard_gates") or []]
            assert f == ({**base, "hard_gates": floored} if "sequence" not in base else base)
    assert video_form("ego_stationary")["hard_gates"][0]["value"] == VIDEO_SPEED_FLOOR_MPS
    # (the form asks for < 0.5 m/s, below walking pace, on every profile: at the floor already)
    assert starting_rule("ego_stationary")["hard_gates"][0]["value"] <= VIDEO_SPEED_FLOOR_MPS
    assert video_form("reverse") == starting_rule("reverse")            # speed < -0.5: not a floor case
    # collision events read the camera jolt on video
    for k in VIDEO_JOLT:
        steps = video_form(k)["sequence"]
        assert any(c["field"] == "jolt" for c in steps[-1]["soft_scores"])
        assert not any(c["field"] == "jolt" for c in (starting_rule(k).get("soft_scores") or []))
    assert video_form("lane_change") == starting_rule("lane_change")     # consensus: unchanged
    # cut-in: the motion with its gates, then the same track still in the lane 1-3 s later
    seq = video_form("cut_in_right")["sequence"]
    assert len(seq) == 2 and seq[0]["hard_gates"] and seq[0]["soft_scores"]
    assert seq[1]["same_track"] and seq[1]["hard_gates"] == seq[0]["hard_gates"] and not seq[1]["soft_scores"]
    assert (seq[1]["gap"]["min_seconds"], seq[1]["gap"]["max_seconds"]) == VIDEO_STAY_S
    # cut-out: in the lane, still in it 1-3 s later, then the motion out on the same track
    seq = video_form("cut_out")["sequence"]
    assert len(seq) == 3 and seq[1]["same_track"] and seq[2]["same_track"]
    assert not seq[0]["soft_scores"] and not seq[1]["soft_scores"] and not seq[2]["hard_gates"]
    assert seq[1]["hard_gates"] == seq[0]["hard_gates"]
    # overtakes keep the two-step form (a vehicle beside us need not stay there)
    assert len(video_form("overtaken_left")["sequence"]) == 2


def test_gates_on_another_track_no_longer_make_a_cut_in(scorer):
    single = _scores(scorer, starting_rule("cut_in_right"))
    video = _scores(scorer, video_form("cut_in_right"))
    # the paper's independent aggregation: the lead car meets the gates, the far car gives the change
    assert single["decoy"] > 0.5
    assert video["decoy"] == 0.0
    assert video["cutin"] > 0.5 and video["cutin"] > video["cutout"]


def test_gates_before_the_motion_for_cut_out(scorer):
    single = _scores(scorer, starting_rule("cut_out"))
    video = _scores(scorer, video_form("cut_out"))
    assert single["decoy_out"] > 0.5
    assert video["decoy_out"] == 0.0
    assert video["cutout"] > 0.5 and video["cutout"] > video["cutin"]


@pytest.mark.parametrize("key, cross, real", [("cut_in_right", "cross_rl", "cutin"),
                                               ("cut_in", "cross_rl", "cutin"),
                                               ("cut_out", "cross_lr", "cutout")])
def test_crossing_traffic_is_not_a_cut_in_or_out(scorer, key, cross, real):
    # crossing traffic sweeps through the ego lane with the same lateral motion as a cut-in (cut-out)
    # but does not stay in it (was not in it before): on video the lane must hold for >= 1 s
    video = _scores(scorer, video_form(key))
    assert video[cross] == 0.0
    assert video[real] > 0.5


def test_video_profile_uses_video_forms():
    lib = L.RuleLibrary.uncalibrated(profile="video")
    assert "sequence" in lib.entries["cut_in_right"].rule
    assert "sequence" not in L.RuleLibrary.uncalibrated().entries["cut_in_right"].rule
    shipped = L.load_default_library(profile="video")
    assert "sequence" in shipped.entries["cut_in_right"].start_rule


def test_video_forms_read_lateral_motion_relative_to_the_road_and_gate_in_the_camera_frame():
    for key in ("cut_in", "cut_in_left", "cut_out", "crossing_vehicle"):
        steps = video_form(key)["sequence"]
        softs = [c["field"] for st in steps for c in st["soft_scores"]]
        gates = [g["field"] for st in steps for g in st["hard_gates"]]
        assert softs and not {"loc_x", "abs_loc_x"} & set(softs), key
        assert {"loc_x_road", "abs_loc_x_road"} & set(softs), key
        assert not {"loc_x_road", "abs_loc_x_road"} & set(gates), key   # "in our lane" is where it is now
    # a collision's sideways motion stays in the camera's frame (the jolt of an impact is part of it)
    assert "loc_x" in [c["field"] for st in video_form("collision")["sequence"] for c in st["soft_scores"]]
    # the tracks profile (imported tracks) keeps loc_x
    assert "loc_x" in [c["field"] for c in starting_rule("cut_in_left")["soft_scores"]]


def test_a_left_side_video_rule_is_mirrored_for_the_right_side():
    from strived.rulelib.resolve import resolve_rule

    lib = L.load_default_library(profile="video")
    left = resolve_rule("a car cuts in from the left", library=lib).rule.to_dict()
    right = resolve_rule("a car cuts in from the right", library=lib).rule.to_dict()

    def road_dirs(d):
        return [c.get("direction") for st in d["sequence"] for c in st["soft_scores"] if c["field"] == "loc_x_road"]
    assert road_dirs(left) == ["positive"] and road_dirs(right) == ["negative"]
    from strived.rulelib.adapter import _flip_side, _side_of
    assert _side_of(left) == "left"
    _flip_side(left)
    assert road_dirs(left) == ["negative"] and _side_of(left) == "right"


def test_a_collision_needs_the_jolt_at_contact_not_anywhere_in_the_clip():
    """A car closes to contact at 3 s; the camera jolts then (a crash) or 2.5 s later (a pothole after
    a close call). Both clips hold the same jolt and the same approach: only the timing differs."""
    n = int(6 * FPS)
    approach = [(max(0.5, 20.0 - 6.5 * j / FPS), 0.3) for j in range(n)]      # 20 m -> contact at ~3 s

    def clip(vid, jolt_at):
        frames = []
        for j in range(n):
            t = j / FPS
            jolt = 0.8 if abs(t - jolt_at) < 0.15 else 0.02
            ego = {"speed": 8.0, "yaw_rate": 0.0, "accel": 0.0, "jolt": jolt}
            objs = [{"track": 1, "cls": "car", "distance": approach[j][0], "loc_x": approach[j][1]}] if t <= 3.0 else []
            frames.append({"i": j, "t": t, "ego": ego, "objects": objs})
        info = VideoInfo(id=vid, path=None, fps=FPS, n_frames=n, attrs={"perception": {"perception_version": 3}})
        return VideoRecords.from_frames(info, frames)
    sc = RuleScorer.from_records([clip("crash", 3.3), clip("close_call_then_pothole", 5.5)])
    form = video_form("collision")
    assert form["sequence"][-1]["entity"]["role"] == "ego"
    assert (form["sequence"][-1]["gap"]["min_seconds"], form["sequence"][-1]["gap"]["max_seconds"]) == VIDEO_JOLT_GAP_S
    got = _scores(sc, form)
    assert got["crash"] > 0.8 and got["close_call_then_pothole"] < 0.5 * got["crash"], got


def test_adapter_keeps_close_on_the_gates_step_of_a_video_form():
    from strived.rulelib.resolve import resolve_rule

    rr = resolve_rule("a truck overtakes us on the left very close",
                      library=L.load_default_library(profile="video"))
    d = rr.rule.to_dict()
    first, then = d["sequence"]
    assert first["entity"]["class_filter"] == ["truck"]
    assert any(g["field"] == "distance" and g["value"] <= 3.0 for g in first["hard_gates"])
    assert then["same_track"] and then["hard_gates"] == []      # the motion away is not gated "close"


def test_composed_absence_of_a_one_step_video_form():
    from strived.rulelib.resolve import resolve_rule

    lib = L.load_default_library(profile="video")
    assert "sequence" in lib.entries["cut_in"].rule
    d = resolve_rule("we turn left without a car cutting in", library=lib).rule.to_dict()
    (absent,) = d["absent"]
    assert absent["name"] == "a car cutting in"
    assert {g["field"] for g in absent["hard_gates"]} == {"distance", "abs_loc_x"} and absent["soft_scores"]


def test_negation_around_a_cut_in_that_stays():
    # "X without Y" negates Y around X's motion: with the video cut-in's "stays in the lane" step
    # after the motion, the window is still placed on the motion (not the whole clip)
    from strived.rulelib.resolve import resolve_rule

    lib = L.load_default_library(profile="video")
    assert len(lib.entries["cut_in"].rule["sequence"]) == 2
    d = resolve_rule("a car cuts in without us braking", library=lib).rule.to_dict()
    assert d["event"] == "cut_in_without"
    (absent,) = d["absent"]
    assert absent["step"] == 0 and absent["before_seconds"] <= 10 and absent["after_seconds"] <= 10
