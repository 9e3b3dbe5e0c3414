"""Window features computed chunk by chunk (bounded memory, thread pool) equal the one-pass
computation exactly, whatever the chunk size; and the scores of whole rules do not change."""

from __future__ import annotations

import numpy as np
import pytest

from strived.evaluation.synth import make_video
from strived.rules import RuleScorer, parse_rule
from strived.rules import columns as C


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
    return out


def test_chunked_features_equal_the_one_pass_computation(recs, monkeypatch):
    monkeypatch.setattr(C, "CHUNK_SAMPLES", 10**12)
    whole = _features(recs)
    for chunk in (1, 37, 500):           # 1: every unit its own chunk; others cut mid-video
        monkeypatch.setattr(C, "CHUNK_SAMPLES", chunk)
        part = _features(recs)
        for k in whole:
            np.testing.assert_array_equal(part[k], whole[k], err_msg=f"{k} chunk={chunk}")


def test_rule_scores_unchanged_by_chunking(recs, monkeypatch):
    rule = parse_rule({"event": "cut_in", "entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
                       "hard_gates": [{"field": "distance", "op": "lt", "value": 40.0}],
                       "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2.5,
                                        "magnitude": 4.0}]})
    monkeypatch.setattr(C, "CHUNK_SAMPLES", 10**12)
    a = RuleScorer.from_records(recs).score(rule).scores
    monkeypatch.setattr(C, "CHUNK_SAMPLES", 64)
    b = RuleScorer.from_records(recs).score(rule).scores
    np.testing.assert_array_equal(a, b)
    assert a.max() > 0
