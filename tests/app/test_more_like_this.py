"""Issue 36, part 2 (app): More like this from a result's context menu and from a span selected
on the timeline (Shift+drag), run in a worker with Cancel; the moments are listed in the results
table with what was compared. The library is `tests/retrieval/test_similar.py`'s: cut-ins planted
in v000-v003 (and v005, its distance never measured), a cut-out in v004."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.results import ResultsModel
from app.workers import Worker
from tests.app.conftest import activate, click_menu_action, click_row, plot_pos, rerank, right_click, shot
from tests.retrieval.test_similar import CUT_IN_TRACK, NO_DISTANCE, PLANTED, lib_dir  # noqa: F401

#: a rule only the planted cut-ins meet in full: a car ending up in our lane after moving 3 m right
RULE = {"event": "cut_in_left", "entity": {"role": "object", "class_filter": ["car"],
        "selection": "any", "agg_mode": "any"},
        "hard_gates": [{"field": "abs_loc_x", "op": "lt", "value": 1.0}],
        "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 3.0,
                         "magnitude": 3.0, "direction": "positive", "weight": 1.0}]}
COPIES = {**PLANTED, **NO_DISTANCE}          # video -> start of its cut-in (s)


def _searched(qtbot, w, lib_dir):  # noqa: F811
    w.open_library(str(lib_dir))
    resp = rerank(qtbot, w, RULE)
    assert resp.hits[0].video_id in COPIES and not w.model.similar
    return resp


def _row_menu(qtbot, w, video_id):
    row = w.model.row_of(video_id)
    w.table.scrollTo(w.model.index(row, 1))
    pos = w.table.visualRect(w.model.index(row, 1)).center()
    right_click(qtbot, w.table.viewport(), pos)
    qtbot.waitUntil(lambda: getattr(w, "results_menu", None) is not None and w.results_menu.isVisible(),
                    timeout=3000)
    return w.results_menu


def _overlaps(hit, t0, t1) -> bool:
    return hit.span_s[0] < t1 and hit.span_s[1] > t0


def _assert_copies_first(w, example: str):
    top = [w.model.hit(r) for r in range(4)]
    assert {h.video_id for h in top} == set(COPIES) - {example}
    for h in top:       # each row's span is the moment's: over its planted cut-in, on that car
        assert _overlaps(h, COPIES[h.video_id], COPIES[h.video_id] + 3.0), (h.video_id, h.span_s)
        assert h.peak_track == CUT_IN_TRACK
    assert "v004" not in {h.video_id for h in top}            # the cut-out is not like a cut-in
    own = [h for h in w.model.hits if h.video_id == example]
    t = COPIES[example]
    assert all(not _overlaps(h, t + 0.5, t + 2.5) for h in own)  # the example itself is left out


def test_more_like_this_from_a_results_context_menu(qtbot, window, lib_dir):  # noqa: F811
    w = window
    _searched(qtbot, w, lib_dir)
    hit = w.model.hit(w.model.row_of("v000"))
    assert hit.peak_track == CUT_IN_TRACK
    menu = _row_menu(qtbot, w, "v000")
    shot(menu, "more_like_this_menu")
    with qtbot.waitSignal(w.similar.finished, timeout=30000) as b:
        click_menu_action(qtbot, menu, "More like this")
    sim = b.args[0]
    assert sim.example["video_id"] == "v000" and sim.example["track_id"] == CUT_IN_TRACK
    assert (sim.example["t0"], sim.example["t1"]) == pytest.approx(hit.span_s)
    _assert_copies_first(w, "v000")
    # the line above the list says what was compared and that the dense text was not available
    head = w.results_label.text()
    assert head.startswith(f"{len(w.model.hits)} moment(s) like v000 {hit.span_s[0]:.1f}–"
                           f"{hit.span_s[1]:.1f} s, car #{CUT_IN_TRACK}")
    assert "signals: distance, loc_x, lane_rel, speed, accel, yaw_rate" in head
    assert "dense: not available (the dense index is empty" in head
    # the evidence columns mean what their titles say: a signal distance, no rule, no text
    m = w.model
    assert m.headerData(ResultsModel.C_RULE, Qt.Orientation.Horizontal) == "Signals"
    assert "0 = the same values" in m.headerData(ResultsModel.C_RULE, Qt.Orientation.Horizontal,
                                                  Qt.ItemDataRole.ToolTipRole)
    cell = m.data(m.index(0, ResultsModel.C_RULE))
    assert cell.startswith("dist 0.0") and cell.endswith("· #1")
    assert float(cell.split()[1]) == pytest.approx(sim.moments[0].distance, abs=0.005)
    tip = m.data(m.index(0, ResultsModel.C_RULE), Qt.ItemDataRole.ToolTipRole)
    assert f"car #{CUT_IN_TRACK}" in tip and "signal distance" in tip
    assert m.data(m.index(0, ResultsModel.C_DENSE)) == "–"
    assert m.data(m.index(0, ResultsModel.C_RELEVANCE)) == "–"          # unknown, not 0
    assert [h.per_source["signals"]["distance"] for h in m.hits] == \
        sorted(h.per_source["signals"]["distance"] for h in m.hits)
    # Inspect goes to the first moment: no rule to explain, its track selected in the player
    qtbot.waitUntil(lambda: "More like this" in w.timeline.title.text(), timeout=10000)
    assert w.player.canvas.highlight == CUT_IN_TRACK
    shot(w, "more_like_this_results")
    # a new search replaces the moments
    resp = rerank(qtbot, w, RULE)
    assert w.model.hits == resp.hits and not w.model.similar
    assert m.headerData(ResultsModel.C_RULE, Qt.Orientation.Horizontal) == "Rule"


def _shift_drag(qtbot, timeline, row, t_from, t_to, shift=True):
    """Press, move in steps and release over ``row`` from time ``t_from`` to ``t_to`` (Shift held
    on every event, as the window system sends them while the key is down)."""
    mods = Qt.KeyboardModifier.ShiftModifier if shift else Qt.KeyboardModifier.NoModifier
    lo, hi = row.plot.getViewBox().viewRange()[1]
    y = lo + 0.2 * (hi - lo)
    vp = timeline.view.viewport()
    start, end = plot_pos(timeline, row, t_from, y), plot_pos(timeline, row, t_to, y)
    qtbot.mouseMove(vp, start)
    qtbot.wait(30)
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, mods, start)
    for k in range(1, 9):
        qtbot.wait(30)
        p = start + (end - start) * (k / 8)
        ev = QMouseEvent(QEvent.Type.MouseMove, QPointF(p), QPointF(vp.mapToGlobal(p)),
                         Qt.MouseButton.NoButton, Qt.MouseButton.LeftButton, mods)
        QApplication.sendEvent(vp, ev)
    qtbot.wait(30)
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, mods, end)
    qtbot.wait(30)


def test_more_like_this_from_a_timeline_selection(qtbot, window, lib_dir):  # noqa: F811
    w = window
    _searched(qtbot, w, lib_dir)
    w.tabs.setCurrentIndex(0)
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, w.model.row_of("v001"))
    tl = w.timeline
    assert tl.explanation.video_id == "v001" and tl.highlighted == CUT_IN_TRACK
    button = tl.selector.button
    assert not button.isEnabled() and "Shift+drag" in button.toolTip()
    row = tl.rows[0]
    # a plain drag pans the time axis as before: no selection
    x_before = row.plot.getViewBox().viewRange()[0]
    _shift_drag(qtbot, tl, row, 12.0, 10.0, shift=False)
    assert tl.selector.span is None and not button.isEnabled()
    assert row.plot.getViewBox().viewRange()[0] != pytest.approx(x_before)
    # Shift+drag selects the span on every row; the button says what it will compare
    _shift_drag(qtbot, tl, row, 11.0, 14.0)
    a, b = tl.selector.span
    assert a == pytest.approx(11.0, abs=0.15) and b == pytest.approx(14.0, abs=0.15)
    assert all(it.isVisible() and it.getRegion() == pytest.approx((a, b))
               for r, it in zip(tl.rows, tl.selector.items) if r.in_layout)
    assert button.isEnabled() and button.text() == f"More like this: {a:.1f}–{b:.1f} s, car #{CUT_IN_TRACK}"
    shot(w, "more_like_this_timeline_selection")
    with qtbot.waitSignal(w.similar.finished, timeout=30000) as blk:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    sim = blk.args[0]
    assert sim.example["video_id"] == "v001" and sim.example["track_id"] == CUT_IN_TRACK
    assert (sim.example["t0"], sim.example["t1"]) == pytest.approx((a, b))
    _assert_copies_first(w, "v001")
    assert w.results_label.text().startswith(f"{len(w.model.hits)} moment(s) like v001 {a:.1f}–{b:.1f} s")


def test_a_too_short_selection_is_said_not_raised(qtbot, window, lib_dir):  # noqa: F811
    w = window
    _searched(qtbot, w, lib_dir)
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, w.model.row_of("v002"))
    tl = w.timeline
    before = list(w.model.hits)
    _shift_drag(qtbot, tl, tl.rows[0], 3.0, 3.3)                  # 0.3 s: under the 0.4 s needed
    assert tl.selector.span is not None
    with qtbot.waitSignal(w.similar.failed, timeout=30000) as blk:
        qtbot.mouseClick(tl.selector.button, Qt.MouseButton.LeftButton)
    assert "too short" in blk.args[0]
    assert w.presenter.history[-1][0] == "More like this failed"
    assert "Traceback" not in w.presenter.last_dialog.message_label.text()
    assert w.model.hits == before and not w.similar.isVisible()     # the list shown stays


def test_cancel_keeps_the_list_and_shows_nothing_later(qtbot, window, lib_dir):  # noqa: F811
    w = window
    resp = _searched(qtbot, w, lib_dir)
    gate = threading.Event()
    for how in ("button", "esc"):
        # the library worker is busy (a long job): More like this waits in its queue
        blocker = w.jobs.submit(Worker(gate.wait, 20, pass_progress=False, pass_cancel=False))
        click_menu_action(qtbot, _row_menu(qtbot, w, "v000"), "More like this")
        qtbot.waitUntil(w.similar.isVisible, timeout=3000)
        job = w.similar.worker
        assert "Looking for moments like v000" in w.similar.label.text()
        with qtbot.waitSignal(w.similar.stopped, timeout=3000):
            if how == "button":
                qtbot.mouseClick(w.similar.cancel_button, Qt.MouseButton.LeftButton)
            else:
                activate(qtbot, w)
                qtbot.keyClick(w.table, Qt.Key.Key_Escape)
        assert not w.similar.isVisible() and w.similar.worker is None     # idle at once
        assert "cancelled" in w.statusBar().currentMessage()
        gate.set()
        qtbot.waitUntil(lambda: blocker.is_done and job.is_done, timeout=10000)
        qtbot.wait(100)
        assert w.model.hits == resp.hits and not w.model.similar          # nothing shown later
        gate.clear()


def test_moments_with_video_files_and_dense_text(qtbot, window, library_copy):
    """The app's real-clip library (its dense index built): the text is compared too, and Inspect
    plays each moment from its own span with its track selected."""
    from tests.app.conftest import CUTIN_RULE, run_search

    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, CUTIN_RULE)
    hit = w.model.hit(w.model.row_of("gen_cutin_a"))
    with qtbot.waitSignal(w.similar.finished, timeout=60000):
        click_menu_action(qtbot, _row_menu(qtbot, w, "gen_cutin_a"), "More like this")
    assert w.results_label.text().startswith(
        f"{len(w.model.hits)} moment(s) like gen_cutin_a {hit.span_s[0]:.1f}–{hit.span_s[1]:.1f} s, car #1")
    assert "dense: used (the span's text against" in w.results_label.text()
    m = w.model
    first = m.hit(0)
    assert first.video_id == "gen_cutin_b" and first.peak_track == 1   # the other generated cut-in
    assert set(first.per_source) == {"signals", "dense"}
    dense = first.per_source["dense"]
    assert 0.9 < dense["score"] <= 1.0 and dense["of"] > 10
    assert m.data(m.index(0, ResultsModel.C_DENSE)) == f"cos {dense['score']:.2f} · 1/{dense['of']}"
    assert "example span's text" in m.data(m.index(0, ResultsModel.C_DENSE), Qt.ItemDataRole.ToolTipRole)
    assert m.data(m.index(0, ResultsModel.C_BM25)) == "–"
    # Inspect plays the moment from its own span, its car selected
    qtbot.waitUntil(lambda: w.player.canvas.image is not None and w.player.canvas.highlight == 1,
                    timeout=10000)
    assert w.player.frame_idx == w.player.frame_at(first.span_s[0])
    assert w.player.span_frames[0] == w.player.frame_at(first.span_s[0])
    shot(w, "more_like_this_dense")
    # a click on the Signals header sorts by the distance, closest first (the fused order mixes in
    # the text's ranks)
    fused = [h.video_id for h in m.hits]
    w.table.scrollTo(m.index(0, ResultsModel.C_RULE))
    hh = w.table.horizontalHeader()
    x = hh.sectionViewportPosition(ResultsModel.C_RULE) + hh.sectionSize(ResultsModel.C_RULE) // 2
    qtbot.mouseClick(hh.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, hh.height() // 2))
    dist = [h.per_source["signals"]["distance"] for h in m.hits if "signals" in h.per_source]
    assert dist == sorted(dist) and [h.video_id for h in m.hits] != fused
