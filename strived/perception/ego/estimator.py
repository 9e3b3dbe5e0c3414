"""The ego-motion estimator: feeds frame pairs through the stages, then reads the series.

Per consecutive pair of sampled frames (``feed``): background corners outside the boxes and the
static pixels, tracked with pyramidal Lucas-Kanade (forward-backward checked), give ``last_warp``,
the far-point rates and, in turns, the focal length; the road fit (``road_fit``) runs
ROAD_DELAY_FRAMES late, once the static mask (``static_pixels``) has seen those frames. At the
end, ``series`` (``series.ego_series``) turns what the pairs gave into the per-frame series.
"""

from __future__ import annotations

import math

import numpy as np

from ..geometry import CameraModel
from .config import EGO, EgoConfig
from .frame_cache import FrameCache
from .horizon import fuse_horizon
from .noise_floor import free_flow
from .pairs import Evidence, PairStep
from .road_fit import coarse_search, direct_ground_fit, fit_ok
from .sanity import thirds
from .scale import car_observations, focal_from_rotation
from .series import ego_series
from .static_pixels import StaticPixels
from .stationary import Scenery


class EgoMotionEstimator:
    """Feed sampled grayscale frames in order; read per-frame ego series afterwards.

    ``scale`` is gray-width / frame-width; boxes and the camera are in full-frame pixels.
    After each ``feed``, ``last_warp`` is the 2x3 affine (full-frame pixels) mapping the previous
    frame's background to the current one, or None when unknown.
    """

    def __init__(self, max_corners: int = 300, config: EgoConfig = EGO):
        self.cfg = config
        self.max_corners = max_corners
        self.prev: np.ndarray | None = None
        self.prev_t: float | None = None
        self.prev_boxes: np.ndarray = np.zeros((0, 4))
        self.last_warp: np.ndarray | None = None
        self.t_s: list[float] = []
        self.yaw_rate: list[float] = []       # raw far-point yaw rate per frame (NaN for the first)
        self.brightness: list[float] = []
        self.steps: list[PairStep] = []
        self.horizon_obs: list[tuple[float, float]] = []  # (row, variance) per pair, full-frame px
        self._scale = 1.0
        self._shape: tuple[int, int] | None = None
        self.static = StaticPixels(config)    # timestamps, logos, dashboard: learnt while the scene moves
        self.scenery = Scenery(config)        # where background corners moved with the scene
        self._last_q: np.ndarray | None = None
        self._pending: list = []              # pairs waiting for their road fit
        self._frames = FrameCache()           # the road fit's per-frame levels (each frame is in two pairs)
        self._sky_stats: list[tuple[float, float, float, float]] = []  # top/bottom third brightness, texture
        self.car_obs: list[tuple[float, float]] = []      # (box bottom y, box height), full-frame px
        self.focal_obs: list[float] = []                  # focal lengths measured from turns (px)
        self.cut_frames: set[int] = set()                 # frames that start a new shot (shots.py)

    # ------------------------------------------------------------------ per frame
    def feed(self, gray: np.ndarray, t_s: float, boxes_px: np.ndarray, cam: CameraModel,
             scale: float, classes=None, scores=None, **_ignored) -> None:
        """Add one frame (``gray`` = the frame downscaled by ``scale``) with its boxes (full-frame xyxy).

        ``classes`` (class indices of ``detect.CLASSES`` or names) and ``scores``, when given, let
        cars measure the camera height (when camera.json does not give it)."""
        import cv2

        gray = np.ascontiguousarray(gray)
        if gray.ndim == 3:
            gray = cv2.cvtColor(gray, cv2.COLOR_BGR2GRAY)
        if gray.dtype != np.uint8:
            gray = np.clip(gray, 0, 255).astype(np.uint8)
        if self._shape is not None and gray.shape != self._shape:
            self.prev = None  # frame size changed: restart the chain of pairs
            self.static.restart()
        self._shape = gray.shape
        self._scale = float(scale)
        boxes = np.asarray(boxes_px, dtype=np.float64).reshape(-1, 4)
        if classes is not None and len(boxes):
            self.car_obs.extend(car_observations(boxes, classes, scores, cam, self.cfg))
        bright = float(gray.mean())
        self._sky_stats.append(thirds(gray))
        self.last_warp = None
        yaw = math.nan
        if self.prev is not None and self.prev_t is not None and t_s > self.prev_t:
            step = self._pair(self.prev, gray, float(t_s - self.prev_t), boxes, cam, bright)
            self.steps.append(step)
            yaw = step.rates[0]
        self.t_s.append(float(t_s))
        self.yaw_rate.append(yaw)
        self.brightness.append(bright)
        self.prev, self.prev_t, self.prev_boxes = gray, float(t_s), boxes

    def _box_mask(self, shape, boxes_px: np.ndarray, pad: int = 4) -> np.ndarray:
        h, w = shape
        mask = np.full((h, w), 255, np.uint8)
        bs = boxes_px * self._scale
        bs = bs[np.all(np.isfinite(bs), axis=1)]
        # round half to even, as round() does; clipped far outside any image (same slices)
        for x1, y1, x2, y2 in np.clip(np.rint(bs), -1e9, 1e9).astype(np.int64).tolist():
            mask[max(0, y1 - pad):max(0, y2 + pad), max(0, x1 - pad):max(0, x2 + pad)] = 0
        return mask

    def _road_region(self, shape, cam: CameraModel, horizon_y: float) -> np.ndarray:
        """Work-image mask of the road ahead for a horizon row (full-frame px)."""
        h, w = shape
        s = self._scale
        yy = (np.arange(h) + 0.5)[:, None] / s
        xx = (np.arange(w) + 0.5)[None, :] / s
        d = yy - horizon_y
        cfg = self.cfg
        dmin = max(cam.focal_px / cfg.ROAD_MAX_DEPTH_H, cfg.ROAD_MIN_BELOW_HORIZON * cam.height)
        dmax = cam.focal_px / cfg.ROAD_MIN_DEPTH_H
        road = (d > dmin) & (d < dmax) & (np.abs(xx - cam.cx) < cfg.ROAD_MAX_LATERAL_H * np.maximum(d, 0))
        limit = self.static.bottom_limit()
        if limit is not None:
            road[limit:] = False
        return road.astype(np.uint8) * 255

    def current_horizon(self, cam: CameraModel) -> float:
        """Best horizon row so far (full-frame px): the road-flow estimate fused with the camera's."""
        return fuse_horizon(cam, self.horizon_obs, self.cfg)[0]

    def horizon_sd(self, cam: CameraModel) -> float:
        return fuse_horizon(cam, self.horizon_obs, self.cfg)[1]

    def static_mask(self) -> np.ndarray | None:
        """Work-image mask (255) of textured pixels that stay put while the scene moves, or None."""
        return self.static.mask()

    def _pair(self, prev: np.ndarray, gray: np.ndarray, dt: float, boxes: np.ndarray,
              cam: CameraModel, bright: float) -> PairStep:
        import cv2

        diff = cv2.absdiff(prev, gray)
        frozen = int(diff.max()) <= 2
        step = PairStep(len(self.t_s), dt, frozen, self._objects_move(diff, boxes), bright)
        if frozen:
            return step
        static = self.static_mask()
        mask = self._box_mask(gray.shape, self.prev_boxes)
        if static is not None:
            mask[static > 0] = 0
            step.static_px = int((static > 0).sum())
        self._background(prev, gray, mask, step, cam)
        if np.isfinite(step.bg_flow_px) and step.bg_flow_px > self.cfg.MOVING_FLOW_PX:
            self.static.learn(gray, diff)
        # the road fit waits ROAD_DELAY_FRAMES frames, so that the static mask has seen them
        self._pending.append((step, prev, gray, self.prev_boxes, cam))
        while len(self._pending) > self.cfg.ROAD_DELAY_FRAMES:
            self._road(*self._pending.pop(0))
        return step

    def _background(self, prev: np.ndarray, gray: np.ndarray, mask: np.ndarray, step: PairStep,
                    cam: CameraModel) -> None:
        """Background corners: warp, far-point rates, focal length in turns, does the scene move."""
        import cv2

        s = self._scale
        dt = step.dt
        hz = self.current_horizon(cam)
        lk = dict(winSize=(21, 21), maxLevel=4,
                  criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
        p_bg = cv2.goodFeaturesToTrack(prev, self.max_corners, 0.01, 8, mask=mask)
        if p_bg is None or len(p_bg) < 8:
            return
        a, b, good = _track(prev, gray, p_bg.reshape(-1, 2), lk)
        a, b = a[good], b[good]
        if len(a) < 8:
            return
        mags = np.linalg.norm(b - a, axis=1)
        step.bg_flow_px = float(np.median(mags))
        step.bg_flow_p75 = float(np.percentile(mags, 75))
        self.scenery.evidence(a, mags, step, gray.shape)
        M, inl = cv2.estimateAffinePartial2D(a, b, method=cv2.RANSAC,
                                             ransacReprojThreshold=2.0, maxIters=500)
        if M is not None and inl is not None and inl.sum() >= 8:
            Mf = M.astype(np.float64).copy()
            Mf[:, 2] /= s
            self.last_warp = Mf
        step.rates = self._far_rates(a / s, b / s, cam, hz, dt)
        fo = focal_from_rotation(a / s, b / s, cam, hz, s, self.cfg)
        if fo is not None:
            self.focal_obs.append(fo)

    def _flush(self) -> None:
        while self._pending:
            self._road(*self._pending.pop(0))

    def _road(self, step: PairStep, prev: np.ndarray, gray: np.ndarray, prev_boxes: np.ndarray,
              cam: CameraModel) -> None:
        """Coarse grid search, then direct ground-plane alignment of the road (horizon free when
        the pair's translation makes it measurable)."""
        import cv2

        s = self._scale
        dt = step.dt
        mask = self._box_mask(gray.shape, prev_boxes)
        static = self.static_mask()
        coarse_mask = mask.copy()
        occluder = None if static is None else cv2.dilate(static, np.ones((9, 9), np.uint8))
        if static is not None:
            # blurred pyramid levels spread an overlay's edges: keep well away from it
            mask[occluder > 0] = 0
            coarse_mask[cv2.dilate(static, np.ones((25, 25), np.uint8)) > 0] = 0
            step.static_px = int((static > 0).sum())
        hz = self.current_horizon(cam)
        region = self._road_region(gray.shape, cam, hz)
        road_mask = cv2.bitwise_and(mask, region)
        coarse_mask = cv2.bitwise_and(coarse_mask, region)
        if road_mask.any():
            step.road_brightness = float(prev[road_mask > 0].mean())
        cfg = self.cfg
        if step.road_brightness < cfg.DARK_ROAD_GRAY:
            self._last_q = None
            return
        w0 = step.rates[0] * dt if np.isfinite(step.rates[0]) else 0.0
        init, n_tex = coarse_search(prev, gray, coarse_mask, s, cam, hz, dt, w0, self._last_q, occluder, cfg,
                                    cache=self._frames)
        step.road_pixels = n_tex
        if init is None:
            self._last_q = None
            return
        # the horizon is measurable only when translation moves the road enough
        d_mid = cfg.HORIZON_MID_ROW * cam.height
        trans_px = abs(init[2]) * d_mid ** 2 / (cam.focal_px * cam.camera_height_m) * s
        informative = trans_px >= cfg.HORIZON_MIN_FLOW_PX
        g = direct_ground_fit(prev, gray, road_mask, s, cam.focal_px, cam.cx, hz,
                              cam.camera_height_m, init, fit_horizon=True,
                              horizon_sd=max(self.horizon_sd(cam), cfg.PITCH_JITTER_PX) if informative else 0.3,
                              occluder=occluder,
                              free_flow=lambda yh: free_flow(prev, gray, int(yh * s) - 8, cfg), cfg=cfg,
                              cache=self._frames)
        if g is not None:
            step.fit_ratio, step.resid_still = g["ratio"], g["resid_still"]
        if g is not None and fit_ok(g, dt, cam, cfg):
            step.ground = g
            g["horizon_informative"] = informative
            g["focal_px"], g["camera_height_m"] = cam.focal_px, cam.camera_height_m
            self._last_q = g["x"].copy()
            if informative and np.isfinite(g["horizon_var_data"]) \
                    and g["horizon_var_data"] < cfg.HORIZON_OBS_MAX_SD ** 2:
                self.horizon_obs.append((g["horizon_y"], g["horizon_var_data"]))
        else:
            self._last_q = None

    def _objects_move(self, diff: np.ndarray, boxes: np.ndarray) -> bool:
        """Something changes in the image: a detection box moved, or a compact region changed."""
        if len(boxes) and len(self.prev_boxes):
            c1 = 0.5 * (boxes[:, :2] + boxes[:, 2:])
            c0 = 0.5 * (self.prev_boxes[:, :2] + self.prev_boxes[:, 2:])
            dmin = np.min(np.linalg.norm(c1[:, None] - c0[None], axis=2), axis=1)
            size = np.maximum(boxes[:, 2] - boxes[:, 0], 1.0)
            if np.any((dmin > 0.03 * size) & (dmin < 0.5 * size)):
                return True
        return float((diff > 20).mean()) > 0.002

    def _far_rates(self, a: np.ndarray, b: np.ndarray, cam: CameraModel, hz: float,
                   dt: float) -> tuple[float, float, float]:
        """Yaw (+ left), pitch (+ down) and roll rates (rad/s) of far points above the horizon band."""
        import cv2

        far = a[:, 1] < hz + 0.05 * cam.height
        if far.sum() < self.cfg.MIN_FAR_POINTS:
            return (math.nan,) * 3
        M, inl = cv2.estimateAffinePartial2D(a[far], b[far], method=cv2.RANSAC,
                                             ransacReprojThreshold=1.5 / self._scale, maxIters=500)
        if M is None or inl is None or inl.sum() < 8:
            return (math.nan,) * 3
        xc = M[0, 0] * cam.cx + M[0, 1] * hz + M[0, 2]
        yc = M[1, 0] * cam.cx + M[1, 1] * hz + M[1, 2]
        yaw = math.atan((xc - cam.cx) / cam.focal_px) / dt
        pitch = math.atan((yc - hz) / cam.focal_px) / dt
        roll = math.atan2(M[1, 0], M[0, 0]) / dt
        return yaw, pitch, roll

    def mark_cuts(self, frames) -> None:
        """The pairs ending at these frame indices span an edit (`shots.ShotCuts`): what they
        measured is the cut, not the ego's motion, so `series` reads nothing from them (no speed,
        yaw, stillness or jolt there; the smoothers bridge the gap as for any missing pair)."""
        self.cut_frames = {int(j) for j in frames}

    def series(self, cam: CameraModel, **_ignored) -> dict:
        """Per-frame ``speed`` (m/s), ``accel`` (m/s^2), ``yaw_rate`` (rad/s, + left), ``jolt``
        (rad/s), ``speed_conf`` (0..1), ``stationary`` (1/0/NaN) and ``status`` per field
        (``series.ego_series``)."""
        self._flush()
        for st in self.steps:
            if st.j in self.cut_frames:
                st.rates = (math.nan, math.nan, math.nan)
                st.ground = None
                st.bg_flow_px = st.bg_flow_p75 = st.fit_ratio = st.resid_still = math.nan
                st.road_pixels, st.objects_move = 0, False
        ev = Evidence(self.t_s, self.brightness, self.steps, self.horizon_obs, self._sky_stats, self.car_obs,
                      self.focal_obs, self._scale)
        return ego_series(ev, self.scenery, cam, self.cfg)


def _track(prev, gray, p0: np.ndarray, lk: dict):
    """LK from ``prev`` to ``gray``, forward-backward checked (work-image px)."""
    import cv2

    a = p0.astype(np.float32).reshape(-1, 1, 2)
    b, st, _ = cv2.calcOpticalFlowPyrLK(prev, gray, a, None, **lk)
    back, stb, _ = cv2.calcOpticalFlowPyrLK(gray, prev, b, None, **lk)
    fb = np.linalg.norm((back - a).reshape(-1, 2), axis=1)
    good = (st.ravel() == 1) & (stb.ravel() == 1) & (fb < 0.8)
    return a.reshape(-1, 2).astype(np.float64), b.reshape(-1, 2).astype(np.float64), good

