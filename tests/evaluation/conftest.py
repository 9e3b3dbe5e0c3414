"""A tiny benchmark folder (FORMATS.md section 2) built from the bundled synthetic scenarios."""

from __future__ import annotations

import json

import pytest

QUERIES = [
    {"id": "q01", "text": "a car cuts into our lane from the right", "event": "cut_in_right",
     "relevant": ["sample_cut_in_right"], "spans": {"sample_cut_in_right": [[4.0, 9.0]]}},
    {"id": "q04", "text": "ego vehicle turns left at a junction", "event": "ego_turn_left",
     "relevant": ["sample_left_turn"]},
    {"id": "q08", "text": "ego car brakes hard", "event": "ego_brake", "relevant": ["sample_hard_brake"],
     "ambiguous": ["sample_waiting"]},
    {"id": "q09", "text": "pedestrian walking across the road in front of the car", "event": "pedestrian_crossing",
     "relevant": ["sample_pedestrian_crossing"]},
]


@pytest.fixture(scope="session")
def tiny_bench(tmp_path_factory):
    from strived.sample import sample_scenarios

    root = tmp_path_factory.mktemp("tiny-bench")
    (root / "records").mkdir()
    videos = []
    for rec in sample_scenarios():
        rec.save(root / "records" / f"{rec.info.id}.json")
        videos.append({"id": rec.info.id, "records": f"records/{rec.info.id}.json", "source": "strived sample"})
    (root / "manifest.json").write_text(json.dumps({"name": "tiny", "description": "bundled sample scenarios",
                                                    "videos": videos}))
    (root / "queries.json").write_text(json.dumps(QUERIES))
    return root
