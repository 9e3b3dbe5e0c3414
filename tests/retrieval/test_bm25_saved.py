"""The BM25 index saved at index time: loaded (not rebuilt) by a new process's first search, the
same ranking as one built from the summaries, refused when the summaries changed, and a damaged
file rebuilt with a notice, never used."""

from __future__ import annotations

import numpy as np
import pytest

from strived.evaluation.synth import make_video
from strived.retrieval import sources
from strived.retrieval.sparse import BM25Index, BM25IndexDamaged
from strived.retrieval.summaries import build_texts
from strived.store import Library

QUERIES = ("a truck moves into our lane from the right", "pedestrian ahead", "bus", "zeppelin",
           "ego drives slowly", "")


@pytest.fixture()
def lib(tmp_path):
    rng = np.random.default_rng(3)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([make_video(k, rng) for k in range(24)])
    sources.clear_caches()
    yield lib
    sources.clear_caches()
    lib.close()


def _fresh(lib, q):
    from strived.retrieval.summaries import load_summaries

    ids, texts = load_summaries(lib)
    return BM25Index(ids, texts).search(q, top_k=None)


def _no_build(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the BM25 index was rebuilt instead of loaded")
    monkeypatch.setattr(sources, "_bm25_build", refuse)


def test_saved_index_roundtrip_gives_identical_scores(tmp_path):
    ids = [f"v{k}" for k in (3, 1, 2, 0)]
    texts = ["a car cuts in", "truck truck ahead", "", "pedestrian crossing near a car"]
    idx = BM25Index(ids, texts)
    idx.save(tmp_path / "b.npz", {"k": 1})
    back = BM25Index.load(tmp_path / "b.npz", {"k": 1})
    for q in ("car", "truck ahead", "pedestrian car", "nothing", ""):
        assert np.array_equal(back.scores(q), idx.scores(q))
        assert back.search(q, top_k=2) == idx.search(q, top_k=2)
    assert BM25Index.load(tmp_path / "b.npz", {"k": 2}) is None          # other texts: stale
    assert BM25Index.load(tmp_path / "absent.npz", {"k": 1}) is None
    empty = BM25Index([], [])
    empty.save(tmp_path / "e.npz", "x")
    assert len(BM25Index.load(tmp_path / "e.npz", "x")) == 0


def test_index_time_save_then_new_process_loads_it(lib, monkeypatch):
    sources.ensure_text_index(lib, dense=False)
    assert (lib.cache_dir / "bm25-bm25s.npz").is_file()
    want = {q: _fresh(lib, q) for q in QUERIES}
    sources.clear_caches()                     # what a new process starts with
    _no_build(monkeypatch)
    for q in QUERIES:
        assert sources.bm25_ranking(lib, q) == want[q]
    assert sources.text_index_notice(lib, ["bm25"]) is None


def test_loaded_index_scores_bit_for_bit_without_importing_bm25s(lib, tmp_path):
    """A new process's first BM25 search loads the saved file and scores with bm25s' arithmetic
    over its arrays: the same float32 scores as the index bm25s built, bm25s (and scipy) never
    imported by that process (their import was ~0.4 s of its first search)."""
    import json
    import subprocess
    import sys

    sources.ensure_text_index(lib, dense=False)
    from strived.retrieval.summaries import load_summaries

    built = BM25Index(*load_summaries(lib))
    qs = list(QUERIES) + ["car car car", "a truck a bus a car ahead", "left right left", "the"]
    script = (
        "import json, sys\n"
        "from strived.retrieval.sparse import BM25Index\n"
        "idx = BM25Index.load(sys.argv[1], json.loads(sys.argv[2]))\n"
        "out = {q: idx.scores(q).tolist() for q in json.loads(sys.argv[3])}\n"
        "print(json.dumps({'scores': out, 'imported': sorted(m for m in ('bm25s', 'scipy') if m in sys.modules)}))\n")
    p = subprocess.run([sys.executable, "-c", script, str(lib.cache_dir / "bm25-bm25s.npz"),
                        json.dumps(sources._bm25_disk_key(lib)), json.dumps(qs)],
                       capture_output=True, text=True, check=True)
    got = json.loads(p.stdout)
    assert got["imported"] == []
    for q in qs:
        want = built.scores(q)
        assert np.array_equal(np.asarray(got["scores"][q], np.float32), want), q
        assert want.dtype == np.float32
    assert any(np.count_nonzero(got["scores"][q]) for q in qs)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "inconsistent"])
