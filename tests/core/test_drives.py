"""Drives across files (issue 33): 3 consecutive time-stamped files of one camera join into one drive;
a braking across the boundary of files 1 and 2 is found once, with its exact span in drive time and
per file; the export cuts one clip across the boundary; `strived drives` lists the drive."""

import csv
import json
import os

import pytest

from strived.cli import main
from tests.core.drive_data import NAMES, file_no, frame_code, make_drive, write_clip


def _json(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture()
def drive(tmp_path):
    recs, rule, paths = make_drive(tmp_path)
    lib = str(tmp_path / "lib")
    assert main(["import", str(recs), "-L", lib, "--no-text-index"]) == 0
    return tmp_path, lib, rule, paths


def test_drive_listed_with_offsets_and_start_evidence(drive, capsys):
    _root, lib, _rule, _paths = drive
    d = _json(capsys, ["drives", "-L", lib, "--json"])
    assert len(d["drives"]) == 1
    dr = d["drives"][0]
    assert dr["id"] == f"drive:{NAMES[0]}" and dr["n_files"] == 3 and dr["length_s"] == pytest.approx(30.0)
    assert [f["video_id"] for f in dr["files"]] == list(NAMES)
    assert [f["offset_s"] for f in dr["files"]] == pytest.approx([0.0, 10.0, 20.0])
    assert [f["gap_s"] for f in dr["files"]] == [None, pytest.approx(0.0), pytest.approx(0.0)]
    assert {f["source"] for f in dr["files"]} == {"name"}
    assert "2026_11_28_101510" in dr["files"][1]["detail"]
    assert main(["drives", "-L", lib]) == 0
    out = capsys.readouterr().out
    assert "3 files" in out and "+   10.00 s" in out and "start from name" in out


def test_event_across_boundary_found_once_with_exact_span(drive, capsys):
    _root, lib, rule, _paths = drive
    d = _json(capsys, ["search", "hard braking", "-L", lib, "--rule", str(rule), "--sources", "rule", "--json"])
    hits = d["hits"]
    assert [h["rank"] for h in hits] == [1, 2]
    ids = [h["video_id"] for h in hits]
    assert NAMES[1] not in ids                      # file 2's half is not listed on its own
    merged = hits[0]
    assert merged["video_id"] == NAMES[0] and merged["span_s"] == pytest.approx([8.0, 9.9])
    dr = merged["drive"]
    assert dr["id"] == f"drive:{NAMES[0]}"
    assert dr["span_s"] == pytest.approx([8.0, 12.0])     # drive time: 8 s into file 1 to 2 s into file 2
    assert [(p["video_id"], p["t0"], p["t1"], p["offset_s"]) for p in dr["parts"]] == [
        (NAMES[0], 8.0, 9.9, 0.0), (NAMES[1], 0.0, 2.0, 10.0)]
    other = hits[1]                                  # inside file 3, not at a boundary: on its own
    assert other["video_id"] == NAMES[2] and other["span_s"] == pytest.approx([5.0, 7.0]) and "drive" not in other
    assert main(["search", "hard braking", "-L", lib, "--rule", str(rule), "--sources", "rule"]) == 0
    assert f"8.0-12.0 s drive time = {NAMES[0]} 8.0-9.9s + {NAMES[1]} 0.0-2.0s" in capsys.readouterr().out


def test_export_cuts_one_clip_across_the_boundary(drive, capsys):
    import cv2

    root, lib, rule, _paths = drive
    out = root / "out"
    assert main(["export-results", "hard braking", str(out), "-L", lib, "--rule", str(rule),
                 "--clips", "reencode"]) == 0
    rows = list(csv.DictReader(open(out / "clips.csv", encoding="utf-8")))
    merged = [r for r in rows if r["drive_id"]]
    assert len(merged) == 1 and len(rows) == 2
    r = merged[0]
    assert (r["drive_id"], float(r["drive_start_s"]), float(r["drive_end_s"])) == (f"drive:{NAMES[0]}", 8.0, 12.0)
    parts = json.loads(r["drive_parts"])
    assert [(p["video_id"], p["start_frame"], p["end_frame"], p["event_start_s"], p["event_end_s"])
            for p in parts] == [(NAMES[0], 80, 99, 8.0, 9.9), (NAMES[1], 0, 20, 0.0, 2.0)]
    doc = json.loads((out / "clips.json").read_text())
    assert doc["clips"][0]["drive_parts"][1]["offset_s"] == 10.0
    cap = cv2.VideoCapture(r["clip_path"])
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append((file_no(f), frame_code(f)))
    cap.release()
    # file 1's frames 80..99, then file 2's frames 0..20: one clip over the boundary
    assert frames == [(0, i) for i in range(80, 100)] + [(1, i) for i in range(0, 21)]
    single = [r for r in rows if not r["drive_id"]][0]
    assert single["video_id"] == NAMES[2] and single["drive_parts"] == ""


def test_files_apart_or_without_time_join_no_drive(tmp_path, capsys):
    """A file a minute later is no part of the drive; names without a time stamp fall back to the
    file's modification time minus its length; a records-only video's start is unknown."""
    from tests.core.drive_data import records

    recs = tmp_path / "records"
    recs.mkdir()
    vids = tmp_path / "videos"
    vids.mkdir()
    t_end = 1_800_000_000.0
    names = [NAMES[0], NAMES[1], "2026_11_28_101700", "FILE0001", "FILE0002"]
    for k, name in enumerate(names):
        p = vids / f"{name}.mp4"
        write_clip(p, k % 3)
        doc = records(name, p, k % 3)
        if name.startswith("FILE"):            # recorded 10 s each, the second opened 1 s after
            end = t_end + (0 if name.endswith("1") else 11.0)
            os.utime(p, (end, end))
        (recs / f"{name}.json").write_text(json.dumps(doc))
    lone = records("clip_without_video", vids / "none.mp4", 0)
    lone["video"]["path"] = None
    (recs / "lone.json").write_text(json.dumps(lone))
    lib = str(tmp_path / "lib")
    assert main(["import", str(recs), "-L", lib, "--no-text-index"]) == 0
    d = _json(capsys, ["drives", "-L", lib, "--json"])
    got = {tuple(f["video_id"] for f in dr["files"]): dr for dr in d["drives"]}
    assert set(got) == {(NAMES[0], NAMES[1]), ("FILE0001", "FILE0002")}
    by_mtime = got[("FILE0001", "FILE0002")]
    assert by_mtime["source"] == "mtime" and by_mtime["files"][1]["gap_s"] == pytest.approx(1.0, abs=0.01)
    assert d["refreshed"]["unknown"] == 1
    assert main(["drives", "-L", lib]) == 0
    assert "start of 1 video(s) is unknown" in capsys.readouterr().err


def test_name_time_stamps_of_dashcam_families():
    from strived.drives import name_start

    def at(name):
        got = name_start(name)
        return None if got is None else got[0]

    t = at("2026_11_28_101500")
    assert t == at("20261128_101500_NF.mp4") == at("2026_1128_101500_001F.MP4")      # BlackVue, Viofo
    assert t == at("NO20261128-101500-000123F") == at("REC_2026_11_28_10_15_00_F")  # Novatek, Thinkware
    assert t == at("261128_101500_001_FH")                                         # Nextbase (YYMMDD)
    assert at("GOPR0042") is None and at("FILE0001") is None                       # counters only
    assert at("2026_13_28_101500") is None                                         # no month 13


def test_indexing_groups_its_files_into_drives(tmp_path, monkeypatch, capsys):
    """`strived index` joins the files it indexed into drives at its end (indexing itself stays
    per file): two 2 s clips named 2 s apart are one drive; a third an hour later is not."""
    from strived.store import Library
    from strived.store import drives as store
    from tests.perception.conftest import FakeDetector, write_video

    src = tmp_path / "footage"
    src.mkdir()
    for name in ("2026_11_28_101500", "2026_11_28_101502", "2026_11_28_111500"):
        write_video(src / f"{name}.mp4", n_frames=20, fps=10.0)
    monkeypatch.setattr("strived.perception.detect.make_detector", lambda *a, **k: FakeDetector())
    monkeypatch.setattr("strived.engine.build_text_index", lambda lib, **k: None)
    lib_dir = tmp_path / "lib"
    assert main(["index", str(src), "--library", str(lib_dir), "--quiet", "--workers", "1"]) == 0
    with Library.open(lib_dir) as lib:
        found = store.drives(lib)
    assert [[f["video_id"] for f in d["files"]] for d in found] == [["2026_11_28_101500", "2026_11_28_101502"]]
    assert [f["offset_s"] for f in found[0]["files"]] == [0.0, 2.0]


def test_files_of_other_frame_sizes_are_not_cut_into_one_clip(drive, capsys):
    """A file of the drive replaced by one of another frame size: a clear error naming it, and no
    clip or list left half-written."""
    import cv2
    import numpy as np

    root, lib, rule, paths = drive
    vw = cv2.VideoWriter(str(paths[1]), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (320, 192))
    for _ in range(100):
        vw.write(np.zeros((192, 320, 3), np.uint8))
    vw.release()
    out = root / "out"
    capsys.readouterr()
    assert main(["export-results", "hard braking", str(out), "-L", lib, "--rule", str(rule),
                 "--clips", "reencode"]) == 1
    err = capsys.readouterr().err
    assert "strived: error: cannot cut one clip across" in err and "320x192" in err and "Traceback" not in err
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == []


def test_a_drive_file_gone_skips_that_result_only(drive, capsys):
    root, lib, rule, paths = drive
    paths[1].unlink()
    out = root / "out"
    capsys.readouterr()
    assert main(["export-results", "hard braking", str(out), "-L", lib, "--rule", str(rule),
                 "--clips", "reencode"]) == 0
    assert f"skipped {NAMES[0]}: no video file" in capsys.readouterr().err
    assert [p.name for p in (out / "clips").iterdir()] == [f"002_{NAMES[2]}_5.0-7.0s.mp4"]
