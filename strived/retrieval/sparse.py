"""Sparse retrieval: BM25 over one summary text per video.

Scoring is Lucene's BM25 (Robertson & Zaragoza 2009, with Lucene's always-positive idf
``log(1 + (N - n + 0.5) / (n + 0.5))``, k1 = 1.5, b = 0.75). Okapi's idf goes negative for a term in
more than half the documents, which in generated summaries ("car" is in most) would push matching
videos *down*; Lucene's does not.

Two backends compute the same ranking: ``bm25s`` (default, chosen by measurement: see
benchmarks/bench_retrieval.py and docs/retrieval.md) and ``rank_bm25`` (BM25Okapi with the idf
replaced by Lucene's; kept as the test oracle). Scores differ by the constant factor (k1 + 1) that
Lucene drops, which changes no ranking.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .tokenize import tokenize

BACKENDS = ("bm25s", "rank_bm25")
DEFAULT_BACKEND = "bm25s"
K1 = 1.5
B = 0.75


class BM25Index:
    """An in-memory BM25 index over ``(doc_ids, texts)``; `search` returns ``[(doc_id, score)]``
    sorted by score descending, ties by id, only documents sharing a token with the query."""

    def __init__(self, doc_ids: Sequence[str], texts: Sequence[str], backend: str = DEFAULT_BACKEND):
        if backend not in BACKENDS:
            raise ValueError(f"unknown BM25 backend {backend!r}; valid: {', '.join(BACKENDS)}")
        if len(doc_ids) != len(texts):
            raise ValueError("doc_ids and texts differ in length")
        self.backend = backend
        self.doc_ids = list(doc_ids)
        # Rank of each id in sorted order: a numeric tie-break key (no string work per query).
        self._id_rank = np.empty(len(self.doc_ids), np.int64)
        self._id_rank[np.argsort(np.asarray(self.doc_ids, dtype=object), kind="stable")] = \
            np.arange(len(self.doc_ids))
        corpus = [tokenize(t) for t in texts]
        self._empty = len(corpus) == 0
        if self._empty:
            self._impl = None
        elif backend == "bm25s":
            import bm25s

            # Empty documents would be dropped from bm25s' matrix shape; a sentinel keeps alignment.
            corpus = [toks or ["\x00empty"] for toks in corpus]
            self._impl = bm25s.BM25(method="lucene", k1=K1, b=B)
            self._impl.index(corpus, show_progress=False)
        else:
            self._impl = _LuceneOkapi([toks or ["\x00empty"] for toks in corpus], k1=K1, b=B)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float32, aligned with ``doc_ids``)."""
        toks = tokenize(query)
        if self._empty or not toks:
            return np.zeros(len(self.doc_ids), np.float32)
        if self.backend == "bm25s":
            return np.asarray(self._impl.get_scores(toks), dtype=np.float32)
        return np.asarray(self._impl.get_scores(toks), dtype=np.float32)

    def search(self, query: str, top_k: int | None = None) -> list[tuple[str, float]]:
        s = self.scores(query)
        hit = np.flatnonzero(s > 0)
        if hit.size == 0:
            return []
        if top_k is not None and top_k < hit.size:
            # Keep every document scoring at least the k-th score (ties at the cut stay in).
            kth = np.partition(s[hit], hit.size - top_k)[hit.size - top_k]
            hit = hit[s[hit] >= kth]
        # Score descending, then id ascending (deterministic ties).
        order = hit[np.lexsort((self._id_rank[hit], -s[hit]))]
        if top_k is not None:
            order = order[:top_k]
        return [(self.doc_ids[i], float(s[i])) for i in order]


class _LuceneOkapi:
    """rank_bm25's BM25Okapi with Lucene's idf (the oracle for the bm25s backend)."""

    def __init__(self, corpus: list[list[str]], k1: float, b: float):
        from rank_bm25 import BM25Okapi

        class _Impl(BM25Okapi):
            def _calc_idf(self, nd):
                self.idf = {w: math.log(1.0 + (self.corpus_size - n + 0.5) / (n + 0.5))
                            for w, n in nd.items()}

        self._bm = _Impl(corpus, k1=k1, b=b)

    def get_scores(self, toks: list[str]) -> np.ndarray:
        return self._bm.get_scores(toks)
