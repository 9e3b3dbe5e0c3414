"""Ego motion from sparse optical flow on the static background between consecutive sampled frames.

- ``yaw_rate`` (rad/s, + = turning left): the common horizontal shift of far background corners
  (outside detection boxes, above the horizon band; RANSAC similarity fit), or with too few of them
  the rotation from ``findEssentialMat`` + ``recoverPose`` on all background corners.
- ``speed`` (m/s) is a *proxy*: road-surface points below the horizon at depth ``Z = f*h_cam/(y-y_h)``
  move down the image as the car advances, giving ``V = f*h_cam*(1/d1 - 1/d2)/dt`` per point
  (``d = y - y_h``); the median over points is kept. It inherits the camera model's error (focal,
  horizon, camera height) and is NaN when the road shows too few trackable points (night, blank
  asphalt). Pitch changes (braking dive, bumps) bias it. Treat it as relative, not a speedometer.
- ``accel`` is the time derivative of the smoothed speed proxy.
"""

from __future__ import annotations

import math

import numpy as np

from .geometry import CameraModel, smooth_series


class EgoMotionEstimator:
    """Feed sampled grayscale frames in order; read per-frame yaw rate and speed proxy afterwards.

    ``scale`` is gray-width / frame-width; boxes and the camera are in full-frame pixels.
    """

    def __init__(self, max_corners: int = 300, min_points: int = 25):
        self.max_corners = max_corners
        self.min_points = min_points
        self.prev: np.ndarray | None = None
        self.prev_t: float | None = None
        self.prev_mask: np.ndarray | None = None
        self.t_s: list[float] = []
        self.yaw_rate: list[float] = []
        self.flow: list[tuple[np.ndarray, np.ndarray, float, float]] = []  # road points per step
        self._sum: np.ndarray | None = None    # running per-pixel sums for the static-region mask
        self._sumsq: np.ndarray | None = None
        self._n = 0
        self._scale = 1.0

    def _mask(self, shape, boxes_px: np.ndarray, scale: float) -> np.ndarray:
        h, w = shape
        mask = np.full((h, w), 255, np.uint8)
        mask[int(0.9 * h):] = 0  # bonnet / dashboard reflections
        for b in np.asarray(boxes_px).reshape(-1, 4) * scale:
            x1, y1, x2, y2 = (int(v) for v in b)
            mask[max(0, y1 - 4):max(0, y2 + 4), max(0, x1 - 4):max(0, x2 + 4)] = 0
        return mask

    def feed(self, gray: np.ndarray, t_s: float, boxes_px: np.ndarray, cam: CameraModel,
             scale: float) -> None:
        """Add one frame (``gray`` downscaled by ``scale``) with its detection boxes."""
        import cv2

        mask = self._mask(gray.shape, boxes_px, scale)
        g = gray.astype(np.float32)
        if self._sum is None or self._sum.shape != g.shape:
            self._sum, self._sumsq, self._n = np.zeros_like(g), np.zeros_like(g), 0
        self._sum += g
        self._sumsq += g * g
        self._n += 1
        self._scale = scale
        yaw = math.nan
        if self.prev is not None and t_s > self.prev_t:
            dt = t_s - self.prev_t
            p0 = cv2.goodFeaturesToTrack(self.prev, self.max_corners, 0.01, 7, mask=self.prev_mask)
            if p0 is not None and len(p0) >= 8:
                p1, st, _ = cv2.calcOpticalFlowPyrLK(self.prev, gray, p0, None, winSize=(21, 21), maxLevel=3)
                pb, stb, _ = cv2.calcOpticalFlowPyrLK(gray, self.prev, p1, None, winSize=(21, 21), maxLevel=3)
                fb = np.linalg.norm((pb - p0).reshape(-1, 2), axis=1)
                good = (st.ravel() == 1) & (stb.ravel() == 1) & (fb < 1.0)
                a = p0.reshape(-1, 2)[good] / scale
                b = p1.reshape(-1, 2)[good] / scale
                yaw = self._yaw(a, b, cam, dt)
                self.flow.append((a, b, dt, len(self.t_s)))
        self.t_s.append(float(t_s))
        self.yaw_rate.append(yaw)
        self.prev, self.prev_t, self.prev_mask = gray, t_s, mask

    def _yaw(self, a: np.ndarray, b: np.ndarray, cam: CameraModel, dt: float) -> float:
        """Yaw rate from far background points, else from the essential matrix of all points.

        Far points (above the horizon band) move almost only by rotation: a RANSAC similarity fit
        (``estimateAffinePartial2D``, robust to moving objects) gives their common horizontal shift
        ``tx`` and yaw = atan(tx / f) / dt. With too few far points, ``recoverPose`` on all points
        (which needs some translation to be well posed).
        """
        import cv2

        far = a[:, 1] < cam.horizon_y + 0.05 * cam.height
        if far.sum() >= 12:
            M, inl = cv2.estimateAffinePartial2D(a[far], b[far], method=cv2.RANSAC,
                                                 ransacReprojThreshold=1.5, maxIters=500)
            if M is not None and inl is not None and inl.sum() >= 8:
                # shift of the principal point under the fitted similarity
                x_c = M[0, 0] * cam.cx + M[0, 1] * cam.horizon_y + M[0, 2]
                return math.atan((x_c - cam.cx) / cam.focal_px) / dt
        if len(a) >= self.min_points:
            K = np.array([[cam.focal_px, 0, cam.cx], [0, cam.focal_px, cam.horizon_y], [0, 0, 1.0]])
            moving = np.linalg.norm(b - a, axis=1) > 0.5
            if moving.sum() >= self.min_points:
                E, inl = cv2.findEssentialMat(a, b, K, method=cv2.RANSAC, prob=0.999, threshold=1.0)
                if E is not None and E.shape == (3, 3) and inl is not None and inl.sum() >= self.min_points:
                    n_ok, R, _, _ = cv2.recoverPose(E, a, b, K, mask=inl.copy())
                    if n_ok >= self.min_points // 2:
                        return math.atan2(R[0, 2], R[2, 2]) / dt
        return math.nan

    def road_limit_y(self, cam: CameraModel, static_std: float = 8.0) -> float:
        """Lowest usable road row (full-frame px): above the bonnet/dashboard.

        The bonnet, dashboard reflections and burnt-in overlays barely change over a video while the
        road does; from the bottom up, rows where most pixels have a temporal std < ``static_std``
        are cut. If the whole frame is that static the ego car never moved: nothing is cut.
        """
        default = 0.9 * cam.height
        if self._sum is None or self._n < 10:
            return default
        mean = self._sum / self._n
        std = np.sqrt(np.maximum(self._sumsq / self._n - mean * mean, 0.0))
        static_rows = (std < static_std).mean(axis=1)
        h = len(static_rows)
        hz = int(min(h - 1, max(0, cam.horizon_y * self._scale)))
        if np.median(static_rows[hz:]) > 0.6:
            return default
        y = h
        while y > max(hz + 1, h // 2) and static_rows[y - 1] > 0.6:
            y -= 1
        return min(default, (y - 0.01 * h) / self._scale)

    def speed_proxy(self, cam: CameraModel) -> np.ndarray:
        """Per-frame speed proxy (m/s) from road points; NaN where too few points were tracked."""
        out = np.full(len(self.t_s), np.nan)
        limit = self.road_limit_y(cam)
        for a, b, dt, j in self.flow:
            d1 = a[:, 1] - cam.horizon_y
            d2 = b[:, 1] - cam.horizon_y
            # the road just ahead: |X| = |x - cx| * h_cam / d < ~3 camera heights (ego lane and its edges)
            road = ((d1 > 0.08 * cam.height) & (d2 > 0.08 * cam.height)
                    & (np.abs(a[:, 0] - cam.cx) < 3.0 * d1) & (a[:, 1] < limit) & (b[:, 1] < limit))
            if road.sum() < 8:
                continue
            v = cam.focal_px * cam.camera_height_m * (1.0 / d1[road] - 1.0 / d2[road]) / dt
            out[j] = float(np.clip(np.median(v), -15.0, 60.0))
        return out

    def series(self, cam: CameraModel, smooth_window_s: float = 0.8,
               with_speed: bool = False) -> dict[str, np.ndarray]:
        """Smoothed ``speed``, ``yaw_rate`` and ``accel`` arrays aligned with the fed frames.

        ``with_speed=False`` (the default) leaves speed and accel NaN: on the bench-dev clips the
        road-flow proxy was dominated by bonnet/reflection points and lost road texture (see
        docs/perception.md), so it is not published unless asked for.
        """
        t = np.asarray(self.t_s, dtype=np.float64)
        yaw = np.asarray(self.yaw_rate, dtype=np.float64)
        speed = self.speed_proxy(cam) if with_speed else np.full(len(t), np.nan)
        yaw_s = _fill_smooth(t, yaw, smooth_window_s * 0.6)
        speed_s = _fill_smooth(t, speed, smooth_window_s)
        accel = np.full(len(t), np.nan)
        if len(t) >= 3 and np.isfinite(speed_s).sum() >= 3:
            ok = np.isfinite(speed_s)
            accel[ok] = np.gradient(speed_s[ok], t[ok]) if ok.sum() >= 2 else np.nan
            accel = _fill_smooth(t, accel, smooth_window_s * 0.6, fill=False)
        return {"speed": speed_s, "yaw_rate": yaw_s, "accel": accel}


def _fill_smooth(t: np.ndarray, v: np.ndarray, window_s: float, fill: bool = True) -> np.ndarray:
    """Smooth, and fill short gaps (<= window) by interpolation so one bad frame does not punch holes."""
    if len(v) == 0 or not np.isfinite(v).any():
        return np.full(len(v), np.nan)
    s = smooth_series(t, v, window_s)
    if fill:
        ok = np.isfinite(s)
        if ok.sum() >= 2:
            filled = np.interp(t, t[ok], s[ok])
            # only fill where a valid sample lies within window_s on both sides
            prev_ok = np.maximum.accumulate(np.where(ok, t, -np.inf))
            next_ok = np.minimum.accumulate(np.where(ok, t, np.inf)[::-1])[::-1]
            gap = (t - prev_ok <= window_s) & (next_ok - t <= window_s)
            s = np.where(ok, s, np.where(gap, filled, np.nan))
    return s
