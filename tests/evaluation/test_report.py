"""`strived report` and `strived bench`: files written, FORMATS.md section 3 shape, determinism,
benchmark ratios and their parsing."""

from __future__ import annotations

import json

import cv2
import pytest

from strived.cli import main
from strived.evaluation import report as R
from strived.retrieval.metrics import ACC_KS

METRICS = {"MRR", "mAP", *(f"Acc@{k}" for k in ACC_KS)}


def _report(bench, out, lib, *extra):
    return main(["report", str(bench), "--out", str(out), "--library", str(lib), "--bench", "none", *extra])


def _png(path):
    img = cv2.imread(str(path))
    assert img is not None, f"{path} is not a readable PNG"
    return img


def test_report_writes_markdown_plots_and_eval_json(tiny_bench, tmp_path, capsys):
    out = tmp_path / "rep"
    assert _report(tiny_bench, out, tmp_path / "lib", "--cv", "0") == 0
    assert {p.name for p in out.iterdir()} == {"README.md", "eval.json", "metrics.png", "ranks.png"}
    ev = json.loads((out / "eval.json").read_text())
    # FORMATS.md section 3
    assert ev["benchmark"] == "tiny" and ev["n_items"] == 6 and ev["n_queries"] == 4
    assert isinstance(ev["skipped"], dict)
    assert {"full", "rule", "bm25", "rule-hand"} <= set(ev["methods"])
    for m, v in ev["methods"].items():
        assert set(v) == METRICS and all(0.0 <= x <= 1.0 for x in v.values()), m
    assert [q["id"] for q in ev["queries"]] == ["q01", "q04", "q08", "q09"]
    for q in ev["queries"]:
        assert q["n_relevant"] == 1 and q["text"]
        for m, e in q["methods"].items():
            assert {"rank_of_first_relevant", "AP", "top"} <= set(e)
            assert "sample_waiting" not in e["top"] or q["id"] != "q08"  # ambiguous left out
    md = (out / "README.md").read_text()
    assert "| method | MRR | mAP | Acc@1 | Acc@3 | Acc@5 | Acc@10 |" in md
    for m in ev["methods"]:
        assert f"| `{m}` |" in md
    for q in ("q01", "q04", "q08", "q09"):
        assert f"| {q} |" in md
    assert "DrivingDojo" in md and "not available offline" in md and "shipped library as it is" in md
    assert "![metrics per method](metrics.png)" in md and "![rank heat map](ranks.png)" in md
    assert "strived eval " in md and "--cv 0" in md
    assert "6 track-record files" in md
    full_q01 = next(q for q in ev["queries"] if q["id"] == "q01")["methods"]["full"]
    assert f"| q01 | cut_in_right | a car cuts into our lane from the right | 1 | {full_q01['rank_of_first_relevant']} |" in md
    metrics_png, ranks_png = _png(out / "metrics.png"), _png(out / "ranks.png")
    assert metrics_png.shape[1] >= 700 and ranks_png.shape[0] > 4 * 24
    # the bars are drawn: the metrics chart is not blank, the heat map has its rank-1 colour
    assert (metrics_png < 250).any(axis=2).mean() > 0.05
    assert ((ranks_png == R.RANK_BINS[0][2]).all(axis=2)).sum() > 100


def test_report_is_deterministic(tiny_bench, tmp_path):
    docs = []
    for k in range(2):
        out = tmp_path / f"rep{k}"
        assert _report(tiny_bench, out, tmp_path / f"lib{k}", "--cv", "2",
                       "--methods", "full,rule,bm25,full-no-gates") == 0
        ev = json.loads((out / "eval.json").read_text())
        assert set(ev.pop("latency_ms")) == set(ev["methods"])  # timings: the only varying key
        docs.append((ev, (out / "metrics.png").read_bytes(), (out / "ranks.png").read_bytes()))
    assert docs[0][0]["calibration"].startswith("cross-fitted, 2 folds")
    assert docs[0] == docs[1]


def test_report_rejects_bad_bench_json(tiny_bench, tmp_path, capsys):
    bad = tmp_path / "b.json"
    bad.write_text('{"x": 1}')
    assert main(["report", str(tiny_bench), "--out", str(tmp_path / "o"), "--bench-json", str(bad)]) == 1
    assert "not a `strived bench --json` file" in capsys.readouterr().err


