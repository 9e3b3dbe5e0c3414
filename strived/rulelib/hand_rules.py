"""Hand-written rules, one per benchmark event key, with physically reasoned (uncalibrated) numbers.

They are the "rule-hand" baseline of `strived eval` (the symbolic path with a human's first guess
and no calibration) and a fallback for `strived search --event NAME`. The calibrated library in
`resources/rule_library.json` supersedes them for normal searches.
"""

from __future__ import annotations

VEHICLES = ["car", "truck", "bus", "motorcycle"]
TWO_WHEELERS = ["motorcycle", "bicycle"]


def _obj(classes, gates, softs, selection="any", agg="any"):
    return {"entity": {"role": "object", "class_filter": classes, "selection": selection, "agg_mode": agg},
            "hard_gates": gates, "soft_scores": softs}


def _ego(gates, softs):
    return {"entity": {"role": "ego", "class_filter": None, "selection": "any", "agg_mode": "any"},
            "hard_gates": gates, "soft_scores": softs}


def _tc(field, window, min_delta, direction=None, weight=1.0, min_fraction=None):
    d = {"type": "temporal_change", "field": field, "window_seconds": window, "min_delta": min_delta,
         "direction": direction, "weight": weight}
    if min_fraction is not None:
        d["min_fraction"] = min_fraction
    return d


def _tr(field, direction, min_duration, weight=1.0):
    return {"type": "monotonic_trend", "field": field, "direction": direction,
            "min_duration_seconds": min_duration, "weight": weight}


def _g(field, op, value, frac=None, secs=None):
    """A gate; ``frac``: held on that share of the clip; ``secs``: held unbroken that many seconds."""
    d = {"field": field, "op": op, "value": value}
    if frac is not None:
        d["min_time_fraction"] = frac
    if secs is not None:
        d["min_seconds"] = secs
    return d


# the ego drives (nearly) straight for 90 % of the clip: |yaw rate| < 0.1 rad/s
STRAIGHT = [_g("yaw_rate", "lt", 0.1, 0.9), _g("yaw_rate", "gt", -0.1, 0.9)]

