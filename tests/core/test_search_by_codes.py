"""engine.search fuses over video codes and arrays (issue 13: no Python step per video and source);
what it returns must be exactly what the straightforward computation gives: the same rankings,
fused scores (to the last bit), order, per-source ranks, terms and notices, with ties in every
source, videos without an availability record, videos the rule cannot judge, and a source that
ranks a video the library does not hold (an index lagging behind the library)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from strived import engine, search_steps
from strived.retrieval.fusion import RRF_K, weighted_rrf
from strived.retrieval.ranked import IdSpace, Ranked
from strived.store import Library
from tests.core.synth import synth_video

# a gate only: every video that passes scores 1.0, so the rule's ranking is one long tie
GATE = {"event": "ego_moving", "entity": {"role": "ego"},
        "hard_gates": [{"field": "speed", "op": "gt", "value": 2.0}], "soft_scores": []}
SOFT = {"event": "ego_brake", "entity": {"role": "ego"},
        "hard_gates": [{"field": "speed", "op": "gt", "value": 2.0}],
        "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 2.0,
                         "magnitude": 4.0, "direction": "negative"}]}
N_VIDEOS = 240


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    lib = Library.open(tmp_path_factory.mktemp("codes") / "lib", create=True)
    recs = []
    for k in range(N_VIDEOS):
        r = synth_video(f"v{k:04d}", seed=k, n_tracks=2)
        if k % 7 == 3:                         # speed never estimated: the rule cannot judge it
            r.ego["speed"][:] = np.nan
            r.ego["accel"][:] = np.nan
            r.info.attrs["perception"] = {"perception_version": 2}
            r.info.attrs["availability"] = {"speed": {"source": "video", "reason": "too dark"}}
        recs.append(r)
    lib.add_videos(recs)
    # videos stored before availability existed carry none: judged as before
    with lib.transaction():
        for k in range(0, N_VIDEOS, 11):
            vid = f"v{k:04d}"
            attrs = json.loads(lib.conn.execute("SELECT attrs FROM videos WHERE id=?", (vid,)).fetchone()[0])
            attrs.pop("availability", None)
            lib.conn.execute("UPDATE videos SET attrs=? WHERE id=?", (json.dumps(attrs), vid))
        lib._bump()
    yield lib
    lib.close()


def _shared(scores):
    """Fractional ranks, written plainly: equal neighbours get the mean of their positions."""
    out, i = [], 0
    while i < len(scores):
        j = i
        while j < len(scores) and scores[j] == scores[i]:
            j += 1
        out += [(i + 1 + j) / 2] * (j - i)
        i = j
    return out


def _reference(rankings, scores, weights, unjudged, n_videos, top_k, rrf_k=RRF_K):
    """The fused list [(video_id, score)] computed one video at a time (fusion.py's module doc)."""
    fused: dict[str, float] = {}
    for s, ranked in rankings.items():
        for vid, r in zip(ranked, _shared(scores[s])):
            fused[vid] = fused.get(vid, 0.0) + weights[s] / (rrf_k + r)
    n_judged = n_videos - len(unjudged)
    if "rule" in rankings and len(rankings) > 1 and unjudged and weights["rule"] != 0 and n_judged > 0:
        expected = weights["rule"] * sum([1.0 / (rrf_k + r) for r in _shared(scores["rule"])]) / n_judged
        for vid in unjudged:
            fused[vid] = fused.get(vid, 0.0) + expected
    if len(rankings) == 1:
        (s,) = rankings
        return list(zip(rankings[s], scores[s]))[:top_k]
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]


def _reference_rule(lib, rule):
    """The rule's ranking and its unjudged videos, video by video."""
    avails = lib.availability()
    unjudged = {v: ["speed"] for v, av in avails.items()
                if av and (av.get("speed") or {}).get("status") == "unavailable"}
    res = engine.scorer_for(lib).score(engine.parse_rule(rule))
    ranked = sorted(((v, float(s), int(p)) for v, s, p in zip(res.video_ids, res.scores, res.peak_track)
                     if s > 0 and v not in unjudged), key=lambda x: (-x[1], x[0]))
    return ranked, unjudged


