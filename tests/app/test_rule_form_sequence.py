"""Issue 34: the rule form edits sequence rules (steps, the gaps between them, negations and their
scope) with the engine's own validation, Ctrl+Z / Ctrl+Shift+Z / Ctrl+Y inside its boxes, and
never shows a stale form. Driven by real clicks and keys on the real widgets; each edit is checked
against the same edit written by hand in the JSON."""

import copy
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from tests.app.conftest import activate, answer_dialogs, click_button, run_search, shot

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _type_in(qtbot, edit, text):
    """Click into a box, select all, type ``text`` (as a user corrects a value)."""
    qtbot.waitUntil(lambda: edit.isVisible() and not edit.rect().isEmpty(), timeout=3000)
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    qtbot.keyClick(edit, Qt.Key.Key_A, CTRL)
    qtbot.keyClicks(edit, text)


def _click(qtbot, button):
    """A click on a button once it is laid out (a row added just now has no size yet)."""
    qtbot.waitUntil(lambda: button.isVisible() and not button.rect().isEmpty(), timeout=3000)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _click_tab(qtbot, tabs, text):
    bar = tabs.tabBar()
    k = next(i for i in range(tabs.count()) if tabs.tabText(i) == text)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(k).center())
    assert tabs.currentIndex() == k


def _json(ed):
    return json.loads(ed.text.toPlainText())


def _engine_errors(doc):
    """What the JSON path says about ``doc``: the engine's (pointer, message) errors."""
    from strived.errors import RuleError
    from strived.rules import parse_rule

    with pytest.raises(RuleError) as e:
        parse_rule(doc)
    return e.value.errors


def _undo_redo(qtbot, ed, box, old, new, want, redo_keys=((Qt.Key.Key_Z, CTRL | SHIFT),
                                                            (Qt.Key.Key_Y, CTRL))):
    """Ctrl+Z in ``box`` shows ``old`` (the JSON follows), each redo key shows ``new`` again and
    the JSON is ``want``."""
    for key, mods in redo_keys:
        qtbot.keyClick(box, Qt.Key.Key_Z, CTRL)
        assert box.text() == old and _json(ed) != want
        qtbot.keyClick(box, key, mods)
        assert box.text() == new and _json(ed) == want


def _save_as(qtbot, ed, name):
    """Save to library…, the name typed in the dialog, OK."""
    def name_it(d):
        e = d.findChild(QLineEdit)
        qtbot.keyClick(e, Qt.Key.Key_A, CTRL)
        qtbot.keyClicks(e, name)
        click_button(qtbot, d, "OK")

    met = answer_dialogs(qtbot, name_it)
    _click(qtbot, ed.save_button)
    assert len(met) == 1


def _retype_json(qtbot, ed, doc):
    """The JSON tab, all selected, ``doc`` typed (as an expert edits it)."""
    _click_tab(qtbot, ed.tabs, "JSON")
    ed.text.setFocus()
    qtbot.keyClick(ed.text, Qt.Key.Key_A, CTRL)
    qtbot.keyClicks(ed.text, json.dumps(doc))


def _editor(qtbot):
    from app.rule_editor import RuleEditor

    ed = RuleEditor()
    qtbot.addWidget(ed)
    ed.resize(1100, 900)
    ed.show()
    qtbot.waitExposed(ed)
    activate(qtbot, ed)                           # focus goes where a click or a key puts it
    return ed


def _shipped(key, profile="video"):
    from strived.rulelib.library import load_default_library

    return copy.deepcopy(load_default_library(profile=profile).entries[key].rule)


