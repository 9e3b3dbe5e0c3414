"""Issue 17 in the app: a sequence rule's steps and negations in the Inspect view (the list beside
the gates, a labelled band per step on the timeline); a click on a step, in the list or on its
band, selects the track that realised it and goes to its span. Driven by real clicks."""

import pytest
from PySide6.QtCore import Qt

from tests.app.conftest import BENCH, click_plot, click_row, inspect_video, rerank, run_search, shot

# step 1: a car cuts in (track 1 of the generated clips); step 2, 0-4 s later: a car far ahead
# (only track 2, at 40 m); and no pedestrian within 20 m around step 2
CUT_IN_THEN_FAR = {
    "event": "cut_in_then_far_car",
    "sequence": [
        {"name": "cut-in", "entity": {"role": "object", "class_filter": ["car"]},
         "hard_gates": [{"field": "abs_loc_x", "op": "lt", "value": 1.0}],
         "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 4.0,
                          "magnitude": 3.0, "direction": "negative"}]},
        {"name": "far car", "entity": {"role": "object", "class_filter": ["car"]},
         "gap": {"min_seconds": 0, "max_seconds": 4},
         "hard_gates": [{"field": "distance", "op": "gt", "value": 35.0}]}],
    "absent": [{"name": "pedestrian near", "entity": {"class_filter": ["pedestrian"]},
                "hard_gates": [{"field": "distance", "op": "lt", "value": 20}], "step": 1,
                "before_seconds": 1.0, "after_seconds": 1.0}]}


def _wait_inspected(qtbot, w, row):
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, row)


def _band_point(tl, lane):
    """A point on the band of ``lane`` away from the playhead (a click on it would grab it)."""
    row = tl.steps_row()
    xs, _ys = row.bands[lane].getData()
    a, b = float(xs[0]), float(xs[-1])
    x = max((a + f * (b - a) for f in (0.2, 0.5, 0.8)), key=lambda x: abs(x - tl.t_s))
    return row, x, (tl.lane_count() - 1 - lane) + 0.22         # step 1 is the top lane


@pytest.mark.skipif(not BENCH.exists(), reason="needs ../shared/data/bench-dev (real records)")
def test_real_sequence_search_shows_each_steps_track_and_span(qtbot, window, library_copy):
    """'the car ahead brakes and then we brake' on real tracks: the library's sequence event; each
    hit's steps (the lead car, then the ego) are listed and drawn; clicks select and seek."""
    w = window
    w.open_library(str(library_copy))
    resp = run_search(qtbot, w, "the car ahead brakes and then we brake")
    assert resp.match["event"] == "lead_brake_then_ego_brake"
    assert resp.rule.get("sequence")
    hit = next(h for h in resp.hits if h.steps and any(s["track"] >= 0 for s in h.steps))
    row = w.model.row_of(hit.video_id)
    w.tabs.setCurrentIndex(0)
    if w.table.currentIndex().row() == row:
        _wait_inspected(qtbot, w, (row + 1) % w.model.rowCount())
    _wait_inspected(qtbot, w, row)
    sl, tl = w.steps_list, w.timeline
    qtbot.waitUntil(sl.isVisible, timeout=3000)
    # the list and the timeline show the search's own steps (the engine's, for this hit)
    assert [s["track"] for s in w.sequence_steps] == [s["track"] for s in hit.steps]
    assert [tuple(s["span_s"]) for s in w.sequence_steps] == [tuple(s["span_s"]) for s in hit.steps]
    lead, ego = hit.steps
    a, b = lead["span_s"]
    when = f"at {a:.1f} s (one sample)" if b - a < 0.05 else f"{a:.1f}–{b:.1f} s ({b - a:.1f} s)"
    assert sl.item(0).text() == f"step 1 lead brakes: {lead['cls']} #{lead['track']} {when}"   # as measured
    assert sl.item(1).text().startswith("step 2 ego brakes: ego ")
    assert "steps" in tl.row_names and tl.lane_count() == 2
    srow = tl.steps_row()
    assert [lab.toPlainText() for lab in srow.labels[:2]] == [sl.item(0).text(), sl.item(1).text()]
    xs, ys = srow.bands[0].getData()
    assert float(xs[0]) == pytest.approx(a, abs=0.051) and float(xs[-1]) == pytest.approx(b, abs=0.051)
    assert tl.explanation.span_s == pytest.approx(hit.span_s)
    # a click on the ego step in the list: the ego selected, the playhead at its start
    rect = sl.visualItemRect(sl.item(1))
    qtbot.mouseClick(sl.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert tl.highlighted == -1 and tl.selected_lane == 1
    assert tl.t_s == pytest.approx(ego["span_s"][0])
    # a click on the lead car's band in the timeline: that car selected, the playhead at its start
    qtbot.wait(50)
    r, x, y = _band_point(tl, 0)
    click_plot(qtbot, tl, r, x, y)
    assert tl.highlighted == lead["track"] and tl.selected_lane == 0
    assert sl.currentRow() == 0
    assert tl.t_s == pytest.approx(a)
    assert "step 1 lead brakes" in tl.values_at(x, "steps")
    shot(w, "sequence_real_steps")


def test_user_sequence_rule_step_click_selects_its_track_and_seeks(qtbot, window, library_copy):
    """A user's sequence rule on a clip with video: step 1 by the car that cuts in (#1), step 2 by
    the far car (#2), a clear negation; clicks on a step move the player to its span."""
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w, "a car cuts in from the right")
    resp = rerank(qtbot, w, CUT_IN_THEN_FAR)
    hit = next(h for h in resp.hits if h.video_id == "gen_cutin_a")
    assert [s["track"] for s in hit.steps] == [1, 2]
    assert hit.absent and hit.absent[0]["track"] is None and hit.absent[0]["factor"] == 1.0
    inspect_video(qtbot, w, "gen_cutin_a")
    sl, tl = w.steps_list, w.timeline
    qtbot.waitUntil(sl.isVisible, timeout=3000)
    assert sl.count() == 3
    assert "car #1" in sl.item(0).text() and "car #2" in sl.item(1).text()
    assert sl.item(2).text().startswith("not pedestrian near in ") and "none there" in sl.item(2).text()
    assert "×1.00" in sl.item(2).text()
    assert tl.lane_count() == 3
    far = hit.steps[1]
    # the far car's step in the list: track 2 in the timeline and the player, the frame at its start
    rect = sl.visualItemRect(sl.item(1))
    qtbot.mouseClick(sl.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert tl.highlighted == 2 and w.player.canvas.highlight == 2
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - round(far["span_s"][0] * 20)) <= 1, timeout=5000)
    # the cut-in's band on the timeline: track 1, its start
    qtbot.wait(50)
    r, x, y = _band_point(tl, 0)
    click_plot(qtbot, tl, r, x, y)
    cut = hit.steps[0]
    assert tl.highlighted == 1 and w.player.canvas.highlight == 1 and sl.currentRow() == 0
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - round(cut["span_s"][0] * 20)) <= 1, timeout=5000)
    shot(w, "sequence_user_rule")
    # a single-pattern rule afterwards: no steps list, no steps row
    rerank(qtbot, w, {k: v for k, v in CUT_IN_THEN_FAR["sequence"][0].items() if k != "name"})
    inspect_video(qtbot, w, "gen_cutin_a")
    assert not sl.isVisible() and "steps" not in tl.row_names
    assert all(not b.isVisible() for r in tl.rows for b in r.bands)
