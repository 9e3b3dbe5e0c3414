"""Classical lane-line detection (Canny + probabilistic Hough) for the ego lane's two boundaries.

Each boundary is a line ``x = a * y + b`` in frame pixels. The left boundary leans right going up
(``a < 0``), the right one leans left. Their intersection is the vanishing point (a horizon estimate);
their separation at an object's box-bottom row assigns it a lane. Works on marked roads in daylight;
returns None for a side it cannot find (no markings, night glare, rain), and callers fall back to the
lateral offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LaneObservation:
    """Ego-lane boundaries found in one frame (None when that side was not found)."""

    left: tuple[float, float] | None   # (a, b) with x = a*y + b
    right: tuple[float, float] | None

    def vanishing_point(self) -> tuple[float, float] | None:
        if self.left is None or self.right is None:
            return None
        (a1, b1), (a2, b2) = self.left, self.right
        if abs(a1 - a2) < 1e-6:
            return None
        y = (b2 - b1) / (a1 - a2)
        return a1 * y + b1, y


def detect_lanes(gray: np.ndarray, horizon_y: float, scale: float = 1.0,
                 min_angle_deg: float = 20.0, max_angle_deg: float = 75.0) -> LaneObservation:
    """Find the ego lane's boundaries in a grayscale frame.

    ``gray`` may be downscaled from the frame by ``scale`` (gray = frame * scale); ``horizon_y`` and
    the returned lines are in full-frame pixels. The search region runs from a little below the
    horizon to 92 % of the height (the bonnet is often visible below).
    """
    import cv2

    h, w = gray.shape[:2]
    y0 = int(max(0, min(h - 10, horizon_y * scale + 0.06 * h)))
    y1 = int(0.92 * h)
    if y1 - y0 < 10:
        return LaneObservation(None, None)
    roi = gray[y0:y1]
    roi = cv2.GaussianBlur(roi, (5, 5), 0)
    edges = cv2.Canny(roi, 60, 150)
    segs = cv2.HoughLinesP(edges, 1, np.pi / 180, threshold=20, minLineLength=max(12, h // 25),
                           maxLineGap=max(6, h // 40))
    if segs is None:
        return LaneObservation(None, None)
    segs = np.asarray(segs).reshape(-1, 4).astype(np.float64)  # (N,1,4) in OpenCV 4, (N,4) in 5
    segs[:, [1, 3]] += y0
    dx, dy = segs[:, 2] - segs[:, 0], segs[:, 3] - segs[:, 1]
    ang = np.degrees(np.arctan2(np.abs(dy), np.abs(dx)))
    ok = (ang >= min_angle_deg) & (ang <= max_angle_deg) & (np.abs(dy) > 1e-6)
    segs, dx, dy = segs[ok], dx[ok], dy[ok]
    if len(segs) == 0:
        return LaneObservation(None, None)
    a = dx / dy                                # dx/dy per segment
    b = segs[:, 0] - a * segs[:, 1]
    length = np.hypot(dx, dy)
    x_bottom = a * y1 + b
    cx = w / 2.0
    out = []
    for side in (-1, 1):
        m = (np.sign(a) == side) & ((x_bottom - cx) * side > 0) & (np.abs(x_bottom - cx) < 0.9 * w)
        if not m.any():
            out.append(None)
            continue
        # the boundary nearest to the image centre at the bottom row, with its collinear neighbours
        nearest = np.min(np.abs(x_bottom[m] - cx))
        sel = m & (np.abs(np.abs(x_bottom - cx) - nearest) < 0.06 * w)
        ys = np.concatenate([segs[sel, 1], segs[sel, 3]])
        xs = np.concatenate([segs[sel, 0], segs[sel, 2]])
        wts = np.concatenate([length[sel], length[sel]])
        if np.ptp(ys) < 5:
            out.append(None)
            continue
        A = np.column_stack([ys, np.ones_like(ys)]) * wts[:, None]
        fa, fb = np.linalg.lstsq(A, xs * wts, rcond=None)[0]
        if np.sign(fa) != side:
            out.append(None)
            continue
        out.append((float(fa), float(fb / scale)))  # x/scale = a*(y/scale) + b/scale
    return LaneObservation(out[0], out[1])


def lane_rel_from_lines(x_px: np.ndarray, y_px: np.ndarray, left: tuple[float, float],
                        right: tuple[float, float]) -> np.ndarray:
    """Lane index of points (box-bottom centres) between/beyond the ego-lane boundaries.

    ``floor((x - x_left(y)) / (x_right(y) - x_left(y)))``: 0 inside the ego lane, +1 one lane to the
    right, -1 one to the left (adjacent lanes assumed as wide as the ego lane). NaN where the lines
    have crossed (at or above the vanishing point).
    """
    x_px, y_px = np.asarray(x_px, float), np.asarray(y_px, float)
    xl = left[0] * y_px + left[1]
    xr = right[0] * y_px + right[1]
    width = xr - xl
    out = np.floor((x_px - xl) / np.where(width > 1, width, np.nan))
    return out
