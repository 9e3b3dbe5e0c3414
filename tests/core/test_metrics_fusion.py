import pytest

from strived.retrieval.fusion import contributions, weighted_rrf
from strived.retrieval.metrics import (average_precision, hit_at_k, query_metrics, rank_of_first_relevant,
                                       reciprocal_rank, summarize)


def test_ap_hand_computed():
    # relevant at ranks 1, 3, 6 of 3 relevant: (1/1 + 2/3 + 3/6) / 3
    ranked = ["a", "x", "b", "y", "z", "c"]
    assert average_precision(ranked, ["a", "b", "c"]) == pytest.approx((1 + 2 / 3 + 0.5) / 3)
    # a relevant item never retrieved still counts in the denominator
    assert average_precision(["x", "a"], ["a", "b"]) == pytest.approx((1 / 2) / 2)
    assert average_precision(["x"], []) == 0.0


def test_ambiguous_items_are_removed_before_ranking():
    ranked = ["amb", "x", "a"]
    assert rank_of_first_relevant(ranked, ["a"], ignore=["amb"]) == 2
    assert average_precision(ranked, ["a"], ignore=["amb"]) == pytest.approx(0.5)
    assert reciprocal_rank(ranked, ["a"]) == pytest.approx(1 / 3)


def test_acc_at_k_and_summary():
    q1 = query_metrics(["a", "x", "y"], ["a"])
    q2 = query_metrics(["x", "y", "z", "w", "b"], ["b"])
    q3 = query_metrics(["x"], ["c"])
    assert hit_at_k(["x", "y", "z", "w", "b"], ["b"], 5) == 1.0 and hit_at_k(["x", "y", "z", "w", "b"], ["b"], 3) == 0.0
    s = summarize([q1, q2, q3])
    assert s["Acc@1"] == pytest.approx(1 / 3)
    assert s["Acc@3"] == pytest.approx(1 / 3)
    assert s["Acc@5"] == pytest.approx(2 / 3)
    assert s["Acc@10"] == pytest.approx(2 / 3)
    assert s["MRR"] == pytest.approx((1 + 1 / 5 + 0) / 3)
    assert s["mAP"] == pytest.approx((1 + 1 / 5 + 0) / 3)


def test_weighted_rrf_hand_computed():
    rankings = {"rule": ["a", "b", "c"], "dense": ["c", "a"], "bm25": ["d"]}
    w = {"rule": 2.0, "dense": 1.0, "bm25": 0.0}
    fused = dict(weighted_rrf(rankings, w))
    assert fused["a"] == pytest.approx(2 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(2 / 62)
    assert fused["c"] == pytest.approx(2 / 63 + 1 / 61)
    assert fused["d"] == 0.0
    order = [v for v, _ in weighted_rrf(rankings, w)]
    assert order == ["a", "c", "b", "d"]
    assert contributions(rankings, w, "c") == pytest.approx({"rule": 2 / 63, "dense": 1 / 61, "bm25": 0.0})


def test_rrf_plain_ties_and_k():
    fused = weighted_rrf({"s1": ["b", "a"], "s2": ["a", "b"]})
    assert [v for v, _ in fused] == ["a", "b"]  # equal scores: tie broken by id
    assert weighted_rrf({"s": ["a"]}, rrf_k=0)[0][1] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        weighted_rrf({"s": ["a"]}, {"s": -1.0})


def test_rrf_gives_an_abstaining_source_its_expected_term():
    """A video the rule could not judge is neither a match (top) nor a non-match (0): it gets the
    rule's mean term over the videos the rule judged."""
    from strived.retrieval.fusion import weighted_rrf

    rankings = {"rule": ["a", "b"], "dense": ["u", "c", "a", "b"]}
    # judged by the rule: a, b (ranked) and c (judged, no match); u: could not be judged
    out = dict(weighted_rrf(rankings, {"rule": 1.0, "dense": 1.0}, rrf_k=0, abstain={"rule": (["u"], 3)}))
    expected_rule = (1 / 1 + 1 / 2) / 3
    assert abs(out["u"] - (1 / 1 + expected_rule)) < 1e-12
    assert abs(out["c"] - 1 / 2) < 1e-12            # judged non-match: nothing from the rule
    assert abs(out["a"] - (1 / 1 + 1 / 3)) < 1e-12
    # without abstention the unknown video is treated like a judged non-match
    plain = dict(weighted_rrf(rankings, {"rule": 1.0, "dense": 1.0}, rrf_k=0))
    assert plain["u"] == 1.0
    # a zero weight or nothing judged adds nothing
    z = dict(weighted_rrf(rankings, {"rule": 0.0, "dense": 1.0}, rrf_k=0, abstain={"rule": (["u"], 3)}))
    assert z["u"] == 1.0


def test_shared_ranks_give_equal_scores_the_mean_position():
    from strived.retrieval.fusion import shared_ranks

    assert shared_ranks([0.9, 0.5, 0.5, 0.1]) == [1.0, 2.5, 2.5, 4.0]
    assert shared_ranks([1.0, 1.0, 1.0]) == [2.0, 2.0, 2.0]
    assert shared_ranks([0.3, 0.2, 0.1]) == [1.0, 2.0, 3.0]   # no tie: plain positions
    assert shared_ranks([]) == []


def test_a_tie_in_one_source_is_ordered_by_the_other_sources_not_by_video_id():
    """Twelve videos tie at the rule score 1.0; the relevant one ("z") has the last id. Ranked
    by position inside the tie (id order), the rule's 1/61 vs 1/72 gap outweighs the dense
    source's small weight and an irrelevant "a00" wins; with a shared rank the tie carries no
    order, so dense decides."""
    tied = [f"a{i:02d}" for i in range(11)] + ["z"]
    rankings = {"rule": tied, "dense": ["z"] + tied[:-1]}
    w = {"rule": 1.0, "dense": 0.1}
    by_position = [v for v, _ in weighted_rrf(rankings, w)]
    assert by_position[0] == "a00"                     # what raw id order does
    fused = weighted_rrf(rankings, w, scores={"rule": [1.0] * 12})
    assert fused[0][0] == "z"
    assert fused[0][1] == pytest.approx(1 / (60 + 6.5) + 0.1 / 61)
    # every tied video gets the same rule term
    assert contributions(rankings, w, "a00", scores={"rule": [1.0] * 12})["rule"] == \
        pytest.approx(contributions(rankings, w, "z", scores={"rule": [1.0] * 12})["rule"])
    # scores that do not tie leave plain RRF unchanged (bit for bit)
    distinct = {"rule": [1.0 - i / 100 for i in range(12)]}
    assert weighted_rrf(rankings, w, scores=distinct) == weighted_rrf(rankings, w)
    with pytest.raises(ValueError):
        weighted_rrf(rankings, w, scores={"rule": [1.0]})


def test_abstain_term_uses_the_shared_ranks():
    rankings = {"rule": ["a", "b"], "dense": ["u", "a", "b"]}
    out = dict(weighted_rrf(rankings, {"rule": 1.0, "dense": 1.0}, rrf_k=0,
                            abstain={"rule": (["u"], 3)}, scores={"rule": [0.7, 0.7]}))
    assert out["u"] == pytest.approx(1 / 1 + (1 / 1.5 + 1 / 1.5) / 3)
    assert out["a"] == pytest.approx(out["b"] - 1 / 3 + 1 / 2)    # same rule term, dense 1/2 vs 1/3
