"""loc_x_road: an object's lateral offset with the ego's own rotation taken out. A parked car seen
while the ego turns sweeps across the image (loc_x changes by metres) but stays put relative to the
road; a car changing lanes on a straight road moves the same in both."""

from __future__ import annotations

import numpy as np

from strived.records import Track, VideoInfo, VideoRecords
from strived.rules import RuleScorer, parse_rule
from strived.rules.columns import TrackColumns
from strived.rules.road import ROAD_MAX_TURN_RAD
from strived.rules.reference import track_series


def _video(vid: str, yaw_rate: float, lateral_speed: float, depth: float = 20.0, n: int = 60,
           fps: float = 10.0) -> VideoRecords:
    """The ego turns at ``yaw_rate`` (rad/s, + = left) past one car at ``depth`` metres moving
    sideways at ``lateral_speed`` (m/s, + = right) relative to the road."""
    t = np.arange(n) / fps
    heading = yaw_rate * t
    x_road = -2.0 + lateral_speed * t
    # seen from the turning ego: a left turn moves everything ahead to the right by depth * heading
    x = x_road + depth * heading
    fields = {"distance": np.full(n, depth), "loc_x": x, "loc_z": np.full(n, depth),
              "lane_rel": np.zeros(n), "bbox_area": np.full(n, 4000.0), "score": np.full(n, 0.9)}
    tr = Track(track_id=1, cls="car", pos=np.arange(n, dtype=np.int32),
               fields={f: np.asarray(v, np.float32) for f, v in fields.items()},
               bbox=np.tile(np.float32([10, 20, 60, 80]), (n, 1)))
    ego = {"speed": np.full(n, 8.0), "yaw_rate": np.full(n, yaw_rate), "accel": np.zeros(n)}
    info = VideoInfo(id=vid, path=None, fps=fps, n_frames=n, width=1280, height=720, source="synthetic")
    return VideoRecords(info=info, frame_idx=np.arange(n, dtype=np.int64), t=t, ego=ego, tracks=[tr])


def test_a_parked_car_stays_put_relative_to_the_road_while_the_ego_turns():
    rec = _video("bend", yaw_rate=0.05, lateral_speed=0.0)
    x = np.asarray(track_series(rec, rec.tracks[0], "loc_x"))
    road = np.asarray(track_series(rec, rec.tracks[0], "loc_x_road"))
    assert x[-1] - x[0] > 5.0                                    # 20 m x 0.3 rad sweeps it a lane and more
    np.testing.assert_allclose(road, x[-1], atol=1e-3)           # as seen at the track's end
    cols_road = TrackColumns.from_records([rec]).series_for("loc_x_road")[1]
    np.testing.assert_allclose(cols_road, road, atol=1e-4)
    np.testing.assert_allclose(TrackColumns.from_records([rec]).series_for("abs_loc_x_road")[1],
                               np.abs(road), atol=1e-4)


def test_on_a_straight_road_the_road_offset_is_the_offset():
    rec = _video("straight", yaw_rate=0.0, lateral_speed=0.8)
    np.testing.assert_array_equal(track_series(rec, rec.tracks[0], "loc_x_road"),
                                  track_series(rec, rec.tracks[0], "loc_x"))


def test_a_cut_in_rule_on_road_motion_ignores_the_turn_and_keeps_the_lane_change():
    recs = [_video("parked_in_a_turn", yaw_rate=0.25, lateral_speed=0.0),
            _video("changes_lane", yaw_rate=0.0, lateral_speed=0.8)]

    def rule(field):
        return parse_rule({"event": "lateral", "entity": {"class_filter": ["car"]},
                           "hard_gates": [{"field": "distance", "op": "lt", "value": 40}],
                           "soft_scores": [{"type": "temporal_change", "field": field, "window_seconds": 4,
                                            "magnitude": 3.0}]})
    scorer = RuleScorer.from_records(recs)
    on_image = dict(zip(scorer.video_ids, scorer.score(rule("loc_x")).scores))
    on_road = dict(zip(scorer.video_ids, scorer.score(rule("loc_x_road")).scores))
    assert on_image["parked_in_a_turn"] == 1.0 and on_image["changes_lane"] == 1.0
    assert on_road["parked_in_a_turn"] < 0.01 and on_road["changes_lane"] == 1.0


def test_through_a_turn_the_offset_before_it_is_unknown_not_a_sideways_sweep():
    """A junction turn (1.5 rad): a fixed heading no longer follows the road, so the samples taken
    while the ego pointed more than ROAD_MAX_TURN_RAD away from its final heading are NaN; the
    rest are the offset as seen at the end. The fast columns agree, NaNs included."""
    rec = _video("junction", yaw_rate=0.25, lateral_speed=0.0)
    road = np.asarray(track_series(rec, rec.tracks[0], "loc_x_road"))
    heading = 0.25 * rec.t
    known = np.abs(heading - heading[-1]) <= ROAD_MAX_TURN_RAD
    assert 5 < known.sum() < len(known) - 30
    np.testing.assert_array_equal(np.isnan(road), ~known)
    x = np.asarray(track_series(rec, rec.tracks[0], "loc_x"))
    np.testing.assert_allclose(road[known], x[-1], atol=1e-3)
    cols = TrackColumns.from_records([rec]).series_for("loc_x_road")[1]
    np.testing.assert_array_equal(np.isnan(cols), ~known)
    np.testing.assert_allclose(cols[known], road[known], atol=1e-4)


def test_unknown_depth_takes_nothing_out_and_unknown_offset_stays_unknown():
    rec = _video("turn", yaw_rate=0.1, lateral_speed=0.0, n=20)
    tr = rec.tracks[0]
    tr.fields["loc_z"][:] = np.nan
    tr.fields["distance"][:] = np.nan
    tr.fields["loc_x"][5] = np.nan
    road = np.asarray(track_series(rec, tr, "loc_x_road"))
    x = tr.fields["loc_x"].astype(float)
    np.testing.assert_array_equal(np.isnan(road), np.isnan(x))
    np.testing.assert_allclose(road[~np.isnan(x)], x[~np.isnan(x)], atol=1e-6)
    cols = TrackColumns.from_records([rec]).series_for("loc_x_road")[1]
    np.testing.assert_array_equal(np.isnan(cols), np.isnan(x))
