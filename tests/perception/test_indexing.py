"""index_folder: records in the library, incremental re-runs, failures recorded, resume, cancel."""

import shutil

import numpy as np
import pytest

from strived.indexing.job import index_folder
from strived.perception.pipeline import perceive_video
from strived.records import VideoRecords
from strived.store.library import Library


@pytest.fixture
def lib(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    yield lib
    lib.close()


def test_perceive_video_tracks_block(tiny_video, fake_detector):
    res = perceive_video(tiny_video, video_id="clip", detector=fake_detector)
    rec = res.records
    assert rec.info.id == "clip" and len(rec.t) == 30 and rec.info.attrs["daynight"] in ("day", "night")
    assert len(rec.tracks) == 1
    tr = rec.tracks[0]
    assert tr.cls == "car" and len(tr) >= 25 and tr.attrs.get("color") == "red"
    assert np.all(np.diff(tr.bbox[:, 0]) > 0)                 # moving right
    assert np.isfinite(tr.fields["distance"]).all() and np.all(tr.fields["distance"] > 0)
    assert np.nanmean(np.diff(tr.fields["loc_x"])) > 0        # lateral offset grows to the right
    assert res.thumbnail_jpeg[:2] == b"\xff\xd8"
    back = VideoRecords.from_json_dict(rec.to_json_dict())   # the file format round-trips
    assert back.tracks[0].attrs["color"] == "red" and len(back.tracks[0]) == len(tr)


def _folder(tmp_path, make_video):
    src = tmp_path / "videos"
    (src / "sub").mkdir(parents=True)
    make_video(src / "a.mp4", n_frames=20)
    make_video(src / "sub" / "b.MOV", n_frames=15)
    (src / "broken.mp4").write_bytes(b"not a video at all" * 100)
    return src


def _fingerprint(rec):
    return (rec.t.tobytes(), rec.frame_idx.tobytes(),
            tuple((t.track_id, t.cls, t.pos.tobytes(), t.bbox.tobytes(), *(t.fields[f].tobytes() for f in sorted(t.fields)))
                  for t in rec.tracks),
            tuple(np.asarray(rec.ego[f]).tobytes() for f in sorted(rec.ego)))


def test_detector_thread_changes_nothing_and_passes_errors_on(tmp_path, fake_detector):
    """Detection one batch ahead in a second thread gives the same records as the stages one after
    the other; a detector that fails there fails the video with its own error, and no thread is left."""
    import threading

    from tests.perception.conftest import write_video

    clip = write_video(tmp_path / "c.mp4", n_frames=37, box_speed_px=3.0)   # 10 batches, the last one short
    a = perceive_video(clip, video_id="c", detector=fake_detector, overlap=True).records
    b = perceive_video(clip, video_id="c", detector=fake_detector, overlap=False).records
    assert len(a.t) == 37 and len(a.tracks) == 1 and _fingerprint(a) == _fingerprint(b)

    class Breaks:
        name, device, config, calls = "fake", "cpu", {"detector": "fake"}, 0

        def detect(self, frames):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("detector broke on batch 3")
            return fake_detector.detect(frames)

    with pytest.raises(RuntimeError, match="batch 3"):
        perceive_video(clip, video_id="c", detector=Breaks(), overlap=True)
    assert not [t for t in threading.enumerate() if t.name.startswith("strived-detect")]


def test_index_incremental_failures_and_thumbnails(tmp_path, make_video, fake_detector, lib):
    src = _folder(tmp_path, make_video)
    events = []
    rep = index_folder(src, lib, detector=fake_detector, progress=events.append)
    assert rep.found == 3 and sorted(rep.indexed) == ["a", "sub__b"]
    assert len(rep.failed) == 1 and "broken.mp4" in rep.failed[0][0] and "cannot decode" in rep.failed[0][1]
    assert lib.video_ids() == ["a", "sub__b"]
    assert lib.get_video("a").tracks[0].cls == "car"
    rows = {r[0].rsplit("/", 1)[-1]: r[1:] for r in lib.conn.execute("SELECT path, status, error FROM files")}
    assert rows["broken.mp4"][0] == "failed" and rows["a.mp4"] == ("done", None)
    n_thumbs = lib.conn.execute("SELECT COUNT(*) FROM thumbnails WHERE length(jpeg) > 100").fetchone()[0]
    assert n_thumbs == 2
    assert any(e.stage == "videos" and e.done == 3 for e in events)

    calls = fake_detector.calls
    rep2 = index_folder(src, lib, detector=fake_detector)
    assert rep2.indexed == [] and rep2.unchanged == 2 and len(rep2.skipped_failed) == 1
    assert fake_detector.calls == calls                      # nothing re-perceived

    # touched but same content -> unchanged; changed content -> re-indexed under the same id
    import os
    os.utime(src / "a.mp4", (1, 1))
    make_video(src / "sub" / "b.MOV", n_frames=25)
    rep3 = index_folder(src, lib, detector=fake_detector)
    assert rep3.indexed == ["sub__b"] and rep3.unchanged == 1
    assert len(lib.get_video("sub__b").t) == 25

    # a different sampling rate is a different config: everything is redone
    rep4 = index_folder(src, lib, detector=fake_detector, sample_fps=5.0)
    assert sorted(rep4.indexed) == ["a", "sub__b"]

    shutil.rmtree(src / "sub")
    rep5 = index_folder(src, lib, detector=fake_detector, sample_fps=5.0)
    assert len(rep5.missing) == 1 and rep5.missing[0].endswith("b.MOV")


def test_cancel_then_resume(tmp_path, make_video, fake_detector, lib):
    src = tmp_path / "v"
    src.mkdir()
    for name in ("a", "b", "c"):
        make_video(src / f"{name}.mp4", n_frames=20)
    stop_after = {"n": 0}

    def progress(ev):
        if ev.stage == "videos" and ev.done >= 1:
            stop_after["n"] = 1

    rep = index_folder(src, lib, detector=fake_detector, progress=progress, cancel=lambda: stop_after["n"] == 1)
    assert rep.cancelled and rep.indexed == ["a"]
    assert lib.video_ids() == ["a"]
    statuses = dict(lib.conn.execute("SELECT video_id, status FROM files").fetchall())
    assert statuses == {"a": "done", "b": "running", "c": "running"}
    rep2 = index_folder(src, lib, detector=fake_detector)
    assert rep2.indexed == ["b", "c"] and rep2.unchanged == 1 and not rep2.cancelled


def test_cancel_inside_a_video_is_quick(tmp_path, make_video, fake_detector, lib):
    import time

    src = tmp_path / "v"
    src.mkdir()
    make_video(src / "long.mp4", n_frames=200)
    t0 = time.perf_counter()
    rep = index_folder(src, lib, detector=fake_detector, cancel=lambda: fake_detector.calls >= 2)
    assert rep.cancelled and rep.indexed == [] and len(lib) == 0
    assert time.perf_counter() - t0 < 5


def test_missing_folder(tmp_path, lib, fake_detector):
    with pytest.raises(FileNotFoundError):
        index_folder(tmp_path / "nope", lib, detector=fake_detector)


def test_cli_index_command(tmp_path, make_video, capsys):
    import argparse

    from strived.commands import index

    src = tmp_path / "v"
    src.mkdir()
    make_video(src / "a.mp4", n_frames=12)
    (src / "zero.ts").write_bytes(b"")
    ap = argparse.ArgumentParser()
    index.register(ap.add_subparsers())
    args = ap.parse_args(["index", str(src), "--library", str(tmp_path / "lib"), "--quiet"])
    rc = args.func(args)
    out, err = capsys.readouterr()
    assert rc == 1 and "1 indexed" in out and "FAILED" in err and "empty file" in err
    with Library.open(tmp_path / "lib") as lib2:
        assert lib2.video_ids() == ["a"]


def test_full_disk_stops_cleanly_and_the_next_run_resumes(tmp_path, make_video, fake_detector, lib, monkeypatch):
    """A full disk while writing video b: a clear LibraryError, nothing half-written, and the next
    run (disk freed) indexes b and c without redoing a."""
    import sqlite3

    from strived.errors import LibraryError

    src = tmp_path / "v"
    src.mkdir()
    for name in ("a", "b", "c"):
        make_video(src / f"{name}.mp4", n_frames=20)
    real_add = Library.add_video

    def add_video(self, rec, replace=True):
        if rec.info.id == "b":
            raise sqlite3.OperationalError("database or disk is full")
        return real_add(self, rec, replace=replace)
    monkeypatch.setattr(Library, "add_video", add_video)
    with pytest.raises(LibraryError, match="disk is full"):
        index_folder(src, lib, detector=fake_detector)
    assert lib.video_ids() == ["a"]
    assert lib.conn.execute("SELECT COUNT(*) FROM tracks WHERE video_id='b'").fetchone()[0] == 0
    statuses = dict(lib.conn.execute("SELECT video_id, status FROM files").fetchall())
    assert statuses["a"] == "done" and statuses["b"] == "running"
    monkeypatch.setattr(Library, "add_video", real_add)
    rep = index_folder(src, lib, detector=fake_detector)
    assert rep.indexed == ["b", "c"] and rep.unchanged == 1
    assert lib.video_ids() == ["a", "b", "c"]
