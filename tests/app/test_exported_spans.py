"""Issue 14: "already exported" is per span, not per video. A video with two events (a car cuts
in from the right at 0.5-1.5 s, another from the left at 3-4 s): exporting the first event's
result marks that span only; the other event's result of the same video shows "○" (other spans
exported) until it is exported too. Old per-video records (kept in the library's metadata by the
previous app) still show, and move into the store at the next export. Real clicks and keys
through the export dialog; the marks are read back after the library is opened again."""

import copy

from PySide6.QtCore import Qt

from tests.app.conftest import (CUTIN_RULE, activate, click_row, rerank, run_search, set_spin, shot,
                                type_text)

VID = "gen_two_events"
RIGHT = copy.deepcopy(CUTIN_RULE)
RIGHT["soft_scores"][0]["window_seconds"] = 1.0          # the 1 s of the cut-in: 0.5-1.5 s
LEFT = copy.deepcopy(RIGHT)
LEFT["event"] = "cut_in_left"
LEFT["soft_scores"][0]["direction"] = "positive"         # 3.0-4.0 s


def two_event_records(video_id, path, n=100, fps=20.0):
    """Records for a 5 s clip: track 1 cuts in from the right at 0.5-1.5 s, track 3 from the left
    at 3.0-4.0 s."""
    from strived.records import VideoRecords

    frames = []
    for i in range(0, n, 2):
        t = i / fps
        f1 = min(1.0, max(0.0, (t - 0.5) / 1.0))
        f3 = min(1.0, max(0.0, (t - 3.0) / 1.0))
        frames.append({"i": i, "t": t, "ego": {"speed": 12.0, "yaw_rate": 0.0, "accel": 0.0}, "objects": [
            {"track": 1, "cls": "car", "bbox": [400.0, 200.0, 480.0, 245.0], "distance": 12.0,
             "loc_x": 3.5 * (1 - f1), "loc_z": 12.0, "lane_rel": 1 if f1 < 0.5 else 0, "bbox_area": 3600.0},
            {"track": 3, "cls": "car", "bbox": [160.0, 200.0, 240.0, 245.0], "distance": 15.0,
             "loc_x": -3.5 * (1 - f3), "loc_z": 15.0, "lane_rel": -1 if f3 < 0.5 else 0,
             "bbox_area": 3600.0}]})
    return VideoRecords.from_json_dict({
        "format": "strived.records/1", "frames": frames,
        "video": {"id": video_id, "path": str(path), "fps": fps, "n_frames": n, "width": 640,
                  "height": 360, "source": "generated test clip"}})


def _add_two_event_video(library_copy, clips_dir, legacy=None):
    from strived.store.library import Library

    lib = Library.open(library_copy)
    lib.add_video(two_event_records(VID, clips_dir[1]["gen_plain"][0]))   # its 5 s clip file
    from strived.retrieval.sources import ensure_text_index

    ensure_text_index(lib)                            # as indexing or import leaves a library
    if legacy is not None:                            # as the previous app version left it:
        lib.meta_set("app_exports", legacy)           # its records in the metadata, no table
        lib.conn.execute("DROP TABLE exports")
    lib.close()


