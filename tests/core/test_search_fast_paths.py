"""The query path's fast paths give exactly what the straightforward code gives: the banded
pairwise span search, the one-track record fetch for spans, the span memo, and top-k fusion."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from strived import engine
from strived.rulelib.hand_rules import hand_rule
from strived.retrieval.fusion import weighted_rrf
from strived.rules import parse_rule
from strived.rules.kernels import T_EPS
from strived.rules.explain import _pairwise_best, peak_span
from strived.store import Library
from tests.core.synth import synth_video


def _full_matrix_best(t, v, c):
    ok = ~np.isnan(v)
    t, v = t[ok].astype(np.float64), v[ok].astype(np.float64)
    if t.size < 2:
        return 0.0, None
    dt = t[None, :] - t[:, None]
    valid = (dt > 0) & (dt <= c.window_s + T_EPS)
    dv = v[None, :] - v[:, None]
    if c.direction == "negative":
        dv = -dv
    elif c.direction is None:
        dv = np.abs(dv)
    dv = np.where(valid, dv, -np.inf)
    i, j = divmod(int(np.argmax(dv)), dv.shape[1])
    if not np.isfinite(dv[i, j]) or dv[i, j] <= 0:
        return 0.0, None
    return float(dv[i, j]), (float(t[i]), float(t[j]))


def test_banded_pairwise_best_equals_full_matrix():
    rng = np.random.default_rng(0)
    for _ in range(600):
        n = int(rng.integers(2, 300))
        t = np.arange(n) / rng.choice([5, 10, 30]) + rng.random()
        if rng.random() < 0.3:
            t = np.sort(t + rng.random(n) * 0.05)
        v = rng.normal(size=n).round(int(rng.integers(0, 3))).astype(np.float32)  # ties
        if rng.random() < 0.3:
            v[rng.random(n) < 0.2] = np.nan
        c = SimpleNamespace(window_s=float(rng.choice([0.5, 2, 4, 100])),
                            direction=rng.choice(["positive", "negative", None]), magnitude=1.0)
        assert _pairwise_best(t, v, c) == _full_matrix_best(t, v, c)


def test_weighted_rrf_top_k_and_order_match_reference():
    def ref(rankings, weights, k):
        scores = {}
        for s, ranked in rankings.items():
            w = 1.0 if weights is None else float(weights.get(s, 0.0))
            for rank, vid in enumerate(ranked, start=1):
                scores[vid] = scores.get(vid, 0.0) + w / (k + rank)
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))

    r = random.Random(1)
    for _ in range(300):
        ids = [f"v{i:04d}" for i in range(r.randint(0, 120))]
        rk = {s: r.sample(ids, r.randint(0, len(ids))) for s in ("rule", "dense", "bm25")}
        if rk["rule"] and r.random() < 0.2:
            rk["rule"] += rk["rule"][:2]          # duplicates accumulate as before
        w = r.choice([None, {"rule": 1.0, "dense": 0.5}, {"rule": 0.0, "bm25": 0.0}])
        k, top = r.choice([0, 60]), r.choice([None, 0, 1, 7, 500])
        full = ref(rk, w, k)
        assert weighted_rrf(rk, w, k) == full
        assert weighted_rrf(rk, w, k, top_k=top) == (full if top is None else full[:top])


def test_search_spans_equal_full_record_spans(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([synth_video(f"v{k:03d}", seed=k) for k in range(30)])
    for event in ("cut_in_right", "ego_brake", "ego_turn_left"):
        rule = parse_rule(hand_rule(event))
        for _ in range(2):                        # the second run is served by the span memo
            resp = engine.search(lib, "q", rule=rule, sources=("rule",), span_k=50)
            assert resp.hits
            for h in resp.hits:
                assert h.span_s == peak_span(lib.get_video(h.video_id), rule, h.peak_track)
    lib.close()
