"""Unknown stays unknown in Inspect: a video the rule cannot judge (its speed was not estimated)
shows `n/a` in the table and "rule score unknown" in the timeline, never the 0 the scorer
computes without the field."""

import numpy as np
from PySide6.QtCore import Qt

from tests.app.conftest import click_row, rerank, run_search
from tests.core.synth import synth_video
from tests.core.test_unknown_not_zero import RULE


def _library(tmp_path):
    from strived.retrieval.sources import ensure_text_index
    from strived.store import Library

    with Library.open(tmp_path / "lib", create=True) as lib:
        with_speed = synth_video("can", seed=1)
        no_speed = synth_video("video", seed=2)
        no_speed.ego["speed"][:] = np.nan
        no_speed.ego["accel"][:] = np.nan
        no_speed.info.attrs["availability"] = {"speed": {"source": "video", "reason": "no road texture"}}
        lib.add_videos([with_speed, no_speed])
        ensure_text_index(lib, dense=False)
    return tmp_path / "lib"


def inspect_records(qtbot, w, video_id):
    """Click a records-only result's row (no video file to show) and wait for its explanation."""
    w.tabs.setCurrentIndex(0)
    row = w.model.row_of(video_id)
    current = w.table.currentIndex()
    if current.isValid() and current.row() == row and w.model.rowCount() > 1:
        # already selected: a click would start nothing (and the wait would catch a late signal
        # of the inspection that showing the results started); select another row first
        with qtbot.waitSignal(w.inspect_finished, timeout=20000):
            click_row(qtbot, w, 1 if row == 0 else 0)
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, row)


def test_inspect_says_unknown_not_zero(qtbot, window, tmp_path):
    w = window
    assert w.open_library(str(_library(tmp_path)))
    run_search(qtbot, w, "a car and a truck")
    resp = rerank(qtbot, w, RULE)
    assert "video" in [h.video_id for h in resp.hits]
    m = w.model
    row = m.row_of("video")
    assert m.data(m.index(row, m.C_RULE)) == "n/a"
    assert "not estimated" in m.data(m.index(row, m.C_RULE), Qt.ItemDataRole.ToolTipRole)
    inspect_records(qtbot, w, "video")
    title = w.timeline.title.text()
    assert "rule score unknown (speed not estimated" in title and "rule score 0" not in title
    inspect_records(qtbot, w, "can")                       # a judged video shows its number again
    assert "rule score unknown" not in w.timeline.title.text() and "rule score " in w.timeline.title.text()


def test_step_text_says_what_was_measured():
    from app.timeline_text import step_text

    one = {"step": 0, "name": "lead brakes", "track": 3, "cls": "car", "span_s": [2.0, 3.5]}
    two = {"step": 1, "name": "ego brakes", "track": -1, "cls": None, "span_s": [3.0, 3.0]}
    assert step_text(one).endswith("2.0–3.5 s (1.5 s)")
    t = step_text(two, one)
    assert "at 3.0 s (one sample)" in t and "begins before step 1 ends (3.5 s)" in t and "0.0 s" not in t
