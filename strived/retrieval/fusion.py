"""Weighted reciprocal rank fusion (Cormack et al. 2009; paper appendix Eq. "fusion"):

    S(v) = sum_s w_s / (rrf_k + rank_s(v)),   rank_s in {1, 2, ...},   rrf_k = 60.

A video absent from a source's ranking gets nothing from that source. Ties break on video id.
"""

from __future__ import annotations

from typing import Mapping, Sequence

RRF_K = 60


def weighted_rrf(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None,
                 rrf_k: int = RRF_K) -> list[tuple[str, float]]:
    """Fuse per-source rankings (best first). Unknown or missing weights count as 1.0 when
    ``weights`` is None (plain RRF) and 0.0 otherwise. Negative weights are rejected."""
    if rrf_k < 0:
        raise ValueError("rrf_k must be >= 0")
    scores: dict[str, float] = {}
    for source, ranked in rankings.items():
        w = 1.0 if weights is None else float(weights.get(source, 0.0))
        if w < 0:
            raise ValueError(f"weight of {source!r} is negative ({w})")
        for rank, vid in enumerate(ranked, start=1):
            scores[vid] = scores.get(vid, 0.0) + w / (rrf_k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def contributions(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None,
                  video_id: str, rrf_k: int = RRF_K) -> dict[str, float]:
    """Each source's term w_s / (rrf_k + rank_s(v)) for one video (0 when absent)."""
    out = {}
    for source, ranked in rankings.items():
        w = 1.0 if weights is None else float(weights.get(source, 0.0))
        try:
            out[source] = w / (rrf_k + list(ranked).index(video_id) + 1)
        except ValueError:
            out[source] = 0.0
    return out
