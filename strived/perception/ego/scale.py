"""The metric scale: focal length x camera height.

From camera.json they are trusted; otherwise the assumed FOV and 1.3 m are fused with turns (the
far points' rotation flow gives the focal length) and with cars standing on the road (the camera
height), and ``speed_conf`` carries what is left of their uncertainty.
"""

from __future__ import annotations

import math

import numpy as np

from ..detect_base import CLASS_INDEX
from ..geometry import CameraModel
from .config import EGO, EgoConfig


def car_observations(boxes: np.ndarray, classes, scores, cam: CameraModel,
                     cfg: EgoConfig = EGO) -> list[tuple[float, float]]:
    """Untruncated, confident car boxes (bottom y, height) for the camera-height estimate."""
    cls = np.asarray(classes).reshape(-1)
    is_car = np.array([(c == "car") if isinstance(c, str) else int(c) == CLASS_INDEX["car"] for c in cls])
    sc = np.ones(len(boxes)) if scores is None else np.asarray(scores, dtype=np.float64).reshape(-1)
    hb = boxes[:, 3] - boxes[:, 1]
    ok = is_car & (sc >= cfg.CAR_MIN_SCORE) & (hb >= cfg.CAR_MIN_HEIGHT * cam.height) \
        & (boxes[:, 1] > 1) & (boxes[:, 3] < cam.height - 2) & (boxes[:, 0] > 1) & (boxes[:, 2] < cam.width - 2)
    return [(float(b[3]), float(b[3] - b[1])) for b in boxes[ok]]


def scale_model(cam: CameraModel, hz: float, hz_src: str, focal_obs, car_obs, cfg: EgoConfig = EGO):
    """Focal length and camera height for the metric scale, with their log-sd and provenance.

    From camera.json they are kept. Otherwise the focal length comes from turns (far points'
    rotation flow) fused with the assumed-FOV prior, and the camera height from cars standing on
    the road (``h = 1.5 m * (y_b - y_h) / box height``) fused with the 1.3 m prior -- the latter
    only when the horizon was not itself derived from cars with an assumed height.
    Returns (focal, its log sd, height, its log sd, the estimate as published)."""
    if cam.focal_source == "config":
        f_fin, f_lsd, f_src = cam.focal_px, cfg.CAM_REL_ERR_CONFIG, "config"
    else:
        f_fin, f_lsd, used = fuse_log(cam.focal_px, cfg.PRIOR_LOG_SD, focal_obs, 0.03, cfg.FOCAL_MIN_OBS)
        f_src = "turns" if used else "assumed_fov"
    if height_configured(cam):
        h_fin, h_lsd, h_src = cam.camera_height_m, cfg.CAM_REL_ERR_CONFIG, "config"
    else:
        obs = []
        if hz_src in ("road_flow", "config", "lanes"):
            obs = [cfg.CAR_HEIGHT_M * (yb - hz) / hb for yb, hb in car_obs
                   if yb - hz > cfg.ROAD_MIN_BELOW_HORIZON * cam.height]
        # boxes of one car over consecutive frames are not independent: ~5 frames per sample
        h_fin, h_lsd, used = fuse_log(cam.camera_height_m, cfg.PRIOR_LOG_SD, obs, 0.08, cfg.CAR_MIN_OBS, 0.2)
        h_src = "cars" if used else "assumed"
    est = {"focal_px": round(f_fin, 1), "focal_source": f_src, "camera_height_m": round(h_fin, 3),
           "height_source": h_src, "scale_rel_sd": round(math.hypot(f_lsd, h_lsd), 3)}
    return f_fin, f_lsd, h_fin, h_lsd, est


def height_configured(cam: CameraModel) -> bool:
    return getattr(cam, "height_source", "default") == "config"


def focal_from_rotation(a: np.ndarray, b: np.ndarray, cam: CameraModel, hz: float,
                        scale: float, cfg: EgoConfig = EGO) -> float | None:
    """Focal length (px) from far points in a turn, or None.

    A yaw ``w`` moves a point at ``x`` (from the principal point) by ``w*f + w*x^2/f`` and by
    ``w*x*y/f`` vertically: the constant and the curvature of the shift give ``f^2``. Fitted with
    an expansion (forward motion), a vertical shift (pitch) and a roll term, by IRLS.
    """
    far = a[:, 1] < hz + 0.05 * cam.height
    if far.sum() < 20:
        return None
    x = a[far, 0] - cam.cx
    y = a[far, 1] - hz
    dx = b[far, 0] - a[far, 0]
    dy = b[far, 1] - a[far, 1]
    n = len(x)
    if np.std(x) < 0.15 * cam.width:
        return None
    M = np.zeros((2 * n, 5))
    M[:n, 0], M[:n, 1], M[:n, 2], M[:n, 4] = 1.0, x ** 2, x, -y
    M[n:, 1], M[n:, 2], M[n:, 3], M[n:, 4] = x * y, y, 1.0, x
    r = np.concatenate([dx, dy])
    w = np.ones(2 * n)
    sol = None
    sig = 1.0
    for _ in range(5):
        try:
            sol = np.linalg.lstsq(M * w[:, None], r * w, rcond=None)[0]
        except np.linalg.LinAlgError:
            return None
        res = r - M @ sol
        sig = 1.4826 * float(np.median(np.abs(res))) + 1e-6
        w = 1.0 / np.maximum(1.0, np.abs(res) / (2.0 * sig))
    A, B = sol[0], sol[1]
    if abs(A) * scale < cfg.FOCAL_MIN_SHIFT_PX or A * B <= 0:
        return None
    try:
        cov = np.linalg.inv((M * w[:, None]).T @ (M * w[:, None])) * sig ** 2
    except np.linalg.LinAlgError:
        return None
    if abs(B) < 3.0 * math.sqrt(max(cov[1, 1], 0.0)):
        return None
    f = math.sqrt(A / B)
    return f if 0.2 * cam.width < f < 3.0 * cam.width else None


def fuse_log(prior: float, prior_sd: float, obs, obs_floor: float, min_obs: int,
             eff_per_obs: float = 1.0) -> tuple[float, float, bool]:
    """Fuse a positive prior (log-normal, sd in log units) with the median of observations.
    Returns (value, log sd, used observations)."""
    obs = np.asarray([o for o in obs if o > 0], dtype=np.float64)
    if len(obs) < min_obs:
        return prior, prior_sd, False
    lo = np.log(obs)
    med = float(np.median(lo))
    mad = 1.4826 * float(np.median(np.abs(lo - med)))
    sd = math.hypot(mad / math.sqrt(max(len(lo) * eff_per_obs, 1.0)), obs_floor)
    wp, wo = 1.0 / prior_sd ** 2, 1.0 / sd ** 2
    val = (wp * math.log(prior) + wo * med) / (wp + wo)
    return math.exp(val), 1.0 / math.sqrt(wp + wo), True

