"""The one query vocabulary, tested once: `strived.query.parse_query` on hand-written queries
(who acts, side, classes, qualifiers, composition, negation, surface words), and the search path
reading that one parsed value (the engine parses once; matcher, adapter and router get it)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from strived.query import ParsedQuery, as_parsed, extract_events_lexicon, parse_query

REPO = Path(__file__).resolve().parents[2]

# (query, actor, side, classes named, classes negated)
WHO_WHERE = [
    ("the car ahead of us turns left", "other", "left", (), ()),
    ("we turn left", "ego", "left", (), ()),
    ("the dashcam car makes a left turn", "ego", "left", (), ()),
    ("the driver slams on the brakes", "ego", None, (), ()),
    ("our car collides with another road user", "ego", None, (), ()),
    ("the ego car is standing still, waiting", "ego", None, (), ()),
    ("someone overtakes us on the left", "other", "left", (), ()),
    ("a vehicle cuts in from the driver's side", "other", "left", (), ()),
    ("vehicle cutting in on the passenger side", "other", "right", (), ()),
    ("a car passes on the left and a truck on the right", "other", None, ("truck",), ()),
    ("pedestrian walking across the road in front of the car", "other", None, ("pedestrian",), ()),
    ("a truck or bus passes extremely close to us", "other", None, ("truck", "bus"), ()),
    ("a car, not a truck, cuts in from the right", "other", "right", ("truck",), ("truck",)),
    ("a motorbike and a bicycle, but no buses", "other", None, ("motorcycle", "bicycle", "bus"), ("bus",)),
    ("we nearly hit a cyclist", "ego", None, ("bicycle",), ()),       # "nearly" negates the hit only
    ("two-wheelers weaving through traffic", "unknown", None, ("motorcycle", "bicycle"), ()),
    ("uneventful footage where nothing really happens", "unknown", None, (), ()),
    ("normal highway cruising, just keeping the lane, no incidents", "unknown", None, (), ()),
]


@pytest.mark.parametrize("query,actor,side,named,negated", WHO_WHERE)
def test_actor_side_classes(query, actor, side, named, negated):
    p = parse_query(query)
    assert (p.actor, p.side, p.classes_named, p.negated_classes) == (actor, side, named, negated)
    assert p.classes == tuple(c for c in named if c not in negated)


def test_ego_and_other_vehicle_mentions():
    # the matcher's ego/other disambiguation: the ego named at all, another vehicle as an actor
    # (with an article) or by its position ahead
    assert (parse_query("the vehicle ahead of us brakes").ego_mentioned,
            parse_query("the vehicle ahead of us brakes").other_vehicle_mentioned) == (False, True)
    p = parse_query("we brake because the car in front stops")
    assert p.ego_mentioned and p.other_vehicle_mentioned and p.actor == "ego"
    assert not parse_query("cars parked along the street").other_vehicle_mentioned  # no article
    assert not parse_query("a vehicle cuts in from the driver's side").ego_mentioned
    # "us" / "our" refer to the ego without making it the actor; a composed part uses them
    p = parse_query("traffic next to us")
    assert (p.actor, p.part_subject, p.ego_referenced) == ("unknown", "ego", True)
    assert parse_query("a car cuts in front of us").part_subject == "other"


EVENTS = [
    ("we turn left", {"ego_turn_left"}, set()),
    ("the car ahead of us turns left", set(), set()),                  # not our turn
    ("a car cuts in from the left", {"cut_in", "cut_in_left"}, set()),
    ("the vehicle ahead of us brakes", {"lead_brake"}, set()),         # not the ego's hard brake
    ("no collision, just normal driving", {"steady_driving"}, {"collision"}),
    ("we almost rear-end the car in front", set(), {"collision", "rear_end"}),
    ("the car did not stop and crashed into a pole", {"collision"}, set()),   # scope ends at "and"
    ("we nearly hit a cyclist", {"near_miss"}, {"collision"}),
]


@pytest.mark.parametrize("query,asserted,negated", EVENTS)
def test_candidate_events_are_negation_aware(query, asserted, negated):
    p = parse_query(query)
    assert p.events == asserted and p.negated_events == negated
    assert p.events == extract_events_lexicon(query)      # one extractor for queries and captions
    # every event is backed by evidence: a lexicon phrase, or a parent phrase plus a cue
    for ev in p.events:
        assert any(e.event == ev and not e.negated for e in p.evidence), ev
    for ev in p.negated_events:
        assert all(e.negated for e in p.evidence if e.event == ev), ev


def test_evidence_names_the_phrase_and_the_derived_cue():
    p = parse_query("a car cuts in from the left")
    direct = [e for e in p.evidence if e.event == "cut_in"]
    derived = [e for e in p.evidence if e.event == "cut_in_left"]
    assert direct and not direct[0].derived and "cut" in direct[0].phrase
    assert derived and derived[0].derived and "left" in derived[0].phrase
    assert parse_query("no collision").negations == ("no",)


QUALIFIERS = [
    ("a truck or bus passes extremely close to us", dict(close=True, extreme=True)),
    ("normal highway cruising", dict(highway=True)),
    ("a car skids in the snow", dict(condition=True)),
    ("a car brakes for no apparent reason", dict(condition=True)),
    ("no pedestrian within 20 m", dict(within_m=20.0)),
    ("no car in our lane", dict(ahead=True, vehicle_things=True)),
    ("a truck behind us", dict(behind=True, vehicle_things=True)),
    ("nobody crossing, no one around", dict(someone=True, vehicle_things=True)),
]


@pytest.mark.parametrize("query,expected", QUALIFIERS)
def test_qualifiers(query, expected):
    q = parse_query(query).qualifiers
    assert {k: getattr(q, k) for k in expected} == expected
    unset = {k: v for k, v in dataclasses.asdict(q).items() if k not in expected}
    assert not any(unset[k] for k in ("extreme", "highway", "condition", "within_m", "behind", "someone")
                   if k in unset), unset


SPLITS = [
    ("the car in front of us brakes and then we brake",
     ("sequence", "the car in front of us brakes", "we brake", "and then", None)),
    ("we brake after a car cuts in", ("sequence", "a car cuts in", "we brake", "after", None)),
    ("after a car cuts in, we brake", ("sequence", "a car cuts in", "we brake", "after", None)),
    ("we brake hard within 3 s after the lead car brakes",
     ("sequence", "the lead car brakes", "we brake hard", "after", 3.0)),
    ("while we are stopped, a pedestrian crosses",
     ("concurrent", "a pedestrian crosses", "we are stopped", "while", None)),
    ("we brake without a vehicle ahead", ("absent", "we brake", "a vehicle ahead", "without", None)),
    ("we change lanes with no car ahead", ("absent", "we change lanes", "no car ahead", "with no", None)),
    # a connective inside a word is no connective, nor is "so" at the start of "someone"
    ("we brake hard after someone cuts in front of us",
     ("sequence", "someone cuts in front of us", "we brake hard", "after", None)),
]


@pytest.mark.parametrize("query,expected", SPLITS)
def test_composition_markers(query, expected):
    s = parse_query(query).split
    assert (s.kind, s.first, s.second, s.connective, s.within_s) == expected


def test_no_composition():
    for q in ("a car cuts in from the right", "then", "the sun sets over the thenar hills"):
        assert parse_query(q).split is None


def test_motion_and_surface_words():
    p = parse_query("a red Toyota overtakes us near Munich at night")
    assert p.surface_dict() == {"colour": ["red"], "make_model": ["toyota"], "weather_time": ["night"],
                                "proper_noun": ["toyota", "munich"]}
    assert p.motion.moves and p.motion.off_centre and not p.motion.central_end
    m = parse_query("a vehicle cuts into our lane from the right").motion
    assert m.moves and m.central and m.central_end
    assert parse_query("a vehicle cuts into our lane").surface == ()
    assert not parse_query("uneventful footage where nothing really happens").motion.moves


def test_parse_is_cached_immutable_and_passes_a_parsed_value_through():
    p = parse_query("a scooter crashes")
    assert parse_query("a scooter crashes") is p and as_parsed(p) is p and as_parsed("a scooter crashes") is p
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.side = "left"
    assert isinstance(p, ParsedQuery) and hash(p) == hash(parse_query("a scooter crashes"))


def test_readers_keep_no_word_lists_of_their_own():
    """One vocabulary: the modules that read a query compile no regular expression of their own."""
    for rel in ("strived/rulelib/matcher.py", "strived/rulelib/adapter.py", "strived/rulelib/compose.py",
                "strived/rulelib/lexicon.py", "strived/retrieval/router.py", "strived/retrieval/router_fit.py"):
        text = (REPO / rel).read_text(encoding="utf-8")
        assert not re.search(r"re\.compile\(", text), rel
        assert not re.search(r"\bset\(\"[a-z]+ [a-z]+ [a-z]+", text), rel    # no word-set literals


def test_a_search_parses_its_query_once_and_every_reader_gets_that_value(tmp_path, monkeypatch):
    from strived import engine, search_steps
    from strived.retrieval import router
    from strived.rulelib import resolve
    from strived.store import Library
    from tests.core.synth import synth_video

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([synth_video(f"v{k:03d}", seed=k) for k in range(4)])
    seen: dict[str, list] = {"parse": [], "match": [], "adapt": [], "route": []}

    def spy(name, fn):
        def wrapped(q, *a, **k):
            seen[name].append(q)
            return fn(q, *a, **k)
        return wrapped
    monkeypatch.setattr(engine, "parse_query", spy("parse", engine.parse_query))
    monkeypatch.setattr(resolve, "match_offline", spy("match", resolve.match_offline))
    monkeypatch.setattr(resolve, "adapt_offline_from", spy("adapt", resolve.adapt_offline_from))
    monkeypatch.setattr(router, "route", spy("route", router.route))
    monkeypatch.setattr(search_steps, "_bm25", lambda library, query, top_k, cancel=None: [("v001", 2.0), ("v002", 1.0)])
    query = "a scooter cuts in from the left"                 # adapted: a class the rule lacks
    resp = engine.search(lib, query, sources=("rule", "bm25"))
    assert resp.match["mode"] == "adapted" and resp.match.get("router")
    assert seen["parse"] == [query]
    parsed = parse_query(query)
    for name in ("match", "adapt", "route"):
        assert seen[name] and all(q is parsed for q in seen[name]), name
