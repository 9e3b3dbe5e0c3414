"""The user journeys of issue 6, driven through the real window (keys, clicks) offscreen."""

import json
import os
import stat

import pytest
from PySide6.QtCore import Qt

from tests.app.conftest import CUTIN_RULE, click_plot, click_row, drag_playhead, make_clip, shot

QUERY = "a car cuts in from the right"


def _search(qtbot, w, text=QUERY):
    w.query.setFocus()
    w.query.lineEdit().clear()
    qtbot.keyClicks(w.query.lineEdit(), text)
    with qtbot.waitSignal(w.search_finished, timeout=60000) as b:
        qtbot.keyClick(w.query.lineEdit(), Qt.Key.Key_Return)
    return b.args[0]


def _rerank(qtbot, w, rule):
    w.tabs.setCurrentWidget(w.rule_editor)
    w.rule_editor.text.setPlainText(json.dumps(rule, indent=2))
    assert w.rule_editor.validate()
    with qtbot.waitSignal(w.search_finished, timeout=30000) as b:
        qtbot.mouseClick(w.rule_editor.apply_button, Qt.MouseButton.LeftButton)
    return b.args[0]


def test_j2_search_ranked_list(qtbot, window, library_copy):
    w = window
    assert w.open_library(str(library_copy))
    assert "videos" in w.stats_label.text()
    resp = _search(qtbot, w)
    assert w.model.rowCount() == len(resp.hits) > 0
    assert resp.timings_ms["total"] < 5000
    m = w.model
    d = lambda r, c: m.data(m.index(r, c))  # noqa: E731
    assert d(0, m.C_EVENT).startswith(resp.match["event"]) and d(0, m.C_MODE) in ("reused", "adapted")
    rel = resp.hits[0].relevance
    assert d(0, m.C_RELEVANCE) == ("–" if rel is None else f"{rel:.0%}")
    assert any(d(r, m.C_RULE) != "–" for r in range(m.rowCount()))
    assert w.settings.history()[0] == QUERY
    comp = w.query.completer().model().stringList()
    assert QUERY in comp and len(comp) > 10            # history + library event names
    shot(w, "j2_results")


