"""`strived report` and `strived bench`: files written, docs/formats.md section 3 shape, determinism,
the benchmarks' JSON figures and the ratios made from them (nothing is read from printed text)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

from strived.cli import main
from strived.evaluation import bench_runner, plots, ratios
from strived.retrieval.metrics import ACC_KS

METRICS = {"MRR", "mAP", *(f"Acc@{k}" for k in ACC_KS)}


def test_span_iou():
    from strived.evaluation.runner import _span_iou

    assert _span_iou((4.0, 6.0), [(5.0, 9.0)]) == pytest.approx(1 / 5)
    assert _span_iou((4.0, 6.0), [(7.0, 9.0), (4.0, 6.0)]) == 1.0
    assert _span_iou((4.0, 6.0), [(6.0, 9.0)]) == 0.0 and _span_iou(None, [(1.0, 2.0)]) == 0.0


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
    # docs/formats.md section 3
    assert ev["benchmark"] == "tiny" and ev["n_items"] == 6 and ev["n_queries"] == 4
    assert isinstance(ev["skipped"], dict)
    assert {"full", "rule", "bm25", "rule-hand"} <= set(ev["methods"])
    for m, v in ev["methods"].items():
        assert set(v) == METRICS and all(0.0 <= x <= 1.0 for x in v.values()), m
    assert [q["id"] for q in ev["queries"]] == ["q01", "q04", "q08", "q09"]
    # span localisation: every relevant hit in the first 3 with a labelled span is counted
    loc = ev["localisation"]["rule"]
    assert loc["top3_relevant_with_span"] >= max(1, loc["top1_relevant_with_span"]), loc
    assert 0.0 <= loc["top3_span_overlap"] <= 1.0 and 0.0 <= loc["top3_mean_iou"] <= loc["top3_span_overlap"]
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
    assert ((ranks_png == plots.RANK_BINS[0][2]).all(axis=2)).sum() > 100


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
    rule0 = core["figures"]["rules"][0]
    assert rule0["disk_ms"] == core["figures"]["new_process"]["first_score_ms"] > 0  # the new process ran
    assert rule0["max_abs_diff"] == 0.0 and rule0["naive_subset"] == 20
    speedups = [r for r in res["ratios"] if r["kind"] == "speed-up" and "warm" in r["name"]]
    assert len(speedups) == 2 and all(r["ratio"] > 10 for r in speedups)  # the vectorised scorer wins
    paper = [r for r in res["ratios"] if r["kind"] == "paper"]
    assert paper and all(r["reference"] == ratios.PAPER["rule_ms"] for r in paper)
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


# figures as the benchmarks write them with --json (shapes of benchmarks/bench_core.py, bench_retrieval.py,
# bench_app.py, bench_search.py and `strived bench scale`)
CORE = {"videos": 10000, "import_s": 12.5, "library_mb": 1320.0, "open_ms": 15.0, "load_columns_s": 5.1,
        "rules": [{"rule": "temporal_change loc_x 4 s (object)", "videos": 10000, "first_ms": 9800.0, "disk_ms": 2900.0,
                   "warm_ms": 4.0, "naive_ms_per_video": 11.7, "naive_subset": 50, "speedup_warm": 29250.0,
                   "speedup_first": 12.0, "max_abs_diff": 0.0}],
        "new_process": {"open_ms": 120.0, "columns_ms": 6.0, "first_score_ms": 2900.0, "warm_ms": 9.0},
        "peak_rss_mb": 5400.0}
RETRIEVAL = {"bm25": [{"docs": 1000, "bm25s_ms": 0.22, "rank_bm25_ms": 1.51, "bm25s_build_s": 0.31,
                       "rank_bm25_build_s": 0.04, "agree": True},
                      {"docs": 10000, "bm25s_ms": 0.50, "rank_bm25_ms": 22.62, "bm25s_build_s": 0.84,
                       "rank_bm25_build_s": 0.42, "agree": False}],
             "dense": [{"videos": 1000, "rows": 5000, "exact_ms": 12.37, "hnsw_ms": 3.43, "recall_at_10": 1.0,
                        "hnsw_build_s": 1.9}],
             "router_offline_ms": 0.015, "router_llm_cached_ms": 0.091, "query_embedding_ms": 227.0,
             "whole": [{"videos": 1000, "search_ms": 16.2, "dense_mode": "exact"}]}
APP = {"seek_clip": "kr.mp4", "seek": {"cold": {"median_ms": 49.1, "p95_ms": 375.8, "max_ms": 459.0},
                                       "after_scan": {"median_ms": 12.2, "p95_ms": 20.1, "max_ms": 23.9}},
       "cold_start": {"videos": 1000, "wall_s": 2.63, "rc": 0, "ready": "ready_s 2.085"},
       "search_stall": {"videos": 1000, "wall_s": 0.48, "ticks": 53, "p50_ms": 0.0, "p99_ms": 34.4, "max_ms": 37.0},
       "index_stall": {"clips": 3, "wall_s": 26.7, "ticks": 4434, "p50_ms": 0.0, "p99_ms": 62.0, "max_ms": 616.0}}
SEARCH = {"query_embedding": {"uncached_p50_ms": 14.0}, "dense_vectors_random": True,
          "sizes": [{"videos": 1000, "dense_vectors": "random", "cold_p50_ms": 24.0, "cold_p95_ms": 28.0,
                     "warm_p50_ms": 7.6, "warm_p95_ms": 8.7, "target_ms": 100.0, "target_met": True, "llm": None},
                    {"videos": 10000, "dense_vectors": "random", "cold_p50_ms": 140.0, "warm_p50_ms": 60.0,
                     "target_ms": 100.0, "target_met": False,
                     "llm": {"server": "fake loopback", "repeat_p50_ms": 61.0, "requests": 20}}]}
SCALE = {"videos": 200, "build_s": 35.7, "disk_mb": 51.3, "open_ms": 66.6, "rss_mb": 954.4, "search_p50_ms": 2.57,
         "search_p95_ms": 2.9, "rule_warm_ms": 0.11, "first_new_window_ms": 65.9, "dense_ms": 17.22,
         "dense_recall_at_10": 1.0, "bm25_ms": 0.05, "dense_vectors": "real"}


def _ratios(**figures):
    return {r["name"]: r for r in ratios.bench_ratios({"benchmarks": {k: {"figures": v} for k, v in figures.items()}})}


def test_core_figures_into_ratios_and_paper_scaling():
    rows = ratios.bench_ratios({"benchmarks": {"core": {"figures": CORE}}})
    warm = next(x for x in rows if x["name"].startswith("rule matching (warm)"))
    assert warm["value"] == pytest.approx(4.0 * 583 / 10000)
    assert warm["ratio"] == pytest.approx(254.16 / (4.0 * 583 / 10000))
    first = next(x for x in rows if x["name"].startswith("rule matching (first run)"))
    assert first["ratio"] < 1 and ratios.fmt_ratio(first).endswith("slower")
    disk = next(x for x in rows if x["name"].startswith("rule matching (new process)"))
    assert disk["value"] == pytest.approx(2900 * 583 / 10000)
    naive = next(x for x in rows if x["name"].startswith("rule scoring, warm"))
    assert naive["reference"] == pytest.approx(117000) and naive["ratio"] == pytest.approx(117000 / 4.0)
    # no new-process figure (its subprocess failed): that row is left out, not made up
    no_disk = dict(CORE, rules=[dict(CORE["rules"][0], disk_ms=None)], new_process=None)
    names = [x["name"] for x in ratios.bench_ratios({"benchmarks": {"core": {"figures": no_disk}}})]
    assert not any(n.startswith("rule matching (new process)") for n in names) and len(names) == len(rows) - 1
    assert ratios.bench_ratios({"benchmarks": {"core": {"figures": {}}}}) == []


def test_retrieval_and_app_figures_into_ratios():
    rows = _ratios(retrieval=RETRIEVAL, app=APP)
    assert rows["BM25 query, bm25s vs rank_bm25, 10000 docs"]["note"] == "RANKINGS DIFFER"
    dense = rows["dense per query, 1000 videos"]
    assert dense["value"] == pytest.approx(3.43 + 227.0) and ratios.fmt_ratio(dense).endswith("slower")
    whole = rows["whole offline query, 1000 videos"]
    assert whole["value"] == pytest.approx(16.2 + 227.0) and "rule scoring not measured" in \
        rows["retrieval branches per query, 1000 videos"]["note"]
    assert ratios.fmt_ratio(rows["UI stall p99 while indexing"]).startswith("misses target")
    assert ratios.fmt_ratio(rows["UI stall p99 while searching"]) == "meets target"
    assert rows["app cold start, 1000 videos"]["value"] == 2.63
    assert rows["player seek 720p, median"]["value"] == 12.2
    # a cold start whose process failed: no value, no verdict, the error in the note
    failed = dict(APP, cold_start={"videos": 1000, "wall_s": None, "rc": 1, "error": "exit 1: boom"})
    cs = _ratios(app=failed)["app cold start, 1000 videos"]
    assert cs["value"] is None and cs["ratio"] is None and "boom" in cs["note"] and ratios.fmt_ratio(cs) == ""
    # no query embedding (skipped, with its reason): dense is search only
    skipped = dict(RETRIEVAL, query_embedding_ms=None, query_embedding_skipped="ImportError: no model")
    assert _ratios(retrieval=skipped)["dense per query, 1000 videos"]["value"] == pytest.approx(3.43)


def test_search_and_scale_figures_into_ratios():
    rows = _ratios(search=SEARCH, scale=SCALE)
    warm = rows["whole search p50 (repeated query), 1000 videos"]
    assert warm["value"] == 7.6 and warm["reference"] == ratios.PAPER["total_ms"] and warm["benchmark"] == "search"
    assert "random" in warm["note"] and "ranking quality is not" in warm["note"]
    assert rows["whole search p50 (query vector uncached), 10000 videos"]["value"] == 140.0
    assert rows["whole search p50, cached LLM answers, 10000 videos"]["value"] == 61.0
    assert "whole search p50, cached LLM answers, 1000 videos" not in rows  # llm case not run there
    t1 = rows["whole search p50 without LLM (slower of cold / repeated), 1000 videos"]
    t10 = rows["whole search p50 without LLM (slower of cold / repeated), 10000 videos"]
    assert t1["value"] == 24.0 and ratios.fmt_ratio(t1) == "meets target"
    assert t10["value"] == 140.0 and ratios.fmt_ratio(t10).startswith("misses target")
    sc = rows["whole search p50, new process, 200 videos"]
    assert sc["value"] == 2.57 and sc["group"] == "latency vs the paper" and "dense vectors real" in sc["note"]
    assert rows["dense recall@10, HNSW vs exact, 200 videos"]["value"] == 1.0
    assert rows["open library (scale, new process), 200 videos"]["ratio"] == pytest.approx(1000 / 66.6)
    # several sizes: `strived bench scale --videos A B --json` writes a list
    two = _ratios(scale=[SCALE, dict(SCALE, videos=1000, search_p50_ms=9.0)])
    assert two["whole search p50, new process, 1000 videos"]["value"] == 9.0
    assert "whole search p50, new process, 200 videos" in two


def _fake_bench(folder, name, body):
    (folder / name).write_text("import json, sys\nargs = sys.argv[1:]\nout = args[args.index('--json') + 1]\n"
                               "print('human readable line')\n" + body)


def test_runner_reads_json_only_and_reports_each_failure(tmp_path, capsys):
    """Fake benchmark scripts: figures come from the --json file whatever the script prints; a script that
    writes no JSON, bad JSON or exits non-zero is reported as such."""
    _fake_bench(tmp_path, "bench_core.py", f"json.dump({CORE!r}, open(out, 'w'))\n")
    _fake_bench(tmp_path, "bench_retrieval.py", "print('## BM25 ... looks like figures but is not JSON')\n")
    _fake_bench(tmp_path, "bench_calibration.py", "open(out, 'w').write('{not json')\n")
    _fake_bench(tmp_path, "bench_app.py", f"json.dump({APP!r}, open(out, 'w'))\nsys.exit(3)\n")
    res = bench_runner.run_benchmarks(["core", "retrieval", "calibration", "app", "perception"], quick=True,
                                      bench_dir=tmp_path)
    B = res["benchmarks"]
    assert B["core"]["status"] == "ok" and B["core"]["figures"] == CORE
    assert "human readable line" in B["core"]["output_tail"]  # raw output kept for debugging
    assert B["core"]["command"] == "python benchmarks/bench_core.py --videos 1000 --naive-subset 20"
    assert B["retrieval"]["status"] == "no-figures" and "wrote nothing" in B["retrieval"]["reason"]
    assert B["retrieval"]["figures"] == {}
    assert B["calibration"]["status"] == "no-figures" and "not JSON" in B["calibration"]["reason"]
    assert B["app"]["status"] == "failed" and B["app"]["reason"] == "exit code 3" and B["app"]["rc"] == 3
    assert B["perception"]["status"] == "missing"
    assert {r["benchmark"] for r in res["ratios"]} == {"core", "app"}
    assert res["ratios"] == ratios.bench_ratios(res)
    # a temporary --json file is not left behind
    assert not list(tmp_path.glob("strived-bench-*"))


def test_bench_registry_has_search_and_scale_with_their_commands():
    assert {"core", "perception", "retrieval", "calibration", "app", "search", "scale", "egomotion",
            "detection"} == set(bench_runner.BENCHES)
    assert " ".join(bench_runner.bench_command("search", True)) == \
        "python benchmarks/bench_search.py --videos 1000 --reps 3 --dense random --no-llm-case"
    assert bench_runner.bench_command("scale", True, ["--cache", "/c"]) == \
        ["strived", "bench", "scale", "--videos", "200", "--cache", "/c"]
    assert bench_runner.bench_command("scale", False) == ["strived", "bench", "scale"]
    assert bench_runner.parse_only("scale,core") == ["core", "scale"]


def test_report_from_bench_json_with_search_and_scale(tiny_bench, tmp_path):
    bj = tmp_path / "bench.json"
    bench = {"mode": "quick", "benchmarks_dir": "benchmarks", "ratios": [], "benchmarks": {
        "search": {"status": "ok", "command": "python benchmarks/bench_search.py --videos 1000", "wall_s": 20.0,
                   "figures": SEARCH},
        "scale": {"status": "ok", "command": "strived bench scale --videos 200", "wall_s": 40.0, "figures": SCALE},
        "app": {"status": "failed", "command": "python benchmarks/bench_app.py", "reason": "exit code 1 | x",
                "figures": {}}}}
    bj.write_text(json.dumps(bench))
    rep = tmp_path / "rep"
    assert main(["report", str(tiny_bench), "--out", str(rep), "--library", str(tmp_path / "lib"), "--cv", "0",
                 "--methods", "rule,bm25", "--bench-json", str(bj)]) == 0
    md = (rep / "README.md").read_text()
    assert "| whole search p50 (repeated query), 1000 videos | 7.60 ms |" in md
    assert "### Library at scale (strived bench scale)" in md
    assert "**random unit vectors** (not MiniLM) at 1000 videos, 10000 videos" in md
    assert "| app | failed: exit code 1 \\| x |" in md
    written = json.loads((rep / "bench.json").read_text())
    assert written["ratios"] == ratios.bench_ratios(bench) and written["ratios"]
    assert _png(rep / "latency.png").shape[1] == 1180


@pytest.mark.slow
def test_each_benchmark_json_has_the_keys_the_ratios_read(tmp_path):
    """The real benchmarks at tiny sizes (about 25 s together): their --json files feed the ratios."""
    root = Path(__file__).resolve().parents[2]
    runs = {"retrieval": ["bench_retrieval.py", "--sizes", "200", "--bm25-sizes", "200", "--reps", "2"],
            "calibration": ["bench_calibration.py", "--videos", "40"],
            "search": ["bench_search.py", "--videos", "30", "--reps", "1", "--dense", "random", "--no-llm-case"]}
    figs = {}
    for name, (script, *args) in runs.items():
        out = tmp_path / f"{name}.json"
        p = subprocess.run([sys.executable, str(root / "benchmarks" / script), *args, "--json", str(out)], cwd=root,
                           env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        figs[name] = json.loads(out.read_text())
    r = figs["retrieval"]
    assert set(r["bm25"][0]) == {"docs", "bm25s_ms", "rank_bm25_ms", "bm25s_build_s", "rank_bm25_build_s", "agree"}
    assert set(r["dense"][0]) == {"videos", "rows", "exact_ms", "hnsw_ms", "recall_at_10", "hnsw_build_s"}
    assert r["whole"][0]["videos"] == 200 and r["whole"][0]["dense_mode"] in ("exact", "HNSW")
    assert r["router_offline_ms"] > 0 and r["dense_vectors"] == "random"
    assert (r["query_embedding_ms"] or 0) > 0 or r["query_embedding_skipped"]
    c = figs["calibration"]
    assert c["videos"] == 40 and c["calibrate_all_s"] > 0 and c["resolve_ms_per_query"] > 0
    s = figs["search"]
    (size,) = s["sizes"]
    assert size["videos"] == 30 and size["dense_vectors"] == "random" and s["dense_vectors_random"] is True
    assert "ranking quality is meaningless" in size["dense_vectors_note"] and size["llm"] is None
    assert 0 < size["warm_p50_ms"] <= size["warm_p95_ms"] and size["cold_p50_ms"] > 0
    assert {"rule", "dense", "bm25", "total"} <= set(size["warm_parts_p50_ms"])
    rows = _ratios(**figs)
    assert {x["benchmark"] for x in rows.values()} == {"retrieval", "calibration", "search"}
    assert rows["whole search p50 (repeated query), 30 videos"]["value"] == size["warm_p50_ms"]
    assert rows["BM25 per query, 200 docs"]["value"] == r["bm25"][0]["bm25s_ms"]


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


def test_report_never_overwrites_a_report_without_yes(tiny_bench, tmp_path, capsys):
    """`--out` is required and an existing report is replaced only with --yes (issue 37: the
    README's command overwrote committed files)."""
    out = tmp_path / "rep"
    out.mkdir()
    (out / "README.md").write_text("committed")
    assert _report(tiny_bench, out, tmp_path / "lib", "--cv", "0", "--methods", "bm25") == 1
    assert "already holds a report" in capsys.readouterr().err
    assert (out / "README.md").read_text() == "committed" and sorted(p.name for p in out.iterdir()) == ["README.md"]
    assert _report(tiny_bench, out, tmp_path / "lib", "--cv", "0", "--methods", "bm25", "--yes") == 0
    assert (out / "README.md").read_text() != "committed"
    with pytest.raises(SystemExit):
        main(["report", str(tiny_bench)])              # no default folder to write into
