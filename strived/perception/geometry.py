"""Camera model and monocular ranging: ground plane from the box bottom, fused with class-size priors.

Pinhole camera, no roll, optical axis parallel to a flat road. An object whose box bottom is at image
row ``y_b`` stands on the road at forward depth ``Z = f * h_cam / (y_b - y_h)`` (``y_h`` the horizon
row, ``h_cam`` the camera height); an object of real height ``H`` seen ``h`` px tall is at
``Z = f * H / h``. The two are fused in log space with inverse-variance weights (the ground estimate
degrades as the box bottom nears the horizon, the size estimate by how much the class varies).
Lateral offset ``X = (x_c - c_x) * Z / f`` from the box-bottom centre (+ = right of the camera).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

DEFAULT_HFOV_DEG = 90.0          # typical forward dashcam after cropping; KITTI's is 81 deg
DEFAULT_CAMERA_HEIGHT_M = 1.3    # windscreen-mounted camera in a passenger car
DEFAULT_HORIZON_FRAC = 0.5       # horizon row / image height when nothing better is known
DEFAULT_LANE_WIDTH_M = 3.5
CAMERA_CONFIG_NAME = "camera.json"

# (height m, width m, relative std of the height prior). Bicycle/motorcycle boxes from COCO
# detectors cover the vehicle without its rider (riders are suppressed in detect.postprocess).
CLASS_SIZE_PRIORS = {
    "car": (1.50, 1.80, 0.12),
    "truck": (3.00, 2.50, 0.30),
    "bus": (3.20, 2.55, 0.10),
    "pedestrian": (1.70, 0.50, 0.10),
    "motorcycle": (1.20, 0.80, 0.20),
    "bicycle": (1.05, 0.60, 0.20),
}


@dataclass(frozen=True)
class CameraModel:
    """Intrinsics and mounting of the camera, in the pixels of the decoded frames."""

    width: int
    height: int
    focal_px: float
    cx: float
    horizon_y: float
    camera_height_m: float = DEFAULT_CAMERA_HEIGHT_M
    lane_width_m: float = DEFAULT_LANE_WIDTH_M
    focal_source: str = "assumed_fov"
    horizon_source: str = "default"
    height_source: str = "default"   # "config" when camera.json gives camera_height_m

    @classmethod
    def from_frame_size(cls, width: int, height: int, hfov_deg: float = DEFAULT_HFOV_DEG) -> "CameraModel":
        """Default camera for a frame size: focal from an assumed horizontal FOV, horizon mid-frame."""
        f = (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
        return cls(width, height, f, width / 2.0, height * DEFAULT_HORIZON_FRAC)

    @classmethod
    def from_config(cls, width: int, height: int, cfg: dict) -> "CameraModel":
        """Apply a ``camera.json`` dict (keys below) over the default for this frame size.

        Keys (all optional): ``focal_px`` or ``hfov_deg``; ``cx``; ``horizon_y`` (px) or
        ``horizon_frac``; ``camera_height_m``; ``lane_width_m``; ``width`` (the frame width the pixel
        values refer to; they are rescaled to this video's width).
        """
        cam = cls.from_frame_size(width, height, float(cfg.get("hfov_deg", DEFAULT_HFOV_DEG)))
        scale = width / float(cfg["width"]) if cfg.get("width") else 1.0
        changes: dict = {}
        if "hfov_deg" in cfg:
            changes["focal_source"] = "config"
        if cfg.get("focal_px"):
            changes.update(focal_px=float(cfg["focal_px"]) * scale, focal_source="config")
        if cfg.get("cx") is not None:
            changes["cx"] = float(cfg["cx"]) * scale
        if cfg.get("horizon_y") is not None:
            changes.update(horizon_y=float(cfg["horizon_y"]) * scale, horizon_source="config")
        elif cfg.get("horizon_frac") is not None:
            changes.update(horizon_y=float(cfg["horizon_frac"]) * height, horizon_source="config")
        if cfg.get("camera_height_m"):
            changes.update(camera_height_m=float(cfg["camera_height_m"]), height_source="config")
        if cfg.get("lane_width_m"):
            changes["lane_width_m"] = float(cfg["lane_width_m"])
        return replace(cam, **changes)

    def with_horizon(self, horizon_y: float, source: str) -> "CameraModel":
        return replace(self, horizon_y=float(horizon_y), horizon_source=source)

    def to_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def load_camera_config(video_path: str | Path, root: str | Path | None = None) -> dict | None:
    """The nearest ``camera.json`` from the video's folder up to ``root`` (inclusive), or None."""
    p = Path(video_path).resolve().parent
    stop = Path(root).resolve() if root else p
    while True:
        cfg = p / CAMERA_CONFIG_NAME
        if cfg.is_file():
            try:
                return json.loads(cfg.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
        if p == stop or p.parent == p or stop not in p.parents:
            return None
        p = p.parent


def horizon_from_boxes(boxes: np.ndarray, cls_names: list[str], cam: CameraModel,
                       min_height_px: float = 12.0, min_count: int = 10) -> float | None:
    """Estimate the horizon row from cars standing on the road (Hoiem et al. 2006 style).

    A car of height H whose box bottom is at y_b and box height h implies y_h = y_b - h * h_cam / H.
    The median over untruncated car boxes is returned, or None with fewer than ``min_count``.
    """
    h_car = CLASS_SIZE_PRIORS["car"][0]
    vals = []
    for b, c in zip(boxes, cls_names):
        if c != "car":
            continue
        h = b[3] - b[1]
        if h < min_height_px or b[3] >= cam.height - 2 or b[1] <= 1:
            continue
        vals.append(b[3] - h * cam.camera_height_m / h_car)
    if len(vals) < min_count:
        return None
    return float(np.median(vals))


def range_boxes(boxes: np.ndarray, cls_names: list[str], cam: CameraModel,
                pixel_sigma_frac: float = 0.01, max_distance_m: float = 150.0) -> tuple[np.ndarray, np.ndarray]:
    """Forward depth Z (m) and lateral offset X (m, + right) for (n,4) xyxy boxes.

    Fuses the ground-plane and size-prior estimates in log space, weights 1/sigma^2 with
    sigma_ground = sigma_px / (y_b - y_h) and sigma_size = prior std + sigma_px / h. A box touching
    the bottom edge (truncated) uses its width prior instead of its height; a box bottom at or above
    the horizon uses the size prior only. NaN where no estimate exists.
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    n = len(boxes)
    z = np.full(n, np.nan)
    x = np.full(n, np.nan)
    sig_px = pixel_sigma_frac * cam.height
    for i, (b, c) in enumerate(zip(boxes, cls_names)):
        hb, wb = b[3] - b[1], b[2] - b[0]
        if hb <= 1 or wb <= 1:
            continue
        prior = CLASS_SIZE_PRIORS.get(c, (1.5, 1.5, 0.4))
        est, w = [], []
        truncated_bottom = b[3] >= cam.height - 2
        truncated_top = b[1] <= 1
        below = b[3] - cam.horizon_y
        if not truncated_bottom and below > 2.0:
            est.append(math.log(cam.focal_px * cam.camera_height_m / below))
            w.append(1.0 / (sig_px / below) ** 2)
        if not truncated_bottom and not truncated_top:
            s = prior[2] + sig_px / hb
            est.append(math.log(cam.focal_px * prior[0] / hb))
            w.append(1.0 / s ** 2)
        elif truncated_bottom and b[0] > 1 and b[2] < cam.width - 2:
            s = prior[2] + 0.15 + sig_px / wb  # width varies with the viewing angle
            est.append(math.log(cam.focal_px * prior[1] / wb))
            w.append(1.0 / s ** 2)
        if not est:
            continue
        zi = math.exp(float(np.dot(est, w) / np.sum(w)))
        z[i] = min(zi, max_distance_m)
        xc = 0.5 * (b[0] + b[2])
        x[i] = (xc - cam.cx) * z[i] / cam.focal_px
    return z, x


def lane_rel_from_offset(loc_x_m: np.ndarray, lane_width_m: float = DEFAULT_LANE_WIDTH_M) -> np.ndarray:
    """Lanes from the lateral offset: 0 within half a lane of the camera axis, +1 one lane right."""
    return np.round(np.asarray(loc_x_m, dtype=np.float64) / lane_width_m)


def smooth_series(t_s: np.ndarray, values: np.ndarray, window_s: float = 0.35, log: bool = False) -> np.ndarray:
    """Median-then-mean smoothing over a centred time window, NaN-aware; times need not be regular."""
    t_s = np.asarray(t_s, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if log:
        v = np.log(np.where(v > 0, v, np.nan))
    out = np.full(len(v), np.nan)
    half = window_s / 2.0
    lo = np.searchsorted(t_s, t_s - half, side="left")
    hi = np.searchsorted(t_s, t_s + half, side="right")
    med = np.full(len(v), np.nan)
    for i in range(len(v)):
        seg = v[lo[i]:hi[i]]
        seg = seg[np.isfinite(seg)]
        if len(seg) and np.isfinite(v[i]):
            med[i] = np.median(seg)
    for i in range(len(v)):
        seg = med[lo[i]:hi[i]]
        seg = seg[np.isfinite(seg)]
        if len(seg) and np.isfinite(v[i]):
            out[i] = seg.mean()
    return np.exp(out) if log else out
