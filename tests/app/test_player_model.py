"""Player (frame-exact, overlay, stepping), timeline binding and the results model (no window)."""

import numpy as np
import pytest

from tests.app.conftest import click_plot, clip_records, drag_playhead, frame_code, make_clip, shot


@pytest.fixture()
def clip(tmp_path):
    p = tmp_path / "c.mp4"
    boxes = make_clip(p, n_frames=90, fps=20.0)
    return p, boxes


def test_decoder_is_frame_exact(clip):
    from app.frames import FrameDecoder

    d = FrameDecoder(str(clip[0]), cache_frames=4)
    rng = np.random.default_rng(0)
    for i in list(rng.integers(0, 90, 15)) + [0, 89, 45, 46, 47, 10]:
        assert frame_code(d.frame(int(i))) == int(i)
    d.scan()
    assert d.scanned
    for i in rng.integers(0, 90, 10):
        assert frame_code(d.frame(int(i))) == int(i)
    d.close()


def test_player_seek_step_overlay(qtbot, clip):
    from app.player import PlayerWidget

    p = PlayerWidget()
    qtbot.addWidget(p)
    p.resize(800, 500)
    p.show()
    rec = clip_records("c", clip[0], clip[1], 20.0)
    with qtbot.waitSignal(p.frame_shown, timeout=5000) as b:
        assert p.load(str(clip[0]), records=rec, span_s=(1.5, 3.0))
    assert b.args[0] == 30                       # jumps to the event start
    assert frame_code(_rgb(p)) == 30
    p.setFocus()
    with qtbot.waitSignal(p.frame_shown, timeout=5000) as b:
        qtbot.keyClick(p, "Right" and __import__("PySide6.QtCore").QtCore.Qt.Key.Key_Right)
    assert b.args[0] == 31 and frame_code(_rgb(p)) == 31
    assert "frame 31 / 89" in p.position_label.text() and "1.550 s" in p.position_label.text()
    assert p.canvas.boxes and p.canvas.boxes[0][0] in (1, 2)      # boxes of the sampled frame
    shot(p, "player_overlay_on")
    qtbot.mouseClick(p.overlay_box, __import__("PySide6.QtCore").QtCore.Qt.MouseButton.LeftButton)
    assert not p.canvas.overlay
    p.overlay_box.setChecked(True)
    p.play()
    qtbot.waitUntil(lambda: p.frame_idx >= 36, timeout=5000)
    p.pause()
    assert not p.is_playing
    p.shutdown()


def _rgb(player):
    from PySide6.QtGui import QImage

    img = player.canvas.image.convertToFormat(QImage.Format.Format_RGB888)
    w, h = img.width(), img.height()
    arr = np.frombuffer(img.constBits(), np.uint8, img.bytesPerLine() * h).reshape(h, -1)
    return arr[:, : w * 3].reshape(h, w, 3)


def test_player_missing_file_shows_message(qtbot, tmp_path):
    from app.player import PlayerWidget

    p = PlayerWidget()
    qtbot.addWidget(p)
    assert not p.load(str(tmp_path / "gone.mp4"))
    assert "Cannot play" in p.canvas.message


