"""BM25: the bm25s backend ranks exactly as the rank-bm25 oracle (same Lucene BM25 formula)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from strived.retrieval.sparse import BM25Index
from strived.retrieval.summaries import load_summaries
from strived.retrieval.tokenize import tokenize


def test_tokenizer():
    assert tokenize("The Red car CUT-IN at night, dashcam_2021-06-03 RainyDay") == \
        ["red", "car", "cut", "night", "2021", "06", "03", "rainy", "day"]


def _agree(ids, texts, queries):
    a, b = BM25Index(ids, texts, "bm25s"), BM25Index(ids, texts, "rank_bm25")
    for q in queries:
        ra, rb = a.search(q), b.search(q)
        assert [x[0] for x in ra] == [x[0] for x in rb], q
        if ra:  # scores differ only by the constant (k1 + 1) Lucene drops
            np.testing.assert_allclose(np.array([s for _, s in rb]) / np.array([s for _, s in ra]),
                                       2.5, rtol=1e-4)


def test_oracle_agreement_synthetic():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)] + ["red", "car", "night", "truck", "left", "turn"]
    texts = [" ".join(rng.choices(vocab, k=rng.randint(3, 40))) for _ in range(500)] + [""]
    ids = [f"v{i:04d}" for i in range(len(texts))]
    queries = [" ".join(rng.choices(vocab, k=rng.randint(1, 5))) for _ in range(40)]
    _agree(ids, texts, queries + ["", "unknownword"])


def test_oracle_agreement_bench_dev(records_library, bench_dev):
    import json

    ids, texts = load_summaries(records_library)
    assert len(ids) == 47
    queries = [q["text"] for q in json.loads((bench_dev / "queries.json").read_text())]
    _agree(ids, texts, queries)


def test_search_contract():
    idx = BM25Index(["b", "a", "c"], ["red car", "red car", "blue truck"])
    assert [v for v, _ in idx.search("red")] == ["a", "b"]      # tie broken by id
    assert idx.search("green") == [] and idx.search("red", top_k=1)[0][0] == "a"
    with pytest.raises(ValueError, match="valid: bm25s, rank_bm25"):
        BM25Index([], [], "tfidf")
    assert BM25Index([], []).search("x") == []
