"""The bundled sample: small synthetic driving scenarios (our own, generated, public domain) in
`strived.records/1` form, so a fresh install can search something at once, offline.

Each scenario is built from simple kinematics (constant-velocity other road users, an ego with a
speed and yaw-rate profile), expressed in the ego frame as perception would report it.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import StrivedError
from .jobs import check_cancel, report
from .records import Track, VideoInfo, VideoRecords
from .retrieval.sources import ensure_text_index
from .store.library import Library

FPS = 10.0
DURATION_S = 20.0


def _ego_profile(speed_fn, yaw_fn):
    t = np.arange(int(DURATION_S * FPS)) / FPS
    speed = np.array([speed_fn(x) for x in t], float)
    yaw = np.array([yaw_fn(x) for x in t], float)
    accel = np.gradient(speed, t)
    return t, speed, yaw, accel


def _ego_pose(t, speed, yaw):
    """Ego pose by integration: (x right, z forward at t=0, heading + = left) per sample."""
    heading = np.r_[0.0, np.cumsum(0.5 * (yaw[1:] + yaw[:-1]) * np.diff(t))]  # + = left
    px = np.zeros_like(t)
    pz = np.zeros_like(t)
    for k in range(1, len(t)):
        dt = t[k] - t[k - 1]
        v = 0.5 * (speed[k] + speed[k - 1])
        h = 0.5 * (heading[k] + heading[k - 1])
        px[k] = px[k - 1] - v * dt * math.sin(h)  # turning left moves the ego towards -x
        pz[k] = pz[k - 1] + v * dt * math.cos(h)
    return px, pz, heading


def _world_to_ego(t, speed, yaw, obj_xy):
    """Object world positions (x right, z forward at t=0) -> ego frame."""
    px, pz, heading = _ego_pose(t, speed, yaw)
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


# ---------------------------------------------------------------------------------------------
# Rendered clips: each scenario drawn as a small mp4 that matches its records frame for frame
# (the same pinhole camera the records were projected with), so the player shows real frames
# with the record boxes on the drawn road users, and perception can be run on them.

FOCAL_PX = 1000.0          # the camera of `_track`: f, principal point, horizon row, height
CX_PX, HORIZON_Y, CAMERA_HEIGHT_M = 640.0, 360.0, 1.4
CAMERA_JSON = {"focal_px": FOCAL_PX, "cx": CX_PX, "horizon_y": HORIZON_Y,
               "camera_height_m": CAMERA_HEIGHT_M, "lane_width_m": 3.5, "width": 1280}

_BGR = {"white": (225, 228, 230), "red": (40, 40, 190), "yellow": (40, 190, 230),
        "gray": (120, 120, 120), "blue": (170, 90, 40), "black": (35, 35, 35)}


def _panorama(seed: int, height: int, width: int) -> np.ndarray:
    """A 360° skyline at infinity (buildings with lit windows, trees) over a sky gradient:
    turning the camera shifts it sideways, which is what the ego-yaw estimator measures."""
    import cv2

    rng = np.random.default_rng(seed)
    sky = np.linspace(0, 1, height)[:, None]
    pano = np.empty((height, width, 3), np.uint8)
    pano[..., 0] = (235 - 40 * sky).astype(np.uint8)
    pano[..., 1] = (200 - 20 * sky).astype(np.uint8)
    pano[..., 2] = (160 + 10 * sky).astype(np.uint8)
    x = 0
    while x < width:
        w = int(rng.integers(40, 160))
        h = int(rng.integers(25, min(200, height - 5)))
        if rng.random() < 0.25:   # a tree
            cv2.circle(pano, (x + w // 4, height - h // 2), max(8, h // 3), (40, 110, 50), -1)
            cv2.rectangle(pano, (x + w // 4 - 3, height - h // 4), (x + w // 4 + 3, height), (30, 60, 80), -1)
        else:
            tone = int(rng.integers(70, 150))
            cv2.rectangle(pano, (x, height - h), (x + w - 6, height), (tone, tone + 5, tone + 12), -1)
            for wy in range(height - h + 6, height - 8, 12):
                for wx in range(x + 5, x + w - 14, 11):
                    lit = rng.random() < 0.5
                    pano[wy:wy + 6, wx:wx + 5] = (90, 200, 230) if lit else (tone - 40,) * 3
        x += w
    return pano


def _draw_object(img: np.ndarray, cls: str, box, color: str, phase: float) -> None:
    """A road user seen from behind (vehicles) or from the side (pedestrians), filling ``box``."""
    import cv2

    x1, y1, x2, y2 = (float(v) for v in box)
    w, h = x2 - x1, y2 - y1
    if w < 2 or h < 2:
        return
    P = lambda fx, fy: (int(round(x1 + fx * w)), int(round(y1 + fy * h)))  # noqa: E731
    body = _BGR.get(color, _BGR["gray"])
    dark = tuple(int(c * 0.45) for c in body)
    if cls == "pedestrian":
        cv2.ellipse(img, P(0.5, 1.0), (max(1, int(w * 0.6)), max(1, int(h * 0.03))), 0, 0, 360, (50, 50, 55), -1)
        cv2.circle(img, P(0.5, 0.09), max(1, int(h * 0.08)), (120, 160, 205), -1)
        cv2.rectangle(img, P(0.2, 0.18), P(0.8, 0.58), (140, 70, 60), -1)
        swing = 0.25 * math.sin(phase)
        th = max(1, int(w * 0.18))
        cv2.line(img, P(0.45, 0.58), P(0.45 + swing, 1.0), (60, 50, 45), th)
        cv2.line(img, P(0.55, 0.58), P(0.55 - swing, 1.0), (60, 50, 45), th)
        cv2.line(img, P(0.25, 0.22), P(0.2 - swing / 2, 0.55), (140, 70, 60), max(1, th // 2))
        cv2.line(img, P(0.75, 0.22), P(0.8 + swing / 2, 0.55), (140, 70, 60), max(1, th // 2))
        return
    cv2.ellipse(img, P(0.5, 1.0), (max(1, int(w * 0.55)), max(1, int(h * 0.06))), 0, 0, 360, (45, 45, 50), -1)
    cv2.rectangle(img, P(0.04, 0.88), P(0.2, 1.0), (25, 25, 25), -1)          # wheels
    cv2.rectangle(img, P(0.8, 0.88), P(0.96, 1.0), (25, 25, 25), -1)
    if cls in ("truck", "bus"):
        cv2.rectangle(img, P(0.0, 0.0), P(1.0, 0.9), body, -1)
        cv2.rectangle(img, P(0.0, 0.0), P(1.0, 0.9), dark, max(1, int(w * 0.02)))
        if cls == "bus":
            cv2.rectangle(img, P(0.08, 0.1), P(0.92, 0.45), (80, 70, 60), -1)  # rear window
        else:
            for fy in (0.2, 0.4, 0.6):
                cv2.line(img, P(0.05, fy), P(0.95, fy), dark, max(1, int(h * 0.01)))
    else:
        cv2.rectangle(img, P(0.12, 0.0), P(0.88, 0.42), body, -1)          # cabin
        cv2.rectangle(img, P(0.18, 0.06), P(0.82, 0.38), (95, 80, 70), -1)  # rear window
        cv2.rectangle(img, P(0.0, 0.38), P(1.0, 0.9), body, -1)             # body
        cv2.rectangle(img, P(0.3, 0.58), P(0.7, 0.7), (200, 200, 200), -1)  # plate
        cv2.rectangle(img, P(0.0, 0.78), P(1.0, 0.9), dark, -1)             # bumper
    cv2.rectangle(img, P(0.03, 0.45), P(0.18, 0.58), (30, 30, 220), -1)      # tail lights
    cv2.rectangle(img, P(0.82, 0.45), P(0.97, 0.58), (30, 30, 220), -1)


def render_clip(rec: VideoRecords, path, *, t_range_s: tuple[float, float] | None = None,
                seed: int = 0, cancel=None) -> dict:
    """Render a scenario's records to an mp4 (OpenCV ``mp4v``) at the records' size and fps.

    The road is drawn from the ego's speed and yaw (a world-fixed asphalt texture slides and turns
    with the ego; dashed lane marks move with the distance driven), a skyline at infinity turns with
    its yaw, and each track is drawn into its record bbox at every
    sampled frame, far to near. ``t_range_s`` renders only [t0, t1) (frame 0 of the file is then
    the first sample in the range: pass the matching records slice if you index it).
    Returns {"path", "n_frames", "seconds"}. Raises OSError when the file cannot be written.
    """
    import time

    import cv2

    t_start = time.perf_counter()
    info = rec.info
    W, H = int(info.width or 1280), int(info.height or 720)
    sx, sy = W / 1280.0, H / 720.0
    fps = float(info.fps)
    t = np.asarray(rec.t, float)
    n = len(t)
    speed = np.nan_to_num(np.asarray(rec.ego.get("speed", np.zeros(n)), float))
    yaw = np.nan_to_num(np.asarray(rec.ego.get("yaw_rate", np.zeros(n)), float))
    pose_x, pose_z, heading = _ego_pose(t, speed, yaw)
    dist = np.r_[0.0, np.cumsum(0.5 * (speed[1:] + speed[:-1]) * np.diff(t))]
    keep = np.ones(n, bool) if t_range_s is None else (t >= t_range_s[0]) & (t < t_range_s[1])
    view = _view(W, H, sx, sy, seed)

    path = str(path)
    vw = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), fps, (W, H))
    if not vw.isOpened():
        raise OSError(f"cannot write a video to {path}")
    order = sorted(rec.tracks, key=lambda tr: -float(np.nanmean(tr.fields["distance"]))
                   if "distance" in tr.fields and len(tr.pos) else 0.0)
    by_track = [(tr, {int(p): i for i, p in enumerate(tr.pos)}) for tr in order]
    written = 0
    try:
        for k in np.flatnonzero(keep):
            if cancel is not None and cancel():
                break
            img = np.empty((H, W, 3), np.uint8)
            _draw_scene(img, view, heading[k], dist[k], pose_x[k], pose_z[k])
            for tr, at in by_track:
                i = at.get(int(k))
                if i is None or tr.bbox is None:
                    continue
                b = tr.bbox[i] * np.array([sx, sy, sx, sy], np.float32)
                _draw_object(img, tr.cls, b, tr.attrs.get("color", "gray"),
                             phase=2.0 * math.pi * 1.6 * t[k] + tr.track_id)
            vw.write(img)
            written += 1
    finally:
        vw.release()
    return {"path": path, "n_frames": written, "seconds": time.perf_counter() - t_start}


def _view(W: int, H: int, sx: float, sy: float, seed: int) -> dict:
    """What every frame of a clip shares: the horizon row, the skyline panorama and each column's
    bearing, and per ground pixel its distance and lateral offset with the road and lane-mark masks."""
    hy = int(round(HORIZON_Y * sy))
    f, cx = FOCAL_PX * sx, CX_PX * sx
    pano_w = int(2 * math.pi * f)
    pano = _panorama(seed + 17, hy, pano_w)
    cols = np.arange(W, dtype=float)
    beta = -np.arctan((cols - cx) / f)                         # + = left of the optical axis
    rows = np.arange(hy + 1, H, dtype=float)
    z = FOCAL_PX * CAMERA_HEIGHT_M / ((rows - hy) / sy)        # ground distance of each row, m
    X = (cols[None, :] - cx) * z[:, None] / f                  # lateral offset, m (+ right)
    return {"hy": hy, "pano": pano, "pano_w": pano_w, "beta": beta, "z": z, "X": X,
            "road": np.abs(X) < 7.0, "edge": (np.abs(np.abs(X) - 5.25) < 0.08),
            "inner": (np.abs(np.abs(X) - 1.75) < 0.07)}


def _draw_scene(img: np.ndarray, view: dict, heading: float, s: float, pose_x: float, pose_z: float) -> None:
    """Skyline and road of one frame into ``img``: the ego at (``pose_x``, ``pose_z``) with
    ``heading``, ``s`` m driven."""
    hy, pano_w, z, X, road = view["hy"], view["pano_w"], view["z"], view["X"], view["road"]
    alpha = view["beta"] + heading
    idx = np.round((alpha % (2 * math.pi)) / (2 * math.pi) * pano_w).astype(int) % pano_w
    img[:hy] = view["pano"][:, idx]
    zz = z[:, None] + s
    # the asphalt's texture is fixed to the world: it slides towards the camera as the ego
    # drives and turns with the ego's heading (lane marks follow the ego's lane)
    ch, sh = math.cos(heading), math.sin(heading)
    wx = pose_x + X * ch - z[:, None] * sh
    wz = pose_z + X * sh + z[:, None] * ch
    tex = (np.sin(wz * 2.1 + 0.5 * np.sin(wx * 0.37)) * np.sin(wz * 0.7 + wx * 0.9) * 8).astype(np.int16)
    ground = np.where(road, 92, 70).astype(np.int16) + tex
    g = np.clip(ground, 0, 255).astype(np.uint8)
    img[hy + 1:, :, 0] = g
    img[hy + 1:, :, 1] = np.where(road, g, np.clip(ground + 40, 0, 255).astype(np.uint8))
    img[hy + 1:, :, 2] = np.where(road, g, np.clip(ground - 10, 0, 255).astype(np.uint8))
    dashes = view["inner"] & (((zz % 12.0) < 4.0))
    img[hy + 1:][view["edge"] | dashes] = (235, 235, 235)
    img[hy] = img[hy - 1]


SAMPLE_VERSION = 2
SAMPLE_QUERIES = ("a car cuts in from the right", "we turn left at a junction",
                  "the ego car brakes hard", "a pedestrian crosses in front of the car")


def build_sample_library(folder, *, progress=None, cancel=None) -> dict:
    """The bundled sample as a ready library: ``folder/clips/*.mp4`` (rendered, with the camera's
    ``camera.json``) and ``folder/library`` holding the scenario records with ``video.path`` set to
    the clips, plus the BM25 (and, when its model is installed, dense) index.

    Idempotent: a complete sample of this version is reused as is. Progress stages ``"render"``
    (clips) and the text-index stages. Returns {"library", "clips", "notices", "reused"}.
    Raises OSError when the folder cannot be written; Cancelled when ``cancel()`` stops it.
    """
    import json
    from pathlib import Path

    root = Path(folder)
    clips, lib_dir, stamp = root / "clips", root / "library", root / "sample.json"
    recs = sample_scenarios()
    try:
        done = json.loads(stamp.read_text())
    except (OSError, ValueError):
        done = {}
    if (done.get("version") == SAMPLE_VERSION and (lib_dir / "library.sqlite").exists()
            and all((clips / f"{r.info.id}.mp4").exists() for r in recs)):
        return {"library": str(lib_dir), "clips": str(clips), "notices": done.get("notices", []),
                "reused": True}
    clips.mkdir(parents=True, exist_ok=True)
    (clips / "camera.json").write_text(json.dumps(CAMERA_JSON, indent=1))
    for i, r in enumerate(recs):
        report(progress, "render", i, len(recs), item=r.info.id, message="drawing the sample clips")
        check_cancel(cancel)
        out = clips / f"{r.info.id}.mp4"
        tmp = clips / f".{r.info.id}.part.mp4"
        render_clip(r, tmp, seed=i, cancel=cancel)
        check_cancel(cancel)
        tmp.replace(out)
        r.info.path = str(out.resolve())
    report(progress, "render", len(recs), len(recs), message="drawing the sample clips")
    notices: list[str] = []
    with Library.open(lib_dir, create=True) as lib:
        lib.add_videos(recs)

        try:
            ensure_text_index(lib, progress=progress, cancel=cancel)
        except StrivedError as e:   # no embedder in this installation: BM25 only, said aloud
            ensure_text_index(lib, progress=progress, cancel=cancel, dense=False)
            notices.append(f"dense retrieval unavailable: {e}")
    stamp.write_text(json.dumps({"version": SAMPLE_VERSION, "notices": notices}))
    return {"library": str(lib_dir), "clips": str(clips), "notices": notices, "reused": False}
