"""The bundled sample: small synthetic driving scenarios (our own, generated, public domain) in
`strived.records/1` form, so a fresh install can search something at once, offline.

Each scenario is built from simple kinematics (constant-velocity other road users, an ego with a
speed and yaw-rate profile), expressed in the ego frame as perception would report it.
"""

from __future__ import annotations

import math

import numpy as np

from .records import Track, VideoInfo, VideoRecords

FPS = 10.0
DURATION_S = 20.0


def _ego_profile(speed_fn, yaw_fn):
    t = np.arange(int(DURATION_S * FPS)) / FPS
    speed = np.array([speed_fn(x) for x in t], float)
    yaw = np.array([yaw_fn(x) for x in t], float)
    accel = np.gradient(speed, t)
    return t, speed, yaw, accel


def _world_to_ego(t, speed, yaw, obj_xy):
    """Ego pose by integration; object world positions (x right, z forward at t=0) -> ego frame."""
    heading = np.r_[0.0, np.cumsum(0.5 * (yaw[1:] + yaw[:-1]) * np.diff(t))]  # + = left
    px = np.zeros_like(t)
    pz = np.zeros_like(t)
    for k in range(1, len(t)):
        dt = t[k] - t[k - 1]
        v = 0.5 * (speed[k] + speed[k - 1])
        h = 0.5 * (heading[k] + heading[k - 1])
        px[k] = px[k - 1] - v * dt * math.sin(h)  # turning left moves the ego towards -x
        pz[k] = pz[k - 1] + v * dt * math.cos(h)
    ox, oz = obj_xy
    dx, dz = ox - px, oz - pz
    c, s = np.cos(heading), np.sin(heading)
    # rotate world offsets into the ego frame (ego forward = heading)
    x_e = c * dx + s * dz
    z_e = -s * dx + c * dz
    return x_e, z_e


def _track(tid, cls, t, x_e, z_e, size=(1.8, 1.5), visible=None):
    vis = (z_e > 1.0) & (z_e < 80) & (np.abs(x_e) < 0.9 * z_e + 4)
    if visible is not None:
        vis &= visible
    pos = np.flatnonzero(vis).astype(np.int32)
    f = 1000.0  # focal length of the sample's 1280x720 camera, px
    w_px = f * size[0] / z_e[pos]
    h_px = f * size[1] / z_e[pos]
    cx = 640 + f * x_e[pos] / z_e[pos]
    bottom = 360 + f * 1.4 / z_e[pos]
    bbox = np.stack([cx - w_px / 2, bottom - h_px, cx + w_px / 2, bottom], 1).astype(np.float32)
    fields = {"distance": z_e[pos], "loc_x": x_e[pos], "loc_z": z_e[pos],
              "lane_rel": np.round(x_e[pos] / 3.5), "bbox_area": w_px * h_px, "score": np.full(len(pos), 0.9)}
    return Track(tid, cls, pos, {k: np.asarray(v, np.float32) for k, v in fields.items()}, bbox,
                 {"color": {"car": "white", "truck": "red", "bus": "yellow"}.get(cls, "gray")})


def _video(vid, desc, t, speed, yaw, accel, objs):
    tracks = []
    for k, (cls, xs, zs, size) in enumerate(objs, start=1):
        x_e, z_e = _world_to_ego(t, speed, yaw, (np.asarray(xs, float), np.asarray(zs, float)))
        tr = _track(k, cls, t, x_e, z_e, size)
        if len(tr.pos) >= 2:
            tracks.append(tr)
    info = VideoInfo(id=vid, path=None, fps=FPS, n_frames=len(t), width=1280, height=720,
                     source=f"STRIVE-D generated sample scenario ({desc}); public domain",
                     attrs={"daynight": "day", "sample": True, "description": desc})
    return VideoRecords(info, np.arange(len(t), dtype=np.int64), t,
                        {"speed": speed, "yaw_rate": yaw, "accel": accel}, tracks)


def _lane_car(t, lane_x, z0, v):
    return np.full_like(t, lane_x), z0 + v * t