def _fake_sources(monkeypatch, lib, seed, lagging: bool, as_ranked: bool):
    """Dense and BM25 stand-ins with many tied scores; ``lagging``: they also rank a video the
    library no longer holds; ``as_ranked``: answered as arrays over a shuffled id list (as the real
    indexes do), else as plain lists."""
    rng = random.Random(seed)
    ids = sorted(lib.video_ids()) + (["zz-removed"] if lagging else [])
    out = {}
    for name, depth, grain in (("dense", len(ids), 20), ("bm25", len(ids) // 3, 5)):
        chosen = rng.sample(ids, depth)
        sc = {v: round(rng.random() * grain) / grain for v in chosen}      # few distinct values: ties
        ranked = sorted(chosen, key=lambda v: (-sc[v], v))
        plain = [(v, sc[v], (1.0, 5.0)) if name == "dense" else (v, sc[v]) for v in ranked]
        out[name] = plain
        if as_ranked:
            space = ids[:]
            rng.shuffle(space)
            where = {v: i for i, v in enumerate(space)}
            r = Ranked(ids=[v for v, *_ in plain], scores=np.array([x[1] for x in plain], np.float64),
                       space=space, index=np.array([where[v] for v, *_ in plain], np.int64))
            if name == "dense":
                r.rows = np.arange(len(plain))
                r.spans = (np.full(len(plain), 1.0), np.full(len(plain), 5.0))
            monkeypatch.setattr(search_steps, "_" + name, lambda *a, _r=r, **k: _r)
        else:
            monkeypatch.setattr(search_steps, "_" + name, lambda *a, _p=plain, **k: _p)
    return out


@pytest.mark.parametrize("rule", [GATE, SOFT], ids=["tied-gate", "soft"])
@pytest.mark.parametrize("lagging,as_ranked", [(False, True), (True, True), (False, False)])
def test_search_equals_the_plain_computation(lib, monkeypatch, rule, lagging, as_ranked):
    plain = _fake_sources(monkeypatch, lib, seed=len(json.dumps(rule)) + lagging, lagging=lagging,
                          as_ranked=as_ranked)
    rule_ref, unjudged_ref = _reference_rule(lib, rule)
    assert unjudged_ref and len(rule_ref) > 20
    if rule is GATE:
        assert len({s for _, s, _ in rule_ref}) == 1            # one long tie
    w = {"rule": 1.0, "dense": 0.5, "bm25": 0.25}
    for sources in (("rule", "dense", "bm25"), ("rule", "bm25"), ("dense", "bm25"), ("rule",), ("dense",)):
        for top_k in (10, 50, 10**9):
            resp = engine.search(lib, "the ego car moves", rule=rule, weights=w, sources=sources,
                                 top_k=top_k, span_k=5)
            rankings = {s: ([v for v, *_ in rule_ref] if s == "rule" else [x[0] for x in plain[s]])
                        for s in sources}
            scores = {s: ([x[1] for x in rule_ref] if s == "rule" else [x[1] for x in plain[s]])
                      for s in sources}
            assert resp.rankings == rankings
            assert resp.ranking_scores == scores
            unj = unjudged_ref if "rule" in sources else {}
            assert resp.rule_unjudged == unj
            assert list(resp.rule_unjudged) == list(unj)            # same order as well
            want = _reference(rankings, scores, {s: w[s] for s in sources}, unj, N_VIDEOS, top_k)
            assert [(h.video_id, h.score) for h in resp.hits] == want          # exact floats
            shared = {s: _shared(scores[s]) for s in sources}
            for k, h in enumerate(resp.hits, start=1):
                assert h.rank == k
                for s in sources:
                    d = h.per_source[s]
                    pos = rankings[s].index(h.video_id) + 1 if h.video_id in rankings[s] else None
                    assert d["rank"] == pos and d["of"] == len(rankings[s])
                    assert d["score"] == (scores[s][pos - 1] if pos else None)
                    assert d["contribution"] == (w[s] / (RRF_K + shared[s][pos - 1]) if pos else 0.0)
                if "rule" in sources:
                    rank = h.per_source["rule"]["rank"]
                    assert h.peak_track == (rule_ref[rank - 1][2] if rank else None)
                    assert (h.per_source["rule"].get("status") == "cannot evaluate") == (h.video_id in unj)
                    if rank:
                        higher = sum(1 for s in scores["rule"] if s > h.per_source["rule"]["score"])
                        assert h.per_source["rule"]["percentile"] == 1.0 - higher / len(rankings["rule"])
                if "dense" in sources and h.per_source["dense"]["rank"] and not (
                        "rule" in sources and h.per_source["rule"]["rank"] and k <= 5):
                    assert h.span_s == (1.0, 5.0)                 # the dense segment's span
            if "rule" in sources:
                assert any("could not judge" in n and f"{len(unj)} of {N_VIDEOS}" in n for n in resp.notices)


def test_fusion_over_codes_equals_weighted_rrf():
    """`search_steps._fuse_codes` against the dict-based `weighted_rrf` on random rankings with ties,
    ids outside the library, abstaining videos, zero weights and every top_k edge."""
    from strived.retrieval.fusion import shared_ranks_array

    r = random.Random(5)
    for trial in range(300):
        lib_ids = sorted(f"v{i:04d}" for i in r.sample(range(10_000), r.randint(1, 150)))
        space = IdSpace(lib_ids)
        pool = lib_ids + [f"x{i}" for i in range(r.randint(0, 3))]           # not in the library
        used = r.sample(["rule", "dense", "bm25"], r.randint(2, 3))
        rankings, scores = {}, {}
        for s in used:
            chosen = r.sample(pool, r.randint(0, len(pool)))
            sc = {v: float(r.randint(0, 4)) for v in chosen}
            rankings[s] = sorted(chosen, key=lambda v: (-sc[v], v))
            scores[s] = [sc[v] for v in rankings[s]]
        w = {s: r.choice([0.0, 0.3, 1.0]) for s in used}
        abst = None
        unj: list[str] = []
        if "rule" in used and r.random() < 0.6:
            free = [v for v in lib_ids if v not in rankings["rule"]] or lib_ids
            unj = r.sample(free, min(len(free), r.randint(1, 5)))
            abst = {"rule": (unj, max(0, len(lib_ids) - len(unj)))}
        top = r.choice([0, 1, 7, 50, 10**9])
        want = weighted_rrf({s: rankings[s] for s in used}, w, top_k=top, abstain=abst, scores=scores)
        extra: dict[str, int] = {}
        codes = {s: space.codes(Ranked(ids=rankings[s], scores=np.asarray(scores[s], float)), extra)
                 for s in used}
        un_codes = space.codes_of_ids(unj, extra) if abst else None
        got = search_steps._fuse_codes(space, extra, len(space) + len(extra), used, codes,
                                 {s: shared_ranks_array(scores[s]) for s in used}, w, RRF_K, top,
                                 un_codes, max(0, len(lib_ids) - len(unj)))
        assert got == want[:top], trial


def _plain_dense(idx, q):
    """The dense source video by video: each video's best live segment (first row on a tie)."""
    sims = idx.vectors @ np.asarray(q, np.float32)
    best: dict[str, tuple[float, int]] = {}
    for row in range(len(sims)):
        if not idx.alive[row]:
            continue
        vid = idx.video_ids[idx.code[row]]
        if vid not in best or sims[row] > best[vid][0]:
            best[vid] = (sims[row], row)
    out = [(v, float(s), (float(idx.t0[r]), float(idx.t1[r]))) for v, (s, r) in best.items()]
    return sorted(out, key=lambda x: (-x[1], x[0]))


def test_dense_video_ranking_by_arrays_equals_the_plain_one(tmp_path):
    from strived.retrieval.dense import DenseIndex

    class Emb:
        kind, name, dim, version = "text-of-perception", "fake", 8, "1"

    rng = np.random.default_rng(3)
    idx = DenseIndex.open(tmp_path, Emb())
    protos = rng.normal(size=(4, 8))
    protos /= np.linalg.norm(protos, axis=1, keepdims=True)
    order = rng.permutation(300)                        # videos added out of id order
    for v in order:
        n = int(rng.integers(1, 4))
        vecs = protos[rng.integers(0, 4, n)].astype(np.float32)     # repeated vectors: ties
        idx.add(f"v{v:04d}", [(k, 2.0 * k, 2.0 * k + 2) for k in range(n)], vecs, stamp="s")
    idx.remove("v0007")
    idx.add("v0011", [(0, 0.0, 9.0)], protos[:1].astype(np.float32), stamp="s")   # replaced
    for q in protos[:3]:
        want = _plain_dense(idx, q)
        assert idx.search_videos(q, exact=True) == want
        for k in (1, 5, 40):
            got = idx.search_videos(q, top_k=k, exact=True)
            assert got == want[:k]
        codes, sims, rows = idx.rank_videos(q, exact=True)
        assert [idx.video_ids[c] for c in codes] == [v for v, *_ in want]