def test_damaged_file_is_rebuilt_with_a_notice(lib, damage):
    sources.ensure_text_index(lib, dense=False)
    f = lib.cache_dir / "bm25-bm25s.npz"
    raw = bytearray(f.read_bytes())
    if damage == "truncate":
        f.write_bytes(bytes(raw[: len(raw) // 2]))
    elif damage == "flip":                      # inside the score data: zip's CRC-32 catches it
        with np.load(f) as z:
            data = z["data"].tobytes()
        at = bytes(raw).index(data[:64]) + 16
        raw[at] ^= 0xFF
        f.write_bytes(bytes(raw))
    elif damage == "garbage":
        f.write_bytes(b"not a zip file at all" * 10)
    else:                                       # readable, but the ids do not fit the matrix
        key = sources._bm25_disk_key(lib)
        idx = BM25Index.load(f, key)
        idx.doc_ids = idx.doc_ids[:-1]
        idx._id_rank = np.arange(len(idx.doc_ids), dtype=np.int64)
        idx.save(f, key)
    with pytest.raises(BM25IndexDamaged):
        BM25Index.load(f, sources._bm25_disk_key(lib))
    sources.clear_caches()
    for q in QUERIES:
        assert sources.bm25_ranking(lib, q) == _fresh(lib, q)
    note = sources.text_index_notice(lib, ["bm25"])
    assert note and "BM25 index was damaged" in note and "rebuilt" in note
    assert sources.text_index_notice(lib, ["bm25"]) is None             # said once
    # the rebuilt file replaced the damaged one
    assert BM25Index.load(f, sources._bm25_disk_key(lib)) is not None


def test_stale_after_adding_videos(lib, monkeypatch):
    sources.ensure_text_index(lib, dense=False)
    f = lib.cache_dir / "bm25-bm25s.npz"
    old_key = sources._bm25_disk_key(lib)
    rng = np.random.default_rng(9)
    lib.add_videos([make_video(k, rng) for k in range(100, 103)])
    build_texts(lib)                              # texts changed, no index-time save (yet)
    assert sources._bm25_disk_key(lib) != old_key
    assert BM25Index.load(f, sources._bm25_disk_key(lib)) is None       # refused: stale
    sources.clear_caches()
    got = sources.bm25_ranking(lib, "bus")
    assert got == _fresh(lib, "bus") and {"v000100", "v000101", "v000102"} & {v for v, _ in got}
    assert sources.text_index_notice(lib, ["bm25"]) is None
    # the first search saved the current one: a further new process loads it
    sources.clear_caches()
    _no_build(monkeypatch)
    assert sources.bm25_ranking(lib, "bus") == got


def test_stale_after_a_summary_is_rewritten_or_removed(lib):
    sources.ensure_text_index(lib, dense=False)
    k0 = sources._bm25_disk_key(lib)
    with lib.transaction():
        lib.conn.execute("UPDATE summaries SET text='zeppelin overhead', updated_at='9999' WHERE video_id='v000003'")
    k1 = sources._bm25_disk_key(lib)
    assert k1 != k0
    sources.clear_caches()
    assert [v for v, _ in sources.bm25_ranking(lib, "zeppelin")] == ["v000003"]
    lib.remove_video("v000003")
    assert sources._bm25_disk_key(lib) not in (k0, k1)
    sources.clear_caches()
    assert sources.bm25_ranking(lib, "zeppelin") == []
