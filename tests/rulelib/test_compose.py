"""Composed queries (issue 17): connectives, the offline adapter building sequences, sequence
forms in the optimiser and the calibration loop."""

from __future__ import annotations

import pytest

from strived.rules import RuleScorer, parse_rule
from strived.rulelib.fit.calibrate import calibrate_event
from strived.rulelib.compose import split_query
from strived.events import EVENTS, get_event
from strived.rulelib.library import RuleLibrary, load_default_library
from strived.rulelib.fit.optimizer import canonical_form, param_space
from strived.rulelib.resolve import resolve_rule
from strived.rulelib.fit.synthetic import synthetic_corpus
from strived.rulelib.fit.weak_labels import WeakLabels


@pytest.mark.parametrize("query, kind, first, second", [
    ("a pedestrian crosses and then we brake", "sequence", "a pedestrian crosses", "we brake"),
    ("a pedestrian crosses, then we brake", "sequence", "a pedestrian crosses", "we brake"),
    ("a pedestrian crosses followed by our braking", "sequence", "a pedestrian crosses", "our braking"),
    ("we brake after a pedestrian crosses", "sequence", "a pedestrian crosses", "we brake"),
    ("after a pedestrian crosses, we brake", "sequence", "a pedestrian crosses", "we brake"),
    ("a pedestrian crosses before we brake", "sequence", "a pedestrian crosses", "we brake"),
    ("before we brake, a pedestrian crosses", "sequence", "a pedestrian crosses", "we brake"),
    ("we brake without a car ahead", "absent", "we brake", "a car ahead"),
    ("we brake with no car ahead", "absent", "we brake", "no car ahead"),
    ("a cyclist crosses while we are stopped", "concurrent", "a cyclist crosses", "we are stopped"),
])
def test_connectives_order_the_parts(query, kind, first, second):
    c = split_query(query)
    assert (c.kind, c.first, c.second) == (kind, first, second)


def test_no_connective_no_composition():
    assert split_query("a car cuts in from the right") is None
    assert split_query("then") is None


@pytest.mark.parametrize("query, steps, absent", [
    ("a pedestrian crosses and then we brake", ["pedestrian_crossing", "ego"], 0),
    ("we brake after a cyclist crosses in front of us", ["cyclist", "ego"], 0),
    ("a cyclist crosses in front of us before we turn left", ["cyclist", "ego"], 0),
    ("we turn left followed by a pedestrian crossing in front of us", ["ego", "pedestrian"], 0),
    ("we turn right without a pedestrian within 20 m", ["ego"], 1),
    ("a cyclist crosses ahead while we are stopped", ["cyclist", "ego"], 0),
])
def test_adapter_builds_sequences_for_connectives(query, steps, absent):
    r = resolve_rule(query, RuleLibrary.uncalibrated())
    assert r.rule.is_sequence and r.mode == "adapted", (query, r.event, r.notices)
    assert len(r.rule.sequence) == len(steps) and len(r.rule.absent) == absent
    for st, want in zip(r.rule.sequence, steps):
        if want == "ego":
            assert st.entity.role == "ego"
        else:
            assert st.entity.role == "object"
    assert any("sequence" in n or "negated" in n for n in r.notices)
    parse_rule(r.rule.to_dict())


def test_adapter_gap_within_and_scope_words():
    r = resolve_rule("we brake and then turn left within 3 seconds", RuleLibrary.uncalibrated())
    assert r.rule.sequence[1].max_gap_s == 3.0 and r.rule.sequence[1].entity.role == "ego"
    r = resolve_rule("we brake with no pedestrian within 20 m", RuleLibrary.uncalibrated())
    a = r.rule.absent[0]
    assert a.entity.class_filter == ("pedestrian",)
    assert {(g.field, g.op, g.value) for g in a.hard_gates} == {("distance", "gt", -20.0), ("distance", "lt", 20.0)}
    r = resolve_rule("we stand still without a pedestrian crossing in front of us", RuleLibrary.uncalibrated())
    assert r.rule.absent[0].before_s >= 3600  # a state: negated over the whole clip


def test_sided_composite_is_mirrored():
    lib = load_default_library()
    left = resolve_rule("we change lanes to the left into a clear lane", lib).rule
    right = resolve_rule("we change lanes to the right into a clear lane", lib).rule
    assert right.sequence[0].soft_scores[0].direction == "negative"
    assert left.sequence[0].soft_scores[0].direction == "positive"
    scope = {(g.field, g.op): g.value for g in right.absent[0].hard_gates}
    assert scope[("loc_x", "gt")] == 1.5 and scope[("loc_x", "lt")] == 5.5


def test_composites_reused_with_classes_adapted():
    r = resolve_rule("a truck cuts in and then brakes")
    assert r.rule.is_sequence and r.mode == "adapted"
    assert r.rule.sequence[0].entity.class_filter == ("truck",) and r.rule.sequence[1].same_track
    r = resolve_rule("the car ahead brakes and then we brake")
    assert r.event == "lead_brake_then_ego_brake" and r.mode == "reused"


def test_library_sequence_events_are_valid_with_parts():
    seq = [e for e in EVENTS if "sequence" in e.form]
    assert len(seq) >= 4
    for e in seq:
        r = parse_rule(e.form)
        assert r.is_sequence and e.parts and all(get_event(p) for p in e.parts)
    lib = load_default_library()
    for e in seq:
        assert lib.rule(e.key).is_sequence


def test_param_space_of_sequences_and_calibration_loop():
    form = canonical_form(get_event("lead_brake_then_ego_brake").form)
    names = [p.name for p in param_space(form)]
    assert "/sequence/0/soft_scores/0/magnitude" in names and "/sequence/1/gap/max_seconds" in names
    assert "/sequence/1/weight" in names
    neg = [p.name for p in param_space(canonical_form(get_event("ego_brake_no_lead").form))]
    assert "/absent/0/before_seconds" in neg and "/absent/0/hard_gates/0/value" not in neg  # a sign gate
    recs, lab = synthetic_corpus(80, seed=3, p_event=0.3)
    both = lab.positives["lead_brake"] & lab.positives["ego_brake"]
    labels = WeakLabels(lab.videos, {"lead_brake_then_ego_brake": both})
    rep = calibrate_event("lead_brake_then_ego_brake", RuleScorer.from_records(recs), labels,
                          max_iterations=4, target_ap=1.01)
    assert len(rep.iterations) == 4 and rep.best_ap >= rep.start_ap
    assert parse_rule(rep.best_rule).is_sequence


def test_calibrate_update_recalibrates_only_the_named_events(shared_dir, tmp_path):
    import json
    from pathlib import Path

    from strived.cli import main

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "lib.json"
    assert main(["calibrate", str(root / "benchmarks" / "composition"), "--benchmark-labels",
                 "--events", "stop_then_go", "--update", str(root / "resources" / "rule_library.json"),
                 "--out", str(out), "--max-iterations", "3", "--sources", "none"]) == 0
    new = json.loads(out.read_text())["events"]
    old = json.loads((root / "resources" / "rule_library.json").read_text())["events"]
    assert new["stop_then_go"]["calibrated"] and new["stop_then_go"]["n_pos"] == 3
    for k in ("cut_in_right", "ego_brake", "lead_brake"):
        assert new[k] == old[k]
