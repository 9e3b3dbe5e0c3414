"""Dense index: exact vs HNSW agreement, per-video max with the best segment's span,
incremental replace/remove, persistence, and a mismatched embedder refused."""

from __future__ import annotations

import numpy as np
import pytest

from strived.retrieval.dense import DenseIndex, DenseIndexMismatch


class FakeEmbedder:
    kind = "text-of-perception"

    def __init__(self, name="fake", dim=32, version="1"):
        self.name, self.dim, self.version = name, dim, version


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _fill(idx, n_videos, segs_per_video, dim, seed=0):
    rng = np.random.default_rng(seed)
    for v in range(n_videos):
        segs = [(k, 4.0 * k, 4.0 * k + 4) for k in range(segs_per_video)]
        idx.add(f"v{v:05d}", segs, _unit(rng.normal(size=(segs_per_video, dim))), stamp="s")


def test_video_score_is_best_segment_with_its_span(tmp_path):
    idx = DenseIndex.open(tmp_path, FakeEmbedder(dim=3))
    idx.add("a", [(0, 0.0, 4.0), (1, 4.0, 8.0)], _unit(np.array([[1, 0, 0], [0, 1, 0.]])))
    idx.add("b", [(0, 0.0, 4.0)], _unit(np.array([[0.7, 0.7, 0.]])))
    res = idx.search_videos(np.array([0, 1, 0.]))
    assert [r[0] for r in res] == ["a", "b"]
    assert res[0][1] == pytest.approx(1.0) and res[0][2] == (4.0, 8.0)


def test_exact_vs_hnsw(tmp_path):
    dim = 48
    idx = DenseIndex.open(tmp_path, FakeEmbedder(dim=dim), exact_max_rows=2_000)
    _fill(idx, 1_000, 3, dim)
    idx.finish_updates()
    assert idx.uses_hnsw
    rng = np.random.default_rng(1)
    recalls = []
    for q in _unit(rng.normal(size=(30, dim))):
        exact = [v for v, _, _ in idx.search_videos(q, top_k=10, exact=True)]
        approx = [v for v, _, _ in idx.search_videos(q, top_k=10)]
        recalls.append(len(set(exact) & set(approx)) / 10)
    assert np.mean(recalls) >= 0.95


def test_incremental_replace_remove_and_reload(tmp_path):
    emb = FakeEmbedder(dim=8)
    idx = DenseIndex.open(tmp_path, emb, exact_max_rows=50)
    _fill(idx, 30, 2, 8)
    idx.finish_updates()
    assert idx.uses_hnsw and len(idx) == 60
    target = _unit(np.ones((1, 8)))
    idx.add("v00003", [(0, 0.0, 2.5)], target, stamp="new")       # replace v00003
    idx.remove("v00004")
    idx.finish_updates()
    top = idx.search_videos(target[0], top_k=3)
    assert top[0][0] == "v00003" and top[0][2] == (0.0, 2.5)
    again = DenseIndex.open(tmp_path, emb, exact_max_rows=50)
    assert len(again) == 57 and again.stamps["v00003"] == "new" and "v00004" not in again.stamps
    assert again.search_videos(target[0], top_k=1)[0][0] == "v00003"
    assert "v00004" not in {v for v, _, _ in again.search_videos(target[0])}


def test_mismatched_embedder_refused(tmp_path):
    idx = DenseIndex.open(tmp_path, FakeEmbedder("text-a", 8))
    _fill(idx, 2, 1, 8)
    idx.finish_updates()
    for other in (FakeEmbedder("text-b", 8), FakeEmbedder("text-a", 16), FakeEmbedder("text-a", 8, "2")):
        with pytest.raises(DenseIndexMismatch, match="was built with embedder 'text-a'"):
            DenseIndex.open(tmp_path, other)
    fresh = DenseIndex.open(tmp_path, FakeEmbedder("text-b", 8), rebuild=True)
    assert len(fresh) == 0


def test_index_time_checks_leave_a_new_process_nothing_to_walk(tmp_path, monkeypatch):
    """The checks a new process makes when it opens a saved generation (every vector's norm, the
    HNSW graph's soundness: at 100,000 videos reading 768 MB of vectors and walking an 842 MB
    graph) are worked out at index time (`prime_checks`): the open reads their answers."""
    from strived.retrieval import dense, dense_check

    emb = FakeEmbedder(dim=8)
    idx = DenseIndex.open(tmp_path, emb, exact_max_rows=50)
    _fill(idx, 30, 2, 8)
    idx.finish_updates()
    dense_check.prime_checks(idx)

    def walked(*a, **k):
        raise AssertionError("a new process computed an index-time check")
    monkeypatch.setattr(dense, "bad_vector_rows", walked)
    monkeypatch.setattr(dense_check, "hnsw_graph_problem", walked)
    again = DenseIndex.open(tmp_path, emb, exact_max_rows=50)
    assert again.uses_hnsw and len(again) == 60 and again.graph_problem is None
    q = _unit(np.ones((1, 8)))[0]
    assert again.search_videos(q, top_k=5) == idx.search_videos(q, top_k=5)


def test_ensure_text_index_primes_the_open_checks(tmp_path, monkeypatch):
    from strived.evaluation.synth import make_video
    from strived.retrieval import dense, sources
    from strived.store import Library
    from tests.faults.conftest import HashEmbedder

    emb = HashEmbedder()
    sources.clear_caches()
    monkeypatch.setattr(sources, "get_default_embedder", lambda: emb)
    rng = np.random.default_rng(2)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([make_video(k, rng, duration_s=8.0, n_tracks=4) for k in range(6)])
    sources.ensure_text_index(lib)
    sources.clear_caches()                                   # a new process
    monkeypatch.setattr(dense, "bad_vector_rows", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("the first open walked every vector")))
    assert [v for v, _, _ in sources.dense_ranking(lib, "a car ahead")]
    lib.close()
    sources.clear_caches()
