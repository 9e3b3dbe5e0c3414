"""Sanity of the whole clip: does it look like a camera moving forward over a flat road?

A video whose road does not fit a flat road (rotated, upside down, camera not facing the road), or
"turning on the spot", publishes no speed (and, sideways or upside down, no yaw), with a reason.
"Fits" is judged on the share of the road's change that the planar motion leaves unexplained above
the image noise (``noise_floor.fit_ratio``), locally first: a bad stretch does not void the clip.
"""

from __future__ import annotations

import numpy as np

from ..geometry import CameraModel
from .config import EGO, FIELDS, REASON_NOT_ROAD, REASON_SMOOTH, EgoConfig
from .pairs import Evidence, PairSeries


def thirds(gray: np.ndarray) -> tuple[float, float, float, float]:
    """Mean brightness and mean absolute vertical+horizontal gradient of the top and bottom thirds."""
    h = gray.shape[0] // 3
    g = gray.astype(np.float32)
    out = []
    for part in (g[:h], g[-h:]):
        tex = float(np.abs(np.diff(part, axis=0)).mean() + np.abs(np.diff(part, axis=1)).mean()) if h > 1 else 0.0
        out.append((float(part.mean()), tex))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def upside_down(ev: Evidence, cfg: EgoConfig = EGO) -> bool:
    """Sky and scenery below the road? In daylight the top third (sky, trees, buildings) is
    brighter and busier than the road in the bottom third; both reversed means the picture is
    upside down. Dark video is not judged (a lit road under a black sky reverses brightness)."""
    if len(ev.sky_stats) < 3 or float(np.median(ev.brightness)) < 2 * cfg.DARK_MEAN_GRAY:
        return False
    top_b, bot_b, top_g, bot_g = np.median(np.asarray(ev.sky_stats), axis=0)
    return bool(bot_b - top_b > cfg.UPSIDE_DOWN_BRIGHTER and bot_g > 1.3 * top_g)


def sideways_or_upside_down(ev: Evidence, cam: CameraModel, cfg: EgoConfig = EGO) -> bool:
    """A camera mounted sideways (portrait frames: dashcams record landscape) or upside down."""
    return cam.height > cam.width or upside_down(ev, cfg)


def reasons(ev: Evidence, cfg: EgoConfig = EGO) -> dict:
    """Why fields could not be estimated, from what the pairs saw (None when no problem)."""
    steps = ev.steps
    if len(ev.t_s) < 3:
        r = "video too short"
        return {f: r for f in FIELDS}
    if not steps:
        return {f: "video too short" for f in FIELDS}
    frozen = np.mean([st.frozen for st in steps])
    nothing_moves = np.mean([st.frozen or (np.isfinite(st.bg_flow_px) and st.bg_flow_px < cfg.STILL_FLOW_PX
                                            and not st.objects_move) for st in steps])
    dark = float(np.median(ev.brightness)) < cfg.DARK_MEAN_GRAY
    no_tex = np.mean([st.road_pixels < cfg.ROAD_MIN_PIXELS for st in steps if not st.frozen] or [1.0])
    dark_road = np.mean([st.road_brightness < cfg.DARK_ROAD_GRAY for st in steps if not st.frozen] or [0.0])
    dark = dark or dark_road > 0.5
    no_fit = np.mean([st.ground is None for st in steps if not st.frozen] or [1.0])
    speed = None
    if frozen > 0.5:
        speed = "static camera / frozen frames"
    elif nothing_moves > 0.5:
        speed = "static camera / frozen frames (nothing moves: a parked car cannot be told from a frozen feed)"
    elif no_tex > 0.5:
        speed = "night: too dark for road texture" if dark else "no road texture"
    elif no_fit > 0.5:
        speed = REASON_NOT_ROAD
    far = np.mean([np.isfinite(st.rates[0]) for st in steps])
    yaw = speed if far < 0.5 else None
    jolt = None if far >= 0.5 else (speed or "too few far background points")
    return {"speed": speed, "accel": speed, "yaw_rate": yaw, "jolt": jolt, "dark": dark}