def test_results_model_columns():
    from PySide6.QtCore import Qt

    from app.results import ResultsModel
    from strived.engine import SearchHit, SearchResponse

    hits = [SearchHit(1, "a", "/x/a.mp4", 0.03, (1.0, 2.5),
                      {"rule": {"rank": 1, "of": 240, "score": 0.9, "percentile": 1.0,
                                "contribution": 1 / 61},
                       "dense": {"rank": 3, "of": 240, "score": 0.4, "contribution": 0.5 / 63},
                       "bm25": {"rank": None, "of": 57, "score": None, "contribution": 0.0}}, 2,
                      relevance=0.83),
            SearchHit(2, "b", None, 0.01, None, {"rule": {"rank": 2, "score": 0.5}}, None),
            SearchHit(3, "c", None, 0.01, None, {"rule": {"rank": 14, "of": 240, "score": 1.0, "percentile": 1.0,
                                                          "tie": {"first": 1, "size": 20}}}, None)]
    resp = SearchResponse("q", hits, {"entity": {}}, {"event": "cut_in", "confidence": 0.82,
                                                        "p_event": 0.97, "mode": "reused"},
                          {"rule": 1.0, "dense": 0.5}, sources_used=["rule", "dense", "bm25"])
    m = ResultsModel()
    m.set_response(resp, {"b": False})
    assert m.rowCount() == 3 and m.columnCount() == 11
    d = lambda r, c: m.data(m.index(r, c), Qt.ItemDataRole.DisplayRole)  # noqa: E731
    tip = lambda r, c: m.data(m.index(r, c), Qt.ItemDataRole.ToolTipRole)  # noqa: E731
    assert d(0, m.C_FILE) == "a.mp4" and d(1, m.C_FILE) == "b"
    assert d(0, m.C_SPAN).strip().startswith("1.0") and d(1, m.C_SPAN) == "–"
    # the relevance is the calibrated probability (no fused rank score shown as a number)
    assert m.headerData(m.C_RELEVANCE, Qt.Orientation.Horizontal) == "Relevance"
    assert d(0, m.C_RELEVANCE) == "83%" and d(1, m.C_RELEVANCE) == "–"
    assert "likely match (83%)" in tip(0, m.C_RELEVANCE).lower()
    assert "unknown" in tip(1, m.C_RELEVANCE).lower()
    assert "0.03" not in "".join(str(d(0, c)) for c in range(1, 10))
    # the two probabilities of the match, in words
    assert d(0, m.C_EVENT) == "cut_in · event 97% · rule as is 82%" and d(0, m.C_MODE) == "reused"
    assert "event you asked for" in tip(0, m.C_EVENT) and "τ = 0.6" in tip(0, m.C_EVENT)
    # each source's evidence: rule percentile and rank, dense cosine and rank, BM25 did not rank it
    assert d(0, m.C_RULE) == "0.90 · 1/240" and d(0, m.C_DENSE) == "cos 0.40 · 3/240"
    assert d(0, m.C_BM25) == "–" and "did not rank" in tip(0, m.C_BM25)
    assert "rule score 0.90" in tip(0, m.C_RULE) and "cosine similarity to the query 0.40" in tip(0, m.C_DENSE)
    assert d(2, m.C_RULE) == "1.00 · =1/240 (20 tied)"   # a tie has no order: not "14/240"
    assert "of the 240 videos the rule judged" in tip(2, m.C_RULE)      # enough judged: the percentile too
    assert d(1, m.C_MARK) == "N" and d(0, m.C_MARK) == ""
    m.set_mark(0, True)
    assert d(0, m.C_MARK) == "R"
    assert m.data(m.index(0, 0), Qt.ItemDataRole.DecorationRole) is None    # no thumbnail loader


def test_timeline_shows_the_road_offset_and_an_ego_step_with_their_units(qtbot, library_dir):
    """A video rule's lateral motion reads loc_x_road, and a sequence step may read the ego (a
    collision's jolt at contact): the timeline draws both, as the main window passes them, with
    their units; every rule field has its unit."""
    import copy

    from tests.app.conftest import CUTIN_RULE

    from app.timeline import UNITS, TimelineWidget
    from strived import engine
    from strived.rules.model import ALL_FIELDS
    from strived.store.library import Library

    assert set(ALL_FIELDS) <= set(UNITS) and UNITS["jolt"] == "rad/s" and UNITS["loc_x_road"] == "m"
    step = {k: v for k, v in copy.deepcopy(CUTIN_RULE).items() if k != "event"}
    step["soft_scores"][0]["field"] = "loc_x_road"
    rule = {"event": "cut_in_then_ego", "sequence": [
        {"name": "moves", **step},
        {"name": "the ego drives on", "entity": {"role": "ego"}, "hard_gates": [{"field": "speed", "op": "gt", "value": 0.0}],
         "soft_scores": [], "gap": {"min_seconds": 0.0, "max_seconds": 10.0}}]}
    lib = Library.open(library_dir)
    exp = engine.explain(lib, "gen_cutin_a", rule)
    lib.close()
    assert exp.score > 0 and exp.ego is not None
    exp.traces = list(exp.traces) + [exp.ego]          # as MainWindow._on_inspect_finished does
    tl = TimelineWidget()
    qtbot.addWidget(tl)
    tl.resize(900, 400)
    tl.show()
    tl.set_explanation(exp, "gen_cutin_a")
    assert "loc_x_road" in tl.row_names and "speed" in tl.row_names
    qtbot.waitExposed(tl)
    t = 0.5 * (exp.span_s[0] + exp.span_s[1])
    assert " m" in tl.values_at(t, "loc_x_road") and "m/s" in tl.values_at(t, "speed")
    assert tl.rows[tl.row_names.index("loc_x_road")].curves


