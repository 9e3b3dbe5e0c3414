"""Issue 15 item 5: moving or renaming the footage folder must not duplicate every video;
missing files are reported; videos can be removed and relinked (CLI + engine API)."""

from __future__ import annotations

import os
import shutil

import pytest

from strived.cli import main
from strived.indexing.job import index_folder
from strived.store import Library
from strived.maintenance.footage import find_moved, missing_videos, relink, remove_videos
from tests.perception.conftest import FakeDetector, write_video


@pytest.fixture
def indexed(tmp_path):
    src = tmp_path / "footage"
    (src / "day1").mkdir(parents=True)
    write_video(src / "day1" / "a.mp4", n_frames=12)
    write_video(src / "day1" / "b.mp4", n_frames=14, box_speed_px=6)
    write_video(src / "c.mp4", n_frames=16, box_speed_px=2)
    lib = Library.open(tmp_path / "lib", create=True)
    det = FakeDetector()
    rep = index_folder(src, lib, detector=det)
    assert sorted(rep.indexed) == ["c", "day1__a", "day1__b"]
    yield src, lib, det
    lib.close()


def _paths(lib):
    return dict(lib.conn.execute("SELECT id, path FROM videos"))


def test_moved_folder_is_relinked_not_duplicated(indexed, tmp_path):
    src, lib, det = indexed
    calls = det.calls
    moved = tmp_path / "archive" / "footage-2024"
    moved.parent.mkdir()
    os.rename(src, moved)
    rep = index_folder(moved, lib, detector=det)
    assert rep.indexed == [] and rep.unchanged == 3 and len(rep.relinked) == 3
    assert det.calls == calls                           # nothing perceived again
    assert lib.video_ids() == ["c", "day1__a", "day1__b"]
    assert all(p.startswith(str(moved.resolve())) for p in _paths(lib).values())
    assert lib.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0] == 3
    assert rep.missing == [] and rep.missing_elsewhere == 0


def test_renamed_and_copied_without_mtime(indexed):
    src, lib, det = indexed
    shutil.copyfile(src / "c.mp4", src / "renamed.mp4")   # new mtime, same content
    os.unlink(src / "c.mp4")
    rep = index_folder(src, lib, detector=det)
    assert rep.relinked and rep.indexed == []
    assert "c" in lib.video_ids() and "renamed" not in lib.video_ids()
    assert _paths(lib)["c"].endswith("renamed.mp4")


def test_missing_files_are_reported_and_removed(indexed, capsys, fast_embedder):
    src, lib, det = indexed
    os.unlink(src / "day1" / "b.mp4")
    rep = index_folder(src, lib, detector=det)
    assert rep.missing == [str((src / "day1" / "b.mp4").resolve())]
    assert [m.video_id for m in missing_videos(lib)] == ["day1__b"]
    lib_dir = str(lib.folder)
    assert main(["check", "--library", lib_dir]) == 1     # texts never built (index_folder alone)
    out = capsys.readouterr().out
    assert "BM25 texts: 3 videos without one" in out
    assert "1 video files are gone" in out and "day1__b" in out and "strived remove --missing" in out
    assert main(["remove", "--missing", "--dry-run", "--library", lib_dir]) == 0
    assert "would remove day1__b" in capsys.readouterr().out
    assert lib.video_ids() == ["c", "day1__a", "day1__b"]
    assert main(["remove", "--missing", "--library", lib_dir]) == 0
    assert "removed day1__b" in capsys.readouterr().out
    assert lib.video_ids() == ["c", "day1__a"] and missing_videos(lib) == []
    assert main(["remove", "nope", "--library", lib_dir]) == 1
    assert "no video 'nope'" in capsys.readouterr().err


def test_relink_command_and_search(indexed, tmp_path, capsys):
    src, lib, det = indexed
    new = tmp_path / "elsewhere"
    os.rename(src, new)
    assert len(missing_videos(lib)) == 3
    assert main(["relink", str(src / "day1"), str(new / "day1"), "--library", str(lib.folder)]) == 0
    out = capsys.readouterr().out
    assert "2 videos relinked" in out
    assert [m.video_id for m in missing_videos(lib)] == ["c"]
    assert main(["relink", "--search", str(tmp_path), "--library", str(lib.folder)]) == 0
    assert "relinked c" in capsys.readouterr().out
    assert missing_videos(lib) == []
    rep = index_folder(new, lib, detector=det)             # and the state follows: nothing redone
    assert rep.indexed == [] and rep.unchanged == 3


def test_relink_refuses_other_content(indexed, tmp_path):
    src, lib, det = indexed
    new = tmp_path / "other"
    new.mkdir()
    write_video(new / "c.mp4", n_frames=30, box_speed_px=9)   # same name, different video
    os.unlink(src / "c.mp4")
    rep = relink(lib, src / "c.mp4", new / "c.mp4")
    assert not rep.relinked and "other content" in rep.not_relinked[0][2]
    rep = find_moved(lib, new)
    assert not rep.relinked


def test_remove_videos_api(indexed):
    src, lib, det = indexed
    assert remove_videos(lib, ["c", "c", "ghost"]) == ["c"]
    assert lib.video_ids() == ["day1__a", "day1__b"]
    assert lib.conn.execute("SELECT COUNT(*) FROM files WHERE video_id='c'").fetchone()[0] == 0


def test_remove_missing_refuses_when_the_whole_footage_folder_is_gone(indexed, capsys, fast_embedder):
    """An unplugged drive (every file and its folder gone) is not a deletion: `remove --missing`
    refuses and removes nothing unless --yes (issue 37, destructive defaults)."""
    src, lib, det = indexed
    lib_dir = str(lib.folder)
    before = lib.video_ids()
    os.rename(src, src.with_name(src.name + "_unplugged"))
    assert main(["remove", "--missing", "--library", lib_dir]) == 1
    err = capsys.readouterr().err
    assert "folders that no longer exist" in err and "nothing was removed" in err and "--yes" in err
    assert lib.video_ids() == before
    assert main(["remove", "--missing", "--dry-run", "--library", lib_dir]) == 0   # listing is harmless
    assert main(["remove", "--missing", "--yes", "--library", lib_dir]) == 0
    assert lib.video_ids() == []
