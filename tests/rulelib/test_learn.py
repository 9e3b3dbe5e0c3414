"""`strived learn`: an event's numbers refitted from the library's own relevance marks, checked
leaving one marked video out, kept as versions with their marks, undone; refusals change nothing."""

import json

import numpy as np
import pytest

from strived import engine
from strived.cli import main
from strived.rulelib.fit.calibrate import average_precision_pessimistic
from strived.rulelib.fit.synthetic import synthetic_corpus
from strived.rulelib.learned import FILE_NAME
from strived.rulelib.library import load_default_library
from strived.store import Library

QUERY = "the car in front of us brakes hard"


@pytest.fixture
def marked(tmp_path):
    """(library folder, true lead_brake positives, the 15 videos the user marked): a library of
    80 synthetic videos with planted lead-vehicle brakes; the user searched QUERY and marked its
    first 15 results with the truth (relevant = a planted lead brake)."""
    recs, lab = synthetic_corpus(80, seed=1)
    folder = tmp_path / "lib"
    pos = lab.positives["lead_brake"]
    with Library.open(folder, create=True) as lib:
        lib.add_videos(recs)
        r = engine.search(lib, QUERY, sources=("rule",), top_k=80)
        assert r.match["event"] == "lead_brake"
        top = [h.video_id for h in r.hits[:15]]
        for v in top:
            lib.set_mark(QUERY, v, v in pos, r.match["event"])
    return folder, pos, top


def _search(folder):
    with Library.open(folder) as lib:
        return engine.search(lib, QUERY, sources=("rule",), top_k=80)


def _ap_on(resp, vids, pos) -> float:
    rank = {h.video_id: h.score for h in resp.hits}
    s = np.array([rank.get(v, 0.0) for v in vids])
    return average_precision_pessimistic(s, np.array([v in pos for v in vids]))


