"""Issue 14: the rule editor's form (for people who do not write JSON) and a timeline that shows
every track of a busy video. Journeys driven through the real window with real clicks and keys;
the form is checked lossless against every rule of the shipped libraries; the engine's field
statistics (`strived.rules.stats.field_hints`) against the records they summarise."""

import json

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from tests.app.conftest import (CUTIN_RULE, click_plot, click_row, many_tracks_records, rerank,
                                run_search, shot)

# the cut-in rule with a second gate: some track comes within 20 m
FORM_RULE = dict(CUTIN_RULE, hard_gates=CUTIN_RULE["hard_gates"] + [
    {"field": "distance", "op": "lt", "value": 20.0}])


def _rule_rank(resp, vid):
    h = next((h for h in resp.hits if h.video_id == vid), None)
    return None if h is None else (h.per_source.get("rule") or {}).get("rank")


def _type_in(qtbot, edit, text):
    """Click into a line edit, select all, type ``text`` (as a user corrects a value)."""
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(edit, text)


def _click_tab(qtbot, tabs, text):
    bar = tabs.tabBar()
    k = next(i for i in range(tabs.count()) if tabs.tabText(i) == text)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(k).center())
    assert tabs.currentIndex() == k


# ----------------------------------------------------------------------------- engine: hints
def test_field_hints_summarise_the_library(tmp_path):
    from strived import engine
    from strived.rules.stats import field_hints, hint_text
    from strived.store import Library
    from tests.core.synth import synth_video

    a, b, c = synth_video("a", seed=1), synth_video("b", seed=2), synth_video("c", seed=3)
    b.ego["speed"][:] = np.nan                    # speed not estimated in one video of three
    b.tracks[0].cls = "fire_truck"
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_videos([a, b, c])
        h = field_hints(engine.scorer_for(lib), lib.availability())
    assert h["n_videos"] == 3 and h["n_tracks"] == sum(len(r.tracks) for r in (a, b, c))
    counts, videos = {}, {}
    for r in (a, b, c):
        for tr in r.tracks:
            counts[tr.cls] = counts.get(tr.cls, 0) + 1
            videos.setdefault(tr.cls, set()).add(r.info.id)
    assert {x["name"]: x["tracks"] for x in h["classes"]} == counts
    assert {x["name"]: x["videos"] for x in h["classes"]} == {k: len(v) for k, v in videos.items()}
    assert [x["tracks"] for x in h["classes"]] == sorted(counts.values(), reverse=True)
    sp = h["fields"]["speed"]
    assert sp["unknown_videos"] == 1 and sp["recorded_videos"] == 3 and sp["unit"] == "m/s"
    speeds = np.concatenate([r.ego["speed"] for r in (a, c)])
    assert sp["value"]["P50"] == pytest.approx(np.median(speeds), rel=1e-5)
    dist = np.concatenate([tr.fields["distance"] for r in (a, b, c) for tr in r.tracks])
    assert h["fields"]["distance"]["value"]["P95"] == pytest.approx(
        np.percentile(dist[np.isfinite(dist)], 95), rel=1e-4)
    text = hint_text(h, "speed")
    assert text.startswith("in this library: median ") and "m/s" in text
    assert text.endswith("unknown in 1 of 3 videos")
    assert "largest change within 4 s" in hint_text(h, "distance", window_s=3.5)
    assert "within 2 s" in hint_text(h, "distance", window_s=1.0)
    assert hint_text(None, "speed") == ""


