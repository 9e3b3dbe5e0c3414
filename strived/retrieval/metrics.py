"""Ranking metrics of the paper (Section "Evaluation metrics", appendix Eq. "ap-suppl").

AP(ranking) = (1/|R|) * sum over ranks k holding a relevant item of (#relevant in top k) / k,
where |R| counts every relevant item of the query (a relevant item never ranked contributes 0).
Items in ``ignore`` (docs/formats.md "ambiguous") are removed from the ranking before computing.
"""

from __future__ import annotations

from typing import Iterable, Sequence

ACC_KS = (1, 3, 5, 10)


def _clean(ranked: Sequence[str], ignore: Iterable[str]) -> list[str]:
    ig = set(ignore)
    return [r for r in ranked if r not in ig]


def average_precision(ranked: Sequence[str], relevant: Iterable[str], ignore: Iterable[str] = ()) -> float:
    rel = set(relevant) - set(ignore)
    if not rel:
        return 0.0
    hits, total = 0, 0.0
    for k, item in enumerate(_clean(ranked, ignore), start=1):
        if item in rel:
            hits += 1
            total += hits / k
    return total / len(rel)


def rank_of_first_relevant(ranked: Sequence[str], relevant: Iterable[str], ignore: Iterable[str] = ()) -> int | None:
    rel = set(relevant)
    for k, item in enumerate(_clean(ranked, ignore), start=1):
        if item in rel:
            return k
    return None


def reciprocal_rank(ranked: Sequence[str], relevant: Iterable[str], ignore: Iterable[str] = ()) -> float:
    r = rank_of_first_relevant(ranked, relevant, ignore)
    return 0.0 if r is None else 1.0 / r


def hit_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int, ignore: Iterable[str] = ()) -> float:
    """1.0 when at least one relevant item is in the top k (the per-query term of Acc@k)."""
    r = rank_of_first_relevant(ranked, relevant, ignore)
    return 1.0 if r is not None and r <= k else 0.0


def query_metrics(ranked: Sequence[str], relevant: Iterable[str], ignore: Iterable[str] = ()) -> dict:
    relevant = list(relevant)
    out = {"AP": average_precision(ranked, relevant, ignore),
           "RR": reciprocal_rank(ranked, relevant, ignore),
           "rank_of_first_relevant": rank_of_first_relevant(ranked, relevant, ignore)}
    for k in ACC_KS:
        out[f"hit@{k}"] = hit_at_k(ranked, relevant, k, ignore)
    return out


def summarize(per_query: Sequence[dict]) -> dict:
    """Mean over queries: MRR, mAP, Acc@k (fractions in [0, 1])."""
    n = len(per_query)
    if n == 0:
        return {"MRR": 0.0, "mAP": 0.0, **{f"Acc@{k}": 0.0 for k in ACC_KS}}
    out = {"MRR": sum(q["RR"] for q in per_query) / n, "mAP": sum(q["AP"] for q in per_query) / n}
    for k in ACC_KS:
        out[f"Acc@{k}"] = sum(q[f"hit@{k}"] for q in per_query) / n
    return out