def test_timeline_playhead_and_curves(qtbot, library_dir):
    from tests.app.conftest import CUTIN_RULE

    from app.timeline import TimelineWidget
    from strived import engine
    from strived.store.library import Library

    lib = Library.open(library_dir)
    exp = engine.explain(lib, "gen_cutin_a", CUTIN_RULE)
    lib.close()
    tl = TimelineWidget()
    qtbot.addWidget(tl)
    tl.resize(900, 400)
    tl.show()
    tl.set_explanation(exp, "gen_cutin_a")
    assert exp.span_s is not None and exp.score > 0.5
    assert "loc_x" in tl.row_names and "abs_loc_x" in tl.row_names and "soft score" in tl.row_names
    curves_before = [id(c) for r in tl.rows for c in r.curves]
    tl.set_explanation(exp, "again")                # pooled: no new items
    assert [id(c) for r in tl.rows for c in r.curves] == curves_before
    qtbot.waitExposed(tl)
    seen = []
    tl.seek_requested.connect(seen.append)
    drag_playhead(qtbot, tl, 0, 2.0)                 # the mouse drags the playhead to 2 s
    assert seen and abs(seen[-1] - 2.0) < 0.05
    assert all(r.playhead.value() == seen[-1] for r in tl.rows)
    tracks = []
    tl.track_selected.connect(tracks.append)
    row = tl.rows[tl.row_names.index("loc_x")]
    for tid in (2, 1):                               # a click on each track's curve selects it
        tr = next(t for t in exp.traces if int(t.track) == tid)
        k = len(tr.t) // 4
        click_plot(qtbot, tl, row, float(tr.t[k]), float(tr.values["loc_x"][k]))
        assert tracks[-1] == tid and tl.highlighted == tid
        assert abs(seen[-1] - float(tr.t[k])) < 0.05       # ... and seeks there
    assert tracks == [2, 1]
    shot(tl, "timeline")


def test_source_cell_for_a_source_that_did_not_rank_the_video(qtbot):
    from types import SimpleNamespace

    from app.results import ResultsModel

    m = ResultsModel()
    hit = SimpleNamespace(score=0.02, per_source={"rule": {"rank": None, "score": None, "weight": 1.0,
                                                           "contribution": 0.0},
                                                  "dense": {"rank": 3, "score": 0.5, "weight": 1.0,
                                                            "contribution": 1 / 63}})
    assert m.source_text(hit, "rule") == "–"
    assert m.source_text(hit, "dense") == "cos 0.50 · #3"       # no "of": the rank alone


def test_source_cell_for_a_video_the_rule_could_not_judge(qtbot, tmp_path):
    """A real search over a library where one video has no ego speed: its rule cell says n/a (not
    a dash that reads as 'no match'), and the tooltip names the missing field."""
    import numpy as np
    from PySide6.QtCore import Qt

    from app.results import ResultsModel
    from strived import engine
    from strived.store import Library
    from tests.core.synth import synth_video

    a, b = synth_video("can", seed=1), synth_video("video", seed=2)
    b.ego["speed"][:] = np.nan
    rule = {"entity": {"role": "ego"}, "hard_gates": [{"field": "speed", "op": "gt", "value": 2.0}],
            "soft_scores": []}
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_videos([a, b])
        from strived.retrieval.sources import ensure_text_index
        ensure_text_index(lib, dense=False)
        resp = engine.search(lib, "a car and a truck", rule=rule, sources=("rule", "bm25"),
                             weights={"rule": 1.0, "bm25": 1.0})
    m = ResultsModel()
    m.set_response(resp)
    hits = {h.video_id: h for h in resp.hits}
    assert "video" in hits, [h.video_id for h in resp.hits]
    assert m.source_text(hits["video"], "rule") == "n/a"
    row = [h.video_id for h in m.hits].index("video")
    tip = m.data(m.index(row, m.C_RULE), Qt.ItemDataRole.ToolTipRole)
    assert "could not judge" in tip and "speed" in tip


def test_timeline_readout_shows_an_unknown_soft_term_and_its_imputed_value(qtbot):
    """A clip without ego speed: the speed term is unknown on every track and takes its expected
    value over the corpus (the mean of the known speed terms, not a 0); the soft-score readout
    says so next to the value; alone, no track knows the speed and the term is not counted."""
    from app.timeline import TimelineWidget
    from strived.rules import parse_rule
    from strived.rules.explain import explain_video
    from strived.rules.reference import corpus_term_means
    from tests.core.test_unknown_soft_terms import DIST, SPEED, _corpus

    rule = parse_rule({"entity": {"class_filter": ["car"]}, "soft_scores": [DIST, SPEED]})
    speed = rule.soft_scores[1].name
    recs = _corpus()
    means = corpus_term_means(recs, rule)
    exp = explain_video(recs[1], rule, term_means=means)
    tl = TimelineWidget()
    qtbot.addWidget(tl)
    tl.set_explanation(exp, "b_no_speed")
    text = tl.values_at(5.0, "soft score")
    assert "0.50" in text and f"unknown: {speed} → corpus mean 0.50" in text
    tl.set_explanation(explain_video(recs[1], rule), "b_no_speed")      # the video alone
    assert f"unknown: {speed} not counted" in tl.values_at(5.0, "soft score")
    with_speed = explain_video(recs[0], rule, term_means=means)
    tl.set_explanation(with_speed, "a_speed")
    assert "0.67" in tl.values_at(5.0, "soft score") and "unknown" not in tl.values_at(5.0, "soft score")
