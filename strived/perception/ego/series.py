"""The per-frame ego series from what the frame pairs gave.

Each pair's road motion is re-expressed at the final horizon and metric scale (speed ``t_z/dt``,
road yaw, pitch rate); the clip is judged (``sanity``), still pairs marked (``stationary``); speed
and acceleration come from a constant-acceleration Kalman filter + RTS smoother over the per-pair
speeds (at each interval's middle, innovation-gated), yaw rate likewise from the far-point and
road yaw, fused per pair, except where the camera is shaken (``jolt``).
"""

from __future__ import annotations

import math

import numpy as np

from ..geometry import CameraModel
from .config import EGO, FIELDS, EgoConfig
from .horizon import condition_on_horizon, fuse_horizon, local_horizon, refit_at_horizon
from .jolt import jolt_series, shaken
from .pairs import Evidence, PairSeries
from .sanity import judge_flat_road, judge_spin, reasons
from .scale import scale_model
from .smoother import ca_smooth, near_measurement
from .stationary import (Scenery, apply_stationary, drop_still_road_against_moving_scene, keep_lasting_stops,
                         mark_still)


def ego_series(ev: Evidence, scenery: Scenery, cam: CameraModel, cfg: EgoConfig = EGO) -> dict:
    """Per-frame ``speed`` (m/s), ``accel`` (m/s^2), ``yaw_rate`` (rad/s, + left), ``jolt``
    (rad/s), ``speed_conf`` (0..1), ``stationary`` (1/0/NaN) and ``status`` per field."""
    t = np.asarray(ev.t_s, dtype=np.float64)
    n = len(t)
    out = {k: np.full(n, np.nan) for k in ("speed", "accel", "yaw_rate", "jolt", "speed_conf", "stationary")}
    hz, hz_sd, hz_src = fuse_horizon(cam, ev.horizon_obs, cfg)
    out["horizon_y"] = hz
    out["horizon_source"] = hz_src
    why = reasons(ev, cfg)
    if n < 3 or len(ev.steps) < cfg.MIN_STEPS_FOR_SPEED:
        r = "video too short" if n < 3 else why["speed"] or "video too short"
        out["status"] = {f: _status(False, 0.0, r) for f in FIELDS}
        return out

    # per pair: speed and yaw at the final horizon, stillness
    j = np.array([st.j for st in ev.steps])
    ps, f_fin, f_lsd, h_lsd, out["camera_estimate"] = _pair_motion(ev, cam, hz, hz_sd, hz_src, cfg)
    not_road, local_bad, w_far_off = judge_flat_road(ps, ev, why, cam, cfg)
    drop_still_road_against_moving_scene(ps, ev.steps, cam, ev.scale, cfg)
    _, w_far_off = judge_spin(ps, ev, why, cam, not_road, local_bad, w_far_off, cfg)
    mark_still(ps, ev.steps, scenery, cfg)
    keep_lasting_stops(ps, cfg)
    # speed and accel: constant-acceleration smoother, measurements at each interval's middle
    zs = np.full(n, np.nan)
    rs = np.full(n, np.nan)
    zs[j], rs[j] = ps.v, ps.v_sd ** 2
    sp, ac, sp_sd, used = ca_smooth(t, zs, rs, cfg.JERK_PSD, cfg)
    jolt, yaw, used_y, shaken_f = _yaw_and_jolt(ev, ps, t, j, cam.focal_px / f_fin, w_far_off, cfg)
    # publish only near accepted measurements
    near = near_measurement(t, used, cfg.MAX_GAP_S)
    near_y = near_measurement(t, used_y, cfg.MAX_GAP_S)
    out["speed"] = np.where(near, sp, np.nan)
    out["accel"] = np.where(near, ac, np.nan)
    out["yaw_rate"] = np.where(near_y & ~shaken_f, yaw, np.nan)
    conf = _speed_conf(ev, cam, sp, sp_sd, used, math.hypot(f_lsd, h_lsd), hz_sd, cfg)
    out["speed_conf"] = np.where(near, conf, np.nan)
    apply_stationary(out, ps, j, n)
    out["jolt"] = jolt
    status = {}
    for f in FIELDS:
        cov = float(np.isfinite(out[f]).mean()) if n else 0.0
        r = None if cov >= 0.5 else why.get(f) or why.get("speed") or "too few usable frame pairs"
        status[f] = _status(cov > 0, cov, r)
    out["status"] = status
    return out


