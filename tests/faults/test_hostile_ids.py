"""Issue 15 item 1: a crafted records file must never make an export write outside its folder."""

from __future__ import annotations

import json

import pytest

from strived.errors import RecordsError, UnsafePathError
from strived.export import ExportError, clip_rows, export_results
from strived.records import VideoRecords
from strived.safepaths import (check_video_id, make_video_id, output_path, safe_filename,
                               video_id_problem)

from .conftest import run_cli, synth_records

HOSTILE_IDS = ["../../escape", "/tmp/abs_target", "a/b", "..", ".", ".hidden", "C:evil", "a\\b",
               "x\x00y", " padded", "-rf", "", "a" * 201, "line\nbreak"]


def _records_doc(vid):
    rec = synth_records(1)[0]
    d = rec.to_json_dict()
    d["video"]["id"] = vid
    return d


@pytest.mark.parametrize("vid", HOSTILE_IDS)
def test_hostile_ids_are_refused_at_import(vid):
    assert video_id_problem(vid)
    with pytest.raises(RecordsError, match="video.id"):
        VideoRecords.from_json_dict(_records_doc(vid))


@pytest.mark.parametrize("vid", ["av2_7fab2350", "comma2k19_seg40_w00", "trip 2024-05-01 (1)",
                                 "über_straße", "clip.v2", "_x"])
def test_ordinary_ids_pass(vid):
    assert check_video_id(vid) == vid
    assert VideoRecords.from_json_dict(_records_doc(vid)).info.id == vid


def test_cli_import_refuses_a_crafted_records_file_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_records_doc("../../../tmp/pwned")))
    r = run_cli("import", str(bad), "--library", str(tmp_path / "lib"), "--no-text-index")
    assert r.returncode == 1 and "video.id" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "lib").exists() or not (tmp_path / "lib" / "library.sqlite").exists()


def test_export_of_an_old_library_with_hostile_ids_stays_in_the_folder(tmp_path):
    """Ids stored before validation existed (written straight into the database) are made safe
    by the one path helper: every file lands inside the export folder."""
    from strived.store import Library

    outside = tmp_path / "victim.json"
    outside.write_text("precious")
    lib = Library.open(tmp_path / "lib", create=True)
    recs = synth_records(3)
    for r, vid in zip(recs, [str(outside.with_suffix("")), "../../victim", "same/name"]):
        r.info.id = vid
    lib.add_videos(recs)
    response = {"query": "q", "hits": [{"rank": k + 1, "video_id": r.info.id, "score": 1.0 / (k + 1)}
                                       for k, r in enumerate(recs)]}
    out = tmp_path / "export"
    rep = export_results(clip_rows(response, lib), out, formats=["csv", "json", "fiftyone", "openlabel"],
                         context={"query": "q"})
    lib.close()
    assert outside.read_text() == "precious"
    for f in rep.files:
        assert (out.resolve() in __import__("pathlib").Path(f).resolve().parents)
    names = sorted(p.name for p in (out / "openlabel").iterdir())
    assert len(names) == 3 and all("/" not in n and not n.startswith(".") for n in names)


def test_cli_export_and_export_results_refuse_to_leave_the_folder(tmp_path, fast_embedder):
    from strived.store import Library

    lib_dir = tmp_path / "lib"
    with Library.open(lib_dir, create=True) as lib:
        recs = synth_records(2)
        recs[0].info.id = "../../outside_export"
        lib.add_videos(recs)
    out = tmp_path / "deep" / "out"
    r = run_cli("export", str(out), "--library", str(lib_dir))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "outside_export.json").exists()
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 2 and "v01.json" in names and all("/" not in n for n in names)

    from strived.cli import main

    out2 = tmp_path / "deep" / "results"
    assert main(["export-results", "car", str(out2), "--library", str(lib_dir), "--format", "openlabel",
                 "--format", "csv", "--top-k", "5"]) == 0
    assert not list(tmp_path.glob("outside_export*")) and not list((tmp_path / "deep").glob("outside*"))
    assert all(out2.resolve() in p.resolve().parents for p in out2.rglob("*"))


def test_output_path_refuses_escapes_and_symlinks(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    assert output_path(root, "a.json") == root / "a.json"
    for parts in [("..", "x.json"), ("/etc/passwd",), ("a/../../x",), ("",), ("C:x",), ("link", "x.json")]:
        with pytest.raises(UnsafePathError):
            output_path(root, *parts)


def test_export_refuses_a_planted_symlink_subfolder(tmp_path):
    """An attacker who can write the export folder plants openlabel -> elsewhere."""
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "openlabel").symlink_to(elsewhere)
    rows = [{"rank": 1, "video_id": "v1", "video_path": None, "start_s": 0.0, "end_s": 1.0,
             "start_frame": 0, "end_frame": 10, "fps": 10.0, "score": 1.0}]
    with pytest.raises(ExportError, match="outside"):
        export_results(rows, out, formats=["openlabel"], context={})
    assert list(elsewhere.iterdir()) == []


def test_safe_names():
    assert safe_filename("../../x") == "_.._x" or "/" not in safe_filename("../../x")
    assert safe_filename("CON") == "_CON" and safe_filename("") == "item"
    assert make_video_id("-weird name?") == "_-weird name_"
    assert video_id_problem(make_video_id("../a/b:c")) is None