def judge_flat_road(ps: PairSeries, ev: Evidence, why: dict, cam: CameraModel,
                    cfg: EgoConfig = EGO) -> tuple[bool, np.ndarray, bool]:
    """The video as a whole must look like a camera moving over a flat road. Drops the pairs that
    do not and sets the reasons in ``why``. Returns (not a road, the pairs judged locally not to
    show one, far-point yaw void too)."""
    steps = ev.steps
    m = len(steps)
    w_far_off = False
    ratios = [st.fit_ratio for st in steps if np.isfinite(st.fit_ratio)]
    not_road = bool(ratios) and float(np.median(ratios)) > cfg.MAX_MEDIAN_RESID_RATIO
    local_bad = np.zeros(m, bool)
    if not_road:
        # judged locally first: the stretches where the road fits (the median over the pairs
        # within +-NOT_ROAD_LOCAL_S) keep their measurements when they are a fair share of the clip
        t_pair = np.array([ev.t_s[st.j] for st in steps])
        fr = np.array([st.fit_ratio for st in steps])
        for k in range(m):
            near_k = (np.abs(t_pair - t_pair[k]) <= cfg.NOT_ROAD_LOCAL_S) & np.isfinite(fr)
            local_bad[k] = not near_k.any() or float(np.median(fr[near_k])) > cfg.MAX_MEDIAN_RESID_RATIO
        fitted = np.isfinite(ps.v)
        if fitted.sum() and (fitted & ~local_bad).sum() >= max(cfg.MIN_STEPS_FOR_SPEED + 1,
                                                               cfg.NOT_ROAD_MIN_KEPT * fitted.sum()):
            not_road = False
            ps.drop(local_bad)
        else:
            local_bad[:] = False
    if not_road:
        change = [st.resid_still for st in steps if np.isfinite(st.resid_still)]
        if float(np.median(change)) < cfg.SMOOTH_ROAD_CHANGE:
            # the road pixels barely change between frames: smooth asphalt, blur or compression
            r = "night: too dark for road texture" if why.get("dark") else REASON_SMOOTH
            why["speed"] = why["accel"] = r
        else:
            why["speed"] = why["accel"] = REASON_NOT_ROAD
            # yaw too when the camera is sideways (portrait frames) or upside down: that turns
            # the far points' sign and axis. A landscape, upright view whose road does not fit
            # (bonnet, tilt, a busy street) still shows the scenery rotating: keep far-point yaw
            if sideways_or_upside_down(ev, cam, cfg):
                w_far_off = True
                why["yaw_rate"] = REASON_NOT_ROAD
        ps.drop(slice(None))
    return not_road, local_bad, w_far_off


def judge_spin(ps: PairSeries, ev: Evidence, why: dict, cam: CameraModel, not_road: bool,
               local_bad: np.ndarray, w_far_off: bool, cfg: EgoConfig = EGO) -> tuple[bool, bool]:
    """A car cannot turn on the spot: |yaw rate| <= |v| / MIN_TURN_RADIUS_M (+ noise). Turning
    "without moving" is far scenery fitted as road (an upside-down camera, no road in view).
    Returns (not a road, far-point yaw void), updated."""
    v, w_road = ps.v, ps.w_road
    spin = []
    for k, st in enumerate(ev.steps):
        w = w_road[k] if np.isfinite(w_road[k]) else st.rates[0]
        if np.isfinite(v[k]) and np.isfinite(w):
            bad = abs(w) > 0.05 + abs(v[k]) / cfg.MIN_TURN_RADIUS_M
            spin.append(bad)
            if bad:
                ps.drop(k)
    if not not_road and upside_down(ev, cfg):
        spin = [True]
    # most road fits rejected although the road had texture: the view is not a road ahead
    # (over the stretches judged to show a road, when only some do)
    attempted = sum(1 for k, st in enumerate(ev.steps)
                    if not st.frozen and st.road_pixels >= cfg.ROAD_MIN_PIXELS and not local_bad[k])
    if not not_road and attempted >= 5 and np.isfinite(v).sum() < 0.3 * attempted:
        spin = [True]
    if spin and np.mean(spin) > 0.25 and not not_road:
        not_road = True
        ps.drop(slice(None))
        why["speed"] = why["accel"] = REASON_NOT_ROAD
        if sideways_or_upside_down(ev, cam, cfg):
            w_far_off = True
            why["yaw_rate"] = REASON_NOT_ROAD
    return not_road, w_far_off