# ----------------------------------------------------------------------------- the form alone
def test_the_form_shows_every_shipped_rule_exactly(qtbot):
    """Every rule of the shipped libraries, single-pattern or sequence, loads into the form, and
    the form writes back the same rule (issue 34: sequences opened in JSON only)."""
    from app.rule_editor import RuleEditor
    from strived.rulelib.library import load_default_library
    from strived.rules import parse_rule

    ed = RuleEditor()
    qtbot.addWidget(ed)
    ed.show()
    shown = seqs = 0
    for profile in ("tracks", "video"):
        for key, e in load_default_library(profile=profile).entries.items():
            ed.set_rule(e.rule)
            seqs += "sequence" in e.rule
            shown += 1
            assert ed.form.reason is None and ed.tabs.currentWidget() is ed.form, key
            assert ed.form.is_sequence == ("sequence" in e.rule), key
            assert ed.form.document() == e.rule, key
            assert parse_rule(ed.form.document()).to_dict() == parse_rule(e.rule).to_dict(), key
    assert shown >= 60 and seqs >= 30
    # what a person wrote keeps its own keys: min_delta, '<', a string typed where a number goes
    doc = {"entity": {"role": "ego"}, "hard_gates": [{"field": "speed", "op": "<", "value": 2}],
           "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 3,
                            "min_delta": 1.5, "direction": "negative"}]}
    ed.set_rule(doc)
    out = ed.form.document()
    assert out["soft_scores"][0]["min_delta"] == 1.5 and "magnitude" not in out["soft_scores"][0]
    assert out["hard_gates"][0] == {"field": "speed", "op": "lt", "value": 2}
    assert parse_rule(out).to_dict() == parse_rule(doc).to_dict()
    # a JSON with one more gate, its value not a number: the new row carries the engine's error
    bad = dict(doc, hard_gates=doc["hard_gates"] + [{"field": "accel", "op": "lt", "value": "hard"}])
    ed.set_rule(bad)
    form = ed.form
    assert len(form.gate_rows) == 2 and not ed.apply_button.isEnabled()
    assert form.gate_rows[1].error.isVisibleTo(form)
    assert "value: must be number; found str 'hard'" in form.gate_rows[1].error.text()
    assert form.gate_rows[1].widgets["value"].text() == "hard"
    # the user removes that gate (its ✕): the JSON loses it, the rule is valid again
    qtbot.mouseClick(form.gate_rows[1].remove, Qt.MouseButton.LeftButton)
    assert json.loads(ed.text.toPlainText())["hard_gates"] == [doc["hard_gates"][0] | {"op": "lt"}]
    assert ed.apply_button.isEnabled() and len(form.gate_rows) == 1
    # ... and Ctrl+Z in the JSON brings it back, in the form too
    _click_tab(qtbot, ed.tabs, "JSON")
    ed.text.setFocus()
    qtbot.keyClick(ed.text, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(form.gate_rows) == 2, timeout=3000)
    assert form.gate_rows[1].widgets["value"].text() == "hard"


def test_form_edits_a_gate_held_for_seconds(qtbot):
    """A gate's ``min_seconds`` ("held for ≥ s"): shown in its own box, written back exactly,
    editable; with the fraction too, the engine's error lands on the seconds box."""
    from app.rule_editor import RuleEditor
    from strived.rules import parse_rule

    ed = RuleEditor()
    qtbot.addWidget(ed)
    ed.show()
    doc = {"entity": {"role": "ego"}, "soft_scores": [],
           "hard_gates": [{"field": "speed", "op": "lt", "value": 0.5, "min_seconds": 3.0}]}
    ed.set_rule(doc)
    form = ed.form
    assert form.reason is None and ed.tabs.currentWidget() is form
    row = form.gate_rows[0]
    assert row.widgets["min_seconds"].text() == "3.0" and row.widgets["min_time_fraction"].text() == ""
    assert form.document()["hard_gates"][0] == doc["hard_gates"][0]
    assert parse_rule(form.document()).to_dict() == parse_rule(doc).to_dict()
    # the user asks for 5 s: the JSON follows
    _type_in(qtbot, row.widgets["min_seconds"], "5")
    assert json.loads(ed.text.toPlainText())["hard_gates"][0]["min_seconds"] == 5
    assert ed.apply_button.isEnabled()
    # ... and types a fraction as well: one or the other, the error sits on the seconds box
    _type_in(qtbot, row.widgets["min_time_fraction"], "0.8")
    assert not ed.apply_button.isEnabled()
    assert row.error.isVisibleTo(form) and "min_seconds" in row.error.text()
    assert form.widget_for("/hard_gates/0/min_seconds") is row.widgets["min_seconds"]
    # emptying the seconds box leaves the fraction gate: valid again, no min_seconds key
    _type_in(qtbot, row.widgets["min_seconds"], "")
    qtbot.keyClick(row.widgets["min_seconds"], Qt.Key.Key_Delete)
    assert row.widgets["min_seconds"].text() == ""
    out = json.loads(ed.text.toPlainText())["hard_gates"][0]
    assert "min_seconds" not in out and out["min_time_fraction"] == 0.8 and ed.apply_button.isEnabled()
    # the shipped ego_stationary (a duration gate) opens in the form, exactly
    from strived.rulelib.hand_rules import hand_rule

    ed.set_rule(hand_rule("ego_stationary"))
    assert ed.tabs.currentWidget() is form and form.gate_rows[0].widgets["min_seconds"].text() == "3.0"
    # the inspector's gate line says how long it held, and when
    from app.window_inspect import gate_witness_text

    line = gate_witness_text({"gate": "speed < 0.5 held for ≥3 s", "met": True, "track": -1, "cls": "ego",
                              "first_s": 14.0, "last_s": 19.9, "held_s": 5.9, "fraction": 0.3})
    assert line == "speed < 0.5 held for ≥3 s: met by the ego vehicle, 14.0–19.9 s (held 5.9 s unbroken)"


