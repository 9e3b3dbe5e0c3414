"""Query understanding generalises (issue part 6): the offline matcher reads whole classes of
plain-language phrasings, not the lexicon's own words. Each test checks one class on fresh
phrasings written for this file (none is a sentence of the independent dev set, checked below),
and the independent dev set (tests/data/paraphrases/independent_dev.json, set A) stays >= 90 %."""

import importlib.util
import json
from pathlib import Path

import pytest

from strived.rulelib.library import load_default_library
from strived.rulelib.matcher import match_offline, respell

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "tests" / "data" / "paraphrases" / "independent_dev.json"


@pytest.fixture(scope="module")
def lib():
    return load_default_library()


def _check(lib, cases):
    wrong = [(q, ev, m.event) for q, ev in cases for m in [match_offline(q, lib)] if m.event != ev]
    assert not wrong, wrong


STANDING_STILL = [
    "our car just idles at the lights for the entire video",
    "the camera vehicle is stood still in a queue",
    "dashcam car stays motionless, engine running",
    "we sit stopped at a junction the whole time",
    "we remain at a standstill throughout",
    "ego is stopped at a red light throughout",
    "the dashcam vehicle stays put the whole time",
    "we are stuck in a traffic jam not moving",
    "clips where we never move",
]
TURNS = [
    ("we swing left into a little side street", "ego_turn_left"),
    ("turning left off the main road onto a lane", "ego_turn_left"),
    ("ego hangs a left at the corner", "ego_turn_left"),
    ("we make a left at the t-junction", "ego_turn_left"),
    ("we bear left into a residential street", "ego_turn_left"),
    ("we take a right at the traffic lights", "ego_turn_right"),
    ("ego swings right at the intersection", "ego_turn_right"),
    ("we hook a right onto the next street", "ego_turn_right"),
    ("we head right at the t-junction", "ego_turn_right"),
    ("ego makes a right onto a side road", "ego_turn_right"),
]
ON_FOOT = [
    "a woman walks across the road in front of us",
    "kids run across the street ahead",
    "a man on foot crosses in front of our car",
    "somebody steps off the kerb and crosses in front of ego",
    "an old lady strolls over the zebra crossing ahead",
    "a jogger dashes across the road in front",
    "a man walks in front of our car",
    "a mother with a child crosses at the lights ahead",
]
WHO_CROSSES = [
    ("someone on a bike rides across in front of us", "cyclist_crossing"),
    ("a kid on a bicycle crosses the road in front of our car", "cyclist_crossing"),
    ("a man cycles across the junction in front of our car", "cyclist_crossing"),
    ("a bicycle cuts across in front of ego", "cyclist_crossing"),
    ("a van drives across our path at the junction", "crossing_vehicle"),
    ("a car shoots across the junction in front of us", "crossing_vehicle"),
    ("a truck pulls out of a side road across our path", "crossing_vehicle"),
    ("a van emerges from a side road in front of us", "crossing_vehicle"),
    ("a dog runs across the road", "dynamic_object_crossing"),
]
INTO_THE_BACK = [
    "we run into the back of the truck ahead",
    "ego crashes into the back of a stopped van",
    "we plough into the rear of the vehicle in front of us",
    "our car shunts the car in front at the lights",
    "we hit the car in front from behind",
    "we go into the back of the car ahead",
    "we bump into the car in front at low speed",
]
ZOOMING_PAST = [
    ("a motorbike whizzes past us on the left", "overtaken_left"),
    ("a car flies by on our left", "overtaken_left"),
    ("a van races past ego on the left side", "overtaken_left"),
    ("we are overtaken on the left by a sports car", "overtaken_left"),
    ("a car speeds past on our right", "overtaken_right"),
    ("a truck shoots by us on the right", "overtaken_right"),
    ("a bike zips past on the right", "overtaken_right"),
    ("a lorry goes past on the right", "overtaken_right"),
]
COMPOUNDS = [
    ("a car cuts in and we brake", "cut_in_then_ego_brake"),
    ("a van swerves into our lane so we have to slow down", "cut_in_then_ego_brake"),
    ("a truck cuts in front of us, forcing us to brake", "cut_in_then_ego_brake"),
    ("someone pulls into our lane ahead and we slam on the brakes", "cut_in_then_ego_brake"),
    ("cut in forces us to brake", "cut_in_then_ego_brake"),
    ("the car in front brakes so we brake as well", "lead_brake_then_ego_brake"),
    ("the lead vehicle brakes and we brake after it", "lead_brake_then_ego_brake"),
    ("a car squeezes in front of us and brakes", "cut_in_then_brake"),
    ("we are waiting at the lights and a man crosses in front", "pedestrian_crossing_while_stopped"),
    ("people cross in front of us as we wait at the lights", "pedestrian_crossing_while_stopped"),
    ("while we wait at the lights a woman crosses", "pedestrian_crossing_while_stopped"),
]
EGO_BY_ANY_VEHICLE = [
    ("our truck crashes into a car", "ego_collision"),
    ("my van hits a cyclist", "ego_collision"),
    ("our bus collides with a car", "ego_collision"),
    ("our truck changes lanes", "ego_lane_change"),
    ("my van moves over a lane", "ego_lane_change"),
]
CUTTING_IN = [
    "a car cuts us off",
    "a van squeezes into our lane in front of us",
    "someone barges in ahead of us",
    "a car muscles its way in ahead of us",
    "somebody swerves in front of our car",
    "a driver pulls in right in front of us",
]
STILL_THEN_GO = [
    ("ego drives off after waiting at the lights", "ego_pull_away"),
    ("our car gets going after waiting at the junction", "ego_pull_away"),
    ("we pull off from the lights", "ego_pull_away"),
    ("we stop at the line, then drive on", "stop_then_go"),
    ("we pull up at the lights and then move away", "stop_then_go"),
    ("ego brakes to a stop and then accelerates away", "stop_then_go"),
    ("ego halts and then starts again", "stop_then_go"),
]
LEAD_LEAVES = [
    "the vehicle in front changes lanes away from us",
    "the truck ahead pulls out to the left lane",
    "the vehicle we're following moves over to the right lane",
    "the car in front changes lanes and leaves a gap",
]
NOTHING_AHEAD = [
    ("we brake hard on an empty road", "ego_brake_no_lead"),
    ("ego slows down sharply with nothing ahead", "ego_brake_no_lead"),
    ("we brake although the road ahead is clear", "ego_brake_no_lead"),
    ("we brake even though nothing is in front of us", "ego_brake_no_lead"),
    ("we switch to an empty lane on the left", "lane_change_clear"),
    ("lane change with nothing in the other lane", "lane_change_clear"),
    ("we move left into an empty lane", "lane_change_clear"),
]
SLIPS = [
    ("we turn rigth at the lights", "ego_turn_right"),
    ("a pedestrain crosses in front of us", "pedestrian_crossing"),
    ("a car overtakng us on the left", "overtaken_left"),
    ("we go left at the junciton", "ego_turn_left"),
]


