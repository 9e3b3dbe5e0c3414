"""Window features computed chunk by chunk (bounded memory, thread pool) equal the one-pass
computation exactly, whatever the chunk size; and the scores of whole rules do not change."""

from __future__ import annotations

import numpy as np
import pytest

from strived.evaluation.synth import make_video
from strived.rules import RuleScorer, parse_rule
from strived.rules import colcache, rows
from strived.rules import columns as C
from strived.rules import kernels as K


@pytest.fixture(scope="module")
def recs():
    rng = np.random.default_rng(3)
    out = [make_video(k, rng, duration_s=6.0, n_tracks=7) for k in range(40)]
    # units of different lengths and NaN gaps, so chunk cuts fall anywhere
    for r in out[::3]:
        for tr in r.tracks[::2]:
            tr.fields["loc_x"][5:9] = np.nan
    return out


def _features(recs):
    cols = C.TrackColumns.from_records(recs)
    out = {}
    for d in ("positive", "negative"):
        out[("wc", d)] = cols.window_change("loc_x", 1.7, d).copy()
        out[("wcd", d)] = cols.window_change("distance", 3.0, d).copy()
        out[("tr", d)] = cols.trend_run("distance", d).copy()
    out["mm"] = np.stack(cols.minmax("loc_x")).copy()
    out["mean"] = cols.mean("distance").copy()
    out["ego"] = cols.window_change("speed", 2.0, "negative").copy()
    out["heading"] = cols.series_for("heading")[1].copy()      # integrated chunk by chunk
    out["turn"] = cols.window_change("heading", 8.0, "positive").copy()
    out["road"] = cols.window_change("loc_x_road", 2.5, "negative").copy()   # derived range by range
    out["road_values"] = cols.series_for("loc_x_road")[1].copy()             # per sample, chunk by chunk
    out["abs_road"] = np.stack(cols.minmax("abs_loc_x_road")).copy()
    out["known"] = np.stack([cols.valid_count(f) for f in ("loc_x", "distance", "loc_x_road")]).copy()
    out["known_ego"] = np.stack([cols.valid_count(f) for f in ("speed", "heading")]).copy()
    return out


def test_chunked_features_equal_the_one_pass_computation(recs, monkeypatch):
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 10**12)
    whole = _features(recs)
    for chunk in (1, 37, 500):           # 1: every unit its own chunk; others cut mid-video
        monkeypatch.setattr(K, "CHUNK_SAMPLES", chunk)
        part = _features(recs)
        for k in whole:
            np.testing.assert_array_equal(part[k], whole[k], err_msg=f"{k} chunk={chunk}")


def test_rule_scores_unchanged_by_chunking(recs, monkeypatch):
    rule = parse_rule({"event": "cut_in", "entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
                       "hard_gates": [{"field": "distance", "op": "lt", "value": 40.0}],
                       "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2.5,
                                        "magnitude": 4.0}]})
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 10**12)
    a = RuleScorer.from_records(recs).score(rule).scores
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 64)
    b = RuleScorer.from_records(recs).score(rule).scores
    np.testing.assert_array_equal(a, b)
    assert a.max() > 0


# ---------------------------------------------------------------- library column cache (streamed)
@pytest.fixture()
def lib(tmp_path, recs):
    from strived.store import Library

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(recs)
    yield lib
    lib.close()


def test_streamed_column_cache_equals_the_in_memory_scan(lib, monkeypatch):
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 333)       # many slices of rows while streaming
    cols = C.TrackColumns.from_library(lib)            # streamed into the cache, then mapped
    assert isinstance(cols.tracks.files["t"], colcache.FileColumn)
    mem = rows.scan_library(lib)
    for a in ("owner", "start", "length", "t"):
        np.testing.assert_array_equal(np.asarray(getattr(cols.tracks, a)), getattr(mem.tracks, a))
        np.testing.assert_array_equal(np.asarray(getattr(cols.ego, a)), getattr(mem.ego, a))
    for f, v in mem.tracks.values.items():
        np.testing.assert_array_equal(np.asarray(cols.tracks.values[f]), v)
        np.testing.assert_array_equal(cols.tracks.files[f].read(100, 1234), v[100:1234])
    for f, v in mem.ego.values.items():
        np.testing.assert_array_equal(np.asarray(cols.ego.values[f]), v)
    for a in ("track_cls", "track_ids", "track_ident", "ego_ident"):
        np.testing.assert_array_equal(getattr(cols, a), getattr(mem, a))
    assert cols.video_ids == mem.video_ids and cols.cls_names == mem.cls_names


