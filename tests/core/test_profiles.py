"""Calibration profiles: perceived videos are scored by the `video` profile's rules, imported track
records by the `tracks` profile's, in one search."""

import copy

import numpy as np
import pytest

from strived import engine
from strived.rulelib import library as L
from strived.store import Library
from tests.core.synth import synth_video

QUERY = "the ego car is standing still, waiting"


@pytest.fixture
def profiled(monkeypatch):
    base = L.load_default_library()
    from strived.rulelib.resolve import resolve_rule

    ev = resolve_rule(QUERY, library=base).event
    assert ev in base.entries

    def with_rule(gate_value):
        lib = L.RuleLibrary({k: copy.deepcopy(e) for k, e in base.entries.items()}, dict(base.provenance))
        r = {"event": ev, "entity": {"role": "ego"},
             "hard_gates": [{"field": "speed", "op": "gt", "value": gate_value}], "soft_scores": []}
        lib.entries[ev].rule = L._canonical(r)
        return lib
    monkeypatch.setitem(L._DEFAULT, "tracks", with_rule(0.0))
    monkeypatch.setitem(L._DEFAULT, "video", with_rule(1000.0))
    return ev


def test_each_video_is_scored_by_its_profile(tmp_path, profiled):
    trk = synth_video("trk", seed=1)
    vid = synth_video("vid", seed=1)
    vid.info.attrs["perception"] = {"perception_version": 2}
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_videos([trk, vid])
        assert lib.video_profiles() == {"trk": "tracks", "vid": "video"}
        resp = engine.search(lib, QUERY, sources=("rule",))
        assert [h.video_id for h in resp.hits] == ["trk"]   # the video profile's gate is not met
        assert set(resp.rules_by_profile) == {"tracks", "video"}
        assert resp.rule_for("vid")["hard_gates"][0]["value"] == 1000.0
        assert resp.rule_for("trk")["hard_gates"][0]["value"] == 0.0
        assert resp.match["profiles"]["video"]["event"] == profiled
        assert "rules_by_profile" in resp.to_dict()


def test_one_profile_library_reports_one_rule(tmp_path, profiled):
    vid = synth_video("vid", seed=1)
    vid.info.attrs["perception"] = {"perception_version": 2}
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_video(vid)
        resp = engine.search(lib, QUERY, sources=("rule",))
        assert resp.hits == [] and resp.rules_by_profile == {}
        assert resp.match["profile"] == "video" and resp.rule["hard_gates"][0]["value"] == 1000.0


def test_missing_video_profile_falls_back_to_tracks(monkeypatch):
    monkeypatch.setattr(L, "_DEFAULT", {})
    monkeypatch.setattr(L, "default_library_path",
                        lambda profile="tracks": None if profile == "video" else L.PROFILE_FILES and
                        __import__("pathlib").Path(L.__file__).resolve().parents[2] / "resources" / "rule_library.json")
    v = L.load_default_library(profile="video")
    t = L.load_default_library(profile="tracks")
    assert v.version == t.version and "tracks profile is used" in v.provenance["note"]
    with pytest.raises(L.RuleLibraryError):
        L.load_default_library(profile="lidar")
    assert np.isfinite(len(v.keys()))
