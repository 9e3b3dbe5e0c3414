"""App follow-ups (issues 12, 14, 15, 16): what the results table says, the gates' witnesses in
the Inspect view, footage maintenance from the menus. Driven like a user (QTest clicks and keys)."""

import os
import shutil

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.app.conftest import CUTIN_RULE, answer_dialogs, click_button, click_row, clip_records, inspect_video, rerank, run_search, shot

# gate 1 is met by the car that cuts in (the scoring track), gate 2 only by the far car (#2, 40 m)
FAR_GATE = dict(CUTIN_RULE, hard_gates=CUTIN_RULE["hard_gates"] + [
    {"field": "distance", "op": "gt", "value": 35.0}])


def test_results_table_shows_relevance_and_each_sources_evidence(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    resp = run_search(qtbot, w)
    m = w.model
    d = lambda r, c: m.data(m.index(r, c))  # noqa: E731
    tip = lambda r, c: m.data(m.index(r, c), Qt.ItemDataRole.ToolTipRole)  # noqa: E731
    head = lambda c, role=Qt.ItemDataRole.DisplayRole: m.headerData(c, Qt.Orientation.Horizontal, role)  # noqa: E731
    assert head(m.C_RELEVANCE) == "Relevance" and "Score" not in [head(c) for c in range(m.columnCount())]
    assert "probability" in head(m.C_RELEVANCE, Qt.ItemDataRole.ToolTipRole)
    assert "rule score" in head(m.C_RULE, Qt.ItemDataRole.ToolTipRole)
    assert "cosine" in head(m.C_DENSE, Qt.ItemDataRole.ToolTipRole)
    for r, h in enumerate(resp.hits):
        rel = h.relevance
        assert d(r, m.C_RELEVANCE) == ("–" if rel is None else f"{rel:.0%}")
        assert f"{h.score:.4f}" not in d(r, m.C_RELEVANCE)       # never the fused rank score
        ps = h.per_source.get("rule") or {}
        if ps.get("rank") and ps.get("status") != "cannot evaluate":
            pos = (f"={ps['tie']['first']}/{ps['of']} ({ps['tie']['size']} tied)" if ps.get("tie")
                   else f"{ps['rank']}/{ps['of']}")     # a tie is shown as one, not as a position
            assert d(r, m.C_RULE) == f"{ps['score']:.2f} · {pos}"   # the absolute score, not a percentile
        ps = h.per_source.get("dense") or {}
        if ps.get("rank"):
            assert d(r, m.C_DENSE) == f"cos {ps['score']:.2f} · {ps['rank']}/{ps['of']}"
        ps = h.per_source.get("bm25") or {}
        if ps.get("rank"):
            assert d(r, m.C_BM25) == f"{ps['rank']}/{ps['of']}"
    ev = resp.match["event"]
    cell = d(0, m.C_EVENT)
    assert cell.startswith(ev) and "(0." not in cell
    if resp.match.get("p_event") is not None:
        assert f"event {resp.match['p_event']:.0%}" in cell
        assert f"rule as is {resp.match['confidence']:.0%}" in cell
    assert "τ = 0.6" in tip(0, m.C_EVENT) or "uncalibrated" in tip(0, m.C_EVENT)
    shot(w, "followup_results_relevance")


def test_inspect_shows_gate_witnesses_and_a_click_selects_the_track(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    rerank(qtbot, w, FAR_GATE)
    inspect_video(qtbot, w, "gen_cutin_a")
    gl = w.gates_list
    qtbot.waitUntil(gl.isVisible, timeout=3000)
    assert gl.count() == 2
    t0, t1 = gl.item(0).text(), gl.item(1).text()
    assert t0.startswith("abs_loc_x") and "car #1" in t0 and "the scoring track" in t0
    assert t1.startswith("distance") and "car #2" in t1 and "not the scoring track" in t1
    assert " s (" in t1                                   # when: first–last second, and how much
    assert w.timeline.highlighted == 1 and w.player.canvas.highlight == 1
    first_s = w.gate_witnesses[1]["first_s"]
    # a click on the far car's gate selects it in the timeline and the player, and goes there
    rect = gl.visualItemRect(gl.item(1))
    qtbot.mouseClick(gl.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert w.timeline.highlighted == 2 and w.player.canvas.highlight == 2
    qtbot.waitUntil(lambda: abs(w.player.frame_idx - round(first_s * 20)) <= 1, timeout=5000)
    rect = gl.visualItemRect(gl.item(0))
    qtbot.mouseClick(gl.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert w.timeline.highlighted == 1 and w.player.canvas.highlight == 1
    shot(w, "followup_gate_witnesses")


# --------------------------------------------------------------------- footage maintenance
def _menu(qtbot, w, title, entry):
    """Open the menu bar's ``title`` menu with a click and click ``entry`` in it."""
    from tests.app.conftest import activate, click_menu_action

    if QApplication.activeWindow() is not w:
        activate(qtbot, w)
    mb = w.menuBar()
    act = next(a for a in mb.actions() if a.text().replace("&", "") == title)
    qtbot.mouseClick(mb, Qt.MouseButton.LeftButton, pos=mb.actionGeometry(act).center())
    return click_menu_action(qtbot, act.menu(), entry)


def _wait_answered(qtbot, met, n, timeout=20000):
    """Until ``n`` dialogs were answered and all of them are closed (or deleted)."""
    from shiboken6 import isValid

    qtbot.waitUntil(lambda: len(met) >= n and not any(isValid(d) and d.isVisible() for d in met),
                    timeout=timeout)


@pytest.fixture()
def footage_library(tmp_path, clips_dir):
    """A library of the 3 generated clips in folder A, indexed with their content hashes (as
    indexing records them), so a moved file can be recognised."""
    from strived.indexing.state import content_hash
    from strived.store.library import Library

    a = tmp_path / "A"
    a.mkdir()
    recs = []
    for vid, (p, boxes, cut) in clips_dir[1].items():
        shutil.copy(p, a / p.name)
        recs.append(clip_records(vid, a / p.name, boxes, 20.0, cut))
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(recs)
    with lib.transaction():
        for r in recs:
            f = r.info.path
            lib.conn.execute("INSERT INTO files(path, video_id, size, mtime, hash, status) "
                             "VALUES (?,?,?,?,?,?)", (f, r.info.id, os.path.getsize(f),
                                                      os.path.getmtime(f), content_hash(f), "done"))
    lib.close()
    return tmp_path


def test_library_menu_finds_missing_relinks_and_removes_videos(qtbot, window, footage_library,
                                                               monkeypatch):
    from strived.maintenance.footage import missing_videos

    w = window
    root = footage_library
    assert w.open_library(str(root / "lib"))
    assert [a.text().replace("&", "") for a in w.menuBar().actions()][:2] == ["File", "Library"]
    picked: list[str] = []
    monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getExistingDirectory",
                        lambda *a, **k: picked.pop(0))
    paths = lambda: {v["id"]: v["path"] for v in w.library.list_videos()}  # noqa: E731
    # 1. the footage moved A -> B: Find missing videos lists them, then finds them by content
    os.rename(root / "A", root / "B")
    picked.append(str(root / "B"))
    texts: list[str] = []

    def look(d):
        texts.append(d.text())
        shot(d, "followup_missing_videos")
        click_button(qtbot, d, "Look for them in a folder")

    def close(d):
        texts.append(d.text())
        click_button(qtbot, d, "Close")

    met = answer_dialogs(qtbot, look, close)
    _menu(qtbot, w, "Library", "Find missing videos")
    _wait_answered(qtbot, met, 2)
    assert texts[0].startswith("3 videos of this library have no file where they were indexed")
    assert texts[1] == f"Looked in {root / 'B'}: 3 videos relinked."
    assert all(p.startswith(str(root / "B")) for p in paths().values())
    assert not missing_videos(w.library)
    # 2. moved again B -> C: Relink a moved folder offers the old folder, asks where it is now
    os.rename(root / "B", root / "C")
    picked.append(str(root / "C"))
    offered: list[str] = []

    def old_folder(d):
        offered.append(d.textValue())
        click_button(qtbot, d, "OK")

    met = answer_dialogs(qtbot, old_folder, close)
    _menu(qtbot, w, "Library", "Relink a moved folder")
    _wait_answered(qtbot, met, 2)
    assert offered == [str(root / "B")]
    assert texts[-1] == f"{root / 'B'} → {root / 'C'}: 3 videos relinked."
    assert all(p.startswith(str(root / "C")) for p in paths().values())
    # 3. remove the selected result's video: asked first; Cancel keeps it, Remove removes it
    run_search(qtbot, w)
    row = w.model.rowCount() - 1
    vid = w.model.hit(row).video_id
    click_row(qtbot, w, row)
    assert w.selected_rows() == [row], (row, w.selected_rows(), w.model.rowCount())
    n_before = w.model.rowCount()
    met = answer_dialogs(qtbot, lambda d: click_button(qtbot, d, "Cancel"))
    _menu(qtbot, w, "Library", "Remove selected videos")
    _wait_answered(qtbot, met, 1)
    assert vid in paths() and w.model.rowCount() == n_before
    asked: list[str] = []

    def confirm(d):
        asked.append(d.text() + " " + d.informativeText())
        shot(d, "followup_remove_confirm")
        click_button(qtbot, d, "Remove 1")

    met = answer_dialogs(qtbot, confirm, close)
    _menu(qtbot, w, "Library", "Remove selected videos")
    _wait_answered(qtbot, met, 2)
    assert "Remove 1 video from this library?" in asked[0] and "stay on disk" in asked[0]
    assert texts[-1].startswith("1 video removed from the library")
    assert vid not in paths() and os.path.exists(root / "C" / f"{vid}.mp4")
    assert w.model.row_of(vid) == -1 and w.model.rowCount() == n_before - 1
    assert "2 videos" in w.stats_label.text()
    shot(w, "followup_after_remove")


# --------------------------------------------------------------------- issue 16: the app's structure
# (import cycles: tests/core/test_architecture.py, for the engine and the app alike)
def test_the_app_writes_marks_and_saved_searches_through_the_store():
    """No SQL on the marks and saved_searches tables in the app: the store writes them."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "app"
    for p in root.glob("*.py"):
        text = p.read_text()
        assert not re.search(r"(INSERT|DELETE|UPDATE|SELECT)[^\"']*\b(marks|saved_searches)\b", text), p.name


def test_a_saved_search_reopens_with_its_relevance_and_evidence(tmp_path):
    from app import library_ops as ops
    from app.results import ResultsModel
    from strived.engine import SearchHit, SearchResponse
    from strived.store.library import Library

    hit = SearchHit(1, "v1", None, 0.03, (1.0, 2.0), {"rule": {"rank": 1, "of": 9, "score": 0.7,
                                                               "percentile": 1.0}}, 2, relevance=0.64)
    resp = SearchResponse("q", [hit], None, {"event": "cut_in", "confidence": 0.2, "p_event": 0.9,
                                             "mode": "adapted"}, {"rule": 1.0}, sources_used=["rule"])
    with Library.open(tmp_path / "lib", create=True) as lib:
        ops.save_search(lib, "s", resp)
        back, _spec, _notice = ops.load_saved(lib, "s")
    m = ResultsModel()
    m.set_response(back)
    assert back.hits[0].relevance == 0.64 and m.data(m.index(0, m.C_RELEVANCE)) == "64%"
    assert m.data(m.index(0, m.C_RULE)) == "0.70 · 1/9"
    tip = m.data(m.index(0, m.C_RULE), Qt.ItemDataRole.ToolTipRole)
    assert "rule score 0.70" in tip and "best of 9 judged" in tip and "%" not in tip   # 9 judged: no percentile
    assert m.data(m.index(0, m.C_EVENT)) == "cut_in · event 90% · rule as is 20%"


def test_an_edited_clip_shows_its_shot_cuts_on_the_timeline(qtbot, window, library_copy):
    """Perception v4 ends every track at a shot cut (video.attrs["shot_cuts_s"]); selecting such a
    clip marks each cut on every row of the timeline and says so in its title."""
    import json
    import sqlite3

    con = sqlite3.connect(library_copy / "library.sqlite")
    (attrs,), = con.execute("SELECT attrs FROM videos WHERE id = ?", ("gen_cutin_a",)).fetchall()
    attrs = {**json.loads(attrs or "{}"), "shot_cuts_s": [3.0, 7.5]}
    con.execute("UPDATE videos SET attrs = ? WHERE id = ?", (json.dumps(attrs), "gen_cutin_a"))
    con.commit()
    con.close()
    w = window
    w.open_library(str(library_copy))
    run_search(qtbot, w)
    inspect_video(qtbot, w, "gen_cutin_a")
    tl = w.timeline
    assert tl.cuts == [3.0, 7.5]
    assert "shot cut at 3.0, 7.5 s" in tl.title.text()
    for name in tl.row_names:
        lines = [ln for ln in tl.rows[tl.row_names.index(name)].cut_lines if ln.isVisible()]
        assert sorted(ln.value() for ln in lines) == [3.0, 7.5]
    shot(w, "followup_shot_cuts")
    # an unedited clip right after: no cut lines are left behind
    inspect_video(qtbot, w, "gen_plain")
    assert tl.cuts == [] and "shot cut" not in tl.title.text()
    assert not any(ln.isVisible() for r in tl.rows for ln in r.cut_lines)


def test_about_box_quotes_the_unseen_footage_figure(qtbot, window, tmp_path):
    """Help > About states search quality as measured on footage from sources never used to design
    the product (resources/quality.json, from the committed holdout evaluation)."""
    import json

    from app.about import QUALITY, quality_sentence
    from tests.app.conftest import answer_dialogs, click_button

    q = json.loads(QUALITY.read_text())
    ev = json.loads((QUALITY.parents[1] / q["source"]).read_text())
    assert q["full_acc1"] == round(ev["methods"]["full"]["Acc@1"], 4) and q["n_items"] == ev["n_items"]
    texts: list[str] = []

    def read(d):
        texts.append(d.text())
        click_button(qtbot, d, "OK")

    met = answer_dialogs(qtbot, read)
    _menu(qtbot, window, "Help", "About STRIVE-D")
    _wait_answered(qtbot, met, 1)
    assert f"{q['full_acc1']:.0%}" in texts[0] and "never used to design" in texts[0]
    (tmp_path / "bad.json").write_text("{")
    assert quality_sentence(tmp_path / "bad.json") is None
