"""A cancelled search stops inside the rule source (per gate, soft score and chunk of a window
feature being computed), not only between sources, and leaves the library and its caches as
they were: the next search gives what a search on an untouched library gives."""

from __future__ import annotations

import os
import threading
import traceback

import numpy as np
import pytest

from strived import engine, search_steps
from strived.errors import Cancelled
from strived.evaluation.synth import make_video
from strived.rules import kernels as K
from strived.store.library import Library

RULE = {"event": "cut_in", "entity": {"role": "object", "class_filter": ["car", "truck"],
                                      "selection": "any", "agg_mode": "any"},
        "hard_gates": [{"field": "distance", "op": "lt", "value": 45.0}],
        "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2.3,
                         "magnitude": 3.0, "direction": "negative", "weight": 1.0},
                        {"type": "temporal_change", "field": "distance", "window_seconds": 3.1,
                         "magnitude": 6.0, "direction": "negative", "weight": 0.5}]}


def _library(folder):
    rng = np.random.default_rng(5)
    lib = Library.open(folder, create=True)
    lib.add_videos([make_video(k, rng, duration_s=8.0, n_tracks=9) for k in range(60)])
    return lib


class CountingCancel:
    """A cancel callable that turns true after ``after`` calls (thread-safe: the feature chunks
    call it from a pool)."""

    def __init__(self, after: int | None = None):
        self.after, self.calls = after, 0
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        with self._lock:
            self.calls += 1
            return self.after is not None and self.calls > self.after


def _search(lib, cancel=None, progress=None):
    return engine.search(lib, "a car cuts in", rule=RULE, sources=("rule",), top_k=20,
                         cancel=cancel, progress=progress)


def test_cancel_stops_inside_the_rule_source_and_leaves_the_library_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 4000)            # ~35 chunks per feature
    ref_lib = _library(tmp_path / "ref")
    count = CountingCancel()
    real_kernel = K.window_change
    runs = []
    monkeypatch.setattr(K, "window_change", lambda *a, **k: runs.append(1) or real_kernel(*a, **k))
    ref = _search(ref_lib, cancel=count)                     # never cancelled: counts the checks
    ref_kernel_runs = len(runs)
    assert count.calls > 40, "the rule source checks cancel per chunk"
    ref_ranking = [(h.video_id, h.score) for h in ref.hits]
    assert ref_ranking and ref.hits[0].score > 0

    lib = _library(tmp_path / "lib")
    ver = lib.content_version
    feats_before = sorted(p.name for p in lib.cache_dir.glob("feat-*.npy"))
    seen = []
    cancel = CountingCancel(after=count.calls // 2)         # mid-way through the window features
    kernel_runs = []                                         # (cancelled already when it started)

    def kernel(*a, **k):
        kernel_runs.append(cancel.after is not None and cancel.calls > cancel.after)
        return real_kernel(*a, **k)

    monkeypatch.setattr(K, "window_change", kernel)
    with pytest.raises(Cancelled) as err:
        _search(lib, cancel=cancel, progress=seen.append)
    frames = [f.name for f in traceback.extract_tb(err.value.__traceback__)]
    assert "rule_ranking" in frames and "per_unit_chunks" in frames, frames
    assert not [e for e in seen if e.stage == "search"], "the rule source never completed"
    # the chunks left were skipped: at most those already running in the pool went on
    assert kernel_runs and sum(kernel_runs) <= min(os.cpu_count() or 1, 8)
    assert len(kernel_runs) < ref_kernel_runs
    monkeypatch.setattr(K, "window_change", real_kernel)

    # untouched: same content, no feature of the soft scores' windows kept half computed
    assert lib.content_version == ver and len(lib) == 60
    feats = sorted(p.name for p in lib.cache_dir.glob("feat-*.npy"))
    assert not [f for f in feats if f not in feats_before and ("2.3" in f or "3.1" in f)
                and np.isnan(np.load(lib.cache_dir / f)).all()]
    # the next search (a new process, then this one) ranks exactly as the untouched library
    again = _search(lib)
    assert [(h.video_id, h.score) for h in again.hits] == ref_ranking
    lib2 = Library.open(tmp_path / "lib")
    assert [(h.video_id, h.score) for h in _search(lib2).hits] == ref_ranking
    for x in (lib, lib2, ref_lib):
        x.close()


def test_cancel_stops_the_span_loop_and_between_text_sources(tmp_path):
    """Every step after the rule source checks it too: a cancel that turns true once the rule
    source has reported stops before the spans or the next source are computed."""
    lib = _library(tmp_path / "lib")
    state = {"rule_done": False}

    def progress(ev):
        if ev.stage == "search" and ev.message == "rule":
            state["rule_done"] = True

    calls = []

    def cancel():
        calls.append(state["rule_done"])
        return state["rule_done"]

    with pytest.raises(Cancelled):
        engine.search(lib, "a car cuts in", rule=RULE, sources=("rule",), top_k=20,
                      progress=progress, cancel=cancel)
    assert calls[-1] is True and calls.count(True) == 1        # stopped at the first check after it
    lib.close()


def test_a_load_that_cannot_stop_runs_aside_and_a_cancel_returns_at_once():
    """A model/index load (no database use) runs in a helper thread: a cancel returns within the
    poll interval, the load finishes by itself, and the next search waits on the same load."""
    import time

    release, done, runs = threading.Event(), threading.Event(), []

    def load():
        runs.append(1)
        release.wait(10)
        done.set()

    flag = {"c": False}
    threading.Timer(0.1, lambda: flag.__setitem__("c", True)).start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        search_steps._wait_preload(("k", "test"), load, lambda: flag["c"])
    assert time.monotonic() - t0 < 1.0 and not done.is_set()
    # the next search waits on the load already running (not a second load), then goes on
    threading.Timer(0.2, release.set).start()
    search_steps._wait_preload(("k", "test"), load, lambda: False)
    assert done.is_set() and runs == [1]


def test_cancel_stops_the_column_cache_being_written_and_leaves_no_half_written_cache(tmp_path, monkeypatch):
    """The first search of a new library state writes the track columns to the cache (at 100,000
    videos ~10 GB of samples, streamed in slices): a cancel stops it between slices, no partial
    folder stays, and the next search writes the cache whole and ranks as an untouched library."""
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 2000)            # many slices for 60 short videos
    ref_lib = _library(tmp_path / "ref")
    ref_ranking = [(h.video_id, h.score) for h in _search(ref_lib).hits]
    lib = _library(tmp_path / "lib")
    assert not list(lib.cache_dir.glob("cols-*"))
    cancel = CountingCancel(after=3)
    with pytest.raises(Cancelled) as err:
        _search(lib, cancel=cancel)
    frames = [f.name for f in traceback.extract_tb(err.value.__traceback__)]
    assert "stream_to_cache" in frames, frames
    assert not list(lib.cache_dir.glob("cols-*")), "a cancelled cache write leaves nothing behind"
    assert [(h.video_id, h.score) for h in _search(lib).hits] == ref_ranking
    assert [p.name for p in lib.cache_dir.glob("cols-*") if ".tmp-" not in p.name]
    for x in (lib, ref_lib):
        x.close()