# ----------------------------------------------------------------------------- the journey
def test_form_edits_a_shipped_sequence_event_and_saves_it(qtbot, window, library_copy):
    """'the car ahead brakes and then we brake': the library's sequence event opens in the form;
    the user types a step's threshold, adds a step and its gate, sets the gap, undoes and redoes
    it inside the box (also after a re-rank), and saves: the saved rule is the hand-written one."""
    from app import library_ops as ops
    from strived.rules import parse_rule

    w = window
    w.open_library(str(library_copy))
    resp = run_search(qtbot, w, "the car ahead brakes and then we brake")
    assert resp.match["event"] == "lead_brake_then_ego_brake" and resp.rule.get("sequence")
    want = copy.deepcopy(resp.rule)                          # the same edits, written by hand
    ed = w.rule_editor
    form = ed.form
    _click_tab(qtbot, w.tabs, "Rule")
    _click_tab(qtbot, ed.tabs, "JSON")
    _click_tab(qtbot, ed.tabs, "Form")
    assert form.reason is None and form.is_sequence and form.scroll.isVisible()
    qtbot.waitUntil(lambda: form.hints is not None, timeout=20000)   # the library's statistics
    steps = form.seq.steps
    assert [s.name.text() for s in steps] == ["lead brakes", "ego brakes"]
    assert not steps[0].gap.isVisibleTo(form) and steps[1].gap.isVisible()
    assert steps[1].gap.max.text() == str(want["sequence"][1]["gap"]["max_seconds"])
    assert not steps[1].gap.same.isChecked()
    # 1. the lead car's distance gate: 40 -> 25 m, typed
    _type_in(qtbot, steps[0].fragment.gate_rows[0].widgets["value"], "25")
    want["sequence"][0]["hard_gates"][0]["value"] = 25
    assert _json(ed) == want and ed.apply_button.isEnabled()
    # 2. "+ Add a step": a third step, 0-5 s after the ego's braking, watching the same (the ego)
    _click(qtbot, form.seq.add_step)
    assert len(form.seq.steps) == 3
    new = form.seq.steps[2]
    assert new.gap.max.hasFocus() and new.label.text() == "Step 3"
    want["sequence"].append({"entity": copy.deepcopy(want["sequence"][1]["entity"]), "hard_gates": [],
                             "soft_scores": [], "gap": {"min_seconds": 0.0, "max_seconds": 5.0}})
    assert _json(ed) == want and ed.apply_button.isEnabled()
    # its first gate, on distance by default: an object field in an ego step, refused with the
    # engine's own message, on the row and in the list
    _click(qtbot, new.fragment.add_gate)
    row = new.fragment.gate_rows[0]
    [(ptr, msg)] = _engine_errors(_json(ed))
    assert ptr == "/sequence/2/hard_gates/0/field" and "object field" in msg
    assert row.error.isVisible() and row.error.text() == f"field: {msg}"
    assert row.widgets["field"].toolTip() == msg and not ed.apply_button.isEnabled()
    assert any(ptr in ed.errors.item(i).text() and msg in ed.errors.item(i).text()
               for i in range(ed.errors.count()))
    # the user picks speed (typed on the picker) and types 0.5 m/s
    row.widgets["field"].setFocus()
    qtbot.keyClicks(row.widgets["field"], "speed")
    _type_in(qtbot, row.widgets["value"], "0.5")
    assert row.unit.text() == "m/s" and not row.error.isVisible() and ed.apply_button.isEnabled()
    want["sequence"][2]["hard_gates"] = [{"field": "speed", "op": "lt", "value": 0.5}]
    # 3. the gap: at most 3 s; Ctrl+Z in the box undoes it, Ctrl+Shift+Z and Ctrl+Y redo it
    box = new.gap.max
    _type_in(qtbot, box, "3")
    want["sequence"][2]["gap"]["max_seconds"] = 3
    assert _json(ed) == want
    _undo_redo(qtbot, ed, box, "5.0", "3", want)
    # 4. re-rank from the box (Ctrl+Return): the engine ran the edited rule
    with qtbot.waitSignal(w.search_finished, timeout=30000) as b:
        qtbot.keyClick(box, Qt.Key.Key_Return, CTRL)
    assert b.args[0].rule == parse_rule(want).to_dict()
    assert ed.tabs.currentWidget() is form and form.seq.steps[2] is new and box.hasFocus()
    # ... and the box's own undo still works after the re-rank reloaded the form
    _undo_redo(qtbot, ed, box, "5.0", "3", want, redo_keys=((Qt.Key.Key_Y, CTRL),))
    shot(w, "rule_form_sequence")
    # 5. save: the library holds the hand-written rule
    _save_as(qtbot, ed, "brake chain")
    assert ops.user_rules(w.library)["brake chain"] == parse_rule(want).to_dict()


