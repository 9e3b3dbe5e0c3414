"""Long recordings (issue 33): perceived in segments stored as they finish, joined into one
video whose tracks cross segment boundaries as one track, with exact times late in the file,
and progress inside the file."""

from __future__ import annotations

import numpy as np
import pytest

from strived.indexing.job import index_folder
from strived.store import Library
from strived.store.segments import TABLE

from .conftest import FakeDetector
from .long_video import write_long_video

SEG = dict(segment_s=12.0, long_file_s=20.0, sample_fps=5.0)   # 48 s of video: 4 segments


@pytest.fixture(scope="module")
def long_runs(tmp_path_factory):
    """The long video indexed in segments (with every progress event, and the segment rows seen
    at each one) and, for reference, as one piece."""
    root = tmp_path_factory.mktemp("long")
    src = root / "footage"
    src.mkdir()
    video = write_long_video(src / "drive.mp4")
    events = []
    with Library.open(root / "seg", create=True) as lib:
        def progress(ev):
            stored = [r[0] for r in lib.conn.execute(f"SELECT seg FROM {TABLE}")] \
                if lib.conn.execute("SELECT 1 FROM sqlite_master WHERE name=?", (TABLE,)).fetchone() else []
            events.append((ev.stage, ev.done, ev.total, ev.item, sorted(stored)))
        rep = index_folder(src, lib, detector=FakeDetector(), workers=1, progress=progress, **SEG)
        assert rep.ok and rep.indexed == ["drive"], rep.failed
        seg = lib.get_video("drive")
        left = lib.conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
        thumb = lib.thumbnail("drive")
    with Library.open(root / "whole", create=True) as lib:
        index_folder(src, lib, detector=FakeDetector(), workers=1, segment_s=12.0, long_file_s=1000.0,
                     sample_fps=5.0)
        whole = lib.get_video("drive")
    return {"video": video, "seg": seg, "whole": whole, "events": events, "left": left, "thumb": thumb}


def test_a_track_crossing_a_segment_boundary_is_one_track(long_runs):
    seg, whole = long_runs["seg"], long_runs["whole"]
    assert seg.info.attrs["segments"] == {"n": 4, "segment_s": 12.0, "overlap_s": 4.0}
    assert "segments" not in whole.info.attrs
    # the sampled frames are those of a whole-file decode, frame for frame
    assert np.array_equal(seg.frame_idx, whole.frame_idx) and np.array_equal(seg.t, whole.t)
    spans = [(round(float(seg.t[tr.pos[0]]), 3), round(float(seg.t[tr.pos[-1]]), 3)) for tr in seg.tracks]
    assert spans == [(18.0, 29.8), (40.0, 43.8)]          # the block on screen 18-30 s crosses 24 s
    assert [tr.track_id for tr in seg.tracks] == [1, 2]
    assert spans == [(round(float(whole.t[tr.pos[0]]), 3), round(float(whole.t[tr.pos[-1]]), 3))
                     for tr in whole.tracks]
    cross = seg.tracks[0]
    assert len(cross) == 60 and np.all(np.diff(cross.pos) == 1)   # every sampled frame, none twice
    assert np.allclose(cross.bbox, whole.tracks[0].bbox)
    assert seg.problem() is None
    for k in ("speed", "yaw_rate", "jolt"):
        assert len(seg.ego[k]) == len(seg.t)


def test_segments_are_stored_as_they_finish_then_cleared(long_runs):
    ev = [e for e in long_runs["events"] if e[0] == "frames"]
    # while the last segment ran, the three before it were already in the library
    assert ev[-2][4] == [0, 1, 2]
    assert any(e[4] == [0] for e in ev) and any(e[4] == [0, 1] for e in ev)
    assert long_runs["left"] == 0 and long_runs["thumb"]