def _export_marked(qtbot, w, folder, clips=True):
    """File → Export marked results (Ctrl+Shift+E), no lead-in/out, into ``folder``."""
    before = getattr(w, "export_dialog", None)
    activate(qtbot, w)                  # the user is back in the main window (the dialog closed)
    qtbot.keyClick(w.table, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    dlg = w.export_dialog
    assert dlg is not before, "the shortcut opened a new export dialog"
    qtbot.waitExposed(dlg)
    type_text(qtbot, dlg.folder, str(folder))
    set_spin(qtbot, dlg.lead_in, "0")
    set_spin(qtbot, dlg.lead_out, "0")
    dlg.clips.setCurrentIndex(1 if clips else 0)
    qtbot.mouseClick(dlg.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.report is not None, timeout=60000)
    rows = dlg.exported_rows
    dlg.close()
    return rows


def test_the_exported_mark_is_per_span(qtbot, window, library_copy, clips_dir, tmp_path):
    from app import library_ops as ops

    _add_two_event_video(library_copy, clips_dir)
    w = window
    w.open_library(str(library_copy))
    m = w.model
    cell = lambda vid=VID: m.data(m.index(m.row_of(vid), m.C_EXPORTED))  # noqa: E731
    tip = lambda vid=VID: m.data(m.index(m.row_of(vid), m.C_EXPORTED), Qt.ItemDataRole.ToolTipRole)  # noqa: E731
    run_search(qtbot, w)
    resp = rerank(qtbot, w, RIGHT)
    early = next(h.span_s for h in resp.hits if h.video_id == VID)
    assert early[0] < 1.5 and early[1] <= 2.0 and cell() == ""
    # 1. mark the early event relevant (R) and export the marked results: that span is marked
    click_row(qtbot, w, m.row_of(VID))
    qtbot.keyClick(w.table, Qt.Key.Key_R)
    rows = _export_marked(qtbot, w, tmp_path / "first")
    assert [(r["video_id"], r["start_s"], r["end_s"]) for r in rows] == [(VID, *early)]
    assert cell() == "✓" and "This span" in tip() and "first" in tip()
    assert cell("gen_cutin_a") == ""
    # 2. the same video's other event (the left cut-in, 3-4 s): not this span, other spans were
    resp = rerank(qtbot, w, LEFT)
    late = next(h.span_s for h in resp.hits if h.video_id == VID)
    assert late[0] >= early[1] and cell() == "○"
    t = tip()
    assert "was not exported yet" in t and "Other spans of this video were exported (1×)" in t
    w.table.scrollTo(m.index(m.row_of(VID), m.C_FILE))
    shot(w, "exported_other_span")
    # 3. export it too (its mark R is kept for this query): now both are marked, each on its span
    click_row(qtbot, w, m.row_of(VID))
    rows = _export_marked(qtbot, w, tmp_path / "second")
    assert [(r["start_s"], r["end_s"]) for r in rows if r["video_id"] == VID] == [late]
    assert cell() == "✓" and "Other spans of this video were exported (1×)" in tip()
    rerank(qtbot, w, RIGHT)
    assert cell() == "✓" and "first" in tip().split("Other spans")[0]
    # 4. kept in the library, per span, after it is opened again
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, LEFT)
    assert cell() == "✓"
    spans = [(e["start_s"], e["end_s"]) for e in ops.exports(w.library)[VID]]
    assert spans == [early, late]
    w.table.scrollTo(m.index(m.row_of(VID), m.C_FILE))
    shot(w, "exported_per_span")


def test_old_per_video_records_show_and_move_to_the_store(qtbot, window, library_copy, clips_dir,
                                                          tmp_path):
    from strived.store.library import Library

    legacy = {VID: [{"at": "2025-05-01 09:00", "folder": "/old/out", "clip": "/old/out/c.mp4",
                     "start_s": 0.2, "end_s": 1.2, "query": "a car cuts in from the right"}],
              "gen_cutin_a": [{"at": "2025-05-01 09:00", "folder": "/old/out", "clip": None}]}
    _add_two_event_video(library_copy, clips_dir, legacy)
    w = window
    w.open_library(str(library_copy))
    m = w.model
    cell = lambda vid=VID: m.data(m.index(m.row_of(vid), m.C_EXPORTED))  # noqa: E731
    run_search(qtbot, w)
    rerank(qtbot, w, RIGHT)
    assert cell() == "✓"                         # the old record's span (0.2-1.2 s) overlaps
    assert cell("gen_cutin_a") == "✓"            # an old record without a span: the whole video
    rerank(qtbot, w, LEFT)
    assert cell() == "○"
    # the next export moves the old records into the store's table; the marks stay
    click_row(qtbot, w, m.row_of(VID))
    qtbot.keyClick(w.table, Qt.Key.Key_R)
    _export_marked(qtbot, w, tmp_path / "new", clips=False)
    assert cell() == "✓" and cell("gen_cutin_a") == "✓"
    lib = Library.open(library_copy)
    assert lib.meta_get("app_exports") is None
    got = lib.exported_spans()
    lib.close()
    assert [e["clip"] for e in got[VID]] == ["/old/out/c.mp4", None]
    assert got["gen_cutin_a"][0]["start_s"] is None