def test_j3_j5_j6_inspect_rule_marks(qtbot, window, library_copy, monkeypatch):
    w = window
    w.open_library(str(library_copy))
    _search(qtbot, w)
    # 5: an invalid rule shows its errors where they are; a valid edit re-ranks instantly
    w.tabs.setCurrentWidget(w.rule_editor)
    bad = dict(CUTIN_RULE, soft_scores=[dict(CUTIN_RULE["soft_scores"][0], window_seconds=-1)])
    w.rule_editor.text.setPlainText(json.dumps(bad, indent=2))
    assert not w.rule_editor.validate()
    item = w.rule_editor.errors.item(0).text()
    assert "/soft_scores/0/window_seconds" in item and "line " in item
    assert not w.rule_editor.apply_button.isEnabled()
    qtbot.mouseClick(w.rule_editor.errors.viewport(), Qt.MouseButton.LeftButton,
                     pos=w.rule_editor.errors.visualItemRect(w.rule_editor.errors.item(0)).center())
    assert "window_seconds" in w.rule_editor.text.textCursor().block().text()
    shot(w, "j5_rule_errors")
    resp = _rerank(qtbot, w, CUTIN_RULE)
    assert resp.match["mode"] == "user"
    ids = [h.video_id for h in resp.hits]
    assert ids.index("gen_cutin_a") < ids.index("gen_plain")
    monkeypatch.setattr("app.rule_editor.QInputDialog.getText", lambda *a, **k: ("my cut-in", True))
    qtbot.mouseClick(w.rule_editor.save_button, Qt.MouseButton.LeftButton)
    from app import library_ops as ops

    assert ops.user_rules(w.library)["my cut-in"]["hard_gates"][0]["field"] == "abs_loc_x"

    # 3: select a result: the player jumps to the event span, the timeline explains it
    w.tabs.setCurrentIndex(0)
    row = w.model.row_of("gen_cutin_a")
    hit = w.model.hit(row)
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, row)
    qtbot.waitUntil(lambda: w.player.canvas.image is not None, timeout=5000)
    assert w.player.frame_idx == w.player.frame_at(hit.span_s[0])
    assert "soft score" in w.timeline.row_names and w.player.canvas.boxes
    assert abs(w.timeline.t_s - hit.span_s[0]) < 0.06
    shot(w, "j3_inspect")
    f0 = w.player.frame_idx
    w.player.setFocus()
    with qtbot.waitSignal(w.player.frame_shown, timeout=5000):
        qtbot.keyClick(w.player, Qt.Key.Key_Right)
    assert w.player.frame_idx == f0 + 1
    assert f"frame {f0 + 1} /" in w.player.position_label.text()
    # dragging the playhead with the mouse drives the player
    tl = w.timeline
    drag_playhead(qtbot, tl, 0, 1.0)
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - 20) <= 1, timeout=5000)
    assert abs(tl.t_s - 1.0) < 0.06
    # clicking the curve of another track (the far car, #2) selects it: its box is highlighted
    row = tl.rows[tl.row_names.index("loc_x")]
    tr = next(t for t in tl.explanation.traces if int(t.track) == 2)
    assert w.player.canvas.highlight != 2
    with qtbot.waitSignal(w.player.frame_shown, timeout=5000):
        click_plot(qtbot, tl, row, float(tr.t[4]), float(tr.values["loc_x"][4]))
    assert w.player.canvas.highlight == 2 and tl.highlighted == 2
    w.player.setFocus()
    qtbot.keyClick(w.player, Qt.Key.Key_Space)
    assert w.player.is_playing
    qtbot.waitUntil(lambda: w.player.frame_idx > 22, timeout=5000)
    qtbot.keyClick(w.player, Qt.Key.Key_Space)
    assert not w.player.is_playing
    qtbot.mouseClick(w.player.overlay_box, Qt.MouseButton.LeftButton)
    assert not w.player.canvas.overlay

    # 6: marks are stored in the library
    qtbot.keyClick(w.table, Qt.Key.Key_R)
    click_row(qtbot, w, w.model.row_of("gen_plain"))
    qtbot.keyClick(w.table, Qt.Key.Key_N)
    marks = {r["video_id"]: r["relevant"] for r in w.library.db["marks"].rows}
    assert marks == {"gen_cutin_a": 1, "gen_plain": 0}
    assert w.model.data(w.model.index(w.model.row_of("gen_plain"), w.model.C_MARK)) == "N"


