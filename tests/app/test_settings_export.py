"""Issue 16: the rule library chosen in Settings is the one searches use (persisted, shown in the
status bar, a bad file refused with the previous choice kept). Issue 14: export with lead-in and
lead-out, "export the marked results" in one go, and the "already exported" mark in the results
table. Driven by real clicks and keys; the files written are read back."""

import copy
import json

import pytest
from PySide6.QtCore import QSettings, Qt

from tests.app.conftest import (CUTIN_RULE, activate, click_button, click_row, rerank, run_search, set_spin,
                                shot, type_text)

MARK_GATE = {"field": "distance", "op": "lt", "value": 77.5}    # only our library's rule has it


def _open_settings(qtbot, w):
    qtbot.mouseClick(w.toolbar.widgetForAction(w.act_settings), Qt.MouseButton.LeftButton)
    dlg = w.settings_dialog
    qtbot.waitExposed(dlg)
    return dlg


def test_rule_library_chosen_in_settings_is_used_by_searches(qtbot, window, library_copy,
                                                             tmp_path, monkeypatch, app_settings):
    from app.settings import AppSettings
    from strived.rulelib.library import load_default_library

    w = window
    w.open_library(str(library_copy))
    assert w.rules_label.text() == "rules: shipped"
    resp0 = run_search(qtbot, w)
    ev = resp0.match["event"]
    assert MARK_GATE not in (resp0.rule.get("hard_gates") or [])
    # a calibrated library as `strived calibrate` writes it, with one rule changed recognisably
    lib = copy.deepcopy(load_default_library())
    lib.entries[ev].rule = dict(lib.entries[ev].rule,
                                hard_gates=list(lib.entries[ev].rule.get("hard_gates") or []) + [MARK_GATE])
    good = tmp_path / "custom_rules.json"
    lib.save(good)
    bad = tmp_path / "broken.json"
    bad.write_text("{not json", encoding="utf-8")
    picks = iter([str(bad), str(good)])
    monkeypatch.setattr("app.settings.QFileDialog.getOpenFileName",
                        lambda *a, **k: (next(picks), "Rule library (*.json)"))

    dlg = _open_settings(qtbot, w)
    # 1. a broken file: a clear message, the previous choice (the shipped rules) kept
    qtbot.mouseClick(dlg.rule_library_choose, Qt.MouseButton.LeftButton)
    assert "not valid JSON" in dlg.rule_library_info.text() and "Kept: the shipped rules" in \
        dlg.rule_library_info.text()
    assert dlg.rule_library.text() == ""
    shot(dlg, "settings_rule_library_bad")
    # 2. the calibrated file: taken, summarised
    qtbot.mouseClick(dlg.rule_library_choose, Qt.MouseButton.LeftButton)
    assert dlg.rule_library.text() == str(good)
    assert "✓" in dlg.rule_library_info.text() and lib.version in dlg.rule_library_info.text()
    shot(dlg, "settings_rule_library_ok")
    click_button(qtbot, dlg, "OK")
    qtbot.waitUntil(lambda: not dlg.isVisible(), timeout=3000)
    # persisted in QSettings (read back from the file) and shown in the status bar
    assert app_settings.rule_library_path == str(good)
    app_settings.sync()
    again = AppSettings(QSettings(app_settings.q.fileName(), QSettings.Format.IniFormat))
    assert again.rule_library_path == str(good)
    assert w.rules_label.text() == f"rules: custom_rules.json ({lib.version})"
    # 3. the search uses it: the same event, our rule
    activate(qtbot, w)
    resp = run_search(qtbot, w)
    assert resp.match["event"] == ev and MARK_GATE in resp.rule["hard_gates"]
    assert w.response.rule_for(resp.hits[0].video_id) == resp.rule
    shot(w, "settings_rule_library_search")
    # 4. the file goes bad later: the search says so and uses the shipped rules
    good.write_text("[]", encoding="utf-8")
    resp = run_search(qtbot, w)
    assert MARK_GATE not in (resp.rule.get("hard_gates") or [])
    assert "chosen rule library cannot be used" in w.notice.text()
    # 5. back to the shipped rules
    lib.save(good)
    dlg = _open_settings(qtbot, w)
    assert dlg.rule_library.text() == str(good)
    qtbot.mouseClick(dlg.rule_library_reset, Qt.MouseButton.LeftButton)
    click_button(qtbot, dlg, "OK")
    assert app_settings.rule_library_path == "" and w.rules_label.text() == "rules: shipped"
    activate(qtbot, w)
    resp = run_search(qtbot, w)
    assert resp.rule == resp0.rule


