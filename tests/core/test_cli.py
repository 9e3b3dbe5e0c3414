import json
import os
import subprocess
import sys
from pathlib import Path


from strived.cli import main

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "strived", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)


def test_import_export_roundtrip(tmp_path, bench_dev, capsys):
    recs = bench_dev / "records"
    lib = tmp_path / "lib"
    assert main(["import", str(recs / "kitti_0000_w00.json"), str(recs / "av2_adcf7d18.json"), "-L", str(lib)]) == 0
    assert main(["export", str(tmp_path / "out"), "-L", str(lib)]) == 0
    for vid in ("kitti_0000_w00", "av2_adcf7d18"):
        a = json.loads((recs / f"{vid}.json").read_text())
        b = json.loads((tmp_path / "out" / f"{vid}.json").read_text())
        assert a["video"]["id"] == b["video"]["id"]
        assert len(a["frames"]) == len(b["frames"])
        for fa, fb in zip(a["frames"], b["frames"]):
            assert fa["i"] == fb["i"] and fa["t"] == fb["t"]
            assert fa.get("ego", {}) == fb.get("ego", {})
            oa = sorted(fa["objects"], key=lambda o: o["track"])
            ob = sorted(fb["objects"], key=lambda o: o["track"])
            for x, y in zip(oa, ob):
                for k, v in x.items():
                    if v is not None:
                        assert y[k] == v, (vid, fa["i"], k)


def test_import_malformed_stops_and_keeps_library(tmp_path, bench_dev, capsys):
    lib = tmp_path / "lib"
    assert main(["import", str(bench_dev / "records" / "kitti_0000_w00.json"), "-L", str(lib)]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "strived.records/1", "video": {"id": "b", "fps": 10, "n_frames": 1},
                               "frames": [{"i": 0, "t": 0.0, "objects": [{"track": 1}]}]}))
    assert main(["import", str(bad), "-L", str(lib)]) == 1
    err = capsys.readouterr().err
    assert "frame 0" in err and "objects[0].cls" in err and "nothing was imported" in err
    from strived.store import Library
    with Library.open(lib) as L:
        assert L.video_ids() == ["kitti_0000_w00"]


def test_import_of_a_folder_holds_one_parsed_file_at_a_time(tmp_path, bench_dev, capsys, monkeypatch):
    """A folder of many records files imports without holding every parsed file in memory: at
    most one VideoRecords is alive while the library stores them (a weak reference per parse)."""
    import gc
    import shutil
    import weakref

    from strived.records import VideoRecords
    from strived.store import Library

    src = tmp_path / "recs"
    src.mkdir()
    names = sorted(p.name for p in (bench_dev / "records").glob("*.json"))[:6]
    for n in names:
        shutil.copy(bench_dev / "records" / n, src / n)
    alive, peak = [], [0]
    real_load = VideoRecords.load.__func__

    def load(cls, path):
        rec = real_load(cls, path)
        gc.collect()
        alive[:] = [r for r in alive if r() is not None]
        alive.append(weakref.ref(rec))
        peak[0] = max(peak[0], len(alive))
        return rec

    monkeypatch.setattr(VideoRecords, "load", classmethod(load))
    lib = tmp_path / "lib"
    assert main(["import", str(src), "-L", str(lib), "--no-text-index"]) == 0
    assert peak[0] <= 2, f"{peak[0]} parsed records files alive at once"
    with Library.open(lib) as L:
        assert L.video_ids() == sorted(n[:-5] for n in names)


