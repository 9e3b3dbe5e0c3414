"""The fitted fusion router: learns which source ranks labelled videos best per kind of query."""

import json

import pytest

from strived.retrieval.router_fit import (Example, FittedRouter, candidate_weights, fit_router,
                                          query_kind)

ITEMS = [f"v{i}" for i in range(20)]


def _example(query, good_source, relevant="v7"):
    """Rankings where only ``good_source`` puts the relevant video first; the others bury it."""
    bad = [v for v in ITEMS if v != relevant] + [relevant]
    good = [relevant] + [v for v in ITEMS if v != relevant]
    r = {s: (good if s == good_source else bad) for s in ("rule", "dense", "bm25")}
    return Example(query, r, {relevant}, set(), query_kind(query))


def test_fit_learns_the_source_that_ranks_each_kind_best():
    ego = ["we brake hard", "the ego car turns left", "we stop at the light", "our car slows down"]
    other = ["a car cuts out of our lane", "a truck overtakes us on the left",
             "a car passes us on the right", "a van changes out of our lane"]
    exs = [_example(q, "dense") for q in ego] + [_example(q, "rule") for q in other]
    fr = fit_router(exs)
    w_ego, kind_ego = fr.weights("the ego vehicle brakes suddenly")
    w_oth, kind_oth = fr.weights("a bus overtakes us on the left")
    assert kind_ego.startswith("ego") and kind_oth.startswith("other")
    assert w_ego["dense"] == 1.0 and w_ego["rule"] < 1.0
    assert w_oth["rule"] == 1.0 and w_oth["dense"] < 1.0


def test_kind_with_too_few_queries_uses_the_global_fit():
    exs = [_example(q, "dense") for q in ("we brake hard", "we stop", "we turn right")]
    exs.append(_example("a car overtakes us on the left", "rule"))
    fr = fit_router(exs)
    w, kind = fr.weights("a car overtakes us on the right")
    assert kind not in fr.cells and w == fr.default


def test_ties_keep_the_prior_weights_and_the_grid_has_a_main_source():
    from strived.retrieval.router_fit import EQUAL, WORDLIST, wordlist_weights

    grid = candidate_weights()
    assert grid[0] == {"rule": 1.0, "dense": 1.0, "bm25": 1.0}
    assert all(max(w.values()) == 1.0 for w in grid)
    same = {"rule": ITEMS, "dense": ITEMS, "bm25": ITEMS}
    q = "the ego car brakes hard"
    # the prior is equal weights (issue 31): a tie keeps them
    fr = fit_router([Example(q, same, {"v3"}, set(), "k")] * 3)
    assert fr.default == EQUAL and fr.cells == {"k": EQUAL}
    assert fr.weights(q)[0] == {"rule": 1.0, "dense": 1.0, "bm25": 1.0}
    # the word-list prior (the full-wordlist ablation) keeps the word-list weights the same way
    fr = fit_router([Example(q, same, {"v3"}, set(), "k")] * 3, prior=WORDLIST)
    assert fr.default == WORDLIST and fr.cells == {"k": WORDLIST}
    w, _ = fr.weights(q)
    assert w == wordlist_weights(q) and w != {"rule": 1.0, "dense": 1.0, "bm25": 1.0}


def test_a_word_list_cell_round_trips(tmp_path):
    from strived.retrieval.router_fit import WORDLIST

    fr = FittedRouter({"ego|n/a|plain|text": WORDLIST}, {"rule": 1.0, "dense": 1.0, "bm25": 0.25}, {})
    p = tmp_path / "router.json"
    fr.save(p)
    back = FittedRouter.load(p)
    assert back.cells == {"ego|n/a|plain|text": WORDLIST}
    # the shipped router loads and answers
    from strived.retrieval.router_fit import shipped_router
    sr = shipped_router()
    assert sr is not None and sr.provenance.get("prior") == "equal"
    # shipped with equal weights: the fitted cells did not beat them on sources left out
    assert "did not beat" in sr.provenance["decision"] or "beat equal" in sr.provenance["decision"]
    w, kind = sr.weights("a car cuts in from the left")
    assert set(w) == {"rule", "dense", "bm25"} and max(w.values()) > 0


def test_save_load_round_trip_and_validation(tmp_path):
    fr = FittedRouter({"ego|n/a|plain|text": {"rule": 0.5, "dense": 1.0, "bm25": 0.0}},
                      {"rule": 1.0, "dense": 1.0, "bm25": 0.25}, {"queries": 4})
    p = tmp_path / "router.json"
    fr.save(p)
    back = FittedRouter.load(p)
    assert back.cells == fr.cells and back.default == fr.default
    bad = fr.to_dict()
    bad["default"]["rule"] = 7.0
    p.write_text(json.dumps(bad))
    with pytest.raises(ValueError):
        FittedRouter.load(p)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError):
        FittedRouter.load(p)


def test_route_uses_the_shipped_fitted_router_and_keeps_the_wordlist_ablation():
    from strived.retrieval.router import offline_route, route
    from strived.retrieval.router_fit import shipped_router

    q = "someone overtakes us on the left"
    fr = shipped_router()
    assert fr is not None                       # resources/router.json ships
    r = route(q)
    assert r.source == "fitted" and r.weights == fr.weights(q)[0]
    assert route(q, mode="wordlist").weights == offline_route(q).weights


def test_fit_scores_fusions_with_ties_sharing_a_rank():
    """The router is fitted on the fusion that search runs: a source's tied videos share a rank.
    Here the rule ties every video (a gate-only rule) and only dense orders them: a small dense
    weight is then enough to put the relevant video first."""
    from strived.retrieval.router_fit import _ap

    rel = "v19"
    rule = ITEMS                                          # id order inside one tie
    dense = [rel] + [v for v in ITEMS if v != rel]
    ex = Example("a car cuts out of our lane", {"rule": rule, "dense": dense, "bm25": []}, {rel}, set(),
                 "k", scores={"rule": [1.0] * len(ITEMS)})
    w = {"rule": 1.0, "dense": 0.25, "bm25": 0.0}
    assert _ap(ex, w) == 1.0
    ex.scores = {}                                         # positions: the id order buries it
    assert _ap(ex, w) < 0.5
