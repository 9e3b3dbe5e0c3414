"""Bad input around the on-disk feature cache (issue 13): a truncated, foreign-length or missing
cache file, a full disk while caching, and two processes building the same new window at once
give a silent recomputation with the right scores, never a wrong score or a broken library."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strived.evaluation.synth import make_video
from strived.rules import RuleScorer, parse_rule
from strived.rules import columns as C
from strived.store import Library

REPO = Path(__file__).resolve().parents[2]
RULE = {"event": "x", "entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
        "hard_gates": [{"field": "distance", "op": "lt", "value": 40.0}],
        "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2.345,
                         "magnitude": 3.0}]}


@pytest.fixture
def lib(tmp_path):
    rng = np.random.default_rng(7)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([make_video(k, rng, duration_s=8.0, n_tracks=6) for k in range(30)])
    yield lib
    lib.close()


def _scores(lib):
    return RuleScorer(lib).score(parse_rule(RULE)).scores


def _feat_files(lib):
    return sorted(p for p in lib.cache_dir.glob("feat-*-wc-loc_x-2.345-*.npy"))


def test_truncated_or_foreign_cache_files_are_recomputed(lib):
    ref = _scores(lib)                          # computes and caches the window features
    files = _feat_files(lib)
    assert len(files) == 2
    raw = files[0].read_bytes()
    files[0].write_bytes(raw[: len(raw) // 2])  # truncated (a crash mid-copy, a full disk)
    np.save(files[1], np.zeros(3))              # readable but of another corpus' length
    np.testing.assert_array_equal(_scores(lib), ref)
    for f in files:
        f.unlink()                              # deleted (e.g. by another process cleaning up)
    np.testing.assert_array_equal(_scores(lib), ref)
    assert all(np.load(f).shape[0] > 3 for f in _feat_files(lib))   # rewritten whole


def test_full_disk_while_caching_still_scores_right(lib, monkeypatch):
    ref = RuleScorer.from_records([lib.get_video(v) for v in lib.video_ids()]).score(parse_rule(RULE)).scores

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(C.np, "save", no_space)
    np.testing.assert_allclose(_scores(lib), ref, atol=1e-12)
    assert not list(lib.cache_dir.glob("*.tmp*"))    # nothing half-written left behind


def test_two_processes_build_the_same_new_window_at_once(lib):
    ref = _scores(lib)
    for f in _feat_files(lib):
        f.unlink()
    lib.close()
    code = ("import json, sys\nfrom strived.store import Library\nfrom strived.rules import RuleScorer, parse_rule\n"
            "lib = Library.open(sys.argv[1]); rule = parse_rule(json.loads(sys.argv[2]))\n"
            "print(json.dumps(RuleScorer(lib).score(rule).scores.tolist()))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(lib.folder), json.dumps(RULE)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        np.testing.assert_array_equal(np.array(json.loads(out)), ref)
    again = Library.open(lib.folder)
    try:
        np.testing.assert_array_equal(_scores(again), ref)     # the cache left behind is whole
        assert not list(again.cache_dir.glob("*.tmp*"))
        assert again.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        again.close()
