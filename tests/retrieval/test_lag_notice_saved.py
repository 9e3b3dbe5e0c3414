"""The "text index lags the library" notice of a library state is worked out at index time and
kept in the cache folder: a new process's first search reads it instead of reading every video
row (~1 s at 100,000 videos); any change of the state (videos added, summaries rewritten, the
dense index saved again) makes the file stale, and the notice is computed afresh."""

from __future__ import annotations

import json

import numpy as np
import pytest

from strived.evaluation.synth import make_video
from strived.retrieval import sources
from strived.retrieval.summaries import build_texts
from strived.store import Library
from tests.faults.conftest import HashEmbedder


@pytest.fixture()
def lib(tmp_path, monkeypatch):
    emb = HashEmbedder()
    sources.clear_caches()
    monkeypatch.setattr(sources, "get_default_embedder", lambda: emb)
    rng = np.random.default_rng(4)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([make_video(k, rng, duration_s=8.0, n_tracks=4) for k in range(10)])
    sources.ensure_text_index(lib)
    yield lib
    lib.close()
    sources.clear_caches()


def _no_row_scan(monkeypatch):
    def refuse(self):
        raise AssertionError("the notice was computed from the video rows, not read")
    monkeypatch.setattr(Library, "text_stale_ids", refuse)


def test_index_time_answer_is_read_by_a_new_process(lib, monkeypatch):
    f = lib.cache_dir / "text_index_notice.json"
    assert json.loads(f.read_text())["notes"] == {"bm25,dense": None}
    sources.clear_caches()                                     # a new process
    with monkeypatch.context() as m:
        _no_row_scan(m)
        assert sources.text_index_notice(lib, ["dense", "bm25"]) is None
    # another set of sources is computed once, then kept beside the first
    sources.clear_caches()
    assert sources.text_index_notice(lib, ["bm25"]) is None
    assert json.loads(f.read_text())["notes"] == {"bm25,dense": None, "bm25": None}


def test_a_changed_state_is_never_answered_from_the_file(lib, monkeypatch):
    rng = np.random.default_rng(8)
    lib.add_videos([make_video(k, rng, duration_s=8.0, n_tracks=4) for k in range(50, 53)])
    sources.clear_caches()                                     # a new process
    note = sources.text_index_notice(lib, ["dense", "bm25"])
    assert note and "3 of 13 videos were added or changed" in note
    build_texts(lib)                                           # BM25 texts caught up, dense not
    sources.clear_caches()
    note = sources.text_index_notice(lib, ["dense", "bm25"])
    assert note and "3 of 13" in note and "dense index were last updated" in note
    sources.ensure_text_index(lib)                             # everything caught up
    sources.clear_caches()
    with monkeypatch.context() as m:
        _no_row_scan(m)
        assert sources.text_index_notice(lib, ["dense", "bm25"]) is None


def test_a_damaged_or_foreign_file_is_not_used(lib):
    f = lib.cache_dir / "text_index_notice.json"
    d = json.loads(f.read_text())
    f.write_text(json.dumps(dict(d, notes={"bm25,dense": "stale words"}, key=d["key"] + " ")))
    sources.clear_caches()
    assert sources.text_index_notice(lib, ["dense", "bm25"]) is None
    f.write_text("{not json")
    sources.clear_caches()
    assert sources.text_index_notice(lib, ["dense", "bm25"]) is None
    f.write_text(json.dumps(dict(d, notes={"bm25,dense": 7})))  # the right key, a wrong value
    sources.clear_caches()
    assert sources.text_index_notice(lib, ["dense", "bm25"]) is None