def test_j4_compare_synced(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    _search(qtbot, w)
    _rerank(qtbot, w, CUTIN_RULE)
    ra, rb = w.model.row_of("gen_cutin_a"), w.model.row_of("gen_cutin_b")
    click_row(qtbot, w, ra)
    click_row(qtbot, w, rb, Qt.KeyboardModifier.ControlModifier)
    assert len(w.selected_rows()) == 2
    qtbot.keyClick(w.table, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    cv = w.compare
    qtbot.waitUntil(lambda: len(cv.slots) == 2, timeout=20000)     # records load in a worker
    assert w.tabs.currentWidget() is cv
    starts = [s.player.frame_at(s.start_s) for s in cv.slots]
    assert cv.frames() == starts
    assert starts[0] != starts[1]                    # each aligned to its own event start
    cv.setFocus()
    qtbot.keyClick(cv, Qt.Key.Key_Right)
    assert cv.frames() == [s + 1 for s in starts]
    qtbot.keyClick(cv, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: cv.t_rel > 0.3, timeout=5000)
    qtbot.keyClick(cv, Qt.Key.Key_Space)
    assert not cv.is_playing
    d = [f - s for f, s in zip(cv.frames(), starts)]
    assert abs(d[0] - d[1]) <= 1
    cv.slider.setValue(-50)                          # 0.5 s before the event starts
    assert cv.frames() == [max(0, s - 10) for s in starts]   # clamped at each clip start
    for s in cv.slots:
        qtbot.waitUntil(lambda s=s: s.player.canvas.image is not None, timeout=5000)
    shot(w, "j4_compare")


def test_j7_export_and_bad_folder(qtbot, window, library_copy, tmp_path):
    w = window
    w.open_library(str(library_copy))
    _search(qtbot, w)
    _rerank(qtbot, w, CUTIN_RULE)
    click_row(qtbot, w, w.model.row_of("gen_cutin_a"))
    click_row(qtbot, w, w.model.row_of("gen_cutin_b"), Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(w.table, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    dlg = w.export_dialog
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
    # root ignores permission bits: /proc refuses new folders to everyone
    target = ro if os.geteuid() != 0 else "/proc/strived-export-test"
    dlg.folder.setText(str(target))
    qtbot.mouseClick(dlg.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "✗" in dlg.message.text(), timeout=10000)
    assert dlg.report is None
    assert "folder you can write to" in dlg.message.text()
    assert not os.listdir(ro)
    shot(dlg, "bad_export_readonly")
    out = tmp_path / "out"
    dlg.folder.setText(str(out))
    dlg.fiftyone.setChecked(True)
    dlg.openlabel.setChecked(True)
    dlg.clips.setCurrentIndex(1)
    qtbot.mouseClick(dlg.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.report is not None, timeout=30000)
    shot(dlg, "j7_export_done")
    doc = json.loads((out / "clips.json").read_text())
    assert [c["video_id"] for c in doc["clips"]] == ["gen_cutin_a", "gen_cutin_b"] or \
        sorted(c["video_id"] for c in doc["clips"]) == ["gen_cutin_a", "gen_cutin_b"]
    assert doc["rule"]["hard_gates"][0]["field"] == "abs_loc_x" and doc["index_version"] is not None
    assert (out / "fiftyone" / "labels.json").exists() and len(os.listdir(out / "openlabel")) == 2
    assert len(dlg.report.clips) == 2
    import cv2

    c = doc["clips"][0]
    cap = cv2.VideoCapture(c["clip_path"])
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == c["end_frame"] - c["start_frame"] + 1


def test_j8_saved_search_reopens_same_ranking(qtbot, app_settings, library_copy, monkeypatch):
    from app.main_window import MainWindow

    w = MainWindow(app_settings)
    qtbot.addWidget(w)
    w.show()
    w.open_library(str(library_copy))
    resp = _search(qtbot, w)
    monkeypatch.setattr("PySide6.QtWidgets.QInputDialog.getText", lambda *a, **k: ("cut-ins", True))
    qtbot.keyClick(w.table, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    ids = [h.video_id for h in resp.hits]
    w.close()
    w2 = MainWindow(app_settings)
    qtbot.addWidget(w2)
    w2.show()
    w2.open_library(str(library_copy))
    w2.open_saved("cut-ins")
    assert [h.video_id for h in w2.model.hits] == ids
    assert w2.response.rule == resp.rule and w2.response.weights == resp.weights
    spec = json.loads(w2.library.db["saved_searches"].get("cut-ins")["spec"])
    assert spec["index_version"] == w2.library.meta_get("content_version")
    w2.close()


def test_j9_settings_no_plain_key_llm_down(qtbot, app_settings, monkeypatch, tmp_path):
    from app.settings import SettingsDialog

    monkeypatch.setenv("STRIVED_LLM_API_KEY", "sk-secret-123")
    dlg = SettingsDialog(app_settings, folder=str(tmp_path))
    qtbot.addWidget(dlg)
    dlg.show()
    assert "STRIVED_LLM_API_KEY" in dlg.key_label.text()
    dlg.base_url.setText("http://127.0.0.1:9/v1")          # nothing listens on port 9
    dlg.model.setText("gemma")
    dlg.device.setCurrentText("cpu")
    dlg.sample_fps.setValue(5.0)
    dlg.focal.setValue(1000.0)
    qtbot.mouseClick(dlg.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.test_button.isEnabled(), timeout=20000)
    assert "✗" in dlg.test_result.text() and "offline" in dlg.test_result.text()
    shot(dlg, "j9_settings_llm_down")
    dlg.apply()
    s = app_settings
    assert (s.llm_base_url, s.llm_model, s.device, s.sample_fps) == ("http://127.0.0.1:9/v1", "gemma", "cpu", 5.0)
    assert s.camera(str(tmp_path))["focal_px"] == 1000.0
    cfg = s.llm_config()
    assert cfg.base_url == "http://127.0.0.1:9/v1" and cfg.api_key == "sk-secret-123"
    s.sync()
    text = open(s.q.fileName()).read()
    assert "sk-secret" not in text and "127.0.0.1:9" in text


def test_deleted_video_and_llm_down_search(qtbot, window, library_copy, clips_dir, tmp_path):
    """A deleted video still in the library: a clear message in the player, nothing lost; a down
    LLM endpoint: the search falls back offline and says so."""
    import shutil

    from strived.store.library import Library

    lib = Library.open(library_copy)
    moved = tmp_path / "moved.mp4"
    shutil.copy(clips_dir[1]["gen_plain"][0], moved)
    rec = lib.get_video("gen_plain")
    rec.info.path = str(moved)
    lib.add_video(rec)
    lib.close()
    os.remove(moved)
    w = window
    w.settings.llm_base_url = "http://127.0.0.1:9/v1"
    w.open_library(str(library_copy))
    resp = _search(qtbot, w)
    assert resp.hits
    row = w.model.row_of("gen_plain")
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, row)
    assert "missing" in w.player.canvas.message
    shot(w, "bad_deleted_video")


def test_j1_index_cancel_resume_errors(qtbot, app_settings, tmp_path):
    pytest.importorskip("strived.indexing.job")
    from app.main_window import MainWindow

    videos = tmp_path / "dashcam"
    videos.mkdir()
    for k in range(3):
        make_clip(videos / f"v{k}.mp4", n_frames=16, fps=10.0, size=(320, 180), seed=k)
    (videos / "broken.mp4").write_bytes(b"\x00not a video" * 100)
    lib = tmp_path / "lib"
    w = MainWindow(app_settings)
    qtbot.addWidget(w)
    w.show()
    assert w.open_library(str(lib), create=True)
    # cancel as soon as the first video is done, then close the window mid-way
    def on_progress(ev):
        if ev.stage == "videos" and ev.done >= 1:
            w.cancel_indexing()
    w.start_indexing(str(videos))
    w.index_worker.signals.progressed.connect(on_progress)
    qtbot.waitUntil(lambda: w.index_worker.is_done, timeout=120000)
    qtbot.wait(50)
    assert "cancelled" in w.index_panel.title.text().lower() or w.index_panel.failed_items
    shot(w, "j1_index_cancelled")
    n_first = len(w.library)
    w.close()
    assert app_settings.pending_index(str(lib.resolve())) == str(videos)
    w2 = MainWindow(app_settings)                 # reopen: indexing resumes by itself
    qtbot.addWidget(w2)
    w2.show()
    w2.open_library(str(lib))
    assert w2.index_worker is not None and "Resuming" in w2.index_panel.title.text()
    qtbot.waitUntil(lambda: w2.index_worker.is_done, timeout=180000)
    qtbot.wait(50)
    assert len(w2.library) == 3 >= n_first
    assert any("broken.mp4" in k for k in w2.index_panel.failed_items)
    assert "1 failed" in w2.index_panel.title.text()
    assert app_settings.pending_index(str(lib.resolve())) == ""
    shot(w2, "j1_index_done")
    empty = tmp_path / "empty"
    empty.mkdir()
    w2.start_indexing(str(empty))
    qtbot.waitUntil(lambda: w2.index_worker.is_done, timeout=60000)
    qtbot.wait(50)
    assert "No videos found" in w2.notice.text()
    w2.close()
