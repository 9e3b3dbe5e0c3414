"""Learn from marks in the app (issue 36): mark -> learn -> re-ranked -> undo, driven by real
clicks and keys on the window, over a library of synthetic videos with planted lead-vehicle
brakes (the fixture of tests/rulelib/test_learn.py); refusals and Cancel change nothing."""

import json

import numpy as np
import pytest
from PySide6.QtCore import Qt

from strived.rulelib.fit.calibrate import average_precision_pessimistic
from strived.rulelib.fit.synthetic import synthetic_corpus
from strived.rulelib.learned import FILE_NAME
from strived.rulelib.library import load_default_library
from strived.store import Library
from tests.app.conftest import click_row, run_search, shot

QUERY = "the car in front of us brakes hard"


def _library(tmp_path, n):
    recs, lab = synthetic_corpus(n, seed=1)
    folder = tmp_path / "lib"
    with Library.open(folder, create=True) as lib:
        lib.add_videos(recs)
    return folder, lab.positives["lead_brake"]


def _mark(qtbot, w, video_id, relevant):
    """Click the result's row and press R (relevant) or N (not relevant), as a user marks."""
    click_row(qtbot, w, w.model.row_of(video_id))
    qtbot.keyClick(w.table, Qt.Key.Key_R if relevant else Qt.Key.Key_N)
    assert w.model.marks.get(video_id) is relevant


def _order(w):
    return [h.video_id for h in w.response.hits]


def _ap(w, vids, pos):
    score = {h.video_id: h.score for h in w.response.hits}
    s = np.array([score.get(v, 0.0) for v in vids])
    return average_precision_pessimistic(s, np.array([v in pos for v in vids]))


def _learn(qtbot, w):
    p = w.learn_panel
    qtbot.waitUntil(p.learn_button.isEnabled, timeout=3000)
    with qtbot.waitSignal(p.finished, timeout=60000):
        qtbot.mouseClick(p.learn_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: p.dialog is not None and p.dialog.isVisible(), timeout=3000)
    return p.dialog


@pytest.fixture
def marked_window(qtbot, window, tmp_path):
    """The window on an 80-video library, QUERY searched, its first 15 results marked with the
    truth (relevant = a planted lead brake) by clicks and keys."""
    folder, pos = _library(tmp_path, 80)
    w = window
    assert w.open_library(str(folder))
    resp = run_search(qtbot, w, QUERY)
    assert resp.match["event"] == "lead_brake" and len(resp.hits) >= 15
    p = w.learn_panel
    assert not p.undo_button.isEnabled()
    top = _order(w)[:15]
    for v in top:
        _mark(qtbot, w, v, v in pos)
    qtbot.waitUntil(lambda: p.counts is not None
                    and p.counts["relevant"] + p.counts["not_relevant"] == 15, timeout=3000)
    n_rel = sum(v in pos for v in top)
    assert (f"{n_rel} relevant and {15 - n_rel} not relevant marked video(s)"
            in p.learn_button.toolTip())
    assert "at least 3 relevant and 3 not relevant are needed" in p.learn_button.toolTip()
    return w, folder, pos, top