def test_export_never_writes_through_a_planted_symlink(tmp_path):
    """A symlink planted in a shared export folder under the names the old exporter used for its
    temporary files is never written through (issue 37): temporary files get fresh random names,
    created exclusively."""
    from strived.export import write_atomic

    out = tmp_path / "export"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for name in (".clips.json.partial", ".clips.partial.json", ".clips.json.partial.json"):
        (out / name).symlink_to(victim)
    write_atomic(out / "clips.json", '{"ok": true}')
    assert victim.read_text() == "precious"
    assert (out / "clips.json").read_text() == '{"ok": true}'
    assert sorted(p.name for p in out.iterdir() if not p.is_symlink()) == ["clips.json"]


def test_a_cut_clip_never_writes_through_a_symlink_planted_at_the_old_temporary_name(tmp_path):
    import cv2
    import numpy as np

    from strived.export import cut_clip_reencode

    src = tmp_path / "src.mp4"
    w = cv2.VideoWriter(str(src), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (64, 48))
    for k in range(20):
        w.write(np.full((48, 64, 3), 10 * k, np.uint8))
    w.release()
    out = tmp_path / "shared"
    out.mkdir()
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious")
    dst = out / "001_clip_1.0-2.0.mp4"
    (out / f".{dst.stem}.partial{dst.suffix}").symlink_to(victim)     # the old predictable name
    cut_clip_reencode(str(src), dst, 2, 12)
    assert victim.read_bytes() == b"precious"
    assert dst.stat().st_size > 0


@pytest.mark.parametrize("last_t", [1e9, 4294967295.0, 1e308])
def test_one_far_time_stamp_is_refused_before_any_work_is_sized_by_it(tmp_path, capsys, last_t):
    """A records file whose last `t` is a unit mistake or a sentinel is refused with a message
    naming the file and the span, and the library stays usable (issue 37: t = 1e9 ran `strived
    import` out of memory and broke every later command)."""
    import json

    from strived.cli import main

    doc = {"format": "strived.records/1", "video": {"id": "far", "fps": 10, "n_frames": 3},
           "frames": [{"i": 0, "t": 0.0}, {"i": 1, "t": 0.1}, {"i": 2, "t": last_t}]}
    p = tmp_path / "far.json"
    p.write_text(json.dumps(doc))
    rc = main(["import", str(p), "--library", str(tmp_path / "lib")])
    err = capsys.readouterr().err
    assert rc != 0 and "frames span" in err and "sentinel" in err and "far.json" in err


def test_text_segments_are_bounded_by_the_samples_not_the_time_span():
    """A PTS jump inside a perceived clip adds one text segment, not one per 4 s of the gap."""
    import numpy as np

    from strived.records import VideoInfo, VideoRecords
    from strived.retrieval.describe import segment_bounds

    t = np.array([0.0, 0.1, 0.2, 100000.0, 100000.1])
    rec = VideoRecords(VideoInfo("v", None, 10.0, 5), np.arange(5), t, {}, [])
    b = segment_bounds(rec)
    assert len(b) == 2 and b[0][0] == 0.0 and b[1][0] <= 100000.0 < b[1][1]


def test_long_non_ascii_ids_export_within_the_file_name_byte_limit(tmp_path, capsys):
    """A 200-character CJK id is a valid id; its exported file names are cut by their encoded
    length (255 bytes on ext4/APFS), not by characters (issue 37: every export failed)."""
    import json

    from strived.cli import main
    from strived.safepaths import safe_filename

    vid = "漢" * 200
    assert len(safe_filename(vid).encode("utf-8")) <= 180
    doc = {"format": "strived.records/1", "video": {"id": vid, "fps": 10, "n_frames": 2},
           "frames": [{"i": 0, "t": 0.0}, {"i": 1, "t": 0.1}]}
    (tmp_path / "r.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    lib = tmp_path / "lib"
    assert main(["import", str(tmp_path / "r.json"), "--library", str(lib), "--no-text-index"]) == 0
    assert main(["export", str(tmp_path / "out"), "--library", str(lib)]) == 0
    names = [p.name for p in (tmp_path / "out").iterdir()]
    assert names and all(len(n.encode("utf-8")) <= 255 for n in names)


@pytest.mark.parametrize("tid", [10**30, 2**63, -1])
def test_a_track_id_out_of_range_is_refused_by_name(tmp_path, tid):
    """A records file with a track id SQLite cannot hold (10^30 crashed the import with an
    OverflowError) or the ego's -1: a clear error naming the frame and key; nothing imported."""
    rec = synth_records(1)[0]
    doc = rec.to_json_dict()
    first = doc["frames"][0]["objects"][0]["track"]
    for f in doc["frames"]:
        for o in f["objects"]:
            if o["track"] == first:
                o["track"] = tid
    src = tmp_path / "big.json"
    src.write_text(json.dumps(doc))
    r = run_cli("import", str(src), "--library", str(tmp_path / "lib"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "objects[0].track" in r.stderr and "between 0 and 2147483647" in r.stderr
    from strived.store import Library

    with Library.open(tmp_path / "lib", create=True) as lib:
        assert len(lib) == 0


def test_a_lone_surrogate_in_a_records_file_is_refused_by_name(tmp_path):
    """A JSON escape like \\udcff parses into a string SQLite cannot store (the import crashed
    with a UnicodeEncodeError); a proper escaped pair (an emoji) stays fine."""
    doc = synth_records(1)[0].to_json_dict()
    doc["video"]["path"] = "/footage/x\udcffy.mp4"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))                 # ensure_ascii: written as the escape
    r = run_cli("import", str(bad), "--library", str(tmp_path / "lib"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "lone surrogate" in r.stderr
    doc["video"]["path"] = "/footage/trip \U0001F697.mp4"
    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc))                # an escaped surrogate pair
    assert "\\ud83d" in good.read_text()
    assert VideoRecords.load(good).info.path == "/footage/trip \U0001F697.mp4"