# ----------------------------------------------------------------------------- journeys
def test_form_journey_edit_gate_rerank_invalid_value_and_sequence(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    resp1 = rerank(qtbot, w, FORM_RULE)                     # an expert's rule, typed as JSON
    assert _rule_rank(resp1, "gen_cutin_a") is not None
    ed = w.rule_editor
    form = ed.form
    _click_tab(qtbot, ed.tabs, "Form")
    assert form.reason is None and len(form.gate_rows) == 2 and len(form.soft_rows) == 1
    # the library's statistics beside each value (computed on the library worker)
    qtbot.waitUntil(lambda: form.hints is not None, timeout=20000)
    gate = form.gate_rows[1]
    assert gate.widgets["field"].currentData() == "distance" and gate.unit.text() == "m"
    assert gate.hint.text().startswith("in this library: median ") and " m" in gate.hint.text()
    assert "car · " in form.classes.item(0).text()          # the library's classes, most first
    # 1. the user changes the distance gate from 20 to 1 m: the JSON follows at once
    _type_in(qtbot, gate.widgets["value"], "1")
    doc = json.loads(ed.text.toPlainText())
    assert doc["hard_gates"][1] == {"field": "distance", "op": "lt", "value": 1}
    assert doc["hard_gates"][0] == FORM_RULE["hard_gates"][0] and ed.apply_button.isEnabled()
    # Ctrl+Z inside the box undoes the edit there (not the marks, not the JSON), the JSON follows;
    # Ctrl+Shift+Z redoes it
    before = FORM_RULE["hard_gates"][1]["value"]
    qtbot.keyClick(gate.widgets["value"], Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert float(gate.widgets["value"].text()) == before
    assert json.loads(ed.text.toPlainText())["hard_gates"][1]["value"] == before
    qtbot.keyClick(gate.widgets["value"], Qt.Key.Key_Z,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert gate.widgets["value"].text() == "1"
    assert json.loads(ed.text.toPlainText())["hard_gates"][1]["value"] == 1
    # 2. re-rank from the form (Ctrl+Return in the value box): the generated cut-ins come no
    # nearer than 1.5 m, so the rule no longer ranks them
    with qtbot.waitSignal(w.search_finished, timeout=30000) as b:
        qtbot.keyClick(gate.widgets["value"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    resp2 = b.args[0]
    assert resp2.match["mode"] == "user" and resp2.rule["hard_gates"][1]["value"] == 1
    assert _rule_rank(resp2, "gen_cutin_a") is None
    assert [h.video_id for h in resp2.hits] != [h.video_id for h in resp1.hits]
    assert ed.tabs.currentWidget() is form                  # the form stays after the re-rank
    # the box's own undo survives the re-rank's reload of the form (issue 34): Ctrl+Z, Ctrl+Y
    qtbot.keyClick(gate.widgets["value"], Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert float(gate.widgets["value"].text()) == before
    assert json.loads(ed.text.toPlainText())["hard_gates"][1]["value"] == before
    qtbot.keyClick(gate.widgets["value"], Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert gate.widgets["value"].text() == "1" and ed.apply_button.isEnabled()
    # 3. an invalid value: the engine's pointer error, on the field and in the list; nothing lost
    _type_in(qtbot, form.soft_rows[0].widgets["window_seconds"], "4 s")
    doc = json.loads(ed.text.toPlainText())
    assert doc["soft_scores"][0]["window_seconds"] == "4 s"       # what was typed, kept
    assert doc["hard_gates"][1]["value"] == 1                      # the earlier edit, kept
    assert not ed.apply_button.isEnabled()
    items = [ed.errors.item(i).text() for i in range(ed.errors.count())]
    assert any("/soft_scores/0/window_seconds" in t and "must be number" in t for t in items), items
    row = form.soft_rows[0]
    assert row.error.isVisible() and "window_seconds: must be number" in row.error.text()
    assert "must be number" in row.widgets["window_seconds"].toolTip()
    shot(w, "rule_form_invalid")
    _click_tab(qtbot, ed.tabs, "JSON")                      # switching keeps it, both ways
    assert '"window_seconds": "4 s"' in ed.text.toPlainText()
    _click_tab(qtbot, ed.tabs, "Form")
    assert form.soft_rows[0].widgets["window_seconds"].text() == "4 s"
    # a click on the error puts the cursor in that box
    qtbot.mouseClick(ed.errors.viewport(), Qt.MouseButton.LeftButton,
                     pos=ed.errors.visualItemRect(ed.errors.item(0)).center())
    assert form.soft_rows[0].widgets["window_seconds"].hasFocus()
    _type_in(qtbot, form.soft_rows[0].widgets["window_seconds"], "4")
    assert ed.apply_button.isEnabled() and ed.errors.count() == 0
    assert not row.error.isVisible()
    # 4. an edit in JSON shows in the form
    _click_tab(qtbot, ed.tabs, "JSON")
    doc = json.loads(ed.text.toPlainText())
    doc["soft_scores"][0]["weight"] = 2.5
    ed.text.setFocus()
    qtbot.keyClick(ed.text, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(ed.text, json.dumps(doc))
    _click_tab(qtbot, ed.tabs, "Form")
    qtbot.waitUntil(lambda: form.soft_rows[0].widgets["weight"].text() == "2.5", timeout=3000)
    # re-rank with the Re-rank button, from the form
    with qtbot.waitSignal(w.search_finished, timeout=30000) as b:
        qtbot.mouseClick(ed.apply_button, Qt.MouseButton.LeftButton)
    assert b.args[0].rule["soft_scores"][0]["weight"] == 2.5
    shot(w, "rule_form_rerank")
    # 5. a sequence rule (the library's "then" event) opens in the form too: its steps
    resp = run_search(qtbot, w, "the car ahead brakes and then we brake")
    assert resp.rule.get("sequence")
    assert ed.tabs.currentWidget() is form and form.reason is None and form.is_sequence
    assert len(form.seq.steps) == len(resp.rule["sequence"]) and not form.banner.isVisibleTo(form)
    # the next single-pattern rule: the single form again
    run_search(qtbot, w)
    assert ed.tabs.currentWidget() is form and form.reason is None and not form.is_sequence


def test_unknown_class_warning_shows_in_the_form_too(qtbot, window, library_copy):
    """A rule naming a class no records use ('cars'): valid, so it can re-rank, but the engine
    warns it probably matches nothing. The warning shows in the list under both tabs, in the form
    on the class it names and under the classes; ticking the right class clears it."""
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    ed, form = w.rule_editor, w.rule_editor.form
    bad = dict(CUTIN_RULE, entity=dict(CUTIN_RULE["entity"], class_filter=["cars"]))
    # typed in the JSON tab (as an expert, or a rule pasted from elsewhere)
    _click_tab(qtbot, w.tabs, "Rule")
    _click_tab(qtbot, ed.tabs, "JSON")
    ed.text.setFocus()
    qtbot.keyClick(ed.text, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(ed.text, json.dumps(bad))
    qtbot.waitUntil(lambda: ed.errors.count() == 1, timeout=3000)
    item = ed.errors.item(0).text()
    assert item.startswith("⚠") and "/entity/class_filter/0" in item and "unknown class 'cars'" in item
    assert "did you mean 'car'" in item
    assert ed.apply_button.isEnabled() and "1 warning" in ed.status.text()
    # the form tab: the warning under the classes and on the 'cars' item itself
    _click_tab(qtbot, ed.tabs, "Form")
    assert form.reason is None
    assert form.warning.isVisible() and "unknown class 'cars'" in form.warning.text()
    names = [form.classes.item(k).data(Qt.ItemDataRole.UserRole) for k in range(form.classes.count())]
    cars = form.classes.item(names.index("cars"))
    assert cars.text().startswith("⚠") and cars.checkState() == Qt.CheckState.Checked
    assert "unknown class 'cars'" in cars.toolTip()
    assert ed.errors.count() == 1                       # the list shows it under the form too
    qtbot.waitUntil(lambda: form.hints is not None, timeout=20000)
    names = [form.classes.item(k).data(Qt.ItemDataRole.UserRole) for k in range(form.classes.count())]
    assert form.classes.item(names.index("cars")).text().startswith("⚠")     # kept when refilled
    qtbot.wait(50)                                      # the hints' new lines laid out
    shot(w, "rule_form_unknown_class_warning")
    # a click on the warning goes to the class picker
    qtbot.mouseClick(ed.errors.viewport(), Qt.MouseButton.LeftButton,
                     pos=ed.errors.visualItemRect(ed.errors.item(0)).center())
    assert form.classes.hasFocus() and ed.tabs.currentWidget() is form
    # the user unticks 'cars' and ticks 'car' (clicks on the check boxes): no warning any more
    for name in ("cars", "car"):
        names = [form.classes.item(k).data(Qt.ItemDataRole.UserRole) for k in range(form.classes.count())]
        it = form.classes.item(names.index(name))
        rect = form.classes.visualItemRect(it)
        qtbot.mouseClick(form.classes.viewport(), Qt.MouseButton.LeftButton,
                         pos=rect.topLeft() + QPoint(rect.height() // 2, rect.height() // 2))
    doc = json.loads(ed.text.toPlainText())
    assert doc["entity"]["class_filter"] == ["car"]
    assert ed.errors.count() == 0 and not form.warning.isVisible()
    assert "warning" not in ed.status.text()
    names = [form.classes.item(k).data(Qt.ItemDataRole.UserRole) for k in range(form.classes.count())]
    assert not any(form.classes.item(k).text().startswith("⚠") for k in range(form.classes.count()))
    # the re-rank from the form uses it
    with qtbot.waitSignal(w.search_finished, timeout=30000) as b:
        qtbot.mouseClick(ed.apply_button, Qt.MouseButton.LeftButton)
    assert b.args[0].rule["entity"]["class_filter"] == ["car"]


def _add_many_tracks(library_folder):
    from strived.retrieval.sources import ensure_text_index
    from strived.store.library import Library

    with Library.open(library_folder) as lib:
        lib.add_video(many_tracks_records())
        ensure_text_index(lib)


def test_timeline_shows_all_200_tracks_and_a_click_selects_one(qtbot, window, library_copy):
    from app.player import TRACK_COLORS
    from app.timeline_text import MAX_TRACKS

    _add_many_tracks(library_copy)
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, CUTIN_RULE)
    w.tabs.setCurrentIndex(0)
    row = w.model.row_of("many_tracks")
    with qtbot.waitSignal(w.inspect_finished, timeout=30000):
        click_row(qtbot, w, row)
    tl = w.timeline
    assert tl.track_count() == 200
    assert tl.drawn_tracks() == set(range(200))              # every track is drawn ...
    for r in tl.rows:                                        # ... with a bounded number of items
        if r.in_layout:
            assert len(r.curves) <= MAX_TRACKS + 2 and len(r.bg) <= len(TRACK_COLORS) + 1
    assert tl.others_check.isVisible() and "192" in tl.others_check.text()
    assert "+ 192 other tracks" in tl.legend.text()
    # the track list: a click on "car #150" selects it in the timeline and the player
    qtbot.mouseClick(tl.list_button, Qt.MouseButton.LeftButton)
    lst = tl.track_list
    assert lst.isVisible() and lst.count() == 200
    k = next(i for i in range(lst.count()) if "car #150 " in lst.item(i).text())
    lst.scrollToItem(lst.item(k))
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualItemRect(lst.item(k)).center())
    assert tl.highlighted == 150 and w.player.canvas.highlight == 150
    tr150 = tl._traces[150]
    assert tr150.t[0] <= tl.t_s <= tr150.t[-1]              # the playhead where #150 is seen
    assert 150 in tl._focus and "car #150" in tl.legend.text()   # drawn thick, in colour
    # select another track, then click #150's curve (parked alone at loc_x 8 m) in the plot
    k3 = next(i for i in range(lst.count()) if "car #3 " in lst.item(i).text())
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualItemRect(lst.item(k3)).center())
    assert tl.highlighted == 3 and 150 not in tl._focus      # #150 is one of the thin ones again
    loc = tl.rows[tl.row_names.index("loc_x")]
    tm = float(tr150.t[len(tr150.t) // 2])
    click_plot(qtbot, tl, loc, tm, 8.0)
    assert tl.highlighted == 150 and w.player.canvas.highlight == 150
    assert abs(tl.t_s - tm) < 0.1
    shot(w, "timeline_200_tracks")
    # hiding the others leaves the best tracks, the selected one and the ego
    qtbot.mouseClick(tl.others_check, Qt.MouseButton.LeftButton, pos=tl.others_check.rect().center())
    assert not tl.others_check.isChecked()
    assert tl.drawn_tracks() == set(t for t in tl._focus if t >= 0)
    assert len(tl.drawn_tracks()) == MAX_TRACKS + 1 and "(hidden)" in tl.legend.text()
    qtbot.mouseClick(tl.others_check, Qt.MouseButton.LeftButton, pos=tl.others_check.rect().center())
    assert tl.drawn_tracks() == set(range(200))