HAND_RULES: dict[str, dict] = {
    # another vehicle enters the ego lane from the right: it drifts steadily towards the lane
    # centre (|loc_x| falls for seconds) and its lateral offset falls; the ego is not turning
    # (a turn sweeps every track sideways)
    "cut_in_right": _obj(VEHICLES, [_g("distance", "lt", 30.0), _g("abs_loc_x", "lt", 1.0)] + STRAIGHT,
                         [_tr("abs_loc_x", "decreasing", 3.0), _tc("loc_x", 8.0, 1.5, "negative", 0.5)]),
    "cut_in_left": _obj(VEHICLES, [_g("distance", "lt", 30.0), _g("abs_loc_x", "lt", 1.0)] + STRAIGHT,
                        [_tr("abs_loc_x", "decreasing", 3.0), _tc("loc_x", 8.0, 1.5, "positive", 0.5)]),
    "cut_in": _obj(VEHICLES, [_g("distance", "lt", 30.0), _g("abs_loc_x", "lt", 1.0)] + STRAIGHT,
                   [_tr("abs_loc_x", "decreasing", 3.0), _tc("abs_loc_x", 8.0, 1.5, "negative", 0.5)]),
    # the lead vehicle leaves the ego lane: the closest vehicle's |lateral offset| grows
    "cut_out": _obj(VEHICLES, [_g("abs_loc_x", "lt", 1.0)], [_tc("abs_loc_x", 4.0, 2.0, "positive")],
                    selection="closest"),
    # ego turns: integrated heading changes by ~45 deg or more within 8 s (+ = left)
    "ego_turn_left": _ego([], [_tc("heading", 8.0, 0.6, "positive")]),
    "ego_turn_right": _ego([], [_tc("heading", 8.0, 0.6, "negative")]),
    # ego lane change: every surrounding track shifts sideways together, with little heading change
    "ego_lane_change": _obj(VEHICLES, [_g("speed", "gt", 3.0)],
                            [_tc("loc_x", 4.0, 2.0, None, 1.0, min_fraction=0.3)], agg="consensus"),
    # the vehicle ahead slows: the gap to the closest in-lane vehicle closes quickly
    "lead_brake": _obj(VEHICLES, [_g("abs_loc_x", "lt", 1.5), _g("distance", "lt", 40.0)],
                       [_tc("distance", 3.0, 4.0, "negative")], selection="closest"),
    "ego_brake": _ego([_g("accel", "lt", -1.0)], [_tc("speed", 4.0, 3.0, "negative")]),
    # a pedestrian / cyclist crosses ahead: lateral offset changes sign close in front
    "pedestrian_crossing": _obj(["pedestrian"], [_g("distance", "lt", 25.0), _g("abs_loc_x", "lt", 1.5)],
                                [_tc("loc_x", 4.0, 2.0)]),
    "cyclist_crossing": _obj(TWO_WHEELERS, [_g("distance", "lt", 25.0), _g("abs_loc_x", "lt", 1.5)],
                             [_tc("loc_x", 4.0, 3.0)]),
    "crossing_vehicle": _obj(["car", "truck", "bus"], [_g("distance", "lt", 40.0), _g("abs_loc_x", "lt", 1.5)],
                             [_tc("loc_x", 3.0, 6.0)]),
    # collisions: something closes in fast and ends at contact range
    "collision_two_wheeler": _obj(TWO_WHEELERS, [_g("distance", "lt", 5.0)],
                                  [_tc("distance", 2.0, 5.0, "negative"), _tc("bbox_area", 2.0, 2e4, "positive", 0.5)]),
    "collision_any": _obj(None, [_g("distance", "lt", 4.0)],
                          [_tc("distance", 2.0, 5.0, "negative"), _tc("bbox_area", 2.0, 3e4, "positive", 0.5)]),
    "ego_collision": _obj(None, [_g("distance", "lt", 3.0), _g("abs_loc_x", "lt", 1.5)],
                          [_tc("distance", 2.0, 5.0, "negative")], selection="closest"),
    "rear_end": _obj(["car", "truck", "bus"], [_g("distance", "lt", 3.0), _g("abs_loc_x", "lt", 1.0)],
                     [_tc("distance", 2.0, 5.0, "negative")], selection="closest"),
    # overtaken: a vehicle beside the ego pulls ahead (forward distance grows) on one side
    "overtaken_left": _obj(VEHICLES, [_g("loc_x", "lt", -1.75), _g("loc_z", "lt", 10.0)],
                           [_tc("loc_z", 4.0, 8.0, "positive"), _tc("loc_x", 4.0, 1.0, "positive", 0.3)]),
    "overtaken_right": _obj(VEHICLES, [_g("loc_x", "gt", 1.75), _g("loc_z", "lt", 10.0)],
                            [_tc("loc_z", 4.0, 8.0, "positive"), _tc("loc_x", 4.0, 1.0, "negative", 0.3)]),
    "close_pass_large": _obj(["truck", "bus"], [_g("distance", "lt", 8.0), _g("abs_loc_x", "lt", 3.0)],
                             [_tc("loc_z", 3.0, 8.0)]),
    # whole-clip states: gates over most of the clip
    "uneventful_highway": _ego([_g("speed", "gt", 18.0, 0.9), _g("yaw_rate", "lt", 0.05, 0.95),
                                _g("yaw_rate", "gt", -0.05, 0.95)], []),
    "uneventful": _ego([_g("speed", "gt", 3.0, 0.9), _g("accel", "gt", -1.0, 0.95),
                        _g("yaw_rate", "lt", 0.08, 0.95), _g("yaw_rate", "gt", -0.08, 0.95)], []),
    # standing still, waiting (a light, a queue): below walking pace (0.5 m/s) for 3 s unbroken, in
    # a clip of any length; a rolling stop or a stop-line pause lasts ~1-2 s (the inventory form's
    # reasoning: strived/events.py, ego_stationary)
    "ego_stationary": _ego([_g("speed", "lt", 0.5, secs=3.0)], []),
}


def hand_rule(event: str) -> dict | None:
    """The hand-written rule document for a benchmark event key, or None."""
    import copy

    r = HAND_RULES.get(event)
    if r is None:
        return None
    r = copy.deepcopy(r)
    r["event"] = event
    return r