def test_features_read_from_the_cache_files_equal_in_memory(lib, recs, monkeypatch):
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 10**12)
    whole = _features(recs)
    C.TrackColumns.from_library(lib)
    for chunk in (1, 500, 10**12):
        monkeypatch.setattr(K, "CHUNK_SAMPLES", chunk)
        cols = C.TrackColumns.from_library(lib)
        cols.cache_dir = None                          # no feature files: compute from the columns
        got = {}
        for d in ("positive", "negative"):
            got[("wc", d)] = cols.window_change("loc_x", 1.7, d)
            got[("wcd", d)] = cols.window_change("distance", 3.0, d)
            got[("tr", d)] = cols.trend_run("distance", d)
        got["mm"] = np.stack(cols.minmax("loc_x"))
        got["mean"] = cols.mean("distance")
        got["ego"] = cols.window_change("speed", 2.0, "negative")
        got["heading"] = cols.series_for("heading")[1]
        got["turn"] = cols.window_change("heading", 8.0, "positive")
        got["road"] = cols.window_change("loc_x_road", 2.5, "negative")
        got["abs_road"] = np.stack(cols.minmax("abs_loc_x_road"))
        got["road_values"] = cols.series_for("loc_x_road")[1]
        got["known"] = np.stack([cols.valid_count(f) for f in ("loc_x", "distance", "loc_x_road")])
        got["known_ego"] = np.stack([cols.valid_count(f) for f in ("speed", "heading")])
        for k in whole:
            np.testing.assert_array_equal(got[k], whole[k], err_msg=f"{k} chunk={chunk}")
        # |loc_x| is taken chunk by chunk: no whole-library array appears
        mm = cols.minmax("abs_loc_x")
        assert "abs_loc_x" not in cols.tracks.values
        np.testing.assert_array_equal(mm[1], np.stack(C.TrackColumns.from_records(recs).minmax("abs_loc_x"))[1])


def test_a_cache_file_cut_short_while_read_is_an_error_not_a_value(lib):
    cols = C.TrackColumns.from_library(lib)
    f = cols.tracks.files["loc_x"]
    with open(f.path, "r+b") as fh:
        fh.truncate(f.offset + 40)
    with pytest.raises(colcache.ColumnCacheError, match="cut short"):
        f.read(0, 100)


def test_partial_features_compute_only_the_units_asked_and_complete_later(lib, recs, monkeypatch):
    full = C.TrackColumns.from_records(recs).window_change("loc_x", 2.2, "positive")
    cols = C.TrackColumns.from_library(lib)
    seen = []
    real = K.window_change
    monkeypatch.setattr(K, "window_change", lambda s, v, w: (seen.append(s.n), real(s, v, w))[1])
    some = np.arange(3, cols.tracks.n, 7)
    a = cols.window_change("loc_x", 2.2, "positive", units=some)
    assert sum(seen) == some.size
    np.testing.assert_array_equal(a[some], full[some])
    assert np.isnan(np.delete(a, some)).all()          # the others are not computed (NaN)
    # a new process reads the partial file and computes only what it lacks
    seen.clear()
    cols2 = C.TrackColumns.from_library(lib)
    more = np.arange(0, cols.tracks.n, 2)
    b = cols2.window_change("loc_x", 2.2, "positive", units=more)
    assert sum(seen) == np.setdiff1d(more, some).size
    np.testing.assert_array_equal(b[more], full[more])
    seen.clear()
    c = C.TrackColumns.from_library(lib).window_change("loc_x", 2.2, "positive")   # every unit
    assert sum(seen) == np.setdiff1d(np.arange(cols.tracks.n), np.union1d(some, more)).size
    np.testing.assert_array_equal(c, full)
    seen.clear()
    C.TrackColumns.from_library(lib).window_change("loc_x", 2.2, "positive")
    assert seen == []                                  # complete on disk: nothing computed


@pytest.mark.parametrize("agg", ["any", "consensus"])
def test_gated_scoring_equals_the_reference_and_computes_only_passing_candidates(lib, recs, monkeypatch, agg):
    from strived.rules.reference import score_video

    rule = parse_rule({"event": "x", "entity": {"class_filter": ["car", "truck"], "agg_mode": agg},
                       "hard_gates": [{"field": "distance", "op": "lt", "value": 27.0},
                                      {"field": "speed", "op": "gt", "value": 9.0}],
                       "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 1.3,
                                        "magnitude": 3.0, "min_fraction": 0.2},
                                       {"type": "temporal_change", "field": "speed", "window_seconds": 2.0,
                                        "magnitude": 1.0, "direction": "negative"}]})
    sc = RuleScorer(lib)
    seen = []
    real = K.window_change
    monkeypatch.setattr(K, "window_change", lambda s, v, w: (seen.append(s.n), real(s, v, w))[1])
    res = sc.score(rule)
    ref = {r.info.id: score_video(r, rule) for r in recs}
    np.testing.assert_allclose(res.scores, [ref[v] for v in res.video_ids], atol=1e-6)
    assert 0 < res.hard.sum() < len(recs) and res.scores.max() > 0
    mask, owner, _ = sc.candidates(rule)
    assert sum(seen) == (mask & res.hard[owner]).sum() + res.hard.sum()   # tracks + ego series


