"""Events with too few positives take the numbers they share with their calibrated parent."""

from strived.rulelib.video_forms import video_form
from strived.rulelib.fit.calibrate import _inherit_from_parents, inherit_numbers
from strived.rulelib.library import LibraryEntry
from strived.rules import parse_rule


def test_shared_numbers_come_from_the_parent_and_nothing_else():
    parent = video_form("collision")
    parent["sequence"][0]["hard_gates"][0]["value"] = 7.5          # "calibrated"
    child = video_form("rear_end")
    # the rear-end has a step of its own first (the car was ahead in the lane before it closed in):
    # the parent's approach step lines up with the child's approach step, its jolt with the jolt
    assert [s["name"] for s in child["sequence"]] == ["ahead in the lane before (gates)",
                                                      "then closes in (same track)", "the camera jolts (at contact)"]
    parent["sequence"][1]["soft_scores"][0]["magnitude"] = 0.2
    out, taken = inherit_numbers(child, parent)
    gates = {(g["field"], g["op"]): g["value"] for g in out["sequence"][1]["hard_gates"]}
    assert gates[("distance", "lt")] == 7.5
    assert gates[("abs_loc_x", "lt")] == 1.5                         # the parent has no such gate
    assert out["sequence"][0]["hard_gates"] == child["sequence"][0]["hard_gates"]   # its own step: untouched
    assert out["sequence"][2]["soft_scores"][0]["magnitude"] == 0.2
    assert any("distance lt" in t for t in taken)
    parse_rule(out)


def test_not_across_entities_or_from_an_uncalibrated_parent():
    ego = {"event": "hard_brake", "entity": {"role": "ego"},
           "hard_gates": [{"field": "speed", "op": "gt", "value": 9.0}], "soft_scores": []}
    other = {"event": "lead_brake", "entity": {"role": "object", "class_filter": ["car"]},
             "hard_gates": [{"field": "speed", "op": "gt", "value": 2.0}], "soft_scores": []}
    assert inherit_numbers(other, ego)[1] == []
    entries = {"collision": LibraryEntry("collision", video_form("collision"), video_form("collision"),
                                         calibrated=False),
               "rear_end": LibraryEntry("rear_end", video_form("rear_end"), video_form("rear_end"))}
    before = dict(entries["rear_end"].rule)
    _inherit_from_parents(entries)
    assert entries["rear_end"].rule == before and entries["rear_end"].note is None
    entries["collision"].calibrated = True
    entries["collision"].rule["sequence"][0]["hard_gates"][0]["value"] = 7.5
    _inherit_from_parents(entries)
    assert entries["rear_end"].rule["sequence"][1]["hard_gates"][0]["value"] == 7.5
    assert "parent event 'collision'" in entries["rear_end"].note
