"""Several videos in flight: worker processes give the records one process gives, cancel stops
them at once, a worker that dies fails its own video only, and `strived bench index` measures the
whole command."""

import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from strived.errors import StrivedError
from strived.indexing.job import index_folder
from strived.indexing.workers import _perceive_in_worker, plan_workers
from strived.store.library import Library
from tests.perception.test_indexing import _fingerprint


def die_on_b(path, video_id, camera_config, root):
    """A worker's per-video function that kills its process on video ``b`` (as an out-of-memory
    kill or a crash in a native decoder would)."""
    if video_id == "b":
        os._exit(3)
    return _perceive_in_worker(path, video_id, camera_config, root)


def _videos(tmp_path, make_video, n=3):
    src = tmp_path / "videos"
    src.mkdir()
    for k, name in enumerate("abcdef"[:n]):
        make_video(src / f"{name}.mp4", n_frames=14 + 3 * k, box_speed_px=3.0 + k)
    return src


def test_plan_workers():
    assert plan_workers(10, None, cpus=2) == (2, 1)
    assert plan_workers(1, None, cpus=16) == (1, 16)          # one video: no pool, every core
    assert plan_workers(100, 0, cpus=64) == (8, 8)           # automatic: at most 8 workers
    assert plan_workers(100, 3, cpus=16) == (3, 5)           # asked for: the cores shared
    assert plan_workers(2, 8, cpus=16) == (2, 8)             # never more workers than videos


def test_workers_give_the_records_one_process_gives(tmp_path, make_video):
    src = _videos(tmp_path, make_video)
    with Library.open(tmp_path / "one", create=True) as one, Library.open(tmp_path / "two", create=True) as two:
        r1 = index_folder(src, one, workers=1, device="cpu")
        r2 = index_folder(src, two, workers=2, device="cpu")
        assert r1.ok and r2.ok and r1.workers == 1 and r2.workers == 2
        assert sorted(r2.indexed) == ["a", "b", "c"] and r2.device == "cpu"
        for vid in ("a", "b", "c"):
            assert _fingerprint(one.get_video(vid)) == _fingerprint(two.get_video(vid))
        assert r2.timings_s["detect"] > 0 and r2.video_s == pytest.approx(r1.video_s)
        assert index_folder(src, two, workers=2, device="cpu").unchanged == 3   # incremental as before


def test_cancel_stops_the_workers_and_the_next_run_resumes(tmp_path, make_video):
    src = _videos(tmp_path, make_video, n=4)
    seen = []

    def progress(ev):
        seen.append(ev.stage)

    with Library.open(tmp_path / "lib", create=True) as lib:
        rep = index_folder(src, lib, workers=2, device="cpu", progress=progress,
                           cancel=lambda: "frames" in seen)
        assert rep.cancelled and len(rep.indexed) < 4
        assert mp.active_children() == []                      # no worker process left behind
        rep2 = index_folder(src, lib, workers=2, device="cpu")
        assert rep2.ok and sorted(rep2.indexed + rep.indexed) == ["a", "b", "c", "d"]


def test_a_worker_that_dies_fails_its_own_video_only(tmp_path, make_video):
    from strived.indexing.job import IndexItem
    from strived.indexing.state import fingerprint
    from strived.indexing.workers import perceive_in_workers
    from strived.perception.pipeline import PerceptionConfig

    src = _videos(tmp_path, make_video, n=4)
    items = [IndexItem(p, p.stem, fingerprint(p), None) for p in sorted(src.glob("*.mp4"))]
    out = dict((it.video_id, res) for it, res in
               perceive_in_workers(items, PerceptionConfig(device="cpu"), src, workers=2, threads=1, work=die_on_b))
    assert sorted(out) == ["a", "b", "c", "d"]
    assert isinstance(out["b"], StrivedError) and "worker process died" in str(out["b"])
    for vid in "acd":
        assert not isinstance(out[vid], BaseException) and out[vid].records.info.id == vid
    assert mp.active_children() == []


def test_bench_index_measures_the_whole_command(tmp_path, make_video):
    src = _videos(tmp_path, make_video, n=2)
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "-m", "strived", "bench", "index", str(src), "--workers", "2",
                        "--device", "cpu", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["videos"] == 2 and d["workers"] == 2 and d["device"] == "cpu"
    assert d["wall_s"] > d["perception_wall_s"] > 0 and d["realtime_x"] == pytest.approx(d["video_s"] / d["wall_s"], rel=1e-2)
    assert abs(sum(d["stage_share"].values()) - 1.0) < 0.01 and "x" in r.stdout and "real time" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "strived", "bench", "index", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "not a folder" in bad.stderr and "Traceback" not in bad.stderr
    assert Path(src).is_dir()
