"""The source-held-out protocol: `--cv source`, the design holdout split, merged folders."""

from __future__ import annotations

import json

import pytest

from strived.cli import main


def test_eval_leave_one_source_out_on_real_records(tmp_path, bench_dev, capsys):
    out = tmp_path / "eval.json"
    assert main(["eval", str(bench_dev), "--library", str(tmp_path / "lib"), "--items", "records",
                 "--methods", "full,equal,rule", "--cv", "source", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    res = json.loads(out.read_text())
    assert res["calibration"].startswith("cross-fitted, leave one source out")
    # every source with a relevant item gets its own figures, printed under the table
    assert set(res["per_source"]["rule"]) == {"kitti", "av2", "comma2k19"}
    assert "per source: mAP / Acc@1" in printed and "comma2k19" in printed
    for m in ("full", "equal", "rule"):
        assert 0.0 <= res["methods"][m]["mAP"] <= 1.0


def test_cv_accepts_a_number_or_source_only(tmp_path, bench_dev, capsys):
    with pytest.raises(SystemExit):
        main(["eval", str(bench_dev), "--cv", "sources"])
    assert "expected a number of folds or 'source'" in capsys.readouterr().err


def test_design_holdout_names_a_third_of_bench_devs_video_sources(bench_dev):
    """The holdout file is the one drawn with its seed, and the two splits partition bench-dev."""
    import random

    from strived.evaluation.bench import design_holdout, load_benchmark, split_benchmark

    h = design_holdout()
    bench = load_benchmark(bench_dev)
    video_sources = sorted({it.group for it in bench.items if it.video is not None})
    assert video_sources == h["video_sources"]
    assert sorted(random.Random(h["seed"]).sample(video_sources, round(len(video_sources) / 3))) == h["sources"]
    design = {it.id for it in split_benchmark(bench, "design").items}
    hold = {it.id for it in split_benchmark(bench, "holdout").items}
    assert design and hold and not design & hold and design | hold == set(bench.item_ids)
    assert all(it.group in h["sources"] for it in bench.items if it.id in hold)


def test_merged_folders_join_queries_by_id_and_refuse_clashes(tmp_path):
    from strived.errors import BenchmarkError
    from strived.evaluation.bench import load_benchmark, merge_benchmarks

    def folder(name, items, queries):
        d = tmp_path / name
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps(
            {"name": name, "videos": [{"id": i, "records": f"records/{i}.json", "group": g} for i, g in items]}))
        (d / "queries.json").write_text(json.dumps(queries))
        return load_benchmark(d)

    a = folder("a", [("a1", "s1"), ("a2", "s2")], [{"id": "q1", "text": "we turn left", "relevant": ["a1"]}])
    b = folder("b", [("b1", "s3")], [{"id": "q1", "text": "we turn left", "relevant": ["b1"]},
                                    {"id": "q2", "text": "we stop", "relevant": ["b1"]}])
    m = merge_benchmarks([a, b])
    assert [it.group for it in m.items] == ["s1", "s2", "s3"]
    q = {x.id: x for x in m.queries}
    assert q["q1"].relevant == ["a1", "b1"] and q["q2"].relevant == ["b1"]
    c = folder("c", [("c1", "s4")], [{"id": "q1", "text": "we turn right", "relevant": ["c1"]}])
    with pytest.raises(BenchmarkError, match="differs"):
        merge_benchmarks([a, c])
    d = folder("d", [("a1", "s9")], [])
    with pytest.raises(BenchmarkError, match="a1"):
        merge_benchmarks([a, d])