# ----------------------------------------------------------------------------- negations
def test_form_edits_negations_their_scope_and_the_steps_order(qtbot):
    """The shipped lane_change_clear (two steps, two negations around step 1): the negation's
    window and anchor, a step moved down (the negations follow it, the gap stays between the
    places), a negation removed and one added; each edit equals the hand-written JSON; invalid
    values get the engine's messages on their boxes."""
    ed = _editor(qtbot)
    want = _shipped("lane_change_clear")
    ed.set_rule(want)
    form = ed.form
    assert form.reason is None and form.is_sequence and ed.tabs.currentWidget() is form
    neg = form.seq.absents
    assert [a.name.text() for a in neg] == ["vehicle in the target lane", "a turn, not a lane change"]
    a0 = neg[0]
    assert a0.anchor.currentText() == "step 1 · steers over"
    assert (a0.before.text(), a0.after.text()) == ("2.0", "2.0")
    assert len(a0.fragment.gate_rows) == 4 and not a0.fragment.agg.isVisible()
    # the window: 3.5 s before to 1 s after; anchored to step 2 (the picker, by keyboard)
    _type_in(qtbot, a0.before, "3.5")
    _type_in(qtbot, a0.after, "1")
    a0.anchor.setFocus()
    qtbot.keyClick(a0.anchor, Qt.Key.Key_Down)
    assert a0.anchor.currentText() == "step 2 · straightens"
    want["absent"][0].update(before_seconds=3.5, after_seconds=1, step=1)
    assert _json(ed) == want and ed.apply_button.isEnabled()
    # Ctrl+Z in the 'after' box: back to 2.0, in the JSON too; redone
    _undo_redo(qtbot, ed, a0.after, "2.0", "1", want)
    # an invalid window: the engine's message on the box and under the negation
    _type_in(qtbot, a0.before, "-2")
    [(ptr, msg)] = _engine_errors(_json(ed))
    assert ptr == "/absent/0/before_seconds" and msg.startswith("must be ≥ 0")
    assert a0.error.isVisible() and a0.error.text() == f"before_seconds: {msg}"
    assert a0.before.toolTip() == msg and not ed.apply_button.isEnabled()
    _type_in(qtbot, a0.before, "3.5")
    assert not a0.error.isVisible() and _json(ed) == want
    # step 1 moves down: the steps' fragments swap, the gap stays between them, each negation
    # keeps its own step
    steps = form.seq.steps
    assert steps[0].down.isEnabled() and not steps[0].up.isEnabled()
    _click(qtbot, steps[0].down)
    s0, s1 = want["sequence"]
    moved = lambda d: {k: v for k, v in d.items() if k not in ("gap", "same_track")}   # noqa: E731
    want["sequence"] = [moved(s1), {**moved(s0), "gap": s1["gap"], "same_track": s1["same_track"]}]
    want["absent"][0]["step"], want["absent"][1]["step"] = 0, 1
    assert _json(ed) == want and ed.apply_button.isEnabled()
    assert [s.name.text() for s in form.seq.steps] == ["straightens", "steers over"]
    assert form.seq.steps[1].up.hasFocus()
    assert neg[0].anchor.currentText() == "step 1 · straightens"
    # the second negation removed (its ✕), a new one added (its defaults) around the last step
    _click(qtbot, neg[1].remove)
    del want["absent"][1]
    assert _json(ed) == want and len(form.seq.absents) == 1
    _click(qtbot, form.seq.add_absent)
    want["absent"].append({"entity": {"role": "object", "class_filter": None, "selection": "any",
                                      "agg_mode": "any"},
                           "hard_gates": [{"field": "distance", "op": "lt", "value": 20.0}],
                           "soft_scores": [], "before_seconds": 2.0, "after_seconds": 2.0})
    assert _json(ed) == want and ed.apply_button.isEnabled()
    new = form.seq.absents[1]
    assert new.before.hasFocus() and new.anchor.currentText() == "the last step"
    # its only gate removed: a negation needs a scope, says the engine, under the negation
    _click(qtbot, new.fragment.gate_rows[0].remove)
    [(ptr, msg)] = _engine_errors(_json(ed))
    assert ptr == "/absent/1" and new.error.isVisible() and new.error.text() == msg
    assert "needs a hard gate" in msg and not ed.apply_button.isEnabled()
    # a JSON edit anchoring it to a step that does not exist: shown on the picker, not lost
    doc = _json(ed)
    doc["absent"][1]["step"] = 5
    _retype_json(qtbot, ed, doc)
    _click_tab(qtbot, ed.tabs, "Form")
    qtbot.waitUntil(lambda: form.seq.absents[1].anchor.currentText() == "step 6 (not valid)",
                    timeout=3000)
    errs = dict(_engine_errors(doc))
    assert "the sequence has 2 step(s); found 5" in errs["/absent/1/step"]
    assert f"step: {errs['/absent/1/step']}" in form.seq.absents[1].error.text()
    assert form.document() == doc


