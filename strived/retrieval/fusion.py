"""Weighted reciprocal rank fusion (Cormack et al. 2009; paper appendix Eq. "fusion"):

    S(v) = sum_s w_s / (rrf_k + rank_s(v)),   rank_s in {1, 2, ...},   rrf_k = 60.

A video absent from a source's ranking gets nothing from that source, except a video the source
*could not judge* (``abstain``: e.g. the rule source on a video whose ego speed was never
estimated): unknown is neither a match nor a non-match, so such a video gets that source's
expected term over the videos it did judge, ``w_s * mean_v(1 / (rrf_k + rank_s(v)))`` with 0 for
judged videos it did not rank. Ties break on video id.

Equal scores share a rank (``scores``): rank_s(v) is then the mean of the positions of every
video with v's score in source s (fractional ranking), e.g. twelve videos tied at the rule score
1.0 all get rank 6.5 instead of ranks 1..12 in video-id order. A tie is no evidence of order, and
the id order is an artefact (on bench-dev the rule's ties at 1.0 put the same "av2_*" records
first for most queries); with a shared rank the other sources decide the order inside a tie.
"""

from __future__ import annotations

import heapq
from operator import itemgetter
from typing import Collection, Mapping, Sequence

import numpy as np

RRF_K = 60


def _shared_ranks(scores: Sequence[float]) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    n = len(s)
    if n == 0:
        return np.zeros(0)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], n]
    return np.repeat((starts + 1 + ends) / 2.0, ends - starts)


def shared_ranks_array(scores: Sequence[float]) -> np.ndarray:
    """`shared_ranks` as a float64 array."""
    return _shared_ranks(scores)


def shared_ranks(scores: Sequence[float]) -> list[float]:
    """1-based ranks of a best-first list of scores where equal scores share the mean of their
    positions: [0.9, 0.5, 0.5, 0.1] -> [1, 2.5, 2.5, 4]. Only *equal* neighbours tie (a source's
    scores are compared exactly; the list must be sorted best first)."""
    return _shared_ranks(scores).tolist()


def _terms(ranked: Sequence[str], scores: "Sequence[float] | None", w: float, rrf_k: int) -> list[float]:
    """Each ranked video's term w / (rrf_k + rank), ranks shared by equal ``scores`` when given."""
    if scores is None:
        return [w / r for r in range(rrf_k + 1, rrf_k + 1 + len(ranked))]
    if len(scores) != len(ranked):
        raise ValueError(f"{len(scores)} scores for a ranking of {len(ranked)} videos")
    return (w / (rrf_k + _shared_ranks(scores))).tolist()


def weighted_rrf(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None,
                 rrf_k: int = RRF_K, top_k: int | None = None,
                 abstain: Mapping[str, tuple[Collection[str], int]] | None = None,
                 scores: Mapping[str, Sequence[float]] | None = None) -> list[tuple[str, float]]:
    """Fuse per-source rankings (best first). Unknown or missing weights count as 1.0 when
    ``weights`` is None (plain RRF) and 0.0 otherwise. Negative weights are rejected.
    ``top_k`` keeps only the first ``top_k`` of the fused list (same order; faster).
    ``abstain``: source -> (videos it could not judge, number of videos it judged); see the
    module doc. ``scores``: source -> its scores, aligned with its ranking; equal scores share
    a rank (module doc). A source without scores ranks by position."""
    scores_in = scores or {}
    if rrf_k < 0:
        raise ValueError("rrf_k must be >= 0")
    scores: dict[str, float] = {}
    for source, ranked in rankings.items():
        w = 1.0 if weights is None else float(weights.get(source, 0.0))
        if w < 0:
            raise ValueError(f"weight of {source!r} is negative ({w})")
        terms = _terms(ranked, scores_in.get(source), w, rrf_k)
        if not scores:
            # first source: the same sums (0.0 + x == x), built at C speed
            scores = dict(zip(ranked, terms))
            if len(scores) == len(ranked):
                continue
            scores = {}                      # duplicate ids: accumulate them one by one
        get = scores.get
        for term, vid in zip(terms, ranked):
            scores[vid] = get(vid, 0.0) + term
    for source, (vids, n_judged) in (abstain or {}).items():
        ranked = rankings.get(source, ())
        w = 1.0 if weights is None else float(weights.get(source, 0.0))
        if not vids or w == 0.0 or n_judged <= 0:
            continue
        expected = w * sum(_terms(ranked, scores_in.get(source), 1.0, rrf_k)) / n_judged
        get = scores.get
        for vid in vids:
            scores[vid] = get(vid, 0.0) + expected
    # score descending, then id ascending
    if top_k is not None and 0 <= top_k < len(scores):
        if top_k == 0:
            return []
        kth = heapq.nlargest(top_k, scores.values())[-1]
        out = [kv for kv in scores.items() if kv[1] >= kth]   # ties at the cut stay in the sort
        out.sort(key=lambda kv: (-kv[1], kv[0]))
        return out[:top_k]
    # sort the ids (a plain string sort), then stably by score (reverse keeps equal scores in
    # id order): ~3x faster than one sort on a (-score, id) tuple key at 10k videos
    out = [(v, scores[v]) for v in sorted(scores)]
    out.sort(key=itemgetter(1), reverse=True)
    return out


def contributions(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None,
                  video_id: str, rrf_k: int = RRF_K,
                  scores: Mapping[str, Sequence[float]] | None = None) -> dict[str, float]:
    """Each source's term w_s / (rrf_k + rank_s(v)) for one video (0 when absent); ``scores`` as
    in `weighted_rrf` (equal scores share a rank)."""
    out = {}
    for source, ranked in rankings.items():
        w = 1.0 if weights is None else float(weights.get(source, 0.0))
        ranked = list(ranked)
        try:
            i = ranked.index(video_id)
        except ValueError:
            out[source] = 0.0
            continue
        out[source] = _terms(ranked, (scores or {}).get(source), w, rrf_k)[i]
    return out