def sample_scenarios() -> list[VideoRecords]:
    """Six deterministic scenarios: cut-in from the right, left turn, hard brake, pedestrian
    crossing, uneventful highway, standing still."""
    out = []
    # 1. a white car cuts in from the right lane at 6-9 s, 12 m ahead
    t, sp, yw, ac = _ego_profile(lambda x: 14.0, lambda x: 0.0)
    cx = np.where(t < 6, 3.5, np.where(t < 9, 3.5 * (1 - (t - 6) / 3), 0.0))
    out.append(_video("sample_cut_in_right", "a car cuts in from the right", t, sp, yw, ac, [
        ("car", cx, 14.0 * t + 12.0 + np.where(t < 6, 0, 0), (1.8, 1.5)),
        ("car", *_lane_car(t, -3.5, 30.0, 14.5), (1.8, 1.5)),
        ("truck", *_lane_car(t, 0.0, 60.0, 15.0), (2.5, 3.5)),
    ]))
    # 2. ego turns left at a junction (about 80 degrees over 5 s)
    t, sp, yw, ac = _ego_profile(lambda x: 8.0 if x < 7 else 5.0, lambda x: 0.28 if 8 <= x < 13 else 0.0)
    out.append(_video("sample_left_turn", "ego turns left at a junction", t, sp, yw, ac, [
        ("car", np.full_like(t, 3.0), np.full_like(t, 40.0), (1.8, 1.5)),
        ("car", np.full_like(t, -20.0), np.full_like(t, 70.0), (1.8, 1.5)),
        ("pedestrian", np.full_like(t, -12.0), np.full_like(t, 60.0), (0.6, 1.7)),
    ]))
    # 3. ego brakes hard (15 -> 2 m/s between 5 and 8 s) behind a slowing truck
    t, sp, yw, ac = _ego_profile(lambda x: 15.0 if x < 5 else (15.0 - 13.0 * (x - 5) / 3 if x < 8 else 2.0),
                                 lambda x: 0.0)
    lead_z = np.cumsum(np.where(t < 4.5, 15.0, np.where(t < 7.5, 15.0 - 13.0 * (t - 4.5) / 3, 2.0))) / FPS + 20
    out.append(_video("sample_hard_brake", "the ego car brakes hard behind a red truck", t, sp, yw, ac, [
        ("truck", np.zeros_like(t), lead_z, (2.5, 3.5)),
        ("car", *_lane_car(t, 3.5, 5.0, 12.0), (1.8, 1.5)),
    ]))
    # 4. a pedestrian crosses 12 m ahead while the ego slows
    t, sp, yw, ac = _ego_profile(lambda x: max(2.0, 8.0 - 0.5 * x), lambda x: 0.0)
    ego_z = np.r_[0.0, np.cumsum(0.5 * (sp[1:] + sp[:-1]) / FPS)]
    px = np.where(t < 8, -5.0, np.where(t < 14, -5.0 + 10.0 * (t - 8) / 6, 5.0))
    out.append(_video("sample_pedestrian_crossing", "a pedestrian crosses in front of the car", t, sp, yw, ac, [
        ("pedestrian", px, ego_z[np.searchsorted(t, 11.0)] + 12.0 + 0 * t, (0.6, 1.7)),
        ("car", *_lane_car(t, -3.5, 25.0, 6.0), (1.8, 1.5)),
    ]))
    # 5. uneventful highway cruising
    t, sp, yw, ac = _ego_profile(lambda x: 27.0, lambda x: 0.0)
    out.append(_video("sample_highway", "uneventful highway cruising", t, sp, yw, ac, [
        ("car", *_lane_car(t, 3.5, 40.0, 27.5), (1.8, 1.5)),
        ("truck", *_lane_car(t, -3.5, 25.0, 26.5), (2.5, 3.5)),
        ("car", *_lane_car(t, 0.0, 55.0, 27.0), (1.8, 1.5)),
    ]))
    # 6. ego waits at a red light while cross traffic passes
    t, sp, yw, ac = _ego_profile(lambda x: 0.0, lambda x: 0.0)
    out.append(_video("sample_waiting", "the ego car stands still at a junction while cars cross", t, sp, yw, ac, [
        ("car", -30.0 + 8.0 * t, np.full_like(t, 18.0), (1.8, 1.5)),
        ("bus", 40.0 - 6.0 * t, np.full_like(t, 24.0), (2.6, 3.2)),
    ]))
    return out