def test_no_stale_form_between_plain_sequence_and_json_only_rules(qtbot):
    """A plain rule, then a sequence: only the steps show (not the plain rule's gates); then a
    rule the form cannot show: only "This rule can be edited in JSON only: <why>", also when the
    user clicks the Form tab, and likewise for a JSON syntax error; then a plain rule again."""
    ed = _editor(qtbot)
    form = ed.form
    plain = _shipped("cut_in_right", profile="tracks")
    assert "sequence" not in plain
    ed.set_rule(plain)
    assert not form.is_sequence and form.single.isVisible() and len(form.gate_rows) >= 1
    plain_rows = list(form.gate_rows)
    # a shipped sequence event after it: its steps, and nothing of the plain rule
    seq = _shipped("collision")
    ed.set_rule(seq)
    assert ed.tabs.currentWidget() is form and form.is_sequence and form.reason is None
    assert form.seq.isVisible() and not form.single.isVisibleTo(form)
    assert not any(r.isVisibleTo(form) for r in plain_rows)
    assert [s.name.text() for s in form.seq.steps] == [s["name"] for s in seq["sequence"]]
    assert form.title.text() == "Rule for: collision · a sequence of 2 step(s)"
    assert form.seq.steps[1].fragment.role.currentData() == "ego"
    # a sequence the form cannot show (a key no step takes): the reason, and no form at all
    odd = copy.deepcopy(seq)
    odd["sequence"][1]["colour"] = "red"
    ed.set_rule(odd)
    assert ed.tabs.currentWidget() is ed.text
    assert form.reason == "step 2: key 'colour' is not one a step takes"
    _click_tab(qtbot, ed.tabs, "Form")
    assert form.banner.isVisible() and form.banner.text() == (
        "This rule can be edited in JSON only: step 2: key 'colour' is not one a step takes.")
    assert not form.scroll.isVisible() and not form.seq.isVisible()
    assert any("/sequence/1" in ed.errors.item(i).text() and "colour" in ed.errors.item(i).text()
               for i in range(ed.errors.count()))     # the engine's error, in the list
    # a syntax error typed in the JSON: said, and no form (not the last one that parsed)
    _retype_json(qtbot, ed, seq)
    qtbot.keyClick(ed.text, Qt.Key.Key_Backspace)        # the closing brace gone
    _click_tab(qtbot, ed.tabs, "Form")
    qtbot.waitUntil(lambda: "syntax error" in form.banner.text(), timeout=3000)
    assert form.banner.isVisible() and not form.scroll.isVisible()
    # the plain rule again: its form, no banner
    ed.set_rule(plain)
    assert form.reason is None and not form.banner.isVisible() and form.scroll.isVisible()
    assert form.single.isVisible() and not form.seq.isVisibleTo(form)
    assert ed.form.document() == plain
