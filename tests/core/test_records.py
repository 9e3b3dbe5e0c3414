import json
import math

import numpy as np
import pytest

from strived.errors import RecordsError
from strived.records import FORMAT, VideoRecords


def doc(frames=None, **video):
    v = {"id": "v1", "path": None, "fps": 10.0, "n_frames": 3, "width": 640, "height": 360, "source": "test"}
    v.update(video)
    if frames is None:
        frames = [
            {"i": 0, "t": 0.0, "ego": {"speed": 5.0}, "objects": [
                {"track": 1, "cls": "car", "bbox": [1, 2, 30, 40], "distance": 12.5, "loc_x": -1.25,
                 "loc_z": 12.5, "lane_rel": 0, "bbox_area": 1131.0}]},
            {"i": 2, "t": 0.2, "objects": [
                {"track": 1, "cls": "car", "distance": 11.0, "loc_x": -1.0},
                {"track": 7, "cls": "forklift", "distance": 3.0}]},
        ]
    return {"format": FORMAT, "video": v, "frames": frames}


def test_roundtrip_exact(tmp_path):
    rec = VideoRecords.from_json_dict(doc())
    assert [t.track_id for t in rec.tracks] == [1, 7]
    assert rec.tracks[1].cls == "forklift"  # unknown class kept as its own class
    assert math.isnan(rec.ego["speed"][1])
    p = tmp_path / "r.json"
    rec.save(p)
    again = VideoRecords.load(p)
    assert again.to_json_dict() == rec.to_json_dict()
    d = rec.to_json_dict()
    assert d["frames"][0]["objects"][0]["loc_x"] == -1.25
    assert d["frames"][0]["objects"][0]["lane_rel"] == 0
    assert "bbox" not in d["frames"][1]["objects"][0]


def test_real_records_roundtrip(bench_records):
    for rec in bench_records[:8]:
        d = rec.to_json_dict()
        back = VideoRecords.from_json_dict(json.loads(json.dumps(d)))
        assert back.to_json_dict() == d
        for a, b in zip(rec.tracks, back.tracks):
            for f in a.fields:
                np.testing.assert_array_equal(a.fields[f], b.fields[f])


@pytest.mark.parametrize("mutate, key, frame", [
    (lambda d: d["video"].pop("fps"), "video.fps", None),
    (lambda d: d["video"].__setitem__("fps", -10), "video.fps", None),
    (lambda d: d["frames"][1].__setitem__("t", 0.0), "t", 1),
    (lambda d: d["frames"][1]["objects"][0].pop("cls"), "objects[0].cls", 1),
    (lambda d: d["frames"][0]["objects"][0].__setitem__("distance", float("nan")), "objects[0].distance", 0),
    (lambda d: d["frames"][0]["objects"][0].__setitem__("distance", "far"), "objects[0].distance", 0),
    (lambda d: d["frames"][0]["objects"][0].pop("track"), "objects[0].track", 0),
    (lambda d: d["frames"][0].__setitem__("ego", {"speed": float("inf")}), "ego.speed", 0),
    (lambda d: d.__setitem__("format", "other/2"), "format", None),
])
def test_malformed_names_file_frame_key(tmp_path, mutate, key, frame):
    d = doc()
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(RecordsError) as ei:
        VideoRecords.load(p)
    e = ei.value
    assert e.key == key and e.frame == frame and e.path == str(p)
    assert str(p) in str(e) and key in str(e)


def test_not_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(RecordsError, match="not valid JSON"):
        VideoRecords.load(p)