def test_progress_inside_the_file(long_runs):
    path = str(long_runs["video"])
    fr = [e for e in long_runs["events"] if e[0] == "frames"]
    assert fr and {e[3] for e in fr} == {path}
    assert {e[2] for e in fr} == {240}                      # the file's sampled frames, 48 s at 5 fps
    done = [e[1] for e in fr]
    assert done == sorted(done) and done[-1] == 240
    assert len({d for d in done if 0 < d < 240}) > 8        # moves inside every segment
    vids = [e for e in long_runs["events"] if e[0] == "videos" and e[1] > 0]
    assert [(e[1], e[2]) for e in vids] == [(1, 1)]         # one video, said once


class FailingDetector(FakeDetector):
    """Raises on one call (a crash inside one segment); counts its calls."""

    def __init__(self, fail_on: int | None = None):
        super().__init__()
        self.fail_on = fail_on

    def detect(self, frames):
        if self.calls + 1 == self.fail_on:
            self.calls += 1
            raise RuntimeError("detector crashed")
        return super().detect(frames)


def test_a_failed_segment_fails_the_file_and_a_retry_redoes_only_that_segment(tmp_path):
    src = tmp_path / "footage"
    src.mkdir()
    write_long_video(src / "drive.mp4")
    with Library.open(tmp_path / "lib", create=True) as lib:
        # batches of 4 frames: segment 1 reads 0-16 s (20 calls), segment 2 8-28 s (25 calls)
        rep = index_folder(src, lib, detector=FailingDetector(fail_on=30), workers=1, **SEG)
        assert not rep.indexed and len(rep.failed) == 1
        assert "segment 2 of 4 (12 s to 24 s)" in rep.failed[0][1] and "detector crashed" in rep.failed[0][1]
        assert "drive" not in lib.video_ids()
        assert sorted(r[0] for r in lib.conn.execute(f"SELECT seg FROM {TABLE}")) == [0, 2, 3]
        again = FailingDetector()
        rep = index_folder(src, lib, detector=again, workers=1, retry_failed=True, **SEG)
        assert rep.ok and rep.indexed == ["drive"]
        assert again.calls == 25                       # segment 2 only
        assert lib.conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0] == 0
        got = lib.get_video("drive")
    ref = index_folder_fresh(src, tmp_path / "ref")
    assert np.array_equal(got.t, ref.t) and len(got.tracks) == len(ref.tracks)
    for a, b in zip(got.tracks, ref.tracks):
        assert np.array_equal(a.pos, b.pos) and np.allclose(a.bbox, b.bbox)
    for k in got.ego:
        assert np.array_equal(got.ego[k], ref.ego[k], equal_nan=True)


def index_folder_fresh(src, lib_dir):
    with Library.open(lib_dir, create=True) as lib:
        index_folder(src, lib, detector=FakeDetector(), workers=1, **SEG)
        return lib.get_video("drive")


@pytest.mark.parametrize("name", ["dashcam_us_highway_overtake", "idd_mm_0003500_0003700", "kb_highway_dashcam2"])
def test_a_segment_reads_the_frames_of_a_whole_file_decode(bench_dev, name):
    """Seeking to a segment gives the same sampled frames, indices and times as decoding the
    whole file (H.264 at 23.976, 15 and 30 fps)."""
    from strived.perception.long_file import iter_frames_range
    from strived.perception.video import iter_frames

    path = bench_dev / "videos" / f"{name}.mp4"
    full = [(f.frame_idx, f.t_s) for f in iter_frames(path, 10.0)]
    got = []
    for a, b in ((0.0, 4.0), (4.0, 8.0), (8.0, float("inf"))):
        got += [(f.frame_idx, f.t_s) for f in iter_frames_range(path, 10.0, a, b)]
    assert got == full


def test_availability_over_segments_says_where_a_field_was_not_estimated():
    from strived.perception.stitch import _join_availability

    ok = {"speed": {"source": "video", "reason": None, "quality": 0.8}}
    no = {"speed": {"source": "video", "reason": "road motion does not fit a flat road ahead"}}
    got = _join_availability([no, ok, no], [100, 100, 100])
    assert got["speed"] == {"source": "video", "quality": 0.8,
                            "reason": "in 2 of 3 segments: road motion does not fit a flat road ahead"}
    assert _join_availability([no, no], [1, 1])["speed"] == no["speed"]
    assert _join_availability([ok, ok], [1, 3])["speed"]["reason"] is None