def test_standing_still_is_stationary(lib):
    _check(lib, [(q, "ego_stationary") for q in STANDING_STILL])


def test_turns_into_side_streets_and_junctions(lib):
    _check(lib, TURNS)


def test_a_person_on_foot_crossing_is_a_pedestrian_crossing(lib):
    _check(lib, [(q, "pedestrian_crossing") for q in ON_FOOT])


def test_who_crosses_picks_the_crossing_event(lib):
    _check(lib, WHO_CROSSES)


def test_running_into_the_back_of_the_car_ahead_is_rear_end(lib):
    _check(lib, [(q, "rear_end") for q in INTO_THE_BACK])


def test_zooming_past_is_being_overtaken(lib):
    _check(lib, ZOOMING_PAST)


def test_compounds_name_the_composite_of_both_halves(lib):
    _check(lib, COMPOUNDS)


def test_and_alone_is_no_sequence(lib):
    # "and" composes only when a library composite has both halves
    assert match_offline("we brake and swerve", lib).event in ("ego_brake", "hard_brake", "swerving",
                                                               "evasive_maneuver")
    assert match_offline("a car and a van collide", lib).event == "collision"
    assert match_offline("a dog and a cat cross the road", lib).event == "dynamic_object_crossing"


def test_the_ego_named_by_any_vehicle_noun(lib):
    _check(lib, EGO_BY_ANY_VEHICLE)


def test_cutting_in_however_said(lib):
    _check(lib, [(q, "cut_in") for q in CUTTING_IN])


def test_standing_still_then_going_is_pulling_away(lib):
    _check(lib, STILL_THEN_GO)


def test_the_vehicle_ahead_leaving_the_lane_is_a_cut_out(lib):
    _check(lib, [(q, "cut_out") for q in LEAD_LEAVES])


def test_nothing_ahead_said_positively(lib):
    _check(lib, NOTHING_AHEAD)


def test_typing_slips_are_read(lib):
    _check(lib, SLIPS)
    assert respell("a car emerges from a junction") == "a car emerges from a junction"   # first letter kept
    assert respell("we swerve and they are getting closer") == "we swerve and they are getting closer"
    assert respell("cut in from the drivers side") == "cut in from the drivers side"


def test_right_as_an_intensifier_is_no_side(lib):
    _check(lib, [("a car from the left squeezes in right in front of us", "cut_in_left"),
                 ("a van dives in right ahead of us from the left lane", "cut_in_left")])


def test_classes_do_not_overreach(lib):
    """What the classes must not take: the ego's own motion, a context, a light turning green."""
    assert match_offline("we pull out into the overtaking lane", lib).event == "ego_lane_change"
    assert match_offline("we merge into the left lane on the motorway", lib).event == "ego_lane_change"
    assert match_offline("ego rear-ends a car in stop and go traffic", lib).event == "rear_end"
    assert match_offline("stop-and-go traffic", lib).event == "stop_then_go"
    assert match_offline("the traffic light turns green", lib).event not in ("ego_turn_left", "ego_turn_right")
    # with a side, "close" adapts the overtake; without one, it is the close pass
    assert match_offline("a truck overtakes us on the left very close", lib).event == "overtaken_left"
    assert match_offline("a car overtakes us with inches to spare", lib).event == "close_pass"
    # a crossing needs a road user other than the ego crossing
    assert match_offline("we drive across the junction", lib).event != "pedestrian_crossing"


def test_these_phrasings_are_not_the_dev_set():
    dev = {it["text"].lower().strip() for it in json.loads(DEV.read_text())}
    mine = (STANDING_STILL + ON_FOOT + INTO_THE_BACK + CUTTING_IN + LEAD_LEAVES +
            [q for q, _ in TURNS + WHO_CROSSES + ZOOMING_PAST + COMPOUNDS + EGO_BY_ANY_VEHICLE +
             STILL_THEN_GO + NOTHING_AHEAD + SLIPS])
    assert not dev & {q.lower().strip() for q in mine}


def test_independent_dev_set_accuracy():
    spec = importlib.util.spec_from_file_location("bench_matcher", ROOT / "benchmarks" / "bench_matcher.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.independent([DEV])
    (fig,) = out["files"].values()
    assert fig["n"] == 60 and fig["accuracy"] >= 0.9, fig["misses"]
    # the equivalence table stays minimal: the ego-braking pair only
    assert mod.EQUIVALENT == {"hard_brake": frozenset({"ego_brake"}), "ego_brake": frozenset({"hard_brake"})}
