"""The explanation names, for each gate, the track (or the ego) that met it and when, so it agrees
with the score even when the gate was met by another track than the scoring one."""

from __future__ import annotations

import json

import numpy as np

from strived.records import OBJECT_FIELDS, Track, VideoInfo, VideoRecords
from strived.rules import parse_rule
from strived.rules.explain import explain_video, gate_witnesses

RULE = {"event": "x", "entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
        "hard_gates": [{"field": "distance", "op": "lt", "value": 10.0}],
        "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 2.0, "magnitude": 3.0}]}


def _video():
    n = 50
    t = np.arange(n) / 10.0
    pos = np.arange(n, dtype=np.int32)
    far_mover = {"distance": np.full(n, 30.0, np.float32),                  # never within 10 m...
                 "loc_x": np.linspace(-4, 4, n).astype(np.float32)}         # ...but moves a lot
    near_still = {"distance": np.r_[np.full(20, 25.0), np.full(15, 6.0), np.full(15, 25.0)].astype(np.float32),
                  "loc_x": np.full(n, 2.0, np.float32)}                    # within 10 m at 2.0-3.4 s
    ped = {"distance": np.full(n, 3.0, np.float32), "loc_x": np.zeros(n, np.float32)}
    for f in (far_mover, near_still, ped):
        for k in OBJECT_FIELDS:
            f.setdefault(k, np.full(n, np.nan, np.float32))
    tracks = [Track(1, "car", pos, far_mover, None), Track(2, "truck", pos, near_still, None),
              Track(3, "pedestrian", pos, ped, None)]
    return VideoRecords(VideoInfo("v", None, 10.0, n, 640, 360, "test"), np.arange(n), t, {}, tracks)


def test_gate_met_by_another_track_is_named_with_its_time():
    rule = parse_rule(RULE)
    e = explain_video(_video(), rule)
    assert e.score > 0.5 and e.peak_track == 1          # the moving car scores (the gate is video-level)
    [g] = gate_witnesses(e, rule)
    assert g["met"] and g["track"] == 2 and g["cls"] == "truck" and not g["is_peak_track"]
    assert (g["first_s"], g["last_s"]) == (2.0, 3.4)
    assert abs(g["fraction"] - 15 / 50) < 1e-9
    # the pedestrian is within 10 m all along but is not a candidate of the rule
    assert all(w["track"] != 3 for w in gate_witnesses(e, rule) if w["met"])


def test_gate_met_by_nobody_says_so():
    rule = parse_rule({**RULE, "hard_gates": [{"field": "distance", "op": "lt", "value": 1.0}]})
    e = explain_video(_video(), rule)
    assert e.score == 0.0 and gate_witnesses(e, rule) == [{"gate": "distance < 1", "met": False}]


def test_cli_explain_and_json_name_the_gate_track(tmp_path, capsys):
    from strived.cli import main

    rec = _video()
    p = tmp_path / "v.json"
    rec.save(p)
    rf = tmp_path / "rule.json"
    rf.write_text(json.dumps(RULE))
    lib = tmp_path / "lib"
    assert main(["import", str(p), "-L", str(lib)]) == 0
    capsys.readouterr()
    assert main(["search", "x", "-L", str(lib), "--rule", str(rf), "--sources", "rule", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "gate distance < 10: met by truck #2, 2.0-3.4 s (another track than the scoring one)" in out
    assert main(["search", "x", "-L", str(lib), "--rule", str(rf), "--sources", "rule", "--explain", "--json"]) == 0
    hit = json.loads(capsys.readouterr().out)["hits"][0]
    assert hit["peak_track"] == 1 and hit["gates"][0]["track"] == 2