def test_bench_quick_core_prints_ratios_and_feeds_the_report(tiny_bench, tmp_path, capsys):
    bj = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "core", "--json", str(bj)]) == 0
    out = capsys.readouterr().out
    assert "FAST PATH VS REFERENCE" in out and "LATENCY VS THE PAPER" in out
    assert "naive reference" in out and "paper 254 ms / 583 videos" in out
    res = json.loads(bj.read_text())
    core = res["benchmarks"]["core"]
    assert core["status"] == "ok" and core["figures"]["videos"] == 1000
    speedups = [r for r in res["ratios"] if r["kind"] == "speed-up" and "warm" in r["name"]]
    assert len(speedups) == 2 and all(r["ratio"] > 10 for r in speedups)  # the vectorised scorer wins
    paper = [r for r in res["ratios"] if r["kind"] == "paper"]
    assert paper and all(r["reference"] == R.PAPER["rule_ms"] for r in paper)
    rep = tmp_path / "rep"
    assert main(["report", str(tiny_bench), "--out", str(rep), "--library", str(tmp_path / "lib"), "--cv", "0",
                 "--methods", "rule,bm25", "--bench-json", str(bj)]) == 0
    md = (rep / "README.md").read_text()
    assert "### Fast path vs reference" in md and "`python benchmarks/bench_core.py --videos 1000" in md
    assert (rep / "latency.png").exists() and _png(rep / "latency.png").shape[1] == 1180


