"""A full disk while importing, indexing or exporting: a clear error, nothing half-written, and
the next run (space freed) completes. Real ENOSPC on a tiny tmpfs when root can mount one; the
export and dense-save cases are also covered by monkeypatched write failures that run anywhere."""

from __future__ import annotations

import os
import shutil

import pytest


from strived.cli import main
from strived.store import Library
from tests.perception.conftest import FakeDetector, write_video

from .conftest import synth_records


def _fill(disk, leave_bytes: int):
    """Take all the free space of ``disk`` but ``leave_bytes``."""
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave_bytes))


def test_import_on_a_full_disk_changes_nothing_then_succeeds(tiny_disk, tmp_path, capsys):
    disk = tiny_disk("2m")
    lib_dir = disk / "lib"
    recs = tmp_path / "records"
    recs.mkdir()
    for r in synth_records(12, seed0=500):
        r.save(recs / f"{r.info.id}.json")
    with Library.open(lib_dir, create=True) as lib:
        lib.add_videos(synth_records(2))
    _fill(disk, 96 * 1024)
    rc = main(["import", str(recs), "--library", str(lib_dir), "--no-text-index"])
    err = capsys.readouterr().err
    assert rc == 1 and "disk is full" in err and "Traceback" not in err and "damaged" not in err
    with Library.open(lib_dir, readonly=True) as lib:
        assert lib.video_ids() == ["v00", "v01"] and not lib.integrity_problems(full=True)
    (disk / "filler").unlink()
    assert main(["import", str(recs), "--library", str(lib_dir), "--no-text-index"]) == 0
    with Library.open(lib_dir) as lib:
        assert len(lib) == 12 and not lib.integrity_problems(full=True)


def test_indexing_on_a_full_disk_stops_clearly_and_resumes(tiny_disk, tmp_path, monkeypatch, capsys):
    disk = tiny_disk("3m")
    src = tmp_path / "footage"
    src.mkdir()
    for k in range(4):
        write_video(src / f"c{k}.mp4", n_frames=20, box_speed_px=2 + k)
    monkeypatch.setattr("strived.perception.detect.make_detector", lambda *a, **k: FakeDetector())
    monkeypatch.setattr("strived.engine.build_text_index", lambda lib, **k: None)
    lib_dir = disk / "lib"
    with Library.open(lib_dir, create=True):
        pass
    _fill(disk, 40 * 1024)
    rc = main(["index", str(src), "--library", str(lib_dir), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1 and "disk is full" in err and "Traceback" not in err and "damaged" not in err
    (disk / "filler").unlink()
    with Library.open(lib_dir) as lib:
        assert not lib.integrity_problems(full=True)
        n_before = len(lib)
    assert main(["index", str(src), "--library", str(lib_dir), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"{4 - n_before} indexed" in out
    with Library.open(lib_dir) as lib:
        assert lib.video_ids() == ["c0", "c1", "c2", "c3"]


def test_export_on_a_full_disk_leaves_nothing(make_library, tiny_disk, capsys):
    folder = make_library(6, text_index=False)
    disk = tiny_disk("64k")
    _fill(disk, 8 * 1024)
    rc = main(["export", str(disk / "out"), "--library", str(folder)])
    err = capsys.readouterr().err
    assert rc == 1 and "disk is full" in err and "Traceback" not in err
    assert not [p for p in (disk / "out").rglob("*") if p.name.endswith(".partial")]


def test_export_write_failure_anywhere(make_library, tmp_path, monkeypatch, capsys):
    """The same without root: every write fails with ENOSPC."""
    import builtins
    import errno

    folder = make_library(2, text_index=False)
    real_open = builtins.open

    def full_open(path, mode="r", *a, **k):
        if "w" in mode and str(path).endswith(".partial"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, mode, *a, **k)
    monkeypatch.setattr(builtins, "open", full_open)
    rc = main(["export", str(tmp_path / "out"), "--library", str(folder)])
    err = capsys.readouterr().err
    assert rc == 1 and "disk is full" in err
    assert os.listdir(tmp_path / "out") == []


def test_a_clip_cut_short_by_a_full_disk_is_never_renamed_into_place(tiny_disk, tmp_path):
    """The video encoder's writes fail silently on a full disk; the clip is decoded before it is
    renamed, and a short one is an error with nothing left behind (issue 37)."""
    import cv2
    import numpy as np

    from strived.export import ExportError, cut_clip_reencode

    src = tmp_path / "src.mp4"
    w = cv2.VideoWriter(str(src), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (320, 240))
    rng = np.random.default_rng(0)
    for _ in range(60):
        w.write(rng.integers(0, 255, (240, 320, 3), dtype=np.uint8))   # noise: a large clip
    w.release()
    disk = tiny_disk("96k")
    dst = disk / "clip.mp4"
    with pytest.raises(ExportError, match="written completely|wrote nothing|disk"):
        cut_clip_reencode(str(src), dst, 0, 59)
    assert not dst.exists() and os.listdir(disk) == []
    ok = tmp_path / "ok.mp4"
    cut_clip_reencode(str(src), ok, 0, 59)         # the same clip where there is room: all 60 frames
    cap = cv2.VideoCapture(str(ok))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 60
