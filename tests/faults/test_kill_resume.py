"""kill -9 and Ctrl-C during indexing, and a kill at the dense index commit: the library stays
whole, the next run resumes, and the result equals an uninterrupted run."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from strived import engine
from strived.retrieval import sources
from strived.store import Library
from tests.perception.conftest import write_video

from .conftest import REPO


def _worker(*args, delay=0.05, hold_after=0):
    env = dict(os.environ, PYTHONPATH=str(REPO), STRIVED_TEST_DETECT_DELAY=str(delay),
               STRIVED_TEST_DETECT_HOLD_AFTER=str(hold_after))
    return subprocess.Popen([sys.executable, "-m", "tests.faults._worker", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(lib_dir) -> int:
    db = lib_dir / "library.sqlite"
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)) as c:
            return c.execute("SELECT COUNT(*) FROM files WHERE status='done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def _snapshot(lib_dir):
    """Everything a search reads, per video: records and tracks, byte for byte."""
    with Library.open(lib_dir) as lib:
        out = {}
        for vid in lib.video_ids():
            r = lib.get_video(vid)
            out[vid] = (r.t.tobytes(), tuple((t.track_id, t.cls, t.pos.tobytes(),
                                              *(t.fields[f].tobytes() for f in sorted(t.fields)))
                                             for t in r.tracks))
        states = dict(lib.conn.execute("SELECT video_id, status FROM files"))
        return out, states


@pytest.fixture
def footage(tmp_path):
    src = tmp_path / "footage"
    src.mkdir()
    for k in range(5):
        write_video(src / f"clip{k}.mp4", n_frames=24, box_speed_px=2 + k)
    return src


def _index_cli(src, lib_dir, delay=0.0):
    p = _worker("cli", "index", str(src), "--library", str(lib_dir), "--quiet", delay=delay)
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


def test_kill_9_during_indexing_then_resume_equals_an_uninterrupted_run(footage, tmp_path):
    ref = tmp_path / "ref"
    rc, out, err = _index_cli(footage, ref)
    assert rc == 0, err
    lib_dir = tmp_path / "lib"
    kills = 0
    for want in (1, 3):                    # kill twice, at different points
        p = _worker("cli", "index", str(footage), "--library", str(lib_dir), "--quiet", delay=0.08)
        t0 = time.monotonic()
        while _done(lib_dir) < want and p.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.05)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.communicate(timeout=60)
        with Library.open(lib_dir) as lib:
            assert not lib.integrity_problems(full=True)
            assert len(lib) >= want
    assert kills >= 1
    rc, out, err = _index_cli(footage, lib_dir)
    assert rc == 0, err
    assert "indexed" in out
    got, states = _snapshot(lib_dir)
    want_, want_states = _snapshot(ref)
    assert got == want_ and states == want_states == {f"clip{k}": "done" for k in range(5)}
    sources.clear_caches()


def test_ctrl_c_stops_cleanly_and_resumes(footage, tmp_path):
    lib_dir = tmp_path / "lib"
    # the detector holds on its 10th call (the second clip: 6 calls a clip), so the Ctrl-C lands
    # mid-run however slow or loaded the machine is
    p = _worker("cli", "index", str(footage), "--library", str(lib_dir), "--quiet", delay=0.02, hold_after=9)
    t0 = time.monotonic()
    while _done(lib_dir) < 1 and p.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()[1]
    time.sleep(0.3)                        # into the held call
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    rc, out, err = _index_cli(footage, lib_dir)
    assert rc == 0 and "unchanged" in out
    got, states = _snapshot(lib_dir)
    assert sorted(got) == [f"clip{k}" for k in range(5)] and set(states.values()) == {"done"}


def test_kill_at_the_dense_commit(make_library, fast_embedder):
    folder = make_library(3)
    with Library.open(folder) as lib:
        before = engine.search(lib, "a car ahead brakes", top_k=10)
    p = _worker("commit-kill", str(folder), "6")
    p.communicate(timeout=120)
    assert p.returncode == 137
    sources.clear_caches()
    with Library.open(folder) as lib:
        assert len(lib) == 6                                 # the records were committed
        resp = engine.search(lib, "a car ahead brakes", top_k=10)
        assert "dense" in resp.sources_used                  # the previous dense index stands
        assert any("added or changed after" in n for n in resp.notices)   # and lag is said
        sources.ensure_text_index(lib)
        resp = engine.search(lib, "a car ahead brakes", top_k=10)
        assert not any("added or changed after" in n for n in resp.notices)
        assert len(resp.hits) >= len(before.hits)
    gens = [x.name for x in (folder / "dense").iterdir() if x.is_dir()]
    assert len(gens) == 1 and not np.any([x.name.endswith(".tmp") for x in (folder / "dense").iterdir()])


def _segments_stored(lib_dir) -> list[int]:
    db = lib_dir / "library.sqlite"
    if not db.exists():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)) as c:
            return sorted(r[0] for r in c.execute("SELECT seg FROM perceived_segments"))
    except sqlite3.Error:
        return []


def test_kill_9_in_a_long_file_resumes_at_its_first_unfinished_segment(tmp_path):
    """Issue 33: a long file is perceived in segments, each stored when finished; kill -9 after k
    of them and the next run perceives only the others, and its records equal an uninterrupted
    run's (same frames, tracks and ego series, byte for byte)."""
    from tests.perception.long_video import write_long_video

    src = tmp_path / "footage"
    src.mkdir()
    write_long_video(src / "drive.mp4")            # 48 s: 4 segments of 12 s
    seg_env = {"STRIVED_SEGMENT_S": "12", "STRIVED_LONG_FILE_S": "20"}

    def index(lib_dir, log, delay=0.0):
        env = dict(os.environ, PYTHONPATH=str(REPO), STRIVED_TEST_DETECT_DELAY=str(delay),
                   STRIVED_TEST_PERCEIVE_LOG=str(log), **seg_env)
        return subprocess.Popen([sys.executable, "-m", "tests.faults._worker", "cli", "index", str(src),
                                 "--library", str(lib_dir), "--quiet", "--fps", "5"], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    ref = index(tmp_path / "ref", tmp_path / "ref.log")
    assert ref.wait(timeout=300) == 0, ref.communicate()[1]
    lib_dir = tmp_path / "lib"
    p = index(lib_dir, tmp_path / "killed.log", delay=0.03)
    t0 = time.monotonic()
    while len(_segments_stored(lib_dir)) < 2 and p.poll() is None and time.monotonic() - t0 < 240:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()[1]
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    stored = _segments_stored(lib_dir)
    assert stored[:2] == [0, 1] and len(stored) < 4                   # k segments kept, in order
    with Library.open(lib_dir) as lib:
        assert not lib.integrity_problems(full=True) and "drive" not in lib.video_ids()
    ranges = {0: "0-16", 1: "8-28", 2: "20-40", 3: "32-inf"}          # core +- 4 s of overlap
    killed = (tmp_path / "killed.log").read_text().split()
    assert [ranges[k] for k in stored] == [w for v, w in zip(killed[::2], killed[1::2]) if v == "done"]

    p = index(lib_dir, tmp_path / "resumed.log")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    resumed = (tmp_path / "resumed.log").read_text().split()
    # only the unfinished segments were perceived again, from the first of them
    assert resumed[1::2] == [w for k in range(4) if k not in stored for w in (ranges[k], ranges[k])]
    assert _segments_stored(lib_dir) == []
    got, states = _snapshot(lib_dir)
    want, want_states = _snapshot(tmp_path / "ref")
    assert got == want and states == want_states == {"drive": "done"}
    with Library.open(lib_dir) as a, Library.open(tmp_path / "ref") as b:
        ra, rb = a.get_video("drive"), b.get_video("drive")
        for k in ra.ego:
            assert ra.ego[k].tobytes() == rb.ego[k].tobytes()
        assert ra.info.attrs["segments"]["n"] == 4 and a.thumbnail("drive") == b.thumbnail("drive")
    sources.clear_caches()
