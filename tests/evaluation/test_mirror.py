"""`strived bench-mirror`: mirrored videos, swapped left/right labels, groups kept, bad input refused."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from strived.evaluation.bench import load_benchmark  # noqa: E402
from strived.evaluation.mirror import mirror_queries, swap_event, swap_text  # noqa: E402

W, H, FPS, N = 64, 48, 10.0, 12


def _video(path, n=N):
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (W, H))
    assert vw.isOpened()
    for _ in range(n):
        f = np.full((H, W, 3), 20, np.uint8)
        f[14:34, 6:26] = 250  # a bright square on the left half
        vw.write(f)
    vw.release()


def _frames(path):
    cap = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        out.append(f)
    fps = cap.get(cv2.CAP_PROP_FPS)
    cap.release()
    return out, fps


QUERIES = [
    {"id": "q01", "text": "a car cuts in from the left", "event": "cut_in_left", "relevant": ["clip_a"],
     "ambiguous": ["bad_clip"], "spans": {"clip_a": [[0.2, 0.8]]}},
    {"id": "q02", "text": "ego car brakes right away", "event": "ego_brake", "relevant": ["clip_a", "clip_b"]},
    {"id": "q03", "text": "a car cuts in from the right", "event": "cut_in_right", "relevant": ["clip_b"]},
    {"id": "q04", "text": "someone overtakes us on the Left", "event": "overtaken_left", "relevant": ["clip_a"]},
    {"id": "q05", "text": "only in the records", "event": "ego_stationary", "relevant": ["rec_only"]},
]


@pytest.fixture()
def bench(tmp_path):
    root = tmp_path / "src"
    (root / "videos").mkdir(parents=True)
    (root / "records").mkdir()
    _video(root / "videos" / "clip_a.mp4")
    _video(root / "videos" / "clip_b.mp4")
    (root / "videos" / "bad_clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"garbage" * 200)
    (root / "videos" / "camera.json").write_text(json.dumps({"focal_px": 50, "horizon_y": 20, "cx": 30}))
    rec = {"format": "strived.records/1",
           "video": {"id": "rec_only", "path": None, "fps": 10, "n_frames": 2, "width": 100, "height": 50},
           "frames": [{"i": 0, "t": 0.0, "ego": {"speed": 5.0, "yaw_rate": 0.25},
                       "objects": [{"track": 1, "cls": "car", "bbox": [10, 5, 30, 25], "loc_x": -2.5,
                                    "loc_z": 12.0, "lane_rel": -1, "distance": 12.0}]},
                      {"i": 1, "t": 0.1, "objects": []}]}
    (root / "records" / "rec_only.json").write_text(json.dumps(rec))
    videos = [
        {"id": "clip_a", "video": "videos/clip_a.mp4", "records": None, "source": "cam 7", "license": "internal",
         "group": "fleet7"},
        {"id": "clip_b", "video": "videos/clip_b.mp4", "records": None, "source": "cam 8", "license": "CC BY"},
        {"id": "bad_clip", "video": "videos/bad_clip.mp4", "records": None, "source": "broken", "license": "x"},
        {"id": "rec_only", "video": None, "records": "records/rec_only.json", "source": "tracks", "license": "y"},
    ]
    (root / "manifest.json").write_text(json.dumps({"name": "tiny", "license_note": "internal only",
                                                    "videos": videos}))
    (root / "queries.json").write_text(json.dumps(QUERIES))
    return root


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "strived", "bench-mirror", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _tree(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*"))


def test_cli_mirrors_videos_and_swaps_labels(bench, tmp_path):
    before = _tree(bench)
    out = tmp_path / "out" / "tiny-mirror"
    r = _cli(bench, out)
    assert r.returncode == 0, r.stderr
    assert _tree(bench) == before  # the source is never written

    # the corrupt video is reported and skipped
    assert "bad_clip" in r.stderr and "skipped" in r.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["name"] == "tiny-mirror" and "mirror" in man["description"]
    assert [s["id"] for s in man["mirror"]["skipped"]] == ["bad_clip"]
    b = load_benchmark(out)
    assert [it.id for it in b.items] == ["clip_a_mirror", "clip_b_mirror"]  # video items only
    groups = {it.id: it.group for it in b.items}
    assert groups == {"clip_a_mirror": "fleet7", "clip_b_mirror": "clip"}  # the originals' groups
    a = next(v for v in man["videos"] if v["id"] == "clip_a_mirror")
    assert a["license"] == "internal" and "mirror of clip_a" in a["source"] and a["mirror_of"] == "clip_a"

    # the video: same frame count and rate, the square now on the right half
    src_frames, src_fps = _frames(bench / "videos" / "clip_a.mp4")
    frames, fps = _frames(out / a["video"])
    assert len(frames) == len(src_frames) == N
    assert fps == pytest.approx(src_fps, rel=1e-3)
    assert frames[0].shape == (H, W, 3)
    for f in (frames[0], frames[-1]):
        left, right = f[:, : W // 2].mean(), f[:, W // 2:].mean()
        assert right > left + 40
        assert f[24, W - 1 - 16].mean() > 200 and f[24, 16].mean() < 60
    assert not list(out.rglob(".*partial*"))
    assert not list(out.parent.glob(".*partial*"))

    # camera.json beside the videos: copied, principal point mirrored
    cam = json.loads((out / "videos" / "camera.json").read_text())
    assert cam == {"focal_px": 50, "horizon_y": 20, "cx": W - 30}

    # queries: sided ones swapped and joined to the source query of that side; ids mapped
    qs = {q.id: q for q in b.queries}
    assert set(qs) == {"q01", "q02", "q03", "q04m"}  # q05's only item is not a video item
    assert qs["q03"].event == "cut_in_right" and qs["q03"].text == "a car cuts in from the right"
    assert qs["q03"].relevant == ["clip_a_mirror"] and qs["q03"].spans == {"clip_a_mirror": [[0.2, 0.8]]}
    assert qs["q03"].ambiguous == []  # bad_clip was not mirrored
    assert qs["q01"].event == "cut_in_left" and qs["q01"].relevant == ["clip_b_mirror"]
    assert qs["q02"].event == "ego_brake" and qs["q02"].text == "ego car brakes right away"
    assert qs["q02"].relevant == ["clip_a_mirror", "clip_b_mirror"]
    assert qs["q04m"].event == "overtaken_right" and qs["q04m"].text == "someone overtakes us on the Right"
    raw = {q["id"]: q["mirror_of"] for q in json.loads((out / "queries.json").read_text())}
    assert raw == {"q03": "q01", "q02": "q02", "q01": "q03", "q04m": "q04"}
    assert "q03" in r.stdout and "cut_in_right" in r.stdout

    # a second run into the same folder needs --force, then replaces it
    assert _cli(bench, out).returncode == 1
    assert _cli(bench, out, "--force").returncode == 0


def test_merge_with_original_keeps_queries_consistent(bench, tmp_path):
    from strived.evaluation.bench import merge_benchmarks

    out = tmp_path / "m"
    assert _cli(bench, out).returncode == 0
    merged = merge_benchmarks([load_benchmark(bench), load_benchmark(out)])
    q = {q.id: q for q in merged.queries}
    assert q["q01"].relevant == ["clip_a", "clip_b_mirror"]
    assert q["q03"].relevant == ["clip_b", "clip_a_mirror"]


def test_records_items_are_mirrored(bench, tmp_path):
    from strived.records import VideoRecords

    out = tmp_path / "rec"
    r = _cli(bench, out, "--items", "records")
    assert r.returncode == 0, r.stderr
    b = load_benchmark(out)
    assert [it.id for it in b.items] == ["rec_only_mirror"]
    rec = VideoRecords.load(b.items[0].records)
    d = rec.to_json_dict()
    o = d["frames"][0]["objects"][0]
    assert o["loc_x"] == 2.5 and o["lane_rel"] == 1 and o["loc_z"] == 12.0
    assert o["bbox"] == [70, 5, 90, 25]
    assert d["frames"][0]["ego"] == {"speed": 5.0, "yaw_rate": -0.25}
    assert d["video"]["id"] == "rec_only_mirror" and d["video"]["path"] is None
    assert [q.id for q in b.queries] == ["q05"]


def test_out_folder_inside_source_is_refused(bench):
    before = _tree(bench)
    r = _cli(bench, bench / "mirror")
    assert r.returncode == 1 and "inside the source benchmark" in r.stderr
    r = _cli(bench, bench)
    assert r.returncode == 1
    assert _tree(bench) == before


def test_refuses_a_foreign_nonempty_folder(bench, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    r = _cli(bench, out, "--force")
    assert r.returncode == 1 and "not empty" in r.stderr
    assert (out / "notes.txt").read_text() == "mine"


def test_label_swaps():
    assert swap_event("cut_in_left") == "cut_in_right"
    assert swap_event("ego_turn_right") == "ego_turn_left"
    assert swap_event("overtaken_left") == "overtaken_right"
    assert swap_event("cut_out") is None and swap_event(None) is None
    assert swap_text("Left turn, then the rightmost lane") == "Right turn, then the leftmost lane"
    assert swap_text("a truck passes right in front of us") == "a truck passes right in front of us"
    assert swap_text("the car has left our lane on the right") == "the car has left our lane on the left"
    assert swap_text("LEFT-hand traffic") == "RIGHT-hand traffic"


def test_query_ids_stay_unique():
    qs = [{"id": "a", "text": "cut in from the left", "event": "cut_in_left", "relevant": ["x"]},
          {"id": "b", "text": "a cut-in on the left", "event": "cut_in_left", "relevant": ["x"]},
          {"id": "c", "text": "cut in from the right", "event": "cut_in_right", "relevant": ["y"]},
          {"id": "am", "text": "stop", "event": "ego_stationary", "relevant": ["y"]},
          {"id": "d", "text": "lane change to the left", "event": "ego_lane_change", "relevant": ["x"]}]
    out, notes = mirror_queries(qs, {"x": "x_mirror", "y": "y_mirror"})
    ids = [q["id"] for q in out]
    assert len(set(ids)) == len(ids)
    by_src = {q["mirror_of"]: q for q in out}
    assert by_src["a"]["id"] == "c" and by_src["a"]["text"] == "cut in from the right"
    assert by_src["b"]["id"] == "bm" and by_src["b"]["text"] == "a cut-in on the right"
    assert by_src["c"]["id"] == "a"
    assert by_src["am"]["id"] == "am"
    assert by_src["d"]["id"] == "dm" and by_src["d"]["event"] == "ego_lane_change"
    assert by_src["d"]["text"] == "lane change to the right"
    assert notes == []


def test_mirrors_stay_in_the_fold_and_split_of_their_originals():
    """A mirror is never calibrated on while its original is scored (or the reverse), with K folds
    or one source out, and lands in the design/holdout split of its original."""
    from strived.evaluation.bench import BenchItem, BenchQuery, Benchmark, split_benchmark
    from strived.evaluation.methods import eval_folds
    from strived.evaluation.registry import EvalContext

    ids = [f"dad_{k:03d}" for k in range(6)] + [f"ccd_{k:03d}" for k in range(3)] + ["kitti_0005_w01"]
    items = [BenchItem(i, None, None, group=i.split("_")[0], bench="dev") for i in ids]
    items += [BenchItem(i + "_mirror", None, None, group=i.split("_")[0], bench="dev", mirror_of=i) for i in ids]
    bench = Benchmark("dev", Path("."), items, [BenchQuery("q1", "x", [ids[0], ids[0] + "_mirror"])])
    for cv in (5, 3, "source"):
        folds = eval_folds(EvalContext(bench, None, cv_folds=cv), [it.id for it in items])
        where = {v: k for k, f in enumerate(folds) for v in f}
        assert all(where[i] == where[i + "_mirror"] for i in ids), cv
    held = {"benchmark": "dev", "sources": ["ccd"]}
    hold = {it.id for it in split_benchmark(bench, "holdout", held).items}
    design = {it.id for it in split_benchmark(bench, "design", held).items}
    assert hold == {i for i in ids if i.startswith("ccd")} | {i + "_mirror" for i in ids if i.startswith("ccd")}
    assert design == {it.id for it in items} - hold
