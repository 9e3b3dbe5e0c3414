"""A soft score on a field a unit has no value for is unknown, neither 0 nor left out (docs/rules.md,
"Scoring"): per unit (a track, or the video for ego fields) it takes the term's expected value, the
mean of s_c over the units of the same scoring where it is known; a term no unit knows is left out
(renormalised) and a unit with no known term scores 0. Fast scorer == reference oracle (its own
plain-loop means; plain, binarised, min_fraction, sequences) on corpora with all-NaN fields, the
planted cases, and the explanations == the scorer."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from strived.records import Track, VideoInfo, VideoRecords
from strived.rules import RuleScorer, parse_rule
from strived.rules.columns import TrackColumns
from strived.rules.explain import explain_video
from strived.rules.reference import corpus_term_means, score_corpus, score_sequence_video, score_video
from tests.core.synth import synth_video
from tests.core.test_rules import RULES
from tests.core.test_sequence_rules import SEQ_RULES, _brute, _random_rule

DIST = {"type": "temporal_change", "field": "distance", "window_seconds": 2.0, "magnitude": 20.0,
        "direction": "negative", "weight": 1.0}
SPEED = {"type": "temporal_change", "field": "speed", "window_seconds": 2.0, "magnitude": 4.0,
         "direction": "negative", "weight": 0.5}

MIXED = [
    # the brief's case: an object term and an ego term
    {"entity": {"class_filter": None}, "soft_scores": [DIST, SPEED]},
    {"entity": {"class_filter": ["car", "truck"], "agg_mode": "consensus"},
     "hard_gates": [{"field": "distance", "op": "lt", "value": 60}],
     "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "magnitude": 2,
                      "min_fraction": 0.3},
                     {"type": "monotonic_trend", "field": "distance", "direction": "decreasing",
                      "min_duration_seconds": 0.5, "weight": 0.7},
                     {"type": "temporal_change", "field": "heading", "window_seconds": 3, "magnitude": 0.2,
                      "weight": 0.4}]},
    {"entity": {"role": "ego"},
     "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 2, "magnitude": 1.5,
                      "direction": "negative"},
                     {"type": "temporal_change", "field": "heading", "window_seconds": 4, "magnitude": 0.1,
                      "weight": 2.0},
                     {"type": "monotonic_trend", "field": "accel", "direction": "increasing",
                      "min_duration_seconds": 0.3, "weight": 0.5}]},
    {"entity": {"class_filter": ["car", "bus", "truck"], "selection": "closest"},
     "soft_scores": [{"type": "temporal_change", "field": "abs_loc_x", "window_seconds": 1.5, "magnitude": 1.5},
                     {"type": "temporal_change", "field": "yaw_rate", "window_seconds": 1, "magnitude": 0.1,
                      "weight": 0.5, "min_fraction": 0.5}]},
    {"entity": {"class_filter": None, "agg_mode": "consensus"},
     "soft_scores": [{"type": "temporal_change", "field": "distance", "window_seconds": 1, "magnitude": 2,
                      "min_fraction": 0.4},
                     {"type": "temporal_change", "field": "loc_x_road", "window_seconds": 2, "magnitude": 1.5,
                      "weight": 0.5},
                     {"type": "temporal_change", "field": "speed", "window_seconds": 1, "magnitude": 0.5,
                      "weight": 0.5, "min_fraction": 0.2}]},
]


def _holey(vid: str, seed: int, duration_s: float = 10.0, **kw) -> VideoRecords:
    """A synthetic video where some tracks never have a distance (or a lateral offset) and some
    videos never have an ego speed/acceleration (or a yaw rate, hence no heading)."""
    rec = synth_video(vid, seed=seed, duration_s=duration_s, **kw)
    rng = np.random.default_rng(1000 + seed)
    for tr in rec.tracks:
        if rng.random() < 0.3:
            tr.fields["distance"][:] = np.nan
            tr.fields["loc_z"][:] = np.nan
        if rng.random() < 0.2:
            tr.fields["loc_x"][:] = np.nan
    if rng.random() < 0.4:
        rec.ego["speed"][:] = np.nan
        rec.ego["accel"][:] = np.nan
    if rng.random() < 0.3:
        rec.ego["yaw_rate"][:] = np.nan
    return rec


@pytest.fixture(scope="module")
def holey():
    recs = [_holey(f"h{k:03d}", seed=k) for k in range(24)]
    cols = TrackColumns.from_records(recs)
    # the corpus really has units without a value, of both roles
    for f in ("distance", "loc_x", "speed", "heading"):
        known = cols.known(f)
        assert (~known).any() and known.any(), f
    return recs


def _same_means(fast, ref):
    """Fast and reference expected terms agree (None where no unit knows the term)."""
    if isinstance(ref, dict):
        assert fast.keys() == ref.keys()
        for k in ref:
            _same_means(fast[k], ref[k])
        return
    assert len(fast) == len(ref)
    for a, b in zip(fast, ref):
        assert (a is None) == (b is None), (fast, ref)
        if a is not None:
            assert a == pytest.approx(b, abs=1e-6)


def _check_agree(recs, docs, binarize=False):
    """Fast scores over the corpus == the reference's (which computes the corpus's expected terms
    itself, by plain loops); returns the number of positive scores and of imputed terms seen."""
    sc = RuleScorer.from_records(recs)
    ordered = sorted(recs, key=lambda r: r.info.id)
    n_pos = 0
    for d in docs:
        r = parse_rule(d)
        res = sc.score(r, binarize=binarize)
        ref = np.array(score_corpus(ordered, r, binarize=binarize))
        np.testing.assert_allclose(res.scores, ref, atol=1e-6, rtol=0, err_msg=json.dumps(d))
        _same_means(res.term_means, corpus_term_means(ordered, r, binarize))
        n_pos += int((res.scores > 0).sum())
    return n_pos


@pytest.mark.parametrize("binarize", [False, True])
def test_fast_equals_reference_with_all_nan_fields(holey, binarize):
    assert _check_agree(holey, RULES + MIXED, binarize) > 50


def test_sequences_fast_equal_reference_with_all_nan_fields(holey):
    rng = random.Random(23)
    docs = SEQ_RULES + [{"sequence": [{"entity": {"class_filter": None}, "soft_scores": [DIST, SPEED]}]}] + \
        [_random_rule(rng, False) for _ in range(14)]
    assert _check_agree(holey[:12], docs) > 20
    assert _check_agree(holey[:12], docs[:6], binarize=True) > 5


def test_sequence_reference_equals_exhaustive_with_all_nan_fields():
    rng = random.Random(5)
    recs = [_holey(f"t{k}", 300 + k, duration_s=0.9, n_tracks=3, nan_frac=0.1) for k in range(6)]
    n_pos = 0
    for _ in range(25):
        r = parse_rule(_random_rule(rng, tiny=True))
        for rec in recs:
            ref = score_sequence_video(rec, r)
            assert ref == pytest.approx(_brute(rec, r), abs=1e-12)
            n_pos += ref > 0
    assert n_pos > 20
    assert _check_agree(recs, [_random_rule(rng, tiny=True) for _ in range(15)]) > 10


def test_explanations_report_unknown_terms_and_agree_with_the_scorer(holey):
    sc = RuleScorer.from_records(holey)
    n_unknown = n_imputed = 0
    for d in MIXED:
        r = parse_rule(d)
        res = sc.score(r)
        for vid, s in zip(res.video_ids, res.scores):
            ex = sc.explain(vid, r)
            assert ex.score == pytest.approx(s, abs=1e-6)
            units = [ex.ego] if r.entity.role == "ego" else ex.traces
            for u in units:
                want_imputed = {}
                for k, c in enumerate(r.soft_scores):
                    if c.name in u.unknown:
                        n_unknown += 1
                        assert np.isnan(u.soft[c.name]).all() and math.isnan(u.soft_max[c.name])
                        if res.term_means[k] is not None and len(u.unknown) < len(r.soft_scores):
                            want_imputed[k] = res.term_means[k]
                    else:
                        assert (u.soft[c.name] >= 0).all() and (u.soft[c.name] <= 1).all()
                assert u.imputed == pytest.approx(want_imputed)
                n_imputed += len(u.imputed)
                assert np.isfinite(u.combined).all() and len(u.combined) == len(u.t)
                # unit_score: the known maxima and the imputed values, weighted
                if len(u.unknown) < len(r.soft_scores):
                    terms = [(c.weight, u.soft_max[c.name] if c.name not in u.unknown else u.imputed.get(k))
                             for k, c in enumerate(r.soft_scores)]
                    terms = [(w, x) for w, x in terms if x is not None]
                    want = sum(w * x for w, x in terms) / sum(w for w, _ in terms)
                    assert u.unit_score == pytest.approx(want, abs=1e-9)
                else:
                    assert u.unit_score == 0.0 and not u.imputed
            if s > 0 and r.entity.agg_mode == "any":
                # the peak unit's score is the video's: the same imputed mean
                assert max(u.unit_score for u in units) == pytest.approx(s, abs=1e-6)
    assert n_unknown > 20 and n_imputed > 20


def test_sequence_explanations_agree_with_the_scorer(holey):
    recs = holey[:12]
    sc = RuleScorer.from_records(recs)
    rng = random.Random(31)
    docs = [{"sequence": [{"entity": {"class_filter": None}, "soft_scores": [DIST, SPEED]}]}] + \
        [_random_rule(rng, False) for _ in range(6)]
    n_pos = 0
    for d in docs:
        r = parse_rule(d)
        res = sc.score(r)
        assert res.term_means == sc.term_means(r)
        for vid, s in zip(res.video_ids, res.scores):
            ex = sc.explain(vid, r)
            assert ex.score == pytest.approx(s, abs=1e-9), json.dumps(d)
            n_pos += s > 0
    assert n_pos > 10


# ---------------------------------------------------------------------------- planted


def _video(vid: str, with_speed: bool, no_distance_track: bool = False, drop_m: float = 10.0) -> VideoRecords:
    """10 s at 10 fps; a car whose distance drops by ``drop_m`` between t=4 and t=5 (s_distance =
    0.5 at magnitude 20 for 10 m) while the ego brakes by 4 m/s (s_speed = 1 at magnitude 4), or has
    no speed."""
    t = np.arange(100) / 10.0
    dist = np.where(t < 4, 30.0, np.maximum(30.0 - drop_m * (t - 4), 30.0 - drop_m)).astype(np.float32)
    f = {"distance": dist, "loc_x": np.zeros(100, np.float32), "loc_z": dist.copy(),
         "lane_rel": np.zeros(100, np.float32), "bbox_area": np.full(100, 1e4, np.float32),
         "score": np.ones(100, np.float32)}
    tracks = [Track(1, "car", np.arange(100, dtype=np.int32), f)]
    if no_distance_track:
        g = {k: v.copy() for k, v in f.items()}
        g["distance"][:] = np.nan
        g["loc_z"][:] = np.nan
        tracks.append(Track(2, "car", np.arange(100, dtype=np.int32), g))
    speed = np.where(t < 4, 12.0, np.maximum(12.0 - 4.0 * (t - 4), 8.0))
    if not with_speed:
        speed = np.full(100, np.nan)
    ego = {"speed": speed, "yaw_rate": np.zeros(100), "accel": np.gradient(speed, t)}
    return VideoRecords(VideoInfo(vid, None, 10.0, 100), np.arange(100), t, ego, tracks)


def _flat(vid: str) -> VideoRecords:
    """Like `_video` with speed, but the ego never brakes: its speed term is known and 0."""
    rec = _video(vid, True)
    rec.ego["speed"][:] = 12.0
    rec.ego["accel"][:] = 0.0
    return rec


def _corpus():
    """a: s_dist 0.5, s_speed 1; c: s_dist 0.5, s_speed 0 (known); b: s_dist 0.5, speed unknown."""
    return [_video("a_speed", True), _video("b_no_speed", False), _flat("c_flat")]


def _rule():
    return parse_rule({"entity": {"class_filter": ["car"]}, "soft_scores": [DIST, SPEED]})


def test_a_clip_without_ego_speed_takes_the_expected_speed_term():
    recs = _corpus()
    rule = _rule()
    res = RuleScorer.from_records(recs).score(rule)
    got = dict(zip(res.video_ids, res.scores))
    # E[s_speed] = the mean of the known speed terms, (1 + 0) / 2 = 0.5; E[s_dist] = 0.5
    assert res.term_means == pytest.approx((0.5, 0.5))
    assert got["a_speed"] == pytest.approx((0.5 + 0.5 * 1.0) / 1.5, abs=1e-9)
    assert got["c_flat"] == pytest.approx((0.5 + 0.5 * 0.0) / 1.5, abs=1e-9)
    # not 0.5 x 1 / 1.5 (unknown as 0), not 0.5 / 1 by chance: (0.5 + 0.5 x E[s_speed]) / 1.5
    assert got["b_no_speed"] == pytest.approx((0.5 + 0.5 * 0.5) / 1.5, abs=1e-9)
    ordered = sorted(recs, key=lambda r: r.info.id)
    assert dict(zip(res.video_ids, score_corpus(ordered, rule))) == pytest.approx(got)
    assert corpus_term_means(recs, rule) == pytest.approx((0.5, 0.5))
    # binarised: the mean of the binarised known speed terms (1, 0) is imputed
    b = RuleScorer.from_records(recs).score(rule, binarize=True)
    assert b.term_means == pytest.approx((1.0, 0.5))
    assert dict(zip(b.video_ids, b.scores)) == pytest.approx(
        {"a_speed": 1.0, "b_no_speed": (1.0 + 0.5 * 0.5) / 1.5, "c_flat": 1.0 / 1.5})
    assert score_corpus(ordered, rule, binarize=True) == pytest.approx(list(b.scores))


def test_one_term_no_longer_stands_for_all_the_evidence():
    """A speedless clip with a full distance drop does not reach a full score on the distance
    term alone (renormalising gave it 1 and put it above a real collision)."""
    recs = [_video("a_speed", True, drop_m=20.0), _flat("c_flat"),
            _video("b_no_speed", False, drop_m=20.0)]
    rule = _rule()
    got = dict(RuleScorer.from_records(recs).score(rule).ranking())
    assert got["a_speed"] == pytest.approx(1.0)
    assert got["b_no_speed"] == pytest.approx((1.0 + 0.5 * 0.5) / 1.5) and got["b_no_speed"] < 1.0


def test_a_term_no_unit_knows_is_left_out():
    recs = [_video("b_no_speed", False), _video("d_no_speed", False, drop_m=20.0)]
    rule = _rule()
    res = RuleScorer.from_records(recs).score(rule)
    # nobody has a speed: the term is left out (renormalised), the distance term alone counts
    assert res.term_means[0] == pytest.approx(0.75) and res.term_means[1] is None
    assert dict(zip(res.video_ids, res.scores)) == pytest.approx({"b_no_speed": 0.5, "d_no_speed": 1.0})
    assert score_corpus(recs, rule) == pytest.approx([0.5, 1.0])
    assert corpus_term_means(recs, rule)[1] is None
    # the default of the one-video oracles and explanations is the video alone as the corpus
    assert score_video(recs[0], rule) == pytest.approx(0.5)
    ex = explain_video(recs[0], rule)
    assert ex.score == pytest.approx(0.5) and ex.traces[0].imputed == {}
    assert ex.traces[0].unit_score == pytest.approx(0.5)
    # a rule whose every term is unknown on every unit scores 0
    speed_only = parse_rule({"entity": {"role": "ego"}, "soft_scores": [SPEED]})
    res = RuleScorer.from_records(recs).score(speed_only)
    assert res.term_means == (None,) and not res.scores.any()


def test_a_unit_with_no_known_term_scores_0_even_where_others_know_it():
    recs = _corpus()
    speed_only = parse_rule({"entity": {"role": "ego"}, "soft_scores": [SPEED]})
    sc = RuleScorer.from_records(recs)
    res = sc.score(speed_only)
    assert res.term_means == pytest.approx((0.5,))
    assert dict(zip(res.video_ids, res.scores)) == pytest.approx({"a_speed": 1.0, "b_no_speed": 0.0, "c_flat": 0.0})
    assert score_corpus(sorted(recs, key=lambda r: r.info.id), speed_only) == pytest.approx(list(res.scores))
    ex = sc.explain("b_no_speed", speed_only)
    assert ex.score == 0.0 and ex.ego.unit_score == 0.0 and ex.ego.imputed == {}
    assert not ex.ego.combined.any()


def test_a_track_without_distance_takes_the_expected_distance_term():
    rec = _video("a", True, no_distance_track=True)
    rule = _rule()
    sc = RuleScorer.from_records([rec])
    res = sc.score(rule)
    # E[s_dist] over the candidates that know it: track 1's 0.5; both tracks score (0.5 + 0.5) / 1.5
    assert res.term_means == pytest.approx((0.5, 1.0))
    assert res.scores[0] == pytest.approx(2 / 3) and res.peak_track[0] == 1   # tie: lowest id
    assert score_video(rec, rule) == pytest.approx(2 / 3)
    ex = sc.explain("a", rule)
    by_id = {tr.track: tr for tr in ex.traces}
    assert by_id[2].unknown == [rule.soft_scores[0].name] and by_id[2].imputed == pytest.approx({0: 0.5})
    assert by_id[2].unit_score == pytest.approx(2 / 3)
    assert by_id[1].unknown == [] and by_id[1].imputed == {} and by_id[1].unit_score == pytest.approx(2 / 3)


def test_the_explanation_shows_the_unknown_term_and_its_imputed_value():
    recs = _corpus()
    rule = _rule()
    sc = RuleScorer.from_records(recs)
    dist_name, speed_name = (c.name for c in rule.soft_scores)
    ex = sc.explain("b_no_speed", rule)
    assert ex.score == pytest.approx(0.5)
    (tr,) = ex.traces
    assert tr.unknown == [speed_name] and tr.imputed == pytest.approx({1: 0.5})
    assert np.isnan(tr.soft[speed_name]).all() and math.isnan(tr.soft_max[speed_name])
    assert tr.spans[speed_name] is None
    assert tr.soft_max[dist_name] == pytest.approx(0.5) and tr.unit_score == pytest.approx(0.5)
    # the per-frame combined trace counts the imputed speed term at every frame
    np.testing.assert_allclose(tr.combined, (tr.soft[dist_name] + 0.5 * 0.5) / 1.5)
    assert ex.ego is not None and ex.ego.unknown == [speed_name]
    assert ex.span_s == pytest.approx((3.0, 5.0))      # the distance drop's window
    full = sc.explain("a_speed", rule).traces[0]
    assert full.unknown == [] and full.imputed == {} and full.unit_score == pytest.approx(2 / 3)
    assert float(full.combined.max()) == pytest.approx(2 / 3)
    # the same numbers through explain_video given the corpus's expected terms
    again = explain_video(recs[1], rule, term_means=corpus_term_means(recs, rule))
    assert again.score == pytest.approx(ex.score) and again.traces[0].imputed == pytest.approx(tr.imputed)


def test_a_sequence_step_without_ego_speed_takes_the_expected_speed_term():
    recs = _corpus()
    one = parse_rule({"sequence": [{"entity": {"class_filter": ["car"]}, "soft_scores": [DIST, SPEED]}]})
    two = parse_rule({"sequence": [
        {"entity": {"role": "ego"}, "hard_gates": [{"field": "yaw_rate", "op": "lt", "value": 1}]},
        {"entity": {"class_filter": ["car"]}, "gap": {"min_seconds": 0, "max_seconds": 10},
         "soft_scores": [DIST, SPEED]}]})
    sc = RuleScorer.from_records(recs)
    ordered = sorted(recs, key=lambda r: r.info.id)
    for rule, expo in ((one, 1.0), (two, 0.5)):
        res = sc.score(rule)
        got = dict(zip(res.video_ids, res.scores))
        last = ("step", len(rule.sequence) - 1)
        # per step over its candidate units: E = the mean of the units' trace maxima where known
        assert res.term_means[last] == pytest.approx((0.5, 0.5))
        _same_means(res.term_means, corpus_term_means(recs, rule))
        step_q = {"a_speed": 2 / 3, "b_no_speed": (0.5 + 0.5 * 0.5) / 1.5, "c_flat": 0.5 / 1.5}
        assert got == pytest.approx({v: q ** expo for v, q in step_q.items()}, abs=1e-9)
        assert dict(zip(res.video_ids, score_corpus(ordered, rule))) == pytest.approx(got, abs=1e-9)
        for r in recs:
            ex = sc.explain(r.info.id, rule)
            assert ex.score == pytest.approx(got[r.info.id], abs=1e-9)
            assert ex.steps[-1].score == pytest.approx(step_q[r.info.id], abs=1e-9)
        # alone, the speedless video knows no speed: the term is left out there
        assert score_video(recs[1], rule) == pytest.approx(0.5 ** expo, abs=1e-9)


def test_library_scoring_caches_the_known_units(tmp_path):
    """Through a library (column cache on disk) the known-units feature is cached and scores agree;
    the library's explanations and sequence spans use its expected terms."""
    from strived import engine
    from strived.store import Library

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([_video("a_speed", True), _video("b_no_speed", False, no_distance_track=True),
                    _flat("c_flat")])
    rule = _rule()
    # b: track 1 (s_dist 0.5, speed imputed 0.5) -> 0.5; track 2 knows no term -> 0
    want = {"a_speed": 2 / 3, "b_no_speed": 0.5, "c_flat": 1 / 3}
    for _ in range(2):            # cold, then from the cache
        got = dict(RuleScorer(lib).score(rule).ranking())
        assert got == pytest.approx(want)
    ex = engine.explain(lib, "b_no_speed", rule)
    assert ex.score == pytest.approx(0.5)
    by_id = {tr.track: tr for tr in ex.traces}
    assert by_id[1].imputed == pytest.approx({1: 0.5}) and by_id[2].unit_score == 0.0
    lib.close()
