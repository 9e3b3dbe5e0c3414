"""Issue 14: the review workflow, driven like a user (QTest clicks and keys on the real widgets,
pixel clicks inside the pyqtgraph plots), each journey ending with a screenshot."""

import json
import os
import threading
import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication

from tests.app.conftest import (CUTIN_RULE, activate, answer_dialogs, click_button, click_menu_action,
                                click_plot, click_row, clip_records, inspect_video, make_clip, plot_pos,
                                press_return, rerank, right_click, run_search, shot, type_into_input_dialog,
                                type_query)

QUERY = "a car cuts in from the right"
TWO_GATES = dict(CUTIN_RULE, hard_gates=CUTIN_RULE["hard_gates"] + [
    {"field": "distance", "op": "lt", "value": 30.0}])


# --------------------------------------------------------------------- timeline and seek bar
def test_timeline_clicks_select_tracks_and_seek_and_read_values(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, TWO_GATES)
    inspect_video(qtbot, w, "gen_cutin_a")
    tl = w.timeline
    qtbot.wait(50)
    exp = tl.explanation
    assert exp.peak_track == 1 and w.player.canvas.highlight == 1
    # 1. a click on the far car's curve (#2, loc_x 0.1 m) selects it and seeks there
    row = tl.rows[tl.row_names.index("loc_x")]
    tr2 = next(t for t in exp.traces if int(t.track) == 2)
    k = len(tr2.t) // 5
    click_plot(qtbot, tl, row, float(tr2.t[k]), float(tr2.values["loc_x"][k]))
    assert tl.highlighted == 2 and w.player.canvas.highlight == 2
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - round(float(tr2.t[k]) * 20)) <= 1, timeout=5000)
    # 2. a click on empty plot area (no curve near) seeks the player: soft score row at 3.0 s
    soft = tl.rows[tl.row_names.index("soft score")]
    at = [float(t.combined[abs(t.t - 3.0).argmin()]) for t in exp.traces]
    y_free = max((y / 20 for y in range(21)), key=lambda y: min(abs(y - v) for v in at))
    assert min(abs(y_free - v) for v in at) > 0.3
    click_plot(qtbot, tl, soft, 3.0, y_free)
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - 60) <= 1, timeout=5000)
    assert abs(tl.t_s - 3.0) < 0.06 and tl.highlighted == 2     # no curve there: selection kept
    # 3. the gates row: one lane per gate, each label inside its own lane and in view
    gates = tl.rows[tl.row_names.index("gates")]
    names = list(exp.traces[0].gates)
    assert len(names) == 2
    vb = gates.plot.getViewBox()
    for lane, lab in enumerate(gates.labels[:2]):
        assert lab.isVisible() and lab.toPlainText() == names[lane]
        c = vb.mapSceneToView(lab.sceneBoundingRect().center())
        assert lane <= c.y() <= lane + 0.7, (lane, c.y())
        assert vb.sceneBoundingRect().contains(lab.sceneBoundingRect())
    # 4. hovering reads each track's value at the pointer; the legend names the tracks
    tr1 = next(t for t in exp.traces if int(t.track) == 1)
    qtbot.wait(30)
    qtbot.mouseMove(tl.view.viewport(), plot_pos(tl, row, float(tr1.t[2]), 2.0))
    qtbot.waitUntil(lambda: "car #1" in tl.readout.text(), timeout=3000)
    assert f"car #1: {float(tr1.values['loc_x'][2]):.2f} m" in tl.readout.text()
    assert "car #2: 0.10 m" in tl.readout.text() and "loc_x" in tl.readout.text()
    assert "car #1" in tl.legend.text() and "car #2" in tl.legend.text()
    shot(w, "review_timeline_click_seek")