def test_range_extremes_equal_brute_force():
    rng = np.random.default_rng(5)
    vals = rng.normal(size=500).astype(np.float32)
    lo = rng.integers(0, 500, 3000)
    hi = np.minimum(499, lo + rng.integers(0, 70, 3000))
    mx, mn = K.range_extremes(vals, lo, hi, (np.maximum, np.minimum))
    np.testing.assert_array_equal(mx, [vals[a:b + 1].max() for a, b in zip(lo, hi)])
    np.testing.assert_array_equal(mn, [vals[a:b + 1].min() for a, b in zip(lo, hi)])
    one = np.array([3])
    assert K.range_extreme(vals, one, one, np.maximum)[0] == vals[3]


@pytest.mark.parametrize("jitter", [False, True])
def test_window_bounds_of_even_frames_equal_the_search(jitter):
    """Evenly spaced frames take index arithmetic; the result equals the key search (forced
    here by breaking the even spacing of one sample by a microsecond)."""
    rng = np.random.default_rng(2)
    lens = rng.integers(1, 60, 30)
    tr = np.repeat(np.arange(30), lens)
    tt = np.concatenate([0.37 * k + np.arange(n) * 0.1 for k, n in enumerate(lens)])
    assert K._regular_steps(tt, tr, 1.0) is not None
    uneven = tt.copy()
    uneven[5] += 1e-6
    assert K._regular_steps(uneven, tr, 1.0) is None
    if jitter:                                  # float noise far below a microsecond
        tt = tt + rng.normal(0, 1e-9, tt.size)
    for w in (0.0, 0.1, 0.25, 1.0, 2.999, 50.0):
        key, w_us = K._track_keys(tt, tr, w)
        np.testing.assert_array_equal(K._window_end(tt, tr, w), np.searchsorted(key, key + w_us, side="right") - 1)
        np.testing.assert_array_equal(K._window_start(tt, tr, w), np.searchsorted(key, key - w_us, side="left"))


def test_fraction_gate_answers_are_remembered_and_bounded(recs, monkeypatch):
    """A "for >= x of the clip" gate's per-unit answer equals the plain count, is computed once per
    (field, op, value, fraction) for a corpus, cannot be modified by a caller, and the memo is bounded."""
    monkeypatch.setattr(C, "FRACTION_MEMO", 3)
    cols = C.TrackColumns.from_records(recs)
    calls = []
    real = cols.fraction_satisfying
    monkeypatch.setattr(cols, "fraction_satisfying", lambda *a: calls.append(a) or real(*a))
    want = real("distance", "le", 20.0) >= 0.3 - 1e-12
    got = cols.fraction_holds("distance", "le", 20.0, 0.3)
    assert got.dtype == bool and np.array_equal(got, want) and 0 < got.sum() < len(got)
    assert cols.fraction_holds("distance", "le", 20.0, 0.3) is got and len(calls) == 1
    with pytest.raises(ValueError):
        got[0] = not got[0]
    ego = cols.fraction_holds("speed", "gt", 1.0, 0.5)
    assert np.array_equal(ego, real("speed", "gt", 1.0) >= 0.5 - 1e-12)
    for v in (10.0, 30.0, 40.0):                     # three more answers: the first one is dropped
        cols.fraction_holds("distance", "le", v, 0.3)
    cols.fraction_holds("distance", "le", 20.0, 0.3)
    assert len(calls) == 6


@pytest.mark.parametrize("seed", range(3))
def test_even_frame_windows_read_as_slices_equal_the_sparse_table_lookups(seed):
    """Evenly spaced samples: full-length windows taken as shifted slices of one sparse-table
    level give what per-window lookups give (windows cut by a track's end, ties, k of 1 to
    longer than any track)."""
    rng = np.random.default_rng(seed)
    for _ in range(60):
        lens = rng.integers(1, 90, int(rng.integers(1, 30)))
        n = int(lens.sum())
        vv = rng.normal(0, 5, n).astype(np.float32)
        if rng.random() < 0.3:
            vv = np.round(vv)
        k = int(rng.integers(1, 120))
        starts = np.cumsum(lens) - lens
        last = np.repeat(starts + lens - 1, lens)
        idx = np.arange(n)
        end = np.minimum(idx + k, last)
        has = end > idx
        got = K._regular_window_extremes(vv, k, end, has, (np.maximum, np.minimum))
        lo = np.minimum(idx + 1, n - 1)
        want = K.range_extremes(vv, lo, np.maximum(end, lo), (np.maximum, np.minimum))
        for g, w_ in zip(got, want):
            np.testing.assert_array_equal(g[has], w_[has])
