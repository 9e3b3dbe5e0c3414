"""engine.search fuses with shared ranks for tied scores (strived.retrieval.fusion), the same
fusion `strived eval`'s "full" method runs: a tie in the rule source is ordered by the other
sources, not by video id, and every video of a tie gets the same percentile and rule term."""

from __future__ import annotations

import pytest


def test_rule_tie_is_ordered_by_bm25_not_by_video_id(records_library):
    from strived import engine
    from strived.retrieval.sources import bm25_ranking

    ids = sorted(records_library.video_ids())
    last = ids[-1]
    query = last.replace("_", " ")                 # its id words are in its summary
    bm = [v for v, _ in bm25_ranking(records_library, query)]
    assert bm and bm[0] == last
    tied = ids[:19] + [last]                       # twenty videos tie at 1.0; ``last`` has the last id
    hits = [(v, 1.0, -1) for v in tied]
    w = {"rule": 1.0, "bm25": 0.1}
    resp = engine.search(records_library, query, sources=("rule", "bm25"), weights=w, top_k=20,
                         span_k=0, rule_hits=hits)
    assert resp.hits[0].video_id == last
    # id order inside the tie (what the fusion did before) would have put ids[0] first:
    # 1/61 for ids[0] against 1/80 + 0.1/61 for ``last``
    assert 1 / 61 > 1 / 80 + 0.1 / 61
    rules = [h.per_source["rule"] for h in resp.hits if h.video_id in tied]
    assert len(rules) == 20
    assert {r["percentile"] for r in rules} == {1.0}
    assert {round(r["contribution"], 12) for r in rules} == {round(1 / (60 + 10.5), 12)}
    for h in resp.hits:                            # the per-source terms add up to the fused score
        assert sum(d["contribution"] for d in h.per_source.values()) == pytest.approx(h.score)
    # the evidence says it is a tie, in the CLI and in the app's result cell, not "rank 12"
    assert {(r["tie"]["first"], r["tie"]["size"]) for r in rules} == {(1, 20)}
    from strived.commands.search import evidence_text

    last_hit = next(h for h in resp.hits if h.video_id == last)
    assert "rule =1/20 (20 tied, p100, 1.00)" in evidence_text(last_hit.per_source)


def test_untied_rule_hits_carry_no_tie(records_library):
    from strived import engine

    ids = sorted(records_library.video_ids())[:5]
    hits = [(v, 1.0 - 0.1 * k, -1) for k, v in enumerate(ids)]
    resp = engine.search(records_library, "a car", sources=("rule",), top_k=5, span_k=0, rule_hits=hits)
    assert [h.video_id for h in resp.hits] == ids
    assert all("tie" not in h.per_source.get("rule", {}) for h in resp.hits)