def test_seek_bar_shows_event_intervals_and_jumps(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, CUTIN_RULE)
    inspect_video(qtbot, w, "gen_cutin_a")
    bar = w.player.slider
    assert bar.intervals, "the event intervals are drawn on the seek bar"
    assert any(a <= w.player.span_frames[0] <= b for a, b in bar.intervals)
    # a click outside the intervals jumps there; inside one, to the frame clicked (not its start);
    # on its left edge, to its start
    free = [f for f in range(w.player.n_frames) if bar.interval_at(bar.x_of(f)) is None]
    assert free, bar.intervals
    f_free = free[len(free) // 2]
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton,
                     pos=QPoint(round(bar.x_of(f_free)), bar.height() // 2))
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - f_free) <= 1, timeout=5000)
    a, b = max(bar.intervals, key=lambda iv: iv[1] - iv[0])
    assert bar.x_of(b) - bar.x_of(a) > 4 * bar.SNAP_PX, "wide enough to aim into"
    x_in = int((bar.x_of(a) + bar.x_of(b)) / 2)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(x_in, bar.height() // 2))
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - bar.value_at(x_in)) <= 1, timeout=5000)
    assert w.player.frame_idx > a
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(round(bar.x_of(a)) + 1, bar.height() // 2))
    qtbot.waitUntil(lambda: w.player.frame_idx == a, timeout=5000)
    shot(w.player, "review_seek_bar_intervals")


# --------------------------------------------------------------------- results and notices
@pytest.fixture()
def rules_only_library(tmp_path, clips_dir):
    """Records of the generated clips, no BM25/dense index yet (as during a first indexing)."""
    from strived.store.library import Library

    lib = Library.open(tmp_path / "rules_only", create=True)
    lib.add_videos([clip_records(v, p, b, 20.0, c) for v, (p, b, c) in clips_dir[1].items()])
    lib.close()
    return tmp_path / "rules_only"


def test_one_source_shows_its_own_score_and_no_cli_advice(qtbot, window, rules_only_library):
    w = window
    w.open_library(str(rules_only_library))
    resp = run_search(qtbot, w)
    assert resp.sources_used == ["rule"] and resp.hits
    m = w.model
    top = resp.hits[0]
    ps = top.per_source["rule"]
    cell = m.data(m.index(0, m.C_RULE))
    # not "2 % #1" for a 0.79 score; both clips score the same here, so the cell says it is a tie
    want = f"{ps['score']:.2f} · ={ps['tie']['first']}/{ps['of']} ({ps['tie']['size']} tied)" if ps.get("tie") \
        else f"{ps['score']:.2f} · 1/{ps['of']}"
    assert cell == want and "%" not in cell
    assert top.relevance is None and m.data(m.index(0, m.C_RELEVANCE)) == "–"   # no fused score
    tip = m.data(m.index(0, m.C_RULE), Qt.ItemDataRole.ToolTipRole)
    assert "only source" in tip
    text = w.notice.text()
    assert w.notice.isVisible() and "not ready yet" in text
    assert "keyword search" in text.lower() and "description search" in text.lower()
    for cli in ("ensure_text_index", "`", "strived index", "library)", "source skipped"):
        assert cli not in text                          # one plain sentence, no engine jargon
    qtbot.waitUntil(lambda: w.player.canvas.image is not None and w.timeline.explanation
                    is not None, timeout=10000)
    shot(w, "review_one_source")


# --------------------------------------------------------------------- search during indexing
def _slow_search(monkeypatch, started: threading.Event, hold_s: float = 30.0,
                 honour_cancel: bool = True):
    """engine.search that first spends up to ``hold_s`` in an uninterruptible-looking step (a
    first model load), reporting its progress; returns what the real search returns."""
    from strived import engine
    from strived.errors import Cancelled
    from strived.jobs import report

    real = engine.search

    def slow(library, query, *a, progress=None, cancel=None, **kw):
        started.set()
        report(progress, "search", 0, 4, message="loading")
        t0 = time.monotonic()
        while time.monotonic() - t0 < hold_s:
            if honour_cancel and cancel is not None and cancel():
                raise Cancelled()
            time.sleep(0.02)
        return real(library, query, *a, progress=progress, cancel=cancel, **kw)

    monkeypatch.setattr(engine, "search", slow)
    return real


def test_search_during_first_indexing_has_progress_cancel_and_no_stale_notice(
        qtbot, window, tmp_path, monkeypatch):
    videos = tmp_path / "dashcam"
    videos.mkdir()
    for k in range(2):
        make_clip(videos / f"v{k}.mp4", n_frames=20, fps=10.0, size=(320, 180), seed=k)
    w = window
    assert w.open_library(str(tmp_path / "lib"), create=True)
    w.start_indexing(str(videos))
    started = threading.Event()
    real = _slow_search(monkeypatch, started)
    type_query(qtbot, w, QUERY)
    press_return(qtbot, w)
    qtbot.waitUntil(started.is_set, timeout=10000)
    qtbot.waitUntil(lambda: w.search_progress.isVisible() and w.search_cancel.isVisible(),
                    timeout=3000)
    qtbot.waitUntil(lambda: "Searching" in w.results_label.text(), timeout=3000)
    assert "indexing is running" in w.results_label.text()
    shot(w, "review_search_progress")
    t0 = time.monotonic()
    with qtbot.waitSignal(w.search_cancelled, timeout=2000):
        qtbot.mouseClick(w.search_cancel, Qt.MouseButton.LeftButton)
    assert time.monotonic() - t0 < 1.0
    assert not w.search_cancel.isVisible() and "cancelled" in w.results_label.text()
    assert w.search_button.isEnabled()
    # the same search again, to the end (while indexing may still run)
    from strived import engine

    monkeypatch.setattr(engine, "search", real)
    qtbot.waitUntil(lambda: not w.jobs.active, timeout=10000)
    with qtbot.waitSignal(w.search_finished, timeout=60000):
        press_return(qtbot, w)
    assert not w.search_progress.isVisible()
    qtbot.waitUntil(lambda: w.index_worker.is_done, timeout=180000)
    qtbot.wait(100)
    text = w.notice.text()
    assert "ensure_text_index" not in text and "`" not in text
    # once indexing is over, no notice says a source is still missing
    assert "not ready yet" not in text
    assert "Indexing finished" in text or not w._results_stale
    shot(w, "review_search_during_indexing_done")


# --------------------------------------------------------------------- indexing panel
def test_index_panel_counts_rows_and_cancel_button(qtbot, window, tmp_path):
    videos = tmp_path / "dashcam"
    videos.mkdir()
    for k in range(3):
        make_clip(videos / f"v{k}.mp4", n_frames=20, fps=10.0, size=(320, 180), seed=k)
    (videos / "broken.mp4").write_bytes(b"\x00not a video" * 100)
    w = window
    assert w.open_library(str(tmp_path / "lib"), create=True)
    panel = w.index_panel
    bars = []
    w.start_indexing(str(videos))
    w.index_worker.signals.progressed.connect(
        lambda ev: bars.append((ev.stage, panel.bar.value(), panel.bar.format())))
    qtbot.waitUntil(lambda: w.index_worker.is_done, timeout=180000)
    qtbot.wait(100)
    states = {panel.tree.topLevelItem(i).text(0): panel.tree.topLevelItem(i).text(1)
              for i in range(panel.tree.topLevelItemCount())}
    assert states == {"v0.mp4": "done", "v1.mp4": "done", "v2.mp4": "done", "broken.mp4": "failed"}
    videos_fmt = [f for st, _v, f in bars if st in ("videos", "frames")]
    assert videos_fmt[-1].startswith("4 / 4 videos")
    assert any(st == "frames" and v > 0 for st, v, _f in bars)     # moves inside a video
    assert "3 video(s)" in panel.title.text() and "1 failed" in panel.title.text()
    shot(w, "review_index_panel_done")
    # a second folder: cancel with the panel's button
    more = tmp_path / "more"
    more.mkdir()
    for k in range(3):
        make_clip(more / f"m{k}.mp4", n_frames=40, fps=10.0, size=(320, 180), seed=10 + k)
    w.start_indexing(str(more))
    qtbot.waitUntil(lambda: panel.tree.topLevelItemCount() > 0, timeout=60000)
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    assert panel.cancel_button.text() == "Cancelling…" and not panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: w.index_worker.is_done, timeout=120000)
    qtbot.wait(100)
    assert "cancelled" in panel.title.text().lower() or "Indexed" in panel.title.text()
    assert panel.cancel_button.text() == "Cancel" and not panel.cancel_button.isEnabled()
    assert all(panel.tree.topLevelItem(i).text(1) != "indexing"
               for i in range(panel.tree.topLevelItemCount()))
    shot(w, "review_index_cancelled")


