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


def test_kill_9_of_the_indexer_takes_its_workers_with_it(tmp_path, make_video):
    """`kill -9` of `strived index` while workers perceive: no worker outlives it (they would hold
    the terminal's pipes open and go on with videos nobody writes), and the next run completes."""
    import signal
    import time

    src = tmp_path / "videos"
    src.mkdir()
    for k in range(4):
        make_video(src / f"v{k}.mp4", n_frames=150, box_speed_px=1.0 + 0.3 * k)
    lib = tmp_path / "lib"
    p = subprocess.Popen([sys.executable, "-m", "strived", "index", str(src), "--library", str(lib),
                          "--workers", "2", "--device", "cpu"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while len(_child_pids(p.pid)) < 2 and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    kids = _child_pids(p.pid)
    assert len(kids) >= 2, "the workers started"
    time.sleep(1.0)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)                 # EOF on its pipes: nothing else holds them open
    deadline = time.monotonic() + 10
    while any(_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [k for k in kids if _alive(k)], "a worker outlived the indexer"
    r = subprocess.run([sys.executable, "-m", "strived", "index", str(src), "--library", str(lib),
                        "--workers", "2", "--device", "cpu", "--quiet"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with Library.open(lib) as done:
        assert sorted(done.video_ids()) == ["v0", "v1", "v2", "v3"] and not done.integrity_problems(full=True)


def _child_pids(pid: int) -> list[int]:
    """The perception workers of ``pid`` (its spawned children; not multiprocessing's resource tracker)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                try:
                    cmd = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"spawn_main" in cmd:
                    out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_text_index_in_its_own_process_reports_progress_and_cancels(tmp_path):
    """The app builds the search indexes in a spawned process (loading the embedder in its own
    froze the window): the same indexes result, progress arrives here, cancel stops it, a broken
    library is an error with its message."""
    import time

    from strived.errors import Cancelled
    from strived.indexing.text_process import build_text_index_in_process
    from strived.retrieval.sources import ensure_text_index
    from tests.faults.conftest import synth_records

    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_videos(synth_records(4))
    stages = []
    note = build_text_index_in_process(tmp_path / "lib", progress=lambda ev: stages.append(ev.stage))
    assert "texts" in stages and "features" in stages
    with Library.open(tmp_path / "lib") as lib:
        rep = ensure_text_index(lib)                 # nothing left to do: the child wrote it all
        assert rep.texts_built == 0 and rep.dense_embedded == 0 and not rep.dense_rebuilt
        assert rep.texts_fresh == 4 and (note is None or "unavailable" in note)
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        build_text_index_in_process(tmp_path / "lib", cancel=lambda: time.monotonic() - t0 > 0.5)
    assert time.monotonic() - t0 < 10 and mp.active_children() == []
    (tmp_path / "junk").mkdir()
    with pytest.raises(StrivedError):
        build_text_index_in_process(tmp_path / "junk")