def test_export_marked_results_with_lead_in_out_and_the_exported_mark(qtbot, window, library_copy,
                                                                      tmp_path):
    import cv2

    from app import library_ops as ops

    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, CUTIN_RULE)
    m = w.model
    exp_cell = lambda vid: m.data(m.index(m.row_of(vid), m.C_EXPORTED))  # noqa: E731
    assert m.headerData(m.C_EXPORTED, Qt.Orientation.Horizontal) == "Exp."
    # nothing marked: the batch export says so
    qtbot.keyClick(w.table, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert "No result of this search is marked relevant" in w.statusBar().currentMessage()
    # mark two clips relevant and one not relevant, by clicks and keys
    for vid, key in (("gen_cutin_a", Qt.Key.Key_R), ("gen_cutin_b", Qt.Key.Key_R),
                     ("gen_plain", Qt.Key.Key_N)):
        click_row(qtbot, w, m.row_of(vid))
        qtbot.keyClick(w.table, key)
    assert all(exp_cell(v) == "" for v in ("gen_cutin_a", "gen_cutin_b", "gen_plain"))
    qtbot.keyClick(w.table, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    dlg = w.export_dialog
    qtbot.waitExposed(dlg)
    assert dlg.windowTitle() == "Export the 2 marked results"
    assert sorted(r["video_id"] for r in dlg.rows) == ["gen_cutin_a", "gen_cutin_b"]
    out = tmp_path / "marked"
    type_text(qtbot, dlg.folder, str(out))
    set_spin(qtbot, dlg.lead_in, "1.5")
    set_spin(qtbot, dlg.lead_out, "3")
    assert (dlg.lead_in.value(), dlg.lead_out.value()) == (1.5, 3.0)
    dlg.clips.setCurrentIndex(1)                      # frame-accurate re-encode
    qtbot.mouseClick(dlg.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.report is not None, timeout=60000)
    shot(dlg, "export_marked_done")
    doc = json.loads((out / "clips.json").read_text())
    assert sorted(c["video_id"] for c in doc["clips"]) == ["gen_cutin_a", "gen_cutin_b"]
    ext = ops.video_extents(w.library, ["gen_cutin_a", "gen_cutin_b"])
    by_vid = {h.video_id: h for h in w.response.hits}
    for c in doc["clips"]:
        h = by_vid[c["video_id"]]
        n, dur = ext[c["video_id"]]
        assert (c["event_start_s"], c["event_end_s"]) == pytest.approx(h.span_s, abs=1e-3)
        assert c["start_s"] == pytest.approx(max(0.0, h.span_s[0] - 1.5), abs=1e-3)
        assert c["end_s"] == pytest.approx(min(dur, h.span_s[1] + 3.0), abs=1e-3)
        assert c["start_frame"] == round(c["start_s"] * 20) and \
            c["end_frame"] == min(n - 1, round(c["end_s"] * 20))
        cap = cv2.VideoCapture(c["clip_path"])
        assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == c["end_frame"] - c["start_frame"] + 1
        cap.release()
    csv_text = (out / "clips.csv").read_text()
    assert f"{doc['clips'][0]['start_s']}" in csv_text
    # the results table marks them exported (and only them), with where and when
    assert exp_cell("gen_cutin_a") == "✓" and exp_cell("gen_cutin_b") == "✓"
    assert exp_cell("gen_plain") == ""
    tip = m.data(m.index(m.row_of("gen_cutin_a"), m.C_EXPORTED), Qt.ItemDataRole.ToolTipRole)
    clip_a = next(c["clip_path"] for c in doc["clips"] if c["video_id"] == "gen_cutin_a")
    assert str(out) in tip and clip_a in tip
    dlg.close()
    w.tabs.setCurrentIndex(0)
    w.table.scrollTo(m.index(m.row_of("gen_cutin_a"), m.C_FILE))
    shot(w, "export_marked_results_table")
    # kept in the library: still marked after the library is opened again
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    assert exp_cell("gen_cutin_a") == "✓" and ops.exports(w.library)["gen_cutin_a"][-1]["clip"] == clip_a
    # a second export of one result (the dialog remembers lead-in/out): "✓ 2×"
    click_row(qtbot, w, m.row_of("gen_cutin_a"))
    qtbot.keyClick(w.table, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    dlg = w.export_dialog
    qtbot.waitExposed(dlg)
    assert (dlg.lead_in.value(), dlg.lead_out.value()) == (1.5, 3.0)
    type_text(qtbot, dlg.folder, str(tmp_path / "second"))
    dlg.csv.setChecked(True)
    qtbot.mouseClick(dlg.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.report is not None, timeout=30000)
    exported = {c["video_id"] for c in json.loads((tmp_path / "second" / "clips.json").read_text())["clips"]}
    for vid in exported:
        assert exp_cell(vid) == ("✓ 2×" if vid in ("gen_cutin_a", "gen_cutin_b") else "✓")