def test_mark_learn_keep_reranks_and_undo_brings_the_order_back(qtbot, marked_window):
    w, folder, pos, top = marked_window
    p = w.learn_panel
    shipped = load_default_library().entries["lead_brake"].rule
    assert w.response.rule == shipped
    before_order, before_ap = _order(w), _ap(w, top, pos)

    d = _learn(qtbot, w)
    # the refit's progress reached the bar: one step for the fit, one per held-out marked video
    assert p.progress.maximum() == len(top) + 1 and p.progress.value() == len(top) + 1
    res = d.result
    assert res.accepted and d.keep_button.isEnabled()
    # what changed: each number in use -> refitted, the held-out check, the marked videos' ranks
    assert d.changes.rowCount() == len(res.changes) > 0
    where, was, now = (d.changes.item(0, c).text() for c in range(3))
    assert f"{where}: {was} -> {now}" == res.changes[0]
    assert "Held out" in d.check.text() and f"{res.heldout['heldout_ap']:.3f}" in d.check.text()
    assert d.ranks.rowCount() == len(top)
    shown = {d.ranks.item(r, 0).text(): d.ranks.item(r, 3).text() for r in range(d.ranks.rowCount())}
    assert set(shown) == set(top)
    assert not (folder / FILE_NAME).exists()            # nothing kept before Keep
    shot(d, "learn_dialog")

    with qtbot.waitSignal(w.search_finished, timeout=60000):
        qtbot.mouseClick(d.keep_button, Qt.MouseButton.LeftButton)
    doc = json.loads((folder / FILE_NAME).read_text())
    h = doc["events"]["tracks/lead_brake"]
    assert h["active"] == 1 and h["versions"][0]["rule"] == w.response.rule != shipped
    # re-ranked with the learned numbers: the marked videos come in the order the user marked
    assert _order(w) != before_order
    assert _ap(w, top, pos) > before_ap + 0.05
    assert "learned version 1" in p.status.text() and "version 1" in w.notice.text()
    qtbot.waitUntil(p.undo_button.isEnabled, timeout=3000)
    assert "uses learned version 1" in p.undo_button.toolTip()
    shot(w, "learn_kept")

    with qtbot.waitSignal(w.search_finished, timeout=60000):
        qtbot.mouseClick(p.undo_button, Qt.MouseButton.LeftButton)
    assert w.response.rule == shipped and _order(w) == before_order
    h = json.loads((folder / FILE_NAME).read_text())["events"]["tracks/lead_brake"]
    assert h["active"] == 0 and h["versions"][0]["undone"]     # the version is kept, undone
    assert "the shipped numbers" in p.status.text()
    qtbot.waitUntil(lambda: not p.undo_button.isEnabled(), timeout=3000)


def test_discard_and_cancel_change_nothing(qtbot, marked_window):
    w, folder, _pos, _top = marked_window
    p = w.learn_panel
    before = _order(w)
    d = _learn(qtbot, w)
    qtbot.mouseClick(d.discard_button, Qt.MouseButton.LeftButton)
    assert not d.isVisible() and "nothing changed" in p.status.text()
    # Cancel while it runs: the worker stops, the buttons come back, nothing is written
    with qtbot.waitSignal(p.stopped, timeout=60000):
        qtbot.mouseClick(p.learn_button, Qt.MouseButton.LeftButton)
        assert p.cancel_button.isVisible() and p.progress.isVisible()
        qtbot.mouseClick(p.cancel_button, Qt.MouseButton.LeftButton)
    assert "cancelled: nothing changed" in p.status.text()
    qtbot.waitUntil(lambda: not p.cancel_button.isVisible() and p.learn_button.isEnabled(), timeout=3000)
    assert not (folder / FILE_NAME).exists() and _order(w) == before


def test_too_few_marks_say_so_and_write_nothing(qtbot, window, tmp_path):
    folder, pos = _library(tmp_path, 30)
    w = window
    assert w.open_library(str(folder))
    run_search(qtbot, w, QUERY)
    p = w.learn_panel
    rel = [v for v in _order(w) if v in pos][:2]
    nrel = [v for v in _order(w) if v not in pos][:5]
    for v in rel + nrel:
        _mark(qtbot, w, v, v in pos)
    qtbot.waitUntil(lambda: "2 relevant and 5 not relevant" in p.learn_button.toolTip(), timeout=3000)
    with qtbot.waitSignal(p.refused, timeout=60000):
        qtbot.mouseClick(p.learn_button, Qt.MouseButton.LeftButton)
    box = p.message_box
    qtbot.waitUntil(box.isVisible, timeout=3000)
    assert "Too few marks to learn lead_brake: 2 relevant and 5 not relevant" in box.text()
    assert "at least 3 of each" in box.text() and "nothing was changed" in box.text()
    assert p.dialog is None and not (folder / FILE_NAME).exists()
    qtbot.mouseClick(box.button(box.StandardButton.Ok), Qt.MouseButton.LeftButton)
    assert not box.isVisible()