def test_bench_reports_missing_scripts_and_unknown_names(tmp_path, capsys):
    assert main(["bench", "--quick", "--only", "core,app", "--benchmarks", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "core         MISSING  bench_core.py not found" in out and "app          MISSING" in out
    assert "no figures" in out
    assert main(["bench", "--only", "core,gpu"]) == 1
    assert "unknown benchmark(s) ['gpu']" in capsys.readouterr().err


CORE_OUT = """corpus: 10000 videos x 20 s x 10 fps x 15 tracks = 30.0M object-frames
import (excluding synthetic generation 4.0 s): 12.5 s   (target <= 60 s)
library size on disk: 1,320 MB
open library (10000 videos): 15 ms   (target <= 1000 ms)
load columns into memory: 5.10 s   (RSS so far 3000 MB)
score one rule [temporal_change loc_x 4 s (object)] over 10000 videos: first 9800 ms (computes and caches the window features), warm 4.0 ms   (target <= 30 ms; paper 254 ms / 583 videos)
  naive reference: 11.7 ms/video on 50 videos -> 117 s extrapolated to 10000; fast/naive speed-up x29,250 (warm), x12 (first); max |diff| 0.0e+00
peak RSS: 5400 MB
new process: open 120 ms, columns from cache 6 ms, first score (features from disk) 2900 ms, warm 9.0 ms
"""


def test_parse_core_and_paper_scaling():
    f = R.parse_core(CORE_OUT)
    assert f["videos"] == 10000 and f["library_mb"] == 1320 and f["open_ms"] == 15 and f["peak_rss_mb"] == 5400
    (r,) = f["rules"]
    assert (r["first_ms"], r["disk_ms"], r["warm_ms"], r["naive_subset"]) == (9800, 2900, 4.0, 50)
    assert f["new_process"] == {"open_ms": 120, "columns_ms": 6, "first_score_ms": 2900}
    rows = R.bench_ratios({"benchmarks": {"core": {"figures": f}}})
    warm = next(x for x in rows if x["name"].startswith("rule matching (warm)"))
    assert warm["value"] == pytest.approx(4.0 * 583 / 10000)
    assert warm["ratio"] == pytest.approx(254.16 / (4.0 * 583 / 10000))
    first = next(x for x in rows if x["name"].startswith("rule matching (first run)"))
    assert first["ratio"] < 1 and R.fmt_ratio(first).endswith("slower")
    naive = next(x for x in rows if x["name"].startswith("rule scoring, warm"))
    assert naive["reference"] == pytest.approx(117000) and naive["ratio"] == pytest.approx(117000 / 4.0)
    assert R.parse_core("something else entirely") == {}


RETRIEVAL_OUT = """
## BM25 (per query, median ms; index build s)
    docs   bm25s q  rank_bm25 q  bm25s build  rank_bm25 build agree
    1000      0.22         1.51         0.31             0.04 True
   10000      0.50        22.62         0.84             0.42 False
## Dense (384-d, 5 segments/video; per query, median ms)
  videos    rows    exact     hnsw  recall@10  hnsw build s
    1000    5000    12.37     3.43      1.000           1.9
## Router (per query, median ms)
offline router: 0.015 ms
LLM router, cached answer (repeat query; server down): 0.091 ms
## Query embedding (MiniLM, CPU, uncached): 227.0 ms
## Whole no-LLM search at 1000 videos (router + bm25s + dense + weighted RRF)
mode: dense exact over 5000 segments
search (excluding query embedding and rule scoring): 16.2 ms
"""

APP_OUT = """seek 720p kr.mp4 {'cold': {'median_ms': 49.1, 'p95_ms': 375.8, 'max_ms': 459.0}, 'after_scan': {'median_ms': 12.2, 'p95_ms': 20.1, 'max_ms': 23.9}}
cold start 1000 videos: process wall 2.63 s; ready_s 2.085 videos lib1000
searching 1000 videos (0.48 s): {'ticks': 53, 'p50_ms': 0.0, 'p99_ms': 34.4, 'max_ms': 37.0}
indexing 3 clips (26.7 s): {'ticks': 4434, 'p50_ms': 0.0, 'p99_ms': 62.0, 'max_ms': 616.0}
"""


def test_parse_retrieval_and_app_into_ratios():
    f = R.parse_retrieval(RETRIEVAL_OUT)
    assert [b["docs"] for b in f["bm25"]] == [1000, 10000] and f["bm25"][1]["agree"] is False
    assert f["dense"] == [{"videos": 1000, "rows": 5000, "exact_ms": 12.37, "hnsw_ms": 3.43, "recall_at_10": 1.0,
                           "hnsw_build_s": 1.9}]
    assert f["query_embedding_ms"] == 227.0 and f["router_offline_ms"] == 0.015
    assert f["whole"] == [{"videos": 1000, "search_ms": 16.2, "dense_mode": "exact"}]
    a = R.parse_app(APP_OUT)
    assert a["seek"]["after_scan"]["median_ms"] == 12.2 and a["cold_start"] == {"videos": 1000, "wall_s": 2.63}
    rows = {r["name"]: r for r in R.bench_ratios({"benchmarks": {"retrieval": {"figures": f},
                                                                 "app": {"figures": a}}})}
    assert rows["BM25 query, bm25s vs rank_bm25, 10000 docs"]["note"] == "RANKINGS DIFFER"
    dense = rows["dense per query, 1000 videos"]
    assert dense["value"] == pytest.approx(3.43 + 227.0) and R.fmt_ratio(dense).endswith("slower")
    whole = rows["whole offline query, 1000 videos"]
    assert whole["value"] == pytest.approx(16.2 + 227.0) and "rule scoring not measured" in \
        rows["retrieval branches per query, 1000 videos"]["note"]
    assert R.fmt_ratio(rows["UI stall p99 while indexing"]).startswith("misses target")
    assert R.fmt_ratio(rows["UI stall p99 while searching"]) == "meets target"


def test_subset_benchmark_keeps_each_querys_items_of_that_kind(tmp_path):
    from pathlib import Path

    from strived.evaluation.bench import BenchItem, BenchQuery, Benchmark, subset_benchmark

    items = [BenchItem("v1", Path("videos/v1.mp4"), None), BenchItem("v2", Path("videos/v2.mp4"), None),
             BenchItem("r1", None, Path("records/r1.json"))]
    qs = [BenchQuery("q1", "a", ["v1", "r1"], "e", {"v1": [[0, 1]], "r1": [[2, 3]]}, ["v2"]),
          BenchQuery("q2", "b", ["r1"], "e")]
    b = Benchmark("bench", tmp_path, items, qs)
    v = subset_benchmark(b, "video")
    assert [i.id for i in v.items] == ["v1", "v2"] and [q.id for q in v.queries] == ["q1"]
    assert v.queries[0].relevant == ["v1"] and v.queries[0].ambiguous == ["v2"]
    assert v.queries[0].spans == {"v1": [[0, 1]]}
    r = subset_benchmark(b, "records")
    assert [q.relevant for q in r.queries] == [["r1"], ["r1"]] and r.queries[0].ambiguous == []
    assert subset_benchmark(b, "all") is b
