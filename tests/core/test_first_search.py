"""The first search of a process: the dense source's loads (its index, the query encoder, the
query's vector) start in a helper thread as the search starts, so they overlap the rule source,
and the dense step reads what that thread loaded; the results are those of a search whose loads
were done beforehand on the calling thread."""

from __future__ import annotations

import threading

import numpy as np

from strived import engine, search_steps
from strived.evaluation.synth import make_video
from strived.retrieval import sources
from strived.store import Library
from tests.faults.conftest import HashEmbedder

QUERY = "a car cuts into our lane from the right"


class CountingEmbedder(HashEmbedder):
    """The tests' hashed bag-of-words embedder that records each call and the thread that made it."""

    name, dim = "hash-first-search", 32

    def __init__(self):
        self.calls: list[tuple[list[str], str]] = []

    def embed_texts(self, texts):
        self.calls.append((list(texts), threading.current_thread().name))
        return super().embed_texts(texts)


def _fresh_process_state():
    sources.clear_caches()
    search_steps._preloads.clear()


def _digest(resp):
    return ([h.to_dict() for h in resp.hits], resp.rankings,
            resp.ranking_scores, resp.weights, resp.sources_used)


def test_dense_loads_start_with_the_search_and_change_no_result(tmp_path, monkeypatch):
    emb = CountingEmbedder()
    monkeypatch.setattr(sources, "get_default_embedder", lambda: emb)
    rng = np.random.default_rng(11)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([make_video(k, rng, duration_s=8.0, n_tracks=6) for k in range(16)])
    engine.build_text_index(lib)                     # BM25, dense index, rule features
    _fresh_process_state()
    emb.calls.clear()
    seen = {}

    def progress(ev):
        if ev.stage == "search" and ev.message == "rule":        # the rule source is done
            seen["loading"] = sorted(k for k in search_steps._preloads if k[0] == str(lib.folder))
    first = engine.search(lib, QUERY, progress=progress)
    assert first.sources_used == ["rule", "dense", "bm25"]
    assert seen["loading"] == [(str(lib.folder), emb.name)]    # started before the rule source ended
    # embedded once, by the helper thread; the dense step read its vector
    assert emb.calls == [([QUERY], "strived-preload")]

    _fresh_process_state()
    sources.dense_ranking(lib, QUERY)                # loads done beforehand, on this thread
    assert emb.calls[-1] == ([QUERY], threading.current_thread().name)
    assert _digest(engine.search(lib, QUERY)) == _digest(first)
    lib.close()
    _fresh_process_state()


def test_an_index_listing_the_library_in_order_is_mapped_without_a_lookup_per_video():
    """The dense index, the BM25 index and the rule scorer list a library's videos sorted, as its
    id space does: their codes are positions, found by one list comparison (a lookup per video
    was ~0.2 s of a first search at 100,000 videos); any other list is looked up id by id."""
    from strived.retrieval.ranked import IdSpace

    class CountingDict(dict):
        gets = 0

        def get(self, *a):
            CountingDict.gets += 1
            return super().get(*a)

    ids = [f"v{k:05d}" for k in range(1000)]
    space = IdSpace(list(ids))
    space.code_of = CountingDict(space.code_of)
    same = list(ids)                                   # equal, another object
    assert space.map_list(same).tolist() == list(range(1000)) and CountingDict.gets == 0
    other = list(ids)
    other[3], other[4] = other[4], "zzz"               # reordered, and an id the library lacks
    m = space.map_list(other).tolist()
    assert m[:5] == [0, 1, 2, 4, -1] and m[5:] == list(range(5, 1000)) and CountingDict.gets == 1000
