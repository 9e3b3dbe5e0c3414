"""Summaries and segment texts from real bench-dev records (no video files), incremental
rebuilds, sidecar and CSV captions."""

from __future__ import annotations


from strived.records import VideoRecords
from strived.retrieval.describe import name_words, segment_bounds
from strived.retrieval.summaries import build_texts, import_captions_csv
from strived.store.library import Library


def test_summaries_from_records(records_library):
    rows = dict(records_library.conn.execute("SELECT video_id, text FROM summaries"))
    assert len(rows) == 47
    s = rows["kitti_0015_w01"]
    assert "pedestrian" in s and "ego stationary" in s and "kitti" in s
    # A KITTI window with a real left turn in its OXTS yaw rate.
    turns = [v for v, t in rows.items() if "ego turns" in t]
    assert turns, "no turn found in any bench-dev records"
    segs = records_library.conn.execute(
        "SELECT seg, t0, t1, text FROM segments WHERE video_id='kitti_0015_w01' ORDER BY seg").fetchall()
    assert [s[0] for s in segs] == list(range(len(segs))) and len(segs) == 3
    assert segs[0][1] == 0.0 and all(a[2] == b[1] for a, b in zip(segs, segs[1:]))
    assert all(s[3] for s in segs)


def test_name_words():
    assert name_words("Dashcam_2021-06-03_RainyDay.mp4", "Munich") == \
        "dashcam 2021 06 03 rainy day june 2021 munich"


def test_incremental_and_captions(bench_records, tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    recs = {r.info.id: r for r in bench_records[:3]}
    lib.add_videos(recs.values())
    assert build_texts(lib).n_built == 3
    assert build_texts(lib).n_built == 0
    ids = sorted(recs)
    # A captions CSV replaces the generated summary of that video only.
    csv = tmp_path / "captions.csv"
    csv.write_text(f"video_id,caption\n{ids[0]},A silver van parks near the bakery\nunknown,x\n")
    assert import_captions_csv(lib, csv) == 1
    r = build_texts(lib)
    assert r.n_built == 1 and r.n_captioned == 1
    text, source = lib.conn.execute("SELECT text, source FROM summaries WHERE video_id=?",
                                    (ids[0],)).fetchone()
    assert source == "caption" and text.startswith("A silver van parks near the bakery")
    # A sidecar caption next to the video file.
    video = tmp_path / "clips" / "trip_2020-05-01.mp4"
    video.parent.mkdir()
    video.write_bytes(b"")
    (video.parent / "trip_2020-05-01.caption.txt").write_text("snowy mountain pass, a bus ahead")
    rec = recs[ids[1]]
    rec.info.path = str(video)
    lib.add_video(rec)
    build_texts(lib)
    text = lib.conn.execute("SELECT text FROM summaries WHERE video_id=?", (ids[1],)).fetchone()[0]
    assert text.startswith("snowy mountain pass") and "may 2020" in text and "clips" in text


def test_segment_bounds_follow_real_times():
    rec = VideoRecords.from_json_dict({"format": "strived.records/1",
                                       "video": {"id": "x", "fps": 30, "n_frames": 300},
                                       "frames": [{"i": i * 3, "t": i * 0.1 + 1.0} for i in range(95)]})
    b = segment_bounds(rec, 4.0)
    assert b[0][0] == 1.0 and len(b) == 3 and b[-1][1] >= rec.t[-1]


def test_ego_phrases_read_speed_and_jolt_only_where_known():
    import numpy as np

    from strived.retrieval.describe import ego_phrases
    from tests.core.synth import synth_video

    rec = synth_video("j", seed=3)
    rec.ego["speed"][:] = 0.0
    rec.ego["jolt"] = np.zeros(len(rec.t))
    rec.ego["jolt"][40] = 0.9
    words = " ".join(ego_phrases(rec))
    assert "standing still" in words and "jolts" in words
    rec.ego["speed"][:] = np.nan            # not estimated: no claim about speed at all
    rec.ego["jolt"][:] = np.nan
    words = " ".join(ego_phrases(rec))
    assert "standing still" not in words and "km/h" not in words and "jolts" not in words