def _pair_motion(ev: Evidence, cam: CameraModel, hz: float, hz_sd: float, hz_src: str, cfg: EgoConfig):
    """Each fitted pair's speed, road yaw and pitch rate at its local horizon and the final metric
    scale. Returns (the pairs' series, focal length, its log sd, height log sd, camera estimate)."""
    steps = ev.steps
    m = len(steps)
    dt = np.array([st.dt for st in steps])
    ps = PairSeries.empty(m)
    local_hz, local_sd = local_horizon(steps, np.asarray(ev.t_s, dtype=np.float64), hz, hz_sd, cfg)
    f_fin, f_lsd, h_fin, h_lsd, cam_est = scale_model(cam, hz, hz_src, ev.focal_obs, ev.car_obs, cfg)
    # pairs fitted without a horizon of their own, or far from the final one (linearising a
    # large shift is poor), are re-expressed at the final horizon by a full refit
    fixed = [k for k, st in enumerate(steps)
             if st.ground is not None and (not st.ground.get("horizon_informative")
                                           or abs(st.ground["horizon_y"] - local_hz[k]) > 3.0 * local_sd[k])]
    refit = {}
    if fixed:
        qs, _ = refit_at_horizon([steps[k].ground for k in fixed], [local_hz[k] for k in fixed], cam)
        refit = {k: qs[i] for i, k in enumerate(fixed)}
    for k, st in enumerate(steps):
        if st.ground is None:
            continue
        if k in refit:
            q, cq = refit[k], st.ground["cov"]
            if abs(st.ground["x"][2]) > 1e-6:  # the relative precision carries over
                cq = cq * (q[2] / st.ground["x"][2]) ** 2
        else:
            q, cq = condition_on_horizon(st.ground, local_hz[k], local_sd[k])
        if not np.all(np.isfinite(q)):
            continue
        # metric scale of the final camera: depth (so speed) grows with focal and height
        kf = f_fin / st.ground["focal_px"]
        ks = kf * h_fin / st.ground["camera_height_m"]
        ps.v[k] = ks * q[2] / dt[k]
        ps.v_sd[k] = math.hypot(max(ks * math.sqrt(max(cq[2, 2], 0.0)) / dt[k], cfg.SPEED_SIGMA_FLOOR),
                                cfg.SPEED_REL_SIGMA * ps.v[k])
        # a pair whose fit leaves much of the change unexplained counts for less
        ps.v_sd[k] *= 1.0 + 4.0 * max(0.0, st.ground["ratio"] - 0.25)
        ps.w_road[k] = q[0] / dt[k] / kf
        ps.w_road_sd[k] = max(math.sqrt(max(cq[0, 0], 0.0)) / dt[k] / kf, cfg.YAW_SIGMA_FLOOR)
        ps.p_rate[k] = math.atan(q[3] / f_fin) / dt[k]
    return ps, f_fin, f_lsd, h_lsd, cam_est


def _yaw_and_jolt(ev: Evidence, ps: PairSeries, t: np.ndarray, j: np.ndarray, far_scale: float,
                  w_far_off: bool, cfg: EgoConfig):
    """Jolt per frame, and the yaw rate: far-point and road measurements fused per pair (the far
    points' rescaled by ``far_scale`` to the final focal length), then smoothed. Returns (jolt,
    yaw rate, accepted yaw measurements, shaken frames)."""
    w_far = np.array([st.rates[0] for st in ev.steps]) * far_scale
    if w_far_off:
        w_far[:] = np.nan
    m = len(ev.steps)
    n = len(t)
    wz = np.full(m, np.nan)
    wr = np.full(m, np.nan)
    # a shaken camera (an impact, a loose mount, a hand-held pan) rotates faster than any car
    # yaws: its rotation there is the camera's, not the vehicle's, so no yaw is measured there
    jolt = jolt_series(ev.steps, t, ps.p_rate, ps.w_road, cfg)
    shaken_f = shaken(jolt, cfg)
    for k in range(m):
        if shaken_f[j[k]]:
            continue
        vals, var = [], []
        if np.isfinite(w_far[k]):
            vals.append(w_far[k])
            var.append(cfg.YAW_SIGMA_FAR ** 2)
        if np.isfinite(ps.w_road[k]):
            vals.append(ps.w_road[k])
            var.append(ps.w_road_sd[k] ** 2)
        if vals:
            wi = 1.0 / np.asarray(var)
            wz[k] = float(np.dot(wi, vals) / wi.sum())
            wr[k] = float(1.0 / wi.sum())
    zy = np.full(n, np.nan)
    ry = np.full(n, np.nan)
    zy[j], ry[j] = wz, wr
    yaw, _, _, used_y = ca_smooth(t, zy, ry, cfg.YAW_ACC_PSD, cfg)
    return jolt, yaw, used_y, shaken_f


def _speed_conf(ev: Evidence, cam: CameraModel, sp: np.ndarray, sp_sd: np.ndarray, used: np.ndarray,
                rel: float, hz_sd: float, cfg: EgoConfig) -> np.ndarray:
    """Confidence (0..1) of the smoothed speed from its expected error: the smoother's, the camera
    scale's (``rel``, relative) and the horizon's; lower for dark video and for few pairs."""
    # speed ~ 1/(y - y_h)^2, road pixels typically 0.3 H below the horizon
    rel_hz = min(1.0, 2.0 * hz_sd / (0.3 * cam.height))
    err = np.sqrt(sp_sd ** 2 + (rel ** 2 + rel_hz ** 2) * sp ** 2)
    tol = np.maximum(cfg.SPEED_CONF_TOL_MPS, cfg.SPEED_CONF_TOL_REL * np.abs(sp))
    conf = 1.0 / (1.0 + (err / tol) ** 2)
    # darker video: blur, noise and moving light make the road flow less reliable
    road_b = [st.road_brightness for st in ev.steps if np.isfinite(st.road_brightness)]
    bright = float(np.median(road_b)) if road_b else float(np.median(ev.brightness))
    conf *= float(np.clip((bright - cfg.DARK_ROAD_GRAY) / (cfg.DARK_MEAN_GRAY - cfg.DARK_ROAD_GRAY), 0.2, 1.0))
    conf *= min(1.0, used.sum() / 5.0)  # a handful of pairs is not a track record
    return conf


def _status(estimated: bool, coverage: float, reason: str | None) -> dict:
    return {"estimated": bool(estimated), "coverage": round(float(coverage), 4),
            "reason": None if estimated and reason is None else reason, "source": "video"}