def test_learn_refits_toward_the_marks_and_search_uses_the_new_numbers(marked, capsys):
    folder, pos, top = marked
    shipped = load_default_library().entries["lead_brake"].rule
    before = _search(folder)
    assert before.rule == shipped
    assert main(["learn", "lead_brake", "-L", str(folder), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "numbers (in use -> refitted):" in out and "held out (leave one video out)" in out
    assert "rank before" in out and f"kept as version 1 in {folder / FILE_NAME}" in out
    after = _search(folder)
    assert after.rule != shipped
    # the marked videos are ranked the way the user marked them, better than before
    assert _ap_on(after, top, pos) > _ap_on(before, top, pos) + 0.05
    assert any("numbers learned in this library from your marks (version 1" in n for n in after.notices)
    doc = json.loads((folder / FILE_NAME).read_text())
    v = doc["events"]["tracks/lead_brake"]["versions"][0]
    # provenance: the marks it was fitted on, the held-out check, the numbers before and after
    assert sorted(m["video_id"] for m in v["marks"]) == sorted(top)
    assert v["heldout"]["heldout_ap"] > v["heldout"]["current_ap"]
    assert v["previous_rule"] == shipped and v["rule"] == after.rule and v["changes"]
    assert main(["events", "-L", str(folder)]) == 0
    assert "[learned here, v1]" in [ln for ln in capsys.readouterr().out.splitlines()
                                    if ln.startswith("lead_brake ")][0]


def test_undo_restores_the_previous_numbers_and_keeps_the_version(marked, capsys):
    folder, _, _ = marked
    shipped = load_default_library().entries["lead_brake"].rule
    assert main(["learn", "lead_brake", "-L", str(folder), "--yes"]) == 0
    learned = _search(folder).rule
    assert main(["learn", "--undo", "lead_brake", "-L", str(folder)]) == 0
    assert "search now uses the shipped numbers" in capsys.readouterr().out
    assert _search(folder).rule == shipped
    assert main(["learn", "--history", "lead_brake", "-L", str(folder), "--json"]) == 0
    h = json.loads(capsys.readouterr().out)["profiles"]["tracks"]
    assert h["active"] == 0 and h["versions"][0]["undone"] and h["versions"][0]["rule"] == learned
    assert main(["learn", "--undo", "lead_brake", "-L", str(folder)]) == 1
    assert "nothing to undo" in capsys.readouterr().err


def test_dry_run_and_no_confirmation_keep_nothing(marked, capsys):
    folder, _, _ = marked
    assert main(["learn", "lead_brake", "-L", str(folder), "--dry-run"]) == 0
    assert "nothing kept (--dry-run)" in capsys.readouterr().out
    assert main(["learn", "lead_brake", "-L", str(folder)]) == 0     # stdin is not a terminal
    assert "run again with --yes" in capsys.readouterr().out
    assert not (folder / FILE_NAME).exists()


def test_too_few_marks_refuse_and_change_nothing(tmp_path, capsys):
    recs, lab = synthetic_corpus(30, seed=1)
    folder = tmp_path / "lib"
    with Library.open(folder, create=True) as lib:
        lib.add_videos(recs)
        pos = sorted(lab.positives["lead_brake"])[:2]
        neg = sorted(set(lib.video_ids()) - lab.positives["lead_brake"])[:5]
        for v in pos + neg:
            lib.set_mark(QUERY, v, v in pos, "lead_brake")
    assert main(["learn", "lead_brake", "-L", str(folder), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "too few marks to learn lead_brake: 2 relevant and 5 not relevant" in err
    assert "at least 3 of each" in err and "Traceback" not in err
    assert not (folder / FILE_NAME).exists()


def test_contradictory_marks_refuse_and_change_nothing(marked, capsys):
    folder, pos, top = marked
    v = next(u for u in top if u in pos)
    with Library.open(folder) as lib:       # another query of the same event says the opposite
        lib.set_mark("the lead vehicle slows down sharply", v, False, "lead_brake")
    assert main(["learn", "lead_brake", "-L", str(folder), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "contradict each other" in err and v in err and "nothing was changed" in err
    assert not (folder / FILE_NAME).exists()


def test_marks_that_do_not_hold_out_change_nothing(marked, capsys):
    """Marks at random (seeded): the refit fits them, but the numbers refitted without each marked
    video rank it worse than the shipped numbers do, so nothing is kept."""
    folder, _, top = marked
    ys = np.random.default_rng(1).random(len(top)) < 0.5
    with Library.open(folder) as lib:
        for v, y in zip(top, ys):
            lib.set_mark(QUERY, v, bool(y), "lead_brake")
    assert main(["learn", "lead_brake", "-L", str(folder), "--yes", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["changes"] and res["heldout"]["fit_ap"] > res["heldout"]["current_ap"]
    assert res["heldout"]["heldout_ap"] < res["heldout"]["current_ap"]
    assert res["accepted"] is False and res["kept"] is False
    assert not (folder / FILE_NAME).exists()


def test_a_damaged_learned_file_is_named_and_search_uses_the_shipped_numbers(marked, capsys):
    folder, _, _ = marked
    (folder / FILE_NAME).write_text('{"format": "strived.learned_rules/1", "events": {"tracks/lead_brake": '
                                    '{"active": 1, "versions": [{"rule": {"hard_gates": 3}}]}}}')
    r = _search(folder)
    assert r.rule == load_default_library().entries["lead_brake"].rule
    assert any(n.startswith("learned numbers not used:") and "damaged" in n for n in r.notices)
    assert main(["learn", "--history", "lead_brake", "-L", str(folder)]) == 1
    assert "is damaged" in capsys.readouterr().err


def test_learning_reports_progress_and_cancels_without_writing(marked):
    from strived.errors import Cancelled
    from strived.rulelib.fit.learn import learn_event

    folder, _, top = marked
    seen = []
    with Library.open(folder) as lib:
        res = learn_event(lib, "lead_brake", progress=seen.append)
        assert res.accepted and len(res.heldout["per_video"]) == len(top)
        # one step for the fit, one per held-out marked video
        assert [e.done for e in seen] == list(range(len(top) + 2)) and seen[-1].total == len(top) + 1
        with pytest.raises(Cancelled):
            learn_event(lib, "lead_brake", progress=seen.append, cancel=lambda: len(seen) > 20)
    assert not (folder / FILE_NAME).exists()
