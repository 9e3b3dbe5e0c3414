"""A gate or score on ego speed counts only the confident speed samples (availability.MIN_SPEED_CONF),
the same on the fast scorer and in the explanation, and the explanation names the speed's source."""

import numpy as np

from strived.records import VideoInfo, VideoRecords
from strived.rules import parse_rule
from strived.rules.explain import explain_video, gate_witnesses
from strived.rules.scorer import RuleScorer
from strived.store import Library

FAST = {"entity": {"role": "ego"}, "hard_gates": [{"field": "speed", "op": "gt", "value": 25.0}],
        "soft_scores": []}


def _video(vid, conf_fast, source="video"):
    """10 s at 10 Hz, 10 m/s except 30 m/s at 4-5 s, where the speed confidence is ``conf_fast``."""
    n = 100
    t = np.arange(n) / 10.0
    speed = np.full(n, 10.0)
    speed[40:50] = 30.0
    conf = np.full(n, 0.8)
    conf[40:50] = conf_fast
    info = VideoInfo(vid, None, 10.0, n, 640, 360, "test",
                     attrs={"availability": {"speed": {"source": source, "coverage": 1.0}}})
    return VideoRecords(info, np.arange(n), t, {"speed": speed, "speed_conf": conf}, [])


def test_unconfident_speed_samples_do_not_meet_a_gate(tmp_path):
    rule = parse_rule(FAST)
    recs = [_video("sure", 0.7), _video("unsure", 0.05), _video("gps", 1.0, "telemetry:nmea:x.gps"),
            _video("imported", np.nan, "records")]     # no confidence known: counts
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_videos(recs)
        res = RuleScorer(lib).score(rule)
        got = dict(zip(res.video_ids, res.scores.tolist()))
    assert got == {"sure": 1.0, "unsure": 0.0, "gps": 1.0, "imported": 1.0}
    # the explanation (reference path) agrees, and says where the speed came from
    for rec in recs:
        e = explain_video(rec, rule)
        assert (e.score > 0) == (got[rec.info.id] > 0)
        [w] = gate_witnesses(e, rule)
        assert w["source"] == rec.info.attrs["availability"]["speed"]["source"]
    [w] = gate_witnesses(explain_video(recs[1], rule), rule)
    assert w == {"gate": "speed > 25", "met": False, "source": "video"}
