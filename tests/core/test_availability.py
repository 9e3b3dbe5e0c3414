"""Per-field availability: stored with every video, exported, and able to tell "not estimated"
from "did not happen"; ego jolt / speed confidence survive a schema upgrade as unknown (NaN)."""

import json
import math
import subprocess
import sys

import numpy as np

from strived.availability import complete_availability, field_available, summarize
from strived.records import VideoRecords
from strived.rules import RuleScorer, parse_rule
from strived.store import Library, SCHEMA_VERSION
from tests.core.synth import synth_video


def test_imported_records_get_measured_availability(tmp_path):
    rec = synth_video("a", seed=1)
    rec.ego["speed"][:] = np.nan          # e.g. a track set without CAN speed
    rec.ego["accel"][:] = np.nan
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_video(rec)
        av = lib.availability()["a"]
    assert av["speed"]["status"] == "unavailable" and av["speed"]["coverage"] == 0.0
    assert av["speed"]["source"] == "records" and "not in the imported records" in av["speed"]["reason"]
    assert av["yaw_rate"]["status"] == "estimated" and 0.9 < av["yaw_rate"]["coverage"] <= 1.0
    assert av["distance"]["status"] == "estimated"
    assert av["jolt"]["status"] == "unavailable"
    assert field_available(av, "speed") is False
    assert field_available(av, "heading") is True      # derived from yaw_rate
    assert field_available(av, "abs_loc_x") is True    # derived from loc_x
    assert field_available({}, "speed") is None


def test_producer_reason_is_kept_and_coverage_is_measured():
    rec = synth_video("b", seed=2)
    rec.ego["speed"][:] = np.nan
    rec.ego["speed"][:5] = 3.0
    rec.info.attrs["perception"] = {"perception_version": 2}
    rec.info.attrs["availability"] = {"speed": {"status": "estimated", "coverage": 1.0, "source": "video",
                                                "reason": "night: too dark for road texture",
                                                "quality": 0.4}}
    av = complete_availability(rec)
    # the producer's claim of full coverage is corrected by what is stored; its reason is kept
    assert av["speed"]["status"] == "partial" and av["speed"]["coverage"] == round(5 / len(rec.t), 4)
    assert av["speed"]["reason"] == "night: too dark for road texture" and av["speed"]["quality"] == 0.4
    assert av["distance"]["source"] == "video"


def test_video_without_objects_is_not_missing_object_fields(tmp_path):
    rec = synth_video("c", seed=3, n_tracks=0)
    av = complete_availability(rec)
    assert av["distance"]["status"] == "no_objects" and field_available(av, "distance") is True
    assert summarize({"c": av})["distance"] == {"no_objects": 1}


def test_availability_round_trips_through_export_and_info(tmp_path):
    rec = synth_video("d", seed=4)
    rec.ego["accel"][:] = np.nan
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_video(rec)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "strived", "export", str(out), "-L", str(tmp_path / "lib")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    files = list(out.rglob("*.json"))
    assert files
    back = VideoRecords.load(files[0])
    assert back.info.attrs["availability"]["accel"]["status"] == "unavailable"
    r = subprocess.run([sys.executable, "-m", "strived", "info", "-L", str(tmp_path / "lib")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["field_availability"]["accel"] == {"unavailable": 1}
    assert info["field_availability"]["speed"] == {"estimated": 1}


def test_version_2_library_upgrades_and_new_ego_fields_read_as_unknown(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_video(synth_video("a", seed=1))
    lib.conn.execute("ALTER TABLE videos DROP COLUMN ego_jolt")
    lib.conn.execute("ALTER TABLE videos DROP COLUMN ego_speed_conf")
    lib.meta_set("schema_version", 2)
    lib.close()
    lib = Library.open(tmp_path / "lib")
    assert lib.meta_get("schema_version") == SCHEMA_VERSION == 3
    back = lib.get_video("a")
    assert len(back.ego["jolt"]) == len(back.t) and np.isnan(back.ego["jolt"]).all()
    assert math.isfinite(float(back.ego["speed"][0]))
    # a rule on jolt scores 0 (nothing known), no crash, on the upgraded library
    rule = parse_rule({"entity": {"role": "ego"}, "hard_gates": [{"field": "jolt", "op": "gt", "value": 0.1}],
                       "soft_scores": []})
    assert RuleScorer(lib).score(rule).scores.tolist() == [0.0]
    lib.close()


def test_jolt_is_a_rule_field_and_round_trips(tmp_path):
    rec = synth_video("e", seed=5)
    rec.ego["jolt"] = np.zeros(len(rec.t))
    rec.ego["jolt"][50:53] = 0.5
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_video(rec)
        lib.add_video(synth_video("f", seed=6))
        back = lib.get_video("e")
        np.testing.assert_allclose(back.ego["jolt"], rec.ego["jolt"])
        rule = parse_rule({"entity": {"role": "ego"},
                           "hard_gates": [{"field": "jolt", "op": "gt", "value": 0.3}], "soft_scores": []})
        res = RuleScorer(lib).score(rule)
        assert dict(zip(res.video_ids, res.scores.tolist())) == {"e": 1.0, "f": 0.0}
    d = back.to_json_dict()
    assert any("jolt" in (fr.get("ego") or {}) for fr in d["frames"])