def test_search_json_and_empty_library(tmp_path, bench_dev, capsys):
    lib = tmp_path / "lib"
    assert main(["search", "anything", "-L", str(lib)]) == 1  # no library yet: clear error
    assert "no STRIVE-D library" in capsys.readouterr().err
    assert main(["import", str(bench_dev / "records"), "-L", str(lib)]) == 0
    capsys.readouterr()
    from strived.store import Library
    with Library.open(lib) as L:  # import built the search indexes: texts and rule features
        assert L.conn.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] == 47
        assert any(p.name.startswith("feat-") for p in L.cache_dir.iterdir())
    assert main(["search", "we make a left turn", "-L", str(lib), "--event", "ego_turn_left", "--sources", "rule",
                 "--json", "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hits"][0]["video_id"] in {"kitti_0006_w02", "av2_7fab2350", "kitti_0000_w00"}
    assert out["hits"][0]["span_s"] is not None and out["rule"]["entity"]["role"] == "ego"


def test_stats_command(tmp_path, bench_dev, capsys):
    lib = tmp_path / "lib"
    main(["import", str(bench_dev / "records"), "-L", str(lib)])
    capsys.readouterr()
    assert main(["stats", "-L", str(lib), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    w = st["fields"]["distance"]["windows"]
    assert w["2s"]["P50"] <= w["4s"]["P50"] <= w["8s"]["P50"]
    assert 0 <= st["fields"]["loc_x"]["pct_exceeding_4s"]["1"] <= 1


def test_eval_end_to_end(tmp_path, bench_dev):
    out = tmp_path / "eval.json"
    p = run_cli("eval", bench_dev, "--library", tmp_path / "benchlib", "--methods", "rule-hand", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "rule-hand" in p.stdout and "Acc@1" in p.stdout
    res = json.loads(out.read_text())
    assert res["n_queries"] == 20 and res["n_items"] == 74
    m = res["methods"]["rule-hand"]
    assert set(m) == {"MRR", "mAP", "Acc@1", "Acc@3", "Acc@5", "Acc@10"}
    assert all(0.0 <= v <= 1.0 for v in m.values())
    q04 = next(q for q in res["queries"] if q["id"] == "q04")
    assert q04["methods"]["rule-hand"]["rank_of_first_relevant"] == 1


def test_eval_bad_bench(tmp_path):
    p = run_cli("eval", tmp_path)
    assert p.returncode == 1 and "manifest.json is missing" in p.stderr


def test_schema_command_validates(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"entity": {}, "soft_scores": [
        {"type": "temporal_change", "field": "loc_x", "window_seconds": 2, "min_delta": 1}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"entity": {}, "soft_scores": [
        {"type": "temporal_change", "field": "loc_x", "window_seconds": -2, "min_delta": 1}]}))
    assert main(["schema", str(good)]) == 0
    assert '"magnitude": 2.0' in capsys.readouterr().out
    assert main(["schema", str(bad)]) == 1
    assert "/soft_scores/0/window_seconds" in capsys.readouterr().err
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "STRIVE-D symbolic rule"


def test_events_lists_the_library_and_suggests_on_a_typo():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "strived", "events"], capture_output=True, text=True)
    assert r.returncode == 0 and "cut_in_right" in r.stdout and "ego_stationary" in r.stdout
    r = subprocess.run([sys.executable, "-m", "strived", "events", "cut_inn"], capture_output=True, text=True)
    assert r.returncode == 2 and "did you mean cut_in" in r.stderr
    r = subprocess.run([sys.executable, "-m", "strived", "events", "close_pass", "--profile", "video"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "(video profile)" in r.stdout and '"event": "close_pass"' in r.stdout


def test_calibrated_library_round_trip_through_search_and_eval(tmp_path, bench_dev, capsys):
    """`strived calibrate` writes a rule library; `--rule-library` makes search and eval use it."""
    from strived.rulelib.library import RuleLibrary, load_default_library

    recs = bench_dev / "records"
    lib = tmp_path / "lib"
    assert main(["import", str(recs), "-L", str(lib)]) == 0
    out = tmp_path / "mine.json"
    assert main(["calibrate", str(lib), "--benchmark", str(bench_dev), "--events", "ego_brake",
                 "--out", str(out)]) == 0
    mine = RuleLibrary.load(out)
    capsys.readouterr()
    assert main(["search", "the ego car brakes hard", "-L", str(lib), "--json", "--rule-library", str(out)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["match"]["event"] == "ego_brake"
    rule = RuleLibrary.load(out).rule("ego_brake").to_dict()
    assert got["rule"]["soft_scores"] == rule["soft_scores"]
    # the user's library, not the shipped one, decided the rule (their numbers differ here)
    shipped = load_default_library().rule("ego_brake").to_dict()
    if shipped["soft_scores"] != rule["soft_scores"]:
        assert main(["search", "the ego car brakes hard", "-L", str(lib), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["rule"]["soft_scores"] != rule["soft_scores"]
    ev = tmp_path / "ev.json"
    assert main(["eval", str(bench_dev), "--library", str(lib), "--items", "records", "--methods", "rule",
                 "--rule-library", str(out), "--json", str(ev), "--quiet"]) == 0
    assert json.loads(ev.read_text())["calibration"] == f"rule library {mine.version} as it is"
    # a broken library file is a clear error, not a traceback
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = run_cli("search", "x", "-L", lib, "--rule-library", bad)
    assert r.returncode != 0 and "not valid JSON" in r.stderr and "Traceback" not in r.stderr


def test_eval_prints_progress_lines_when_not_on_a_terminal(tmp_path, bench_dev):
    lib = tmp_path / "lib"
    r = run_cli("eval", bench_dev, "--library", lib, "--items", "records", "--methods", "bm25", "--cv", "0")
    assert r.returncode == 0, r.stderr[-1500:]
    lines = [ln for ln in r.stderr.splitlines() if "/" in ln and ":" in ln]
    assert len(lines) >= 3, r.stderr        # a line per 10 % of each stage, not silence


def test_demo_indexes_the_bundled_real_clip_with_real_perception(tmp_path):
    """`strived demo` (the README's first command) says the scenarios are generated, perceives the
    bundled Apache-2.0 clip with the real pipeline and finds it for the bus query."""
    r = run_cli("demo", "--library", tmp_path / "demo")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "generated scenarios: synthetic per-frame track records (no video)" in out
    assert "indexing it with the real perception pipeline" in out
    from strived.store import Library

    with Library.open(tmp_path / "demo") as lib:
        rec = lib.get_video("street_bus_passes")
        assert rec.info.attrs.get("perception"), "the clip must come from our perception"
        assert "bus" in {t.cls for t in rec.tracks}          # the bus that passes is detected and tracked
    bus = out.split("query: 'a bus passes very close to us'")[1]
    assert "street_bus_passes" in bus and "<- the real clip" in bus