# --------------------------------------------------------------------- rule editor, saved searches
def test_rule_reset_after_rerank_brings_back_rule_ranking_and_undo(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    first = run_search(qtbot, w)
    original_text = w.rule_editor.text.toPlainText()
    assert first.rule and original_text
    re_ = rerank(qtbot, w, CUTIN_RULE)
    assert re_.match["mode"] == "user"
    edited = w.rule_editor.text.toPlainText()
    assert json.loads(edited) == json.loads(json.dumps(CUTIN_RULE)) or \
        json.loads(edited)["hard_gates"][0]["field"] == "abs_loc_x"
    qtbot.mouseClick(w.rule_editor.reset_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.response.match.get("mode") != "user", timeout=30000)
    back = w.response
    assert w.rule_editor.text.toPlainText() == original_text
    assert back.match.get("mode") != "user" and back.rule == first.rule
    assert [h.video_id for h in back.hits] == [h.video_id for h in first.hits]
    # the edit is not lost: Ctrl+Z in the editor brings it back
    w.tabs.setCurrentWidget(w.rule_editor)
    w.rule_editor.text.setFocus()
    qtbot.keyClick(w.rule_editor.text, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert json.loads(w.rule_editor.text.toPlainText())["hard_gates"][0]["field"] == "abs_loc_x"
    shot(w, "review_rule_reset_undo")


def _saved_query(w, name):
    row = w.library.conn.execute("SELECT query FROM saved_searches WHERE name=?", (name,)).fetchone()
    return row[0] if row else None


def test_saving_under_an_existing_name_asks_first(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    answer_dialogs(qtbot, lambda d: type_into_input_dialog(qtbot, d, "cut-ins"))
    qtbot.keyClick(w.table, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert _saved_query(w, "cut-ins") == QUERY
    activate(qtbot, w)
    run_search(qtbot, w, "we brake hard behind a truck")
    # same name: the user is asked, keeps the old one
    met = answer_dialogs(qtbot, lambda d: type_into_input_dialog(qtbot, d, "cut-ins"),
                         lambda d: click_button(qtbot, d, "Keep the old one"))
    qtbot.keyClick(w.table, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert len(met) == 2 and "already exists" in met[1].text()
    assert _saved_query(w, "cut-ins") == QUERY
    activate(qtbot, w)
    # ... and now replaces it
    met = answer_dialogs(qtbot, lambda d: type_into_input_dialog(qtbot, d, "cut-ins"),
                         lambda d: click_button(qtbot, d, "Replace"))
    qtbot.keyClick(w.table, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert len(met) == 2
    assert _saved_query(w, "cut-ins") == "we brake hard behind a truck"


def test_settings_test_connection_message_is_whole(qtbot, app_settings, tmp_path):
    from app.settings import SettingsDialog

    dlg = SettingsDialog(app_settings, folder=str(tmp_path))
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    url = "http://127.0.0.1:9/v1/" + "a-long-path-segment/" * 6    # nothing listens on port 9
    dlg.base_url.setFocus()
    qtbot.keyClicks(dlg.base_url, url)
    qtbot.mouseClick(dlg.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.test_button.isEnabled(), timeout=20000)
    qtbot.wait(50)
    lab = dlg.test_result
    assert "✗" in lab.text() and "offline" in lab.text()
    need = lab.heightForWidth(lab.width())
    assert need > 3 * lab.fontMetrics().height()               # a long verdict: several lines
    assert lab.height() >= need, (lab.height(), need)          # all of them shown
    top_left = lab.mapTo(dlg, QPoint(0, 0))
    assert top_left.y() + lab.height() <= dlg.height()         # inside the dialog
    shot(dlg, "review_settings_long_message")


# --------------------------------------------------------------------- keyboard, folders, closing
def test_after_a_search_space_and_arrows_drive_the_player(qtbot, window, rules_only_library):
    w = window
    w.open_library(str(rules_only_library))
    run_search(qtbot, w)
    qtbot.waitUntil(lambda: w.player.canvas.image is not None, timeout=5000)
    fw = QApplication.focusWidget()
    assert fw is w.player
    f0 = w.player.frame_idx
    qtbot.keyClick(fw, Qt.Key.Key_Right)
    assert w.player.frame_idx == f0 + 1
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Space)
    assert w.player.is_playing
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Space)
    assert not w.player.is_playing
    assert w.query.currentText() == QUERY                      # nothing typed into the query
    shot(w, "review_focus_player")


def test_opening_a_video_folder_offers_to_index_it(qtbot, window, tmp_path, monkeypatch):
    videos = tmp_path / "trip"
    videos.mkdir()
    make_clip(videos / "a.mp4", n_frames=20, fps=10.0, size=(320, 180))
    w = window
    monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getExistingDirectory",
                        lambda *a, **k: str(videos))
    met = answer_dialogs(qtbot, lambda d: click_button(qtbot, d, "Index the videos"))
    qtbot.keyClick(w, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)     # File → Open library…
    assert len(met) == 1 and "1 video(s)" in met[0].text() and "strived" not in met[0].text()
    assert not w.presenter.history                                # no error, no CLI advice
    assert w.library is not None and w.library_path != str(videos)
    assert not os.path.exists(videos / "library.sqlite")
    assert w.index_worker is not None and w.index_dock.isVisible()
    qtbot.waitUntil(lambda: w.index_worker.is_done, timeout=120000)
    qtbot.waitUntil(lambda: "1 videos" in w.stats_label.text(), timeout=10000)
    shot(w, "review_open_video_folder")


def test_closing_does_not_wait_for_a_stuck_search(qtbot, app_settings, library_copy, monkeypatch):
    from app.main_window import MainWindow

    w = MainWindow(app_settings)
    qtbot.addWidget(w)
    w.show()
    w.open_library(str(library_copy))
    started = threading.Event()
    _slow_search(monkeypatch, started, hold_s=4.0, honour_cancel=False)   # a model load
    type_query(qtbot, w, QUERY)
    press_return(qtbot, w)
    qtbot.waitUntil(started.is_set, timeout=10000)
    t0 = time.perf_counter()
    w.close()
    took = time.perf_counter() - t0
    assert took < 0.8, f"closing took {took:.2f} s"
    assert w.busy_jobs == ["search"]
    qtbot.waitUntil(lambda: not w.busy_jobs, timeout=30000)       # it ends on its own


def test_the_search_worker_has_its_own_connection(qtbot, window, library_copy, monkeypatch):
    from strived import engine

    seen = []
    real_search, real_explain = engine.search, engine.explain

    def search(library, *a, **k):
        seen.append(("search", threading.get_ident(), library))
        return real_search(library, *a, **k)

    def explain(library, *a, **k):
        seen.append(("explain", threading.get_ident(), library))
        return real_explain(library, *a, **k)

    monkeypatch.setattr(engine, "search", search)
    monkeypatch.setattr(engine, "explain", explain)
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    qtbot.waitUntil(lambda: any(s[0] == "explain" for s in seen), timeout=20000)
    run_search(qtbot, w, "we brake hard behind a truck")
    main = threading.get_ident()
    libs = {id(lib) for _k, _t, lib in seen}
    assert all(t != main for _k, t, _l in seen)
    assert all(lib is not w.library and lib.conn is not w.library.conn for _k, _t, lib in seen)
    assert len(libs) == 1                  # one worker connection, reused (its caches too)


# --------------------------------------------------------------------- desktop basics
def test_menu_bar_shortcuts_context_menu_marks_and_window_state(qtbot, app_settings, library_copy,
                                                                 monkeypatch):
    from app.main_window import MainWindow

    w = MainWindow(app_settings)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    activate(qtbot, w)
    titles = [a.text().replace("&", "") for a in w.menuBar().actions()]
    assert titles == ["File", "Library", "Edit", "View", "Search", "Help"]
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    # keyboard: Ctrl+Down / Ctrl+Up walk the results; Ctrl+F goes back to the query
    r0 = w.table.currentIndex().row()
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Down, Qt.KeyboardModifier.ControlModifier)
    assert w.table.currentIndex().row() == r0 + 1
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier)
    assert w.table.currentIndex().row() == r0
    qtbot.keyClick(w.player, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() in (w.query, w.query.lineEdit())
    assert w.query.lineEdit().selectedText() == QUERY             # typing replaces the query
    # marks: R, then Delete clears, Ctrl+Z brings it back, Edit → Clear all
    vid = w.model.hit(r0).video_id
    qtbot.keyClick(w.table, Qt.Key.Key_R)
    assert w.model.marks == {vid: True}
    qtbot.keyClick(w.table, Qt.Key.Key_Delete)
    assert w.model.marks == {} and not w.library.conn.execute("SELECT COUNT(*) FROM marks").fetchone()[0]
    qtbot.keyClick(w.table, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert w.model.marks == {vid: True}
    # the context menu of a result: mark, reveal the file, export
    row = w.model.row_of("gen_cutin_b")
    w.table.scrollTo(w.model.index(row, 1))
    rect = w.table.visualRect(w.model.index(row, 1))
    assert w.table.viewport().rect().contains(rect.center())
    right_click(qtbot, w.table.viewport(), rect.center())
    qtbot.waitUntil(lambda: getattr(w, "results_menu", None) is not None
                    and w.results_menu.isVisible(), timeout=3000)
    assert w.table.currentIndex().row() == row
    shot(w, "review_context_menu")
    shot(w.results_menu, "review_context_menu_popup")          # the popup is its own window
    click_menu_action(qtbot, w.results_menu, "Mark not relevant")
    assert w.model.marks.get("gen_cutin_b") is False
    opened = []
    monkeypatch.setattr("PySide6.QtGui.QDesktopServices.openUrl",
                        lambda url: opened.append(url.toLocalFile()) or True)
    right_click(qtbot, w.table.viewport(), rect.center())
    qtbot.waitUntil(lambda: w.results_menu.isVisible(), timeout=3000)
    click_menu_action(qtbot, w.results_menu, "Reveal")
    assert opened == [os.path.dirname(w.model.hit(row).path)]
    assert QApplication.clipboard().text() == w.model.hit(row).path
    right_click(qtbot, w.table.viewport(), rect.center())
    qtbot.waitUntil(lambda: w.results_menu.isVisible(), timeout=3000)
    click_menu_action(qtbot, w.results_menu, "Export")
    qtbot.waitUntil(lambda: getattr(w, "export_dialog", None) is not None
                    and w.export_dialog.isVisible(), timeout=3000)
    w.export_dialog.close()
    activate(qtbot, w)
    qtbot.mouseClick(w.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    mb = w.menuBar()
    edit = next(a for a in mb.actions() if a.text().replace("&", "") == "Edit")
    qtbot.mouseClick(mb, Qt.MouseButton.LeftButton, pos=mb.actionGeometry(edit).center())
    click_menu_action(qtbot, w.menus["Edit"], "Clear all marks")             # Edit → Clear all
    assert w.model.marks == {}
    # View → Full screen with its key (F11), and back
    qtbot.keyClick(w.table, Qt.Key.Key_F11)
    assert w.isFullScreen() and w.act_fullscreen.isChecked()
    qtbot.keyClick(w.table, Qt.Key.Key_F11)
    assert not w.isFullScreen()
    # Help → Keyboard shortcuts lists the standard keys
    dlg = w.show_shortcuts()
    text = dlg.text.toPlainText()
    for keys in ("Ctrl+O", "Ctrl+Q", "Ctrl+F", "Ctrl+Z", "F11", "Space", "Right", "Ctrl+Down"):
        assert keys in text, keys
    dlg.close()
    # window state persists: size, splitter, tab
    w.showNormal()
    screen = w.screen().availableGeometry()            # offscreen: 800 x 600
    size = (min(1200, screen.width() - 40), min(760, screen.height() - 40))
    w.resize(*size)
    qtbot.wait(20)
    size = (w.width(), w.height())                     # (the window's minimum width may win)
    w.main_split.setSizes([300, size[0] - 320])
    sizes = w.main_split.sizes()
    w.tabs.setCurrentIndex(2)
    activate(qtbot, w)
    qtbot.keyClick(w.table, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)    # File → Quit
    assert not w.isVisible()
    w2 = MainWindow(app_settings)
    qtbot.addWidget(w2)
    w2.show()
    qtbot.waitExposed(w2)
    # (the offscreen screen is 800 px wide: narrower than the window's minimum, which wins)
    assert (w2.width(), w2.height()) == (max(size[0], w2.minimumSizeHint().width()), size[1])
    assert w2.main_split.sizes()[0] == sizes[0] and w2.tabs.currentIndex() == 2
    w2.close()


def test_compare_has_a_synced_signal_plot_under_each_player(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, CUTIN_RULE)
    click_row(qtbot, w, w.model.row_of("gen_cutin_a"))
    click_row(qtbot, w, w.model.row_of("gen_cutin_b"), Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(w.table, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    cv = w.compare
    qtbot.waitUntil(lambda: len(cv.slots) == 2, timeout=20000)
    assert all(getattr(s, "plot", None) is not None and s.curves for s in cv.slots)
    starts = [s.player.frame_at(s.start_s) for s in cv.slots]
    # a click in the second clip's plot at t - t_event = +0.5 s moves every player there
    s1 = cv.slots[1]
    qtbot.waitUntil(lambda: s1.plot.isVisible() and s1.plot.height() >= 80, timeout=3000)
    qtbot.wait(50)                                               # laid out
    click_plot(qtbot, s1.plot, s1.plot.getPlotItem(), 0.5, 0.9)
    qtbot.waitUntil(lambda: cv.frames() == [s + 10 for s in starts], timeout=5000)
    assert all(abs(s.playhead.value() - cv.t_rel) < 1e-9 for s in cv.slots)
    assert abs(cv.t_rel - 0.5) < 0.05
    # the keyboard steps all of them (and their playheads)
    qtbot.keyClick(cv, Qt.Key.Key_Right)
    assert cv.frames() == [s + 11 for s in starts]
    assert all(abs(s.playhead.value() - cv.t_rel) < 1e-9 for s in cv.slots)
    for s in cv.slots:
        qtbot.waitUntil(lambda s=s: s.player.canvas.image is not None, timeout=5000)
    shot(w, "review_compare_plots")
