"""Lexicon extractor with negation; label files; benchmark labels."""

import csv

import pytest

from strived.events import EVENTS, EVENT_KEYS, PAPER_EVENT_KEYS
from strived.rulelib.fit.weak_labels import (WeakLabelError, extract_events_lexicon,
                                         labels_from_benchmark, labels_from_captions,
                                         load_label_file)


def test_inventory_has_the_papers_21_events_with_valid_forms():
    from strived.rules.model import parse_rule
    assert len(PAPER_EVENT_KEYS) == 21
    for ev in EVENTS:
        parse_rule(ev.form)            # every starting form validates
    weak = {e.key for e in EVENTS if e.weakness}
    assert {"emergency_vehicle", "rollover", "reverse"} <= weak


@pytest.mark.parametrize("text,present,absent", [
    ("The ego car brakes hard as a pedestrian crosses the road.",
     {"hard_brake", "pedestrian_crossing"}, {"collision"}),
    ("No collision occurred; the driver swerved to avoid a crash.",
     {"near_miss", "swerving"}, {"collision"}),
    ("We drive on without braking, then a truck cuts in from the right.",
     {"cut_in", "cut_in_right"}, {"hard_brake", "ego_brake", "cut_in_left"}),
    ("The car did not stop and crashed into the barrier.", {"collision"}, set()),
    ("There is no time to brake.", set(), {"hard_brake"}),
    ("A car overtakes us on the left.", {"overtaken_left"}, {"overtaken_right"}),
    ("We turn left at the junction.", {"ego_turn_left"}, {"ego_turn_right"}),
    ("The car ahead brakes suddenly.", {"lead_brake"}, {"hard_brake"}),
    ("Normal highway cruising, no incidents, nobody crashes.", set(), {"collision"}),
])
def test_lexicon_with_negation(text, present, absent):
    got = extract_events_lexicon(text)
    assert present <= got, got
    assert not (absent & got), got


def test_captions_to_labels_and_label_file(tmp_path):
    lab = labels_from_captions({"a": "a car cuts in from the left", "b": "nothing happens",
                                "c": "no cut-in here"})
    assert lab.positives["cut_in_left"] == {"a"}
    assert lab.counts("cut_in") == (1, 2)
    p = tmp_path / "labels.csv"
    p.write_text("video_id,event,label\nv1,hard_brake,1\nv2,hard_brake,0\nv3,hard_brake,ambiguous\n")
    lab = load_label_file(p)
    assert lab.positives["hard_brake"] == {"v1"} and lab.ignore["hard_brake"] == {"v3"}
    assert lab.counts("hard_brake") == (1, 1)
    bad = tmp_path / "bad.csv"
    bad.write_text("video_id,event\nv1,flying_car\n")
    with pytest.raises(WeakLabelError, match="unknown event"):
        load_label_file(bad)


def test_mm_au_accident_type_texts(shared_dir):
    """Real caption-like texts: MM-AU's accident type names."""
    path = shared_dir / "data/labels/mmau/accident_types_58.csv"
    rows = {int(r["type"]): r["accident_type_text"] for r in csv.DictReader(open(path))}
    assert "collision" in extract_events_lexicon(rows[1])           # ego-car hits a crossing ped.
    assert "ego_collision" in extract_events_lexicon(rows[11])
    assert "loss_of_control" in extract_events_lexicon(rows[42])    # car is out of control


def test_benchmark_labels(shared_dir):
    lab = labels_from_benchmark(shared_dir / "data/bench-dev")
    assert set(lab.positives) <= set(EVENT_KEYS)
    assert "av2_adcf7d18" in lab.positives["cut_in_right"]
    assert lab.positives["ego_brake"] and not (lab.ignore["ego_brake"] & lab.positives["ego_brake"])
