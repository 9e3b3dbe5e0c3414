"""Ego motion from monocular video: metric speed and acceleration, yaw rate, stationary, jolt.

Per consecutive pair of sampled frames (``feed``):

- *background*: corners outside the detection boxes and the learnt static mask, tracked with
  pyramidal Lucas-Kanade (forward-backward checked). Their RANSAC similarity is ``last_warp``
  (full-frame pixels, for the tracker's camera-motion compensation); over the far ones (above the
  horizon band) it gives the camera's yaw, pitch and roll increments, and in turns the focal length.
- *road* (run ROAD_DELAY_FRAMES late, once the static mask has seen those frames): the textured
  pixels of the road ahead (below the horizon, ``|X| < 2 h``, ``Z < 20 h``, outside boxes and static
  pixels) are aligned directly (photometric Gauss-Newton, coarse to fine, Huber weights) under the
  ground-plane homography of a planar motion: yaw ``w``, lateral ``t_x`` and forward ``t_z``
  translation in metres (``Z = f*h/(y - y_h)``, ``X = (x - c_x)*Z/f``), a vertical shift ``p``
  (pitch change) and the horizon row ``y_h``. The start comes from a grid search of ``(w, t_z)`` on
  a 1/4-scale image, so fast motion and repeated markings do not trap the fit.
- *static pixels* (timestamps, logos, dashboard, letterbox bars): corners of the time-averaged image
  that change in < 12 % of the frames in which the scene moves (a lane line sliding along itself
  looks unchanged too, but has no corners and is kept).

At the end (``series``):

- horizon: ground points move down as ``(y - y_h)^2`` and sideways as ``(x - c_x)(y - y_h)``, so
  pairs with enough translation measure ``y_h`` (the road's vanishing line, whatever the camera's
  pitch). Their weighted median (locally over +-1.5 s) is fused with the prior from camera.json /
  cars / lanes / mid-frame, and each pair's motion is re-expressed at it;
- speed and acceleration: a constant-acceleration Kalman filter + RTS smoother over the per-pair
  speeds ``t_z/dt`` (at each interval's middle, innovation-gated); yaw rate likewise from the
  far-point and road yaw;
- stationary: road and background still while something in the image moves -> speed 0 with high
  confidence; identical frames or a scene where nothing moves -> NaN with a reason;
- jolt (rad/s): magnitude of the camera's angular rates minus their 1 s running median;
- sanity: a video whose road does not fit a flat road (rotated, upside down, camera not facing the
  road), or "turning on the spot", publishes no speed and no yaw, with a reason. "Fits" is judged on
  the share of the road's change between the frames that the planar motion leaves unexplained
  *above the image noise*: a dense optical flow (DIS) on the same pixels measures that floor, so the
  block noise of heavily compressed video no longer reads as "not a flat road".

The metric scale is focal length x camera height: from camera.json they are trusted; otherwise the
assumed FOV and 1.3 m are fused with turns and with cars, and ``speed_conf`` carries what is left
of their uncertainty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .geometry import CameraModel

# One set of constants for every video. Distances in camera heights (h), rows as fractions of the
# frame height (H), pixel tolerances in pixels of the work image (the downscaled gray frame).
ROAD_MAX_LATERAL_H = 2.0         # road pixels: |X| < 2 h (ego lane and its edges; wider takes in raised verges)
ROAD_MAX_DEPTH_H = 20.0         # ... Z < 20 h
ROAD_MIN_BELOW_HORIZON = 0.03   # ... at least 3 % of H below the horizon
ROAD_MIN_PIXELS = 150           # textured road pixels needed for a fit
GRAD_MIN = 2.0                  # gray levels per pixel: "textured"
FIT_MIN_INLIER_FRAC = 0.55
MAX_SPEED_MPS = 70.0
MAX_LATERAL_MPS = 1.5           # a road fit's sideways camera speed may not exceed max(1.5 m/s, 30 % of
MAX_LATERAL_REL = 0.3           # its forward speed) (a car does not slide: yaw x lever arm ~ 1 m/s at most)
MIN_FAR_POINTS = 12
STATIC_MIN_MOVING_FRAMES = 10   # frames in motion needed before pixels can be called static
STATIC_CHANGE_FRAC = 0.12       # a static pixel changes in < 12 % of moving frames ...
STATIC_MIN_GRAD = 10.0          # ... and is textured in the time-averaged image
STATIC_MIN_CORNER = 20.0        # ... with corners (min eigenvalue of the structure tensor, gray^2)
MOVING_FLOW_PX = 1.0            # median background flow above this: the scene moves
STILL_FLOW_PX = 0.3             # median background flow below this (and road still): nothing moves
STILL_SPEED_MPS = 0.4
STILL_CHECK_SPEED_MPS = 2.0     # a road fit slower than this must agree with a still background
MIN_STATIONARY_STEPS = 3        # consecutive still pairs needed to call the ego stopped
SCENE_CELL_PX = 16              # scenery evidence grid (work px): cells where corners moved with the scene
SCENE_MIN_SHARE = 0.5           # a still pair's corners must lie on such cells this often, once the scene
#                                 has been seen moving (>= STATIC_MIN_MOVING_FRAMES pairs), to mean "stopped"
DARK_MEAN_GRAY = 45.0           # darker frames (median): speed confidence reduced
DARK_ROAD_GRAY = 20.0           # a road region darker than this is not used at all
ROAD_DELAY_FRAMES = 10          # road fits run this many frames late (static mask learnt first)
MAX_RESID_RATIO = 0.6           # a pair's road fit must explain its change at least this well
MAX_MEDIAN_RESID_RATIO = 0.45   # ... and the video's median fit (else: not a flat road ahead)
FREE_FLOW_PRESET = 2            # cv2.DISOPTICAL_FLOW_PRESET_MEDIUM (FAST fits clean roads worse than the plane)
FREE_FLOW_STRIDE = 4            # ... with the patch stride and descent iterations of a lighter preset
FREE_FLOW_ITERS = 8             #     (finest scale 1/2 is what matters; ~40 % cheaper)
FREE_MIN_RAW_RATIO = 0.25       # below this raw ratio a pair is well explained: no floor needed
FREE_MIN_SIGNAL = 2.0           # gray levels: a pair whose free optical flow explains less than this of the
                                # road's change carries no motion signal above the noise (raw ratio kept)
FREE_MAX_EPE_PX = 1.0           # the free flow must agree with the plane's flow on the road pixels: median
FREE_MAX_EPE_REL = 0.65         # endpoint difference <= max(1 px, 65 % of the flow the plane's translation
                                # makes there), else its residual is no floor for this plane (rain streaks,
                                # a fit that is right about the turn and wrong about the speed: raw kept)
NOT_ROAD_LOCAL_S = 1.5          # ... judged over the pairs within +-1.5 s (a busy, turning or occluded stretch
                                # does not void the rest of the clip)
NOT_ROAD_MIN_KEPT = 0.3         # ... unless fewer than 30 % of the fitted pairs pass: then the whole video
HORIZON_SD_FLOOR_PX = 2.0       # per-pair horizon precision is never taken as better than this
HORIZON_LOCAL_S = 1.5
HORIZON_MID_ROW = 0.25           # ... translation flow measured a quarter frame height below the horizon
HORIZON_MIN_FLOW_PX = 2.5       # ... must reach 2.5 work px for the pair to measure the horizon
HORIZON_OBS_MAX_SD = 4.0        # a pair's horizon counts as a measurement when its own sd < 4 px
PITCH_JITTER_PX = 3.0           # frame-to-frame wander of the road horizon (bumps, pitch)
JERK_PSD = 0.5                  # Kalman process noise of the speed model (m^2/s^5)
YAW_ACC_PSD = 0.3               # ... of the yaw-rate model ((rad/s^2)^2/s)
SPEED_SIGMA_FLOOR = 0.3         # m/s per measurement (measured scatter on KITTI)
SPEED_REL_SIGMA = 0.05          # + 5 % of the speed
YAW_SIGMA_FAR = 0.015           # rad/s, far-point yaw
YAW_SIGMA_FLOOR = 0.01
GATE_SIGMA = 4.0
MAX_GAP_S = 1.0                 # no value more than this far from an accepted measurement
JOLT_WINDOW_S = 1.0
SHAKE_JOLT_RAD_S = 0.5          # camera rotation this far off its 1 s median (> 5 rad/s^2 within a frame
#                                 pair at 10 fps): a shaken camera, no vehicle yaw measured there. A car
#                                 turning at a junction reads <= 0.25 (ccd_000838 before its impact)
CAM_REL_ERR_CONFIG = 0.03       # relative error of a configured focal length, and of a height
SPEED_CONF_TOL_MPS = 0.5        # confidence 0.5 where the expected error is max(0.5 m/s, 15 %)
SPEED_CONF_TOL_REL = 0.15
MIN_STEPS_FOR_SPEED = 2
CAR_MIN_SCORE = 0.4
CAR_MIN_HEIGHT = 0.04           # car boxes at least 4 % of H tall
CAR_HEIGHT_M = 1.5              # geometry.CLASS_SIZE_PRIORS["car"]
CAR_MIN_OBS = 15
FOCAL_MIN_OBS = 8
FOCAL_MIN_SHIFT_PX = 4.0        # work px of rotation shift for a pair to measure the focal length
PRIOR_LOG_SD = 0.2              # assumed FOV / camera height: ~20 % uncertain
SMOOTH_ROAD_CHANGE = 4.0        # median gray change of road pixels between frames below which
                                # an unexplained road means "no texture", not "no road"
MIN_TURN_RADIUS_M = 4.0
UPSIDE_DOWN_BRIGHTER = 20.0     # gray levels by which a sky at the bottom outshines the road at the top
FIELDS = ("speed", "accel", "yaw_rate", "jolt")
REASON_SMOOTH = "no road texture (smooth road surface, blur or heavy compression)"
REASON_NOT_ROAD = ("road motion does not fit a flat road ahead (camera not facing forward, "
                   "rotated or tilted video?)")


@dataclass
class _Step:
    """What one consecutive frame pair gave (geometry in full-frame pixels)."""

    j: int                      # index of the later frame
    dt: float
    frozen: bool                # the two frames are identical
    objects_move: bool          # something in the image moves (boxes or local change)
    brightness: float
    bg_flow_px: float = math.nan          # median background flow (work px)
    bg_flow_p75: float = math.nan         # its 75th percentile (static overlays cannot pull it down)
    bg_cells: np.ndarray | None = None    # scenery-grid cells of the background corners of a still pair
    rates: tuple = (math.nan, math.nan, math.nan)   # far-point yaw (+left), pitch, roll rates (rad/s)
    road_pixels: int = 0                  # textured road pixels available
    ground: dict | None = None            # direct fit: q, cov, horizon_y, horizon_var, samples, ...
    static_px: int = 0
    road_brightness: float = math.nan     # mean gray of the road region (work image)
    fit_ratio: float = math.nan           # share of the road's change the planar fit leaves unexplained,
                                          # above the image noise (``_fit_ratio``; kept or not)
    resid_still: float = math.nan         # median change of the road pixels between the frames


class EgoMotionEstimator:
    """Feed sampled grayscale frames in order; read per-frame ego series afterwards.

    ``scale`` is gray-width / frame-width; boxes and the camera are in full-frame pixels.
    After each ``feed``, ``last_warp`` is the 2x3 affine (full-frame pixels) mapping the previous
    frame's background to the current one, or None when unknown.
    """

    def __init__(self, max_corners: int = 300):
        self.max_corners = max_corners
        self.prev: np.ndarray | None = None
        self.prev_t: float | None = None
        self.prev_boxes: np.ndarray = np.zeros((0, 4))
        self.last_warp: np.ndarray | None = None
        self.t_s: list[float] = []
        self.yaw_rate: list[float] = []       # raw far-point yaw rate per frame (NaN for the first)
        self.brightness: list[float] = []
        self.steps: list[_Step] = []
        self.horizon_obs: list[tuple[float, float]] = []  # (row, variance) per pair, full-frame px
        self._scale = 1.0
        self._shape: tuple[int, int] | None = None
        self._mov_sum: np.ndarray | None = None
        self._mov_changed: np.ndarray | None = None
        self._n_moving = 0
        self._static_cache: tuple[int, np.ndarray | None] = (-1, None)
        self._scene_cells: np.ndarray | None = None  # scenery grid: corners moved there with the scene
        self._scene_pairs = 0                         # pairs whose background swept by
        self._last_q: np.ndarray | None = None
        self._pending: list = []              # pairs waiting for their road fit
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
            self._mov_sum = None
            self._n_moving = 0
        self._shape = gray.shape
        self._scale = float(scale)
        boxes = np.asarray(boxes_px, dtype=np.float64).reshape(-1, 4)
        if classes is not None and len(boxes):
            self._collect_cars(boxes, classes, scores, cam)
        bright = float(gray.mean())
        self._sky_stats.append(_thirds(gray))
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

    def _collect_cars(self, boxes: np.ndarray, classes, scores, cam: CameraModel) -> None:
        """Keep untruncated, confident car boxes (bottom y, height) for the camera-height estimate."""
        from .detect import CLASS_INDEX

        cls = np.asarray(classes).reshape(-1)
        is_car = np.array([(c == "car") if isinstance(c, str) else int(c) == CLASS_INDEX["car"] for c in cls])
        sc = np.ones(len(boxes)) if scores is None else np.asarray(scores, dtype=np.float64).reshape(-1)
        hb = boxes[:, 3] - boxes[:, 1]
        ok = is_car & (sc >= CAR_MIN_SCORE) & (hb >= CAR_MIN_HEIGHT * cam.height) \
            & (boxes[:, 1] > 1) & (boxes[:, 3] < cam.height - 2) & (boxes[:, 0] > 1) & (boxes[:, 2] < cam.width - 2)
        for b in boxes[ok]:
            self.car_obs.append((float(b[3]), float(b[3] - b[1])))

    def _box_mask(self, shape, boxes_px: np.ndarray, pad: int = 4) -> np.ndarray:
        h, w = shape
        mask = np.full((h, w), 255, np.uint8)
        for b in boxes_px * self._scale:
            if not np.all(np.isfinite(b)):
                continue
            x1, y1, x2, y2 = (int(round(v)) for v in b)
            mask[max(0, y1 - pad):max(0, y2 + pad), max(0, x1 - pad):max(0, x2 + pad)] = 0
        return mask

    def _road_region(self, shape, cam: CameraModel, horizon_y: float) -> np.ndarray:
        """Work-image mask of the road ahead for a horizon row (full-frame px)."""
        h, w = shape
        s = self._scale
        yy = (np.arange(h) + 0.5)[:, None] / s
        xx = (np.arange(w) + 0.5)[None, :] / s
        d = yy - horizon_y
        dmin = max(cam.focal_px / ROAD_MAX_DEPTH_H, ROAD_MIN_BELOW_HORIZON * cam.height)
        road = (d > dmin) & (np.abs(xx - cam.cx) < ROAD_MAX_LATERAL_H * np.maximum(d, 0))
        limit = self._bottom_limit()
        if limit is not None:
            road[limit:] = False
        return road.astype(np.uint8) * 255

    def current_horizon(self, cam: CameraModel) -> float:
        """Best horizon row so far (full-frame px): the road-flow estimate fused with the camera's."""
        return _fuse_horizon(cam, self.horizon_obs)[0]

    def horizon_sd(self, cam: CameraModel) -> float:
        return _fuse_horizon(cam, self.horizon_obs)[1]

    def _pair(self, prev: np.ndarray, gray: np.ndarray, dt: float, boxes: np.ndarray,
              cam: CameraModel, bright: float) -> _Step:
        import cv2

        s = self._scale
        diff = cv2.absdiff(prev, gray)
        frozen = int(diff.max()) <= 2
        step = _Step(len(self.t_s), dt, frozen, self._objects_move(diff, boxes), bright)
        if frozen:
            return step
        static = self.static_mask()
        mask = self._box_mask(gray.shape, self.prev_boxes)
        if static is not None:
            mask[static > 0] = 0
            step.static_px = int((static > 0).sum())
        hz = self.current_horizon(cam)
        # background corners: warp, far-point rates, does the scene move
        lk = dict(winSize=(21, 21), maxLevel=4,
                  criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
        p_bg = cv2.goodFeaturesToTrack(prev, self.max_corners, 0.01, 8, mask=mask)
        if p_bg is not None and len(p_bg) >= 8:
            a, b, good = _track(prev, gray, p_bg.reshape(-1, 2), lk)
            a, b = a[good], b[good]
            if len(a) >= 8:
                mags = np.linalg.norm(b - a, axis=1)
                step.bg_flow_px = float(np.median(mags))
                step.bg_flow_p75 = float(np.percentile(mags, 75))
                self._scene_evidence(a, mags, step, gray.shape)
                M, inl = cv2.estimateAffinePartial2D(a, b, method=cv2.RANSAC,
                                                     ransacReprojThreshold=2.0, maxIters=500)
                if M is not None and inl is not None and inl.sum() >= 8:
                    Mf = M.astype(np.float64).copy()
                    Mf[:, 2] /= s
                    self.last_warp = Mf
                step.rates = self._far_rates(a / s, b / s, cam, hz, dt)
                fo = _focal_from_rotation(a / s, b / s, cam, hz, s)
                if fo is not None:
                    self.focal_obs.append(fo)
        if np.isfinite(step.bg_flow_px) and step.bg_flow_px > MOVING_FLOW_PX:
            self._learn_static(gray, diff)
        # the road fit waits ROAD_DELAY_FRAMES frames, so that the static mask has seen them
        self._pending.append((step, prev, gray, self.prev_boxes, cam))
        while len(self._pending) > ROAD_DELAY_FRAMES:
            self._road(*self._pending.pop(0))
        return step

    def _flush(self) -> None:
        while self._pending:
            self._road(*self._pending.pop(0))

    def _road(self, step: _Step, prev: np.ndarray, gray: np.ndarray, prev_boxes: np.ndarray,
              cam: CameraModel) -> None:
        """Coarse grid search, then direct ground-plane alignment of the road (horizon free when
        the pair's translation makes it measurable)."""
        import cv2

        s = self._scale
        dt = step.dt
        mask = self._box_mask(gray.shape, prev_boxes)
        static = self.static_mask()
        coarse_mask = mask.copy()
        if static is not None:
            # blurred pyramid levels spread an overlay's edges: keep well away from it
            mask[cv2.dilate(static, np.ones((9, 9), np.uint8)) > 0] = 0
            coarse_mask[cv2.dilate(static, np.ones((25, 25), np.uint8)) > 0] = 0
            step.static_px = int((static > 0).sum())
        hz = self.current_horizon(cam)
        region = self._road_region(gray.shape, cam, hz)
        road_mask = cv2.bitwise_and(mask, region)
        coarse_mask = cv2.bitwise_and(coarse_mask, region)
        if road_mask.any():
            step.road_brightness = float(prev[road_mask > 0].mean())
        if step.road_brightness < DARK_ROAD_GRAY:
            self._last_q = None
            return
        w0 = step.rates[0] * dt if np.isfinite(step.rates[0]) else 0.0
        occluder = None if static is None else cv2.dilate(static, np.ones((9, 9), np.uint8))
        init, n_tex = _coarse_search(prev, gray, coarse_mask, s, cam, hz, dt, w0, self._last_q, occluder)
        step.road_pixels = n_tex
        if init is None:
            self._last_q = None
            return
        # the horizon is measurable only when translation moves the road enough
        d_mid = HORIZON_MID_ROW * cam.height
        trans_px = abs(init[2]) * d_mid ** 2 / (cam.focal_px * cam.camera_height_m) * s
        informative = trans_px >= HORIZON_MIN_FLOW_PX
        g = direct_ground_fit(prev, gray, road_mask, s, cam.focal_px, cam.cx, hz,
                              cam.camera_height_m, init, fit_horizon=True,
                              horizon_sd=max(self.horizon_sd(cam), PITCH_JITTER_PX) if informative else 0.3,
                              occluder=occluder,
                              free_flow=lambda yh: _free_flow(prev, gray, int(yh * s) - 8))
        if g is not None:
            step.fit_ratio, step.resid_still = g["ratio"], g["resid_still"]
        if g is not None and _fit_ok(g, dt, cam):
            step.ground = g
            g["horizon_informative"] = informative
            g["focal_px"], g["camera_height_m"] = cam.focal_px, cam.camera_height_m
            self._last_q = g["x"].copy()
            if informative and np.isfinite(g["horizon_var_data"]) \
                    and g["horizon_var_data"] < HORIZON_OBS_MAX_SD ** 2:
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
        if far.sum() < MIN_FAR_POINTS:
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

    # ------------------------------------------------------------------ static pixels
    def _scene_evidence(self, a: np.ndarray, mags: np.ndarray, step: _Step, shape) -> None:
        """Mark the grid cells where background corners moved while the scene swept by, and keep the
        cells of a still pair's corners. A windscreen reflection or the dashboard never moves with the
        scene: once the scene has been seen moving, a pair is "still" only on corners of the scenery."""
        gh, gw = (shape[0] + SCENE_CELL_PX - 1) // SCENE_CELL_PX, (shape[1] + SCENE_CELL_PX - 1) // SCENE_CELL_PX
        if self._scene_cells is None or self._scene_cells.shape != (gh, gw):
            self._scene_cells = np.zeros((gh, gw), bool)
        cells = (np.clip(a[:, 1] // SCENE_CELL_PX, 0, gh - 1).astype(int) * gw
                 + np.clip(a[:, 0] // SCENE_CELL_PX, 0, gw - 1).astype(int))
        if step.bg_flow_px > MOVING_FLOW_PX:
            self._scene_cells.flat[cells[mags > MOVING_FLOW_PX]] = True
            self._scene_pairs += 1
        elif step.bg_flow_px < STILL_FLOW_PX:
            step.bg_cells = cells

    def _on_scenery(self, st: _Step) -> bool:
        """Do a still pair's corners show the scenery (not only what never moves with it)?"""
        if self._scene_pairs < STATIC_MIN_MOVING_FRAMES or st.bg_cells is None:
            return True   # the scene was never seen moving: nothing to tell scenery from overlays
        return float(np.mean(self._scene_cells.flat[st.bg_cells])) >= SCENE_MIN_SHARE

    def _learn_static(self, gray: np.ndarray, diff: np.ndarray) -> None:
        g = gray.astype(np.float32)
        if self._mov_sum is None or self._mov_sum.shape != g.shape:
            self._mov_sum = np.zeros_like(g)
            self._mov_changed = np.zeros_like(g)
            self._n_moving = 0
        self._mov_sum += g
        self._mov_changed += (diff > 6).astype(np.float32)
        self._n_moving += 1

    def static_mask(self) -> np.ndarray | None:
        """Work-image mask (255) of textured pixels that stay put while the scene moves, or None."""
        import cv2

        if self._mov_sum is None or self._n_moving < STATIC_MIN_MOVING_FRAMES:
            return None
        if self._static_cache[0] == self._n_moving:
            return self._static_cache[1]
        mean = self._mov_sum / self._n_moving
        frac = self._mov_changed / self._n_moving
        # 2-D structure (corners: text, logos, dashboard parts) in the time-averaged image. A straight
        # edge sliding along itself (a solid lane line, the road's edge) also looks unchanged but is
        # scenery; it has no corners, so it is kept.
        corner = cv2.cornerMinEigenVal(mean.astype(np.float32), 5, 3) / 16.0
        seeds = ((frac < STATIC_CHANGE_FRAC) & (corner > STATIC_MIN_CORNER)).astype(np.uint8) * 255
        # grow the seeds over the static strokes that join them
        gx = cv2.Sobel(mean, cv2.CV_32F, 1, 0, ksize=3)
        gy = cv2.Sobel(mean, cv2.CV_32F, 0, 1, ksize=3)
        grad = np.sqrt(gx * gx + gy * gy) / 4.0
        strokes = (frac < STATIC_CHANGE_FRAC) & (grad > STATIC_MIN_GRAD)
        near = cv2.dilate(seeds, np.ones((15, 15), np.uint8)) > 0
        static = (seeds > 0) | (strokes & near)
        if self._n_moving >= 2 * STATIC_MIN_MOVING_FRAMES:  # edges that never changed at all
            static |= (frac < 0.02) & (grad > STATIC_MIN_GRAD)
        # letterbox / pillarbox bars: dark, unchanging border rows and columns
        bar = (mean < 24) & (frac < 0.05)
        for axis, n in ((0, static.shape[1]), (1, static.shape[0])):
            full = bar.mean(axis=axis) > 0.95
            for idx in (range(n), range(n - 1, -1, -1)):
                k = 0
                for i in idx:
                    if not full[i]:
                        break
                    k += 1
                if k:
                    lo, hi = (0, k + 6) if idx.start == 0 else (n - k - 6, n)
                    if axis == 0:
                        static[:, max(lo, 0):hi] = True
                    else:
                        static[max(lo, 0):hi, :] = True
        static = cv2.dilate(static.astype(np.uint8) * 255, np.ones((9, 9), np.uint8))
        out = static if static.any() else None
        self._static_cache = (self._n_moving, out)
        return out

    def _bottom_limit(self) -> int | None:
        """First work-image row of a bonnet/dashboard band at the bottom (static across > 50 % of
        the width, within the bottom 40 %; a timestamp line is narrower), or None."""
        m = self.static_mask()
        if m is None:
            return None
        h = m.shape[0]
        rows = (m > 0).mean(axis=1)
        band = np.nonzero(rows[int(0.6 * h):] > 0.5)[0]
        if len(band) == 0:
            return None
        return int(0.6 * h) + int(band[0])

    # ------------------------------------------------------------------ results
    def mark_cuts(self, frames) -> None:
        """The pairs ending at these frame indices span an edit (`shots.ShotCuts`): what they
        measured is the cut, not the ego's motion, so `series` reads nothing from them (no speed,
        yaw, stillness or jolt there; the smoothers bridge the gap as for any missing pair)."""
        self.cut_frames = {int(j) for j in frames}

    def series(self, cam: CameraModel, **_ignored) -> dict:
        """Per-frame ``speed`` (m/s), ``accel`` (m/s^2), ``yaw_rate`` (rad/s, + left), ``jolt``
        (rad/s), ``speed_conf`` (0..1), ``stationary`` (1/0/NaN) and ``status`` per field."""
        self._flush()
        for st in self.steps:
            if st.j in self.cut_frames:
                st.rates = (math.nan, math.nan, math.nan)
                st.ground = None
                st.bg_flow_px = st.bg_flow_p75 = st.fit_ratio = st.resid_still = math.nan
                st.road_pixels, st.objects_move = 0, False
        t = np.asarray(self.t_s, dtype=np.float64)
        n = len(t)
        out = {k: np.full(n, np.nan) for k in ("speed", "accel", "yaw_rate", "jolt", "speed_conf", "stationary")}
        hz, hz_sd, hz_src = _fuse_horizon(cam, self.horizon_obs)
        out["horizon_y"] = hz
        out["horizon_source"] = hz_src
        reasons = self._reasons(cam)
        if n < 3 or len(self.steps) < MIN_STEPS_FOR_SPEED:
            why = "video too short" if n < 3 else reasons["speed"] or "video too short"
            out["status"] = {f: _status(False, 0.0, why) for f in FIELDS}
            return out

        # per pair: speed and yaw at the final horizon, stillness
        m = len(self.steps)
        j = np.array([st.j for st in self.steps])
        dt = np.array([st.dt for st in self.steps])
        v = np.full(m, np.nan)
        v_sd = np.full(m, np.nan)
        w_road = np.full(m, np.nan)
        w_road_sd = np.full(m, np.nan)
        p_rate = np.full(m, np.nan)
        still = np.zeros(m, bool)
        stationary_step = np.zeros(m, bool)
        local_hz, local_sd = _local_horizon(self.steps, t, hz, hz_sd)
        f_fin, f_lsd, h_fin, h_lsd, cam_est = self._scale_model(cam, hz, hz_src)
        out["camera_estimate"] = cam_est
        # pairs fitted without a horizon of their own, or far from the final one (linearising a
        # large shift is poor), are re-expressed at the final horizon by a full refit
        fixed = [k for k, st in enumerate(self.steps)
                 if st.ground is not None and (not st.ground.get("horizon_informative")
                                               or abs(st.ground["horizon_y"] - local_hz[k]) > 3.0 * local_sd[k])]
        refit = {}
        if fixed:
            qs, _ = _refit_at_horizon([self.steps[k].ground for k in fixed], [local_hz[k] for k in fixed], cam)
            refit = {k: qs[i] for i, k in enumerate(fixed)}
        for k, st in enumerate(self.steps):
            if st.ground is None:
                continue
            if k in refit:
                q, cq = refit[k], st.ground["cov"]
                if abs(st.ground["x"][2]) > 1e-6:  # the relative precision carries over
                    cq = cq * (q[2] / st.ground["x"][2]) ** 2
            else:
                q, cq = _condition_on_horizon(st.ground, local_hz[k], local_sd[k])
            if not np.all(np.isfinite(q)):
                continue
            # metric scale of the final camera: depth (so speed) grows with focal and height
            kf = f_fin / st.ground["focal_px"]
            ks = kf * h_fin / st.ground["camera_height_m"]
            v[k] = ks * q[2] / dt[k]
            v_sd[k] = math.hypot(max(ks * math.sqrt(max(cq[2, 2], 0.0)) / dt[k], SPEED_SIGMA_FLOOR),
                                 SPEED_REL_SIGMA * v[k])
            # a pair whose fit leaves much of the change unexplained counts for less
            v_sd[k] *= 1.0 + 4.0 * max(0.0, st.ground["ratio"] - 0.25)
            w_road[k] = q[0] / dt[k] / kf
            w_road_sd[k] = max(math.sqrt(max(cq[0, 0], 0.0)) / dt[k] / kf, YAW_SIGMA_FLOOR)
            p_rate[k] = math.atan(q[3] / f_fin) / dt[k]
        # the video as a whole must look like a camera moving over a flat road
        w_far_off = False
        ratios = [st.fit_ratio for st in self.steps if np.isfinite(st.fit_ratio)]
        not_road = bool(ratios) and float(np.median(ratios)) > MAX_MEDIAN_RESID_RATIO
        local_bad = np.zeros(m, bool)
        if not_road:
            # judged locally first: the stretches where the road fits (the median over the pairs
            # within +-NOT_ROAD_LOCAL_S) keep their measurements when they are a fair share of the clip
            t_pair = np.array([self.t_s[st.j] for st in self.steps])
            fr = np.array([st.fit_ratio for st in self.steps])
            for k in range(m):
                near_k = (np.abs(t_pair - t_pair[k]) <= NOT_ROAD_LOCAL_S) & np.isfinite(fr)
                local_bad[k] = not near_k.any() or float(np.median(fr[near_k])) > MAX_MEDIAN_RESID_RATIO
            fitted = np.isfinite(v)
            if fitted.sum() and (fitted & ~local_bad).sum() >= max(MIN_STEPS_FOR_SPEED + 1,
                                                                   NOT_ROAD_MIN_KEPT * fitted.sum()):
                not_road = False
                v[local_bad] = w_road[local_bad] = p_rate[local_bad] = np.nan
            else:
                local_bad[:] = False
        if not_road:
            change = [st.resid_still for st in self.steps if np.isfinite(st.resid_still)]
            if float(np.median(change)) < SMOOTH_ROAD_CHANGE:
                # the road pixels barely change between frames: smooth asphalt, blur or compression
                why = "night: too dark for road texture" if reasons.get("dark") else REASON_SMOOTH
                reasons["speed"] = reasons["accel"] = why
            else:
                reasons["speed"] = reasons["accel"] = REASON_NOT_ROAD
                # yaw too when the camera is sideways (portrait frames) or upside down: that turns
                # the far points' sign and axis. A landscape, upright view whose road does not fit
                # (bonnet, tilt, a busy street) still shows the scenery rotating: keep far-point yaw
                if self._sideways_or_upside_down(cam):
                    w_far_off = True
                    reasons["yaw_rate"] = REASON_NOT_ROAD
            v[:] = w_road[:] = p_rate[:] = np.nan
        for k, st in enumerate(self.steps):
            # "the road stands still" while the background sweeps by without a turn: contradiction.
            # A textureless or washed-out road (glare, compression) fits "no motion" about as well
            # as any motion; such a fit is a measurement only when the rest of the scene agrees.
            bg = st.bg_flow_p75 if np.isfinite(st.bg_flow_p75) else st.bg_flow_px
            if np.isfinite(v[k]) and abs(v[k]) < STILL_CHECK_SPEED_MPS and np.isfinite(bg) \
                    and bg > MOVING_FLOW_PX:
                rot_px = abs(st.rates[0] * st.dt * cam.focal_px * self._scale) if np.isfinite(st.rates[0]) else 0.0
                if rot_px < 0.8 * bg:  # a pure rotation moves every background point alike
                    v[k] = w_road[k] = p_rate[k] = np.nan
        # a car cannot turn on the spot: |yaw rate| <= |v| / MIN_TURN_RADIUS_M (+ noise). Turning
        # "without moving" is far scenery fitted as road (an upside-down camera, no road in view)
        spin = []
        for k, st in enumerate(self.steps):
            w = w_road[k] if np.isfinite(w_road[k]) else st.rates[0]
            if np.isfinite(v[k]) and np.isfinite(w):
                bad = abs(w) > 0.05 + abs(v[k]) / MIN_TURN_RADIUS_M
                spin.append(bad)
                if bad:
                    v[k] = w_road[k] = p_rate[k] = np.nan
        if not not_road and self._upside_down():
            spin = [True]
        # most road fits rejected although the road had texture: the view is not a road ahead
        # (over the stretches judged to show a road, when only some do)
        attempted = sum(1 for k, st in enumerate(self.steps)
                        if not st.frozen and st.road_pixels >= ROAD_MIN_PIXELS and not local_bad[k])
        if not not_road and attempted >= 5 and np.isfinite(v).sum() < 0.3 * attempted:
            spin = [True]
        if spin and np.mean(spin) > 0.25 and not not_road:
            not_road = True
            v[:] = w_road[:] = p_rate[:] = np.nan
            reasons["speed"] = reasons["accel"] = REASON_NOT_ROAD
            if self._sideways_or_upside_down(cam):
                w_far_off = True
                reasons["yaw_rate"] = REASON_NOT_ROAD
        for k, st in enumerate(self.steps):
            if st.frozen:
                continue
            bg_still = (np.isfinite(st.bg_flow_px) and st.bg_flow_px < STILL_FLOW_PX
                        and not (np.isfinite(st.bg_flow_p75) and st.bg_flow_p75 > MOVING_FLOW_PX)
                        and self._on_scenery(st))
            road_still = (not np.isfinite(v[k])) or abs(v[k]) < STILL_SPEED_MPS
            if bg_still and road_still:
                still[k] = True
                if st.objects_move:
                    stationary_step[k] = True
                    v[k], v_sd[k] = 0.0, 0.05
                    w_road[k], w_road_sd[k] = 0.0, YAW_SIGMA_FLOOR
                else:  # nothing moves anywhere: a parked car and a frozen feed look the same
                    v[k] = v_sd[k] = np.nan
        # a car does not stop for one frame pair in the middle of a drive: a still stretch counts
        # as stationary only when it lasts (one glare-washed pair reads as "nothing moves")
        k = 0
        while k < m:
            if not stationary_step[k]:
                k += 1
                continue
            e = k
            while e < m and stationary_step[e]:
                e += 1
            if e - k < MIN_STATIONARY_STEPS and not (k == 0 and e == m):
                stationary_step[k:e] = False
                v[k:e] = v_sd[k:e] = np.nan
                w_road[k:e] = np.nan
            k = e
        # speed and accel: constant-acceleration smoother, measurements at each interval's middle
        zs = np.full(n, np.nan)
        rs = np.full(n, np.nan)
        zs[j], rs[j] = v, v_sd ** 2
        sp, ac, sp_sd, used = _ca_smooth(t, zs, rs, JERK_PSD)
        # yaw rate: far-point and road measurements fused per pair, then smoothed
        w_far = np.array([st.rates[0] for st in self.steps]) * (cam.focal_px / f_fin)
        if w_far_off:
            w_far[:] = np.nan
        wz = np.full(m, np.nan)
        wr = np.full(m, np.nan)
        # a shaken camera (an impact, a loose mount, a hand-held pan) rotates faster than any car
        # yaws: its rotation there is the camera's, not the vehicle's, so no yaw is measured there
        jolt = self._jolt(t, j, p_rate, w_road)
        shaken = np.nan_to_num(jolt) > SHAKE_JOLT_RAD_S
        for k in range(m):
            if shaken[j[k]]:
                continue
            vals, var = [], []
            if np.isfinite(w_far[k]):
                vals.append(w_far[k])
                var.append(YAW_SIGMA_FAR ** 2)
            if np.isfinite(w_road[k]):
                vals.append(w_road[k])
                var.append(w_road_sd[k] ** 2)
            if vals:
                wi = 1.0 / np.asarray(var)
                wz[k] = float(np.dot(wi, vals) / wi.sum())
                wr[k] = float(1.0 / wi.sum())
        zy = np.full(n, np.nan)
        ry = np.full(n, np.nan)
        zy[j], ry[j] = wz, wr
        yaw, _, _, used_y = _ca_smooth(t, zy, ry, YAW_ACC_PSD)
        # publish only near accepted measurements
        near = _near_measurement(t, used, MAX_GAP_S)
        near_y = _near_measurement(t, used_y, MAX_GAP_S)
        out["speed"] = np.where(near, sp, np.nan)
        out["accel"] = np.where(near, ac, np.nan)
        out["yaw_rate"] = np.where(near_y & ~shaken, yaw, np.nan)
        rel = math.hypot(f_lsd, h_lsd)  # relative scale uncertainty of the camera
        # speed error: the smoother's, the camera scale's and the horizon's (speed ~ 1/(y - y_h)^2,
        # road pixels typically 0.3 H below the horizon)
        rel_hz = min(1.0, 2.0 * hz_sd / (0.3 * cam.height))
        err = np.sqrt(sp_sd ** 2 + (rel ** 2 + rel_hz ** 2) * sp ** 2)
        tol = np.maximum(SPEED_CONF_TOL_MPS, SPEED_CONF_TOL_REL * np.abs(sp))
        conf = 1.0 / (1.0 + (err / tol) ** 2)
        # darker video: blur, noise and moving light make the road flow less reliable
        road_b = [st.road_brightness for st in self.steps if np.isfinite(st.road_brightness)]
        bright = float(np.median(road_b)) if road_b else float(np.median(self.brightness))
        conf *= float(np.clip((bright - DARK_ROAD_GRAY) / (DARK_MEAN_GRAY - DARK_ROAD_GRAY), 0.2, 1.0))
        conf *= min(1.0, used.sum() / 5.0)  # a handful of pairs is not a track record
        out["speed_conf"] = np.where(near, conf, np.nan)
        stat = np.full(n, np.nan)
        stat[j] = np.where(stationary_step, 1.0, np.where(np.isfinite(v) & ~still, 0.0, np.nan))
        if n and np.isfinite(stat[min(1, n - 1)]):
            stat[0] = stat[min(1, n - 1)]
        out["stationary"] = stat
        stat_frames = stat == 1.0
        out["speed"][stat_frames] = 0.0
        out["accel"][stat_frames & np.isfinite(out["accel"])] = 0.0
        out["speed_conf"][stat_frames] = np.maximum(np.nan_to_num(out["speed_conf"][stat_frames]), 0.9)
        # jolt
        out["jolt"] = jolt
        # status
        status = {}
        for f in FIELDS:
            cov = float(np.isfinite(out[f]).mean()) if n else 0.0
            r = None if cov >= 0.5 else reasons.get(f) or reasons.get("speed") or "too few usable frame pairs"
            status[f] = _status(cov > 0, cov, r)
        out["status"] = status
        return out

    def _sideways_or_upside_down(self, cam: CameraModel) -> bool:
        """A camera mounted sideways (portrait frames: dashcams record landscape) or upside down."""
        return cam.height > cam.width or self._upside_down()

    def _upside_down(self) -> bool:
        """Sky and scenery below the road? In daylight the top third (sky, trees, buildings) is
        brighter and busier than the road in the bottom third; both reversed means the picture is
        upside down. Dark video is not judged (a lit road under a black sky reverses brightness)."""
        if len(self._sky_stats) < 3 or float(np.median(self.brightness)) < 2 * DARK_MEAN_GRAY:
            return False
        top_b, bot_b, top_g, bot_g = np.median(np.asarray(self._sky_stats), axis=0)
        return bool(bot_b - top_b > UPSIDE_DOWN_BRIGHTER and bot_g > 1.3 * top_g)

    def _scale_model(self, cam: CameraModel, hz: float, hz_src: str):
        """Focal length and camera height for the metric scale, with their log-sd and provenance.

        From camera.json they are kept. Otherwise the focal length comes from turns (far points'
        rotation flow) fused with the assumed-FOV prior, and the camera height from cars standing on
        the road (``h = 1.5 m * (y_b - y_h) / box height``) fused with the 1.3 m prior -- the latter
        only when the horizon was not itself derived from cars with an assumed height."""
        if cam.focal_source == "config":
            f_fin, f_lsd, f_src = cam.focal_px, CAM_REL_ERR_CONFIG, "config"
        else:
            f_fin, f_lsd, used = _fuse_log(cam.focal_px, PRIOR_LOG_SD, self.focal_obs, 0.03, FOCAL_MIN_OBS)
            f_src = "turns" if used else "assumed_fov"
        if _height_configured(cam):
            h_fin, h_lsd, h_src = cam.camera_height_m, CAM_REL_ERR_CONFIG, "config"
        else:
            obs = []
            if hz_src in ("road_flow", "config", "lanes"):
                obs = [CAR_HEIGHT_M * (yb - hz) / hb for yb, hb in self.car_obs
                       if yb - hz > ROAD_MIN_BELOW_HORIZON * cam.height]
            # boxes of one car over consecutive frames are not independent: ~5 frames per sample
            h_fin, h_lsd, used = _fuse_log(cam.camera_height_m, PRIOR_LOG_SD, obs, 0.08, CAR_MIN_OBS, 0.2)
            h_src = "cars" if used else "assumed"
        est = {"focal_px": round(f_fin, 1), "focal_source": f_src, "camera_height_m": round(h_fin, 3),
               "height_source": h_src, "scale_rel_sd": round(math.hypot(f_lsd, h_lsd), 3)}
        return f_fin, f_lsd, h_fin, h_lsd, est

    def _jolt(self, t: np.ndarray, j: np.ndarray, p_rate: np.ndarray, w_road: np.ndarray) -> np.ndarray:
        n = len(t)
        comps = np.full((3, n), np.nan)
        for k, st in enumerate(self.steps):
            r = st.rates
            if np.all(np.isfinite(r)):
                comps[:, st.j] = r
            elif np.isfinite(w_road[k]) and np.isfinite(p_rate[k]):
                comps[:, st.j] = (w_road[k], p_rate[k], 0.0)
        ok = np.isfinite(comps[0])
        out = np.full(n, np.nan)
        if ok.sum() < 3:
            return out
        hp = np.zeros((3, n))
        for c in range(3):
            base = _running_median(t, comps[c], JOLT_WINDOW_S)
            hp[c] = comps[c] - base
        out[ok] = np.sqrt(np.sum(hp[:, ok] ** 2, axis=0))
        return out

    def _reasons(self, cam: CameraModel) -> dict:
        """Why fields could not be estimated, from what the pairs saw (None when no problem)."""
        steps = self.steps
        if len(self.t_s) < 3:
            r = "video too short"
            return {f: r for f in FIELDS}
        if not steps:
            return {f: "video too short" for f in FIELDS}
        frozen = np.mean([st.frozen for st in steps])
        nothing_moves = np.mean([st.frozen or (np.isfinite(st.bg_flow_px) and st.bg_flow_px < STILL_FLOW_PX
                                                and not st.objects_move) for st in steps])
        dark = float(np.median(self.brightness)) < DARK_MEAN_GRAY
        no_tex = np.mean([st.road_pixels < ROAD_MIN_PIXELS for st in steps if not st.frozen] or [1.0])
        dark_road = np.mean([st.road_brightness < DARK_ROAD_GRAY for st in steps if not st.frozen] or [0.0])
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


# ---------------------------------------------------------------------- helpers
def _status(estimated: bool, coverage: float, reason: str | None) -> dict:
    return {"estimated": bool(estimated), "coverage": round(float(coverage), 4),
            "reason": None if estimated and reason is None else reason, "source": "video"}


def _height_configured(cam: CameraModel) -> bool:
    return getattr(cam, "height_source", "default") == "config"


def _track(prev, gray, p0: np.ndarray, lk: dict):
    """LK from ``prev`` to ``gray``, forward-backward checked (work-image px)."""
    import cv2

    a = p0.astype(np.float32).reshape(-1, 1, 2)
    b, st, _ = cv2.calcOpticalFlowPyrLK(prev, gray, a, None, **lk)
    back, stb, _ = cv2.calcOpticalFlowPyrLK(gray, prev, b, None, **lk)
    fb = np.linalg.norm((back - a).reshape(-1, 2), axis=1)
    good = (st.ravel() == 1) & (stb.ravel() == 1) & (fb < 0.8)
    return a.reshape(-1, 2).astype(np.float64), b.reshape(-1, 2).astype(np.float64), good


def _free_flow(prev: np.ndarray, gray: np.ndarray, top_row: int = 0) -> np.ndarray | None:
    """Dense optical flow prev -> gray (work px; DIS) from ``top_row`` down (zero above): a motion
    model free enough to follow anything on the road but its noise, so that its residual is the
    pair's noise floor."""
    import cv2

    top = int(min(max(top_row, 0), max(prev.shape[0] - 16, 0)))
    flow = np.zeros(prev.shape + (2,), np.float32)
    try:
        dis = cv2.DISOpticalFlow_create(FREE_FLOW_PRESET)
        dis.setPatchStride(FREE_FLOW_STRIDE)
        dis.setGradientDescentIterations(FREE_FLOW_ITERS)
        flow[top:] = dis.calc(np.ascontiguousarray(prev[top:]), np.ascontiguousarray(gray[top:]), None)
    except cv2.error:
        return None
    return flow


def _fit_ratio(g: dict) -> float:
    """How much of the road's change between the frames the planar fit leaves unexplained.

    Raw: fit residual / "nothing moved" residual. Block noise of heavy compression changes from
    frame to frame, so even the right motion leaves a residual near that of "nothing moved"; the
    free optical flow's residual on the same pixels measures that floor, and the share above it
    (``(resid - free) / (still - free)``) is what the planar model fails to explain. The smaller of
    the two is used; the raw ratio alone where the free flow fits worse than the plane (it then
    measures no floor), explains under FREE_MIN_SIGNAL gray levels of the change, or moves the road
    pixels elsewhere than the plane does (``free_epe`` above FREE_MAX_EPE_* of ``trans_flow``)."""
    raw = g["resid"] / max(g["resid_still"], 1e-6)
    free = g.get("resid_free", math.nan)
    # the floor is only measured where the free flow fits at least as well as the plane (on clean
    # frames the regularised flow is the coarser model) and explains a real part of the change
    if not np.isfinite(free) or free > g["resid"] or g["resid_still"] - free < FREE_MIN_SIGNAL:
        return raw
    # ... and only where the free flow sees the plane's own motion: noise that moves from frame to
    # frame (rain streaks, wipers) lets it explain change no scene motion made, and then any plane,
    # a wrong one included, would look good against that floor. Judged against the flow the plane's
    # translation makes, so a fit right about a turn and wrong about the speed gets no floor either.
    epe = g.get("free_epe", math.nan)
    if np.isfinite(epe) and epe > max(FREE_MAX_EPE_PX, FREE_MAX_EPE_REL * g.get("trans_flow", 0.0)):
        return raw
    return min(raw, (g["resid"] - free) / (g["resid_still"] - free))


def _fit_ok(g: dict, dt: float, cam: CameraModel) -> bool:
    q = g["x"]
    if not np.all(np.isfinite(q)) or abs(q[2]) / dt > MAX_SPEED_MPS:
        return False
    if g["n"] < ROAD_MIN_PIXELS or g["inlier_frac"] < FIT_MIN_INLIER_FRAC:
        return False
    # a car moves along its heading: sideways only by its yaw times the camera's lever arm (and a
    # little slip), so a fit that slides the camera sideways traded rotation for translation
    if abs(q[1]) / dt > max(MAX_LATERAL_MPS, MAX_LATERAL_REL * abs(q[2]) / dt):
        return False
    # the model must explain the change much better than "nothing moved"
    if g["ratio"] > MAX_RESID_RATIO and g["resid_still"] > 2.0:
        return False
    hz = g["horizon_y"]
    if not (0.15 * cam.height < hz < 0.85 * cam.height):
        return False
    return math.sqrt(max(g["cov"][2, 2], 0.0)) / dt < 2.0


def _ground_to_image(f: float, cx: float, yh: float, h: float) -> tuple[np.ndarray, np.ndarray]:
    """G: ground (X, Z, 1) -> image (homogeneous), and its inverse."""
    G = np.array([[f, cx, 0.0], [0.0, yh, f * h], [0.0, 1.0, 0.0]])
    # inverse of G: Z = w', X = (u' - cx w') / f, 1 = (v' - yh w') / (f h)
    Gi = np.array([[1.0 / f, 0.0, -cx / f], [0.0, 0.0, 1.0], [0.0, 1.0 / (f * h), -yh / (f * h)]])
    return G, Gi


def _planar_motion(q) -> tuple[np.ndarray, np.ndarray, float, float]:
    """T: the ground points' motion (yaw w, then translation tx, tz); P: the image shift p; cos w, sin w."""
    w, tx, tz, p = q
    c, s_ = math.cos(w), math.sin(w)
    T = np.array([[c, s_, -(c * tx + s_ * tz)], [-s_, c, s_ * tx - c * tz], [0.0, 0.0, 1.0]])
    P = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, p], [0.0, 0.0, 1.0]])
    return T, P, c, s_


def ground_homography(q, f: float, cx: float, yh: float, h: float) -> np.ndarray:
    """3x3 image homography of ground points under the planar motion ``q = (w, tx, tz, p)``."""
    G, Gi = _ground_to_image(f, cx, yh, h)
    T, P, _, _ = _planar_motion(q)
    return P @ G @ T @ Gi


def ground_homographies(qs: np.ndarray, f: float, cx: float, yh: float, h: float) -> np.ndarray:
    """``ground_homography`` of each row of (k,4) ``qs`` at once: (k,3,3)."""
    qs = np.asarray(qs, dtype=np.float64)
    w, tx, tz, p = qs.T
    G, Gi = _ground_to_image(f, cx, yh, h)
    c, s_ = np.cos(w), np.sin(w)
    T = np.zeros((len(qs), 3, 3))
    T[:, 0, 0], T[:, 0, 1], T[:, 0, 2] = c, s_, -(c * tx + s_ * tz)
    T[:, 1, 0], T[:, 1, 1], T[:, 1, 2] = -s_, c, s_ * tx - c * tz
    T[:, 2, 2] = 1.0
    P = np.zeros((len(qs), 3, 3))
    P[:, 0, 0] = P[:, 1, 1] = P[:, 2, 2] = 1.0
    P[:, 1, 2] = p
    return P @ G @ T @ Gi


def ground_homography_apply(pts: np.ndarray, q, f: float, cx: float, yh: float, h: float) -> np.ndarray:
    """Map (n,2) image points of the ground through ``ground_homography``."""
    Hm = ground_homography(q, f, cx, yh, h)
    x = pts @ Hm[:, :2].T + Hm[:, 2]
    z = x[:, 2:3]
    z = np.where(np.abs(z) < 1e-9, 1e-9, z)
    return x[:, :2] / z


def ground_homography_jacobian(pts: np.ndarray, q, f: float, cx: float, yh: float, h: float,
                               with_horizon: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``ground_homography_apply`` and its analytic derivatives.

    Returns the mapped (n,2) points and (n,2,m) d(u,v)/d(w, tx, tz, p[, yh]), m = 4 or 5: the
    homography ``P G T Gi`` is linear in each factor, so each derivative is one 3x3 matrix applied
    to the points, then the quotient rule of the perspective division.
    """
    _, tx, tz, _ = q
    G, Gi = _ground_to_image(f, cx, yh, h)
    T, P, c, s_ = _planar_motion(q)
    dT = np.array([
        [[-s_, c, s_ * tx - c * tz], [-c, -s_, c * tx + s_ * tz], [0.0, 0.0, 0.0]],  # d/dw
        [[0.0, 0.0, -c], [0.0, 0.0, s_], [0.0, 0.0, 0.0]],  # d/dtx
        [[0.0, 0.0, -s_], [0.0, 0.0, -c], [0.0, 0.0, 0.0]],  # d/dtz
    ])
    PG = P @ G
    TGi = T @ Gi
    mats = [PG @ dT[0] @ Gi, PG @ dT[1] @ Gi, PG @ dT[2] @ Gi,
            np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]) @ G @ TGi]  # d/dp
    if with_horizon:
        dG = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
        dGi = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -1.0 / (f * h)]])
        mats.append(P @ (dG @ TGi + G @ T @ dGi))
    Hm = PG @ TGi
    D = np.concatenate([Hm] + mats)  # (3 (1+m), 3): every matrix's rows, one product for all
    xh = pts @ D[:, :2].T + D[:, 2]  # (n, 3 (1+m))
    z = xh[:, 2]
    z = np.where(np.abs(z) < 1e-9, 1e-9, z)
    iz = 1.0 / z
    uv = xh[:, :2] * iz[:, None]
    m = len(mats)
    J = np.empty((len(pts), 2, m))
    for i in range(m):
        c0 = 3 * (i + 1)
        J[:, 0, i] = (xh[:, c0] - uv[:, 0] * xh[:, c0 + 2]) * iz
        J[:, 1, i] = (xh[:, c0 + 1] - uv[:, 1] * xh[:, c0 + 2]) * iz
    return uv, J


def _coarse_search(prev, gray, road_mask, scale: float, cam: CameraModel, hz: float, dt: float,
                   w0: float, q_prev: np.ndarray | None, occluder: np.ndarray | None = None):
    """Best (w, 0, tz, 0) on a grid by photometric error of textured road pixels at 1/4 scale.

    Returns (q or None, number of textured road pixels at work scale)."""
    import cv2

    n_tex = int(((road_mask > 0) & (_grad_mag(prev) > GRAD_MIN)).sum())
    if n_tex < ROAD_MIN_PIXELS:
        return None, n_tex
    c = 0.25
    p_small = cv2.resize(cv2.GaussianBlur(prev, (0, 0), 2.0), None, fx=c, fy=c, interpolation=cv2.INTER_AREA)
    g_small = cv2.resize(cv2.GaussianBlur(gray, (0, 0), 2.0), None, fx=c, fy=c, interpolation=cv2.INTER_AREA)
    m_small = cv2.resize(road_mask, (p_small.shape[1], p_small.shape[0]), interpolation=cv2.INTER_NEAREST)
    grad = _grad_mag(p_small)
    ys, xs = np.nonzero((m_small > 0) & (grad > 1.0))
    if len(xs) < 20:
        return None, n_tex
    if len(xs) > 800:
        sel = np.linspace(0, len(xs) - 1, 800).astype(int)
        ys, xs = ys[sel], xs[sel]
    vals0 = p_small[ys, xs].astype(np.float32)
    vals0 -= vals0.mean()
    pts = (np.stack([xs, ys], 1).astype(np.float64) + 0.5) / (c * scale)
    # a global grid (every 1 m/s) and, after a good pair, a finer one around its motion
    cands = [[w, 0.0, sp * dt, 0.0] for w in w0 + np.array([-0.008, 0.0, 0.008])
             for sp in np.arange(-2.0, 50.0, 1.0)]
    if q_prev is not None:
        cands += [[q_prev[0] + dw, 0.0, q_prev[2] + dv * dt, 0.0] for dw in (-0.004, 0.0, 0.004)
                  for dv in np.arange(-3.0, 3.01, 0.5)]
    cands = np.asarray(cands)
    Hs = ground_homographies(cands, cam.focal_px, cam.cx, hz, cam.camera_height_m)
    ph = np.concatenate([pts, np.ones((len(pts), 1))], 1)
    x = ph[None] @ Hs.transpose(0, 2, 1)
    z = np.where(np.abs(x[..., 2]) < 1e-9, 1e-9, x[..., 2])
    mx = (x[..., 0] / z * (c * scale) - 0.5).astype(np.float32)
    my = (x[..., 1] / z * (c * scale) - 0.5).astype(np.float32)
    vals1 = cv2.remap(g_small.astype(np.float32), mx, my, cv2.INTER_LINEAR)
    inside = (mx >= 0) & (my >= 0) & (mx <= g_small.shape[1] - 1) & (my <= g_small.shape[0] - 1) & (z > 0)
    if occluder is not None:  # landing on a static overlay in the second frame: no evidence
        occ = cv2.resize(occluder, (g_small.shape[1], g_small.shape[0]), interpolation=cv2.INTER_AREA)
        inside &= cv2.remap(occ, mx, my, cv2.INTER_NEAREST) == 0
    n_in = inside.sum(axis=1)
    mean1 = np.where(inside, vals1, 0).sum(axis=1) / np.maximum(n_in, 1)
    err = np.where(inside, np.abs(vals1 - mean1[:, None] - vals0[None]), 0).sum(axis=1) / np.maximum(n_in, 1)
    err[n_in < 0.5 * len(xs)] = np.inf
    k = int(np.argmin(err))
    if not np.isfinite(err[k]):
        return None, n_tex
    return cands[k].astype(np.float64), n_tex


def _strongest(vals: np.ndarray, k: int) -> np.ndarray:
    """Ascending positions of the ``k`` largest ``vals``, ties going to the earlier position (the
    set a stable descending sort would keep), by partition rather than a full sort."""
    n = len(vals)
    if k >= n:
        return np.arange(n)
    thr = np.partition(vals, n - k)[n - k]
    above = np.flatnonzero(vals > thr)
    tied = np.flatnonzero(vals == thr)[:k - len(above)]
    return np.sort(np.concatenate([above, tied]))


def _grad_mag(img: np.ndarray) -> np.ndarray:
    import cv2

    f = img.astype(np.float32)
    gx = cv2.Sobel(f, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(f, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    return np.hypot(gx, gy)


def direct_ground_fit(prev: np.ndarray, gray: np.ndarray, road_mask: np.ndarray, scale: float,
                      f: float, cx: float, yh: float, h: float, q0: np.ndarray,
                      levels=(0.25, 0.5, 1.0), max_points: int = 2000, iters: int = 8,
                      fit_horizon: bool = False, horizon_sd: float = 5.0,
                      occluder: np.ndarray | None = None, free_flow=None) -> dict | None:
    """Photometric (direct) fit of the ground-plane motion ``q = (w, tx, tz, p)`` over road pixels.

    Coarse to fine over ``levels`` (fractions of the work image): textured pixels of ``prev`` inside
    ``road_mask`` are mapped by the ground homography into ``gray``; Gauss-Newton on the intensity
    residual (plus a brightness offset), Huber-weighted, weak priors holding ``tx`` and ``p`` near 0.
    With ``fit_horizon`` the horizon row is a parameter too, held to ``yh`` with sd ``horizon_sd``
    px (slow driving barely constrains it). Returns q, covariance, horizon (and its
    variance), the share of inlier pixels, the residual against "no motion", and ~150 sample road
    points (full-frame px) for re-expressing the motion at another horizon; None without texture.
    With ``free_flow`` (``horizon ->`` dense flow prev -> gray in work px, or None), also the
    residual of that flow on the same pixels (``resid_free``: the noise floor the planar model is
    judged against). ``ratio`` (``_fit_ratio``) is the share of the change the fit leaves unexplained.
    """
    import cv2

    q = np.asarray(q0, dtype=np.float64).copy()
    yh0 = float(yh)
    npar = 5 if fit_horizon else 4
    bright = 0.0
    out = None
    prior_sd = np.array([np.inf, 0.1, np.inf, 4.0])
    for lv in levels:
        k = lv * scale  # full-frame px -> level px
        if lv < 1.0:
            p_l = cv2.resize(cv2.GaussianBlur(prev, (0, 0), 0.5 / lv), None, fx=lv, fy=lv, interpolation=cv2.INTER_AREA)
            g_l = cv2.resize(cv2.GaussianBlur(gray, (0, 0), 0.5 / lv), None, fx=lv, fy=lv, interpolation=cv2.INTER_AREA)
            m_l = cv2.resize(road_mask, (p_l.shape[1], p_l.shape[0]), interpolation=cv2.INTER_NEAREST)
        else:
            p_l, g_l, m_l = cv2.GaussianBlur(prev, (3, 3), 0.8), cv2.GaussianBlur(gray, (3, 3), 0.8), road_mask
        occ_l = None
        if occluder is not None:
            occ_l = cv2.resize(occluder, (p_l.shape[1], p_l.shape[0]), interpolation=cv2.INTER_AREA)
            occ_l = cv2.dilate(occ_l, np.ones((3, 3), np.uint8)) if lv < 1.0 else occ_l
        p_l = p_l.astype(np.float32)
        g_l = g_l.astype(np.float32)
        mag = _grad_mag(p_l)
        ys, xs = np.nonzero((m_l > 0) & (mag > GRAD_MIN))
        if len(xs) < 40:
            continue
        if len(xs) > max_points:
            order = _strongest(mag[ys, xs], max_points * 2)
            order = order[np.linspace(0, len(order) - 1, max_points).astype(int)]
            ys, xs = ys[order], xs[order]
        tmpl = p_l[ys, xs]
        full = (np.stack([xs, ys], 1).astype(np.float64) + 0.5) / k
        gx2 = cv2.Sobel(g_l, cv2.CV_32F, 1, 0, ksize=3) / 8.0
        gy2 = cv2.Sobel(g_l, cv2.CV_32F, 0, 1, ksize=3) / 8.0
        Wl, Hl = g_l.shape[1], g_l.shape[0]
        A = None
        for _ in range(iters):
            x2 = ground_homography_apply(full, q, f, cx, yh, h) * k - 0.5
            mx = x2[:, 0].astype(np.float32).reshape(1, -1)
            my = x2[:, 1].astype(np.float32).reshape(1, -1)
            inside = ((mx >= 1) & (my >= 1) & (mx <= Wl - 2) & (my <= Hl - 2)).ravel()
            if occ_l is not None:
                inside &= cv2.remap(occ_l, mx, my, cv2.INTER_NEAREST).ravel() == 0
            if inside.sum() < 30:
                break
            i2 = cv2.remap(g_l, mx, my, cv2.INTER_LINEAR).ravel()[inside]
            ix = cv2.remap(gx2, mx, my, cv2.INTER_LINEAR).ravel()[inside]
            iy = cv2.remap(gy2, mx, my, cv2.INTER_LINEAR).ravel()[inside]
            r = i2 - tmpl[inside] - bright
            J = np.empty((len(r), npar + 1))
            _, dxy = ground_homography_jacobian(full[inside], q, f, cx, yh, h, with_horizon=fit_horizon)
            J[:, :npar] = (ix[:, None] * dxy[:, 0] + iy[:, None] * dxy[:, 1]) * k
            J[:, npar] = -1.0
            sig = 1.4826 * np.median(np.abs(r - np.median(r))) + 1e-3
            cth = 1.345 * max(sig, 1.0)
            a = np.abs(r)
            wts = np.where(a <= cth, 1.0, cth / np.maximum(a, 1e-9))
            s2 = max(sig, 1.0) ** 2
            A = (J * wts[:, None]).T @ J / s2
            g = (J * wts[:, None]).T @ r / s2
            A_data = A.copy()
            for pi in range(4):
                if np.isfinite(prior_sd[pi]):
                    A[pi, pi] += 1.0 / prior_sd[pi] ** 2
                    g[pi] += q[pi] / prior_sd[pi] ** 2
            if fit_horizon:
                A[4, 4] += 1.0 / horizon_sd ** 2
                g[4] += (yh - yh0) / horizon_sd ** 2
            A += 1e-9 * np.diag(np.diag(A)) + 1e-12 * np.eye(npar + 1)
            try:
                delta = -np.linalg.solve(A, g)
            except np.linalg.LinAlgError:
                break
            if not np.all(np.isfinite(delta)):
                break
            q += delta[:4]
            if fit_horizon:
                yh += float(np.clip(delta[4], -10.0, 10.0))
            bright += delta[npar]
            if abs(delta[2]) < 1e-4 and abs(delta[0]) < 1e-5 and (not fit_horizon or abs(delta[4]) < 0.05):
                break
        if A is None:
            continue
        # statistics at this level
        x2 = ground_homography_apply(full, q, f, cx, yh, h) * k - 0.5
        mx = x2[:, 0].astype(np.float32).reshape(1, -1)
        my = x2[:, 1].astype(np.float32).reshape(1, -1)
        inside = ((mx >= 1) & (my >= 1) & (mx <= Wl - 2) & (my <= Hl - 2)).ravel()
        if inside.sum() < 30:
            return None
        r = (cv2.remap(g_l, mx, my, cv2.INTER_LINEAR).ravel() - tmpl - bright)[inside]
        x0 = (full * k - 0.5).astype(np.float32)
        same = (cv2.remap(g_l, x0[:, 0].reshape(1, -1), x0[:, 1].reshape(1, -1),
                          cv2.INTER_LINEAR).ravel() - tmpl)[inside]
        sig = 1.4826 * np.median(np.abs(r - np.median(r))) + 1e-3
        try:
            cov_full = np.linalg.inv(A)
            var_h_data = float(np.linalg.inv(A_data + 1e-9 * np.eye(npar + 1))[4, 4]) if fit_horizon else math.nan
        except np.linalg.LinAlgError:
            return None
        resid_free = free_epe = trans_flow = math.nan
        # the floor is needed only where the raw ratio could matter (above FREE_MIN_RAW_RATIO every
        # decision on it is unchanged); the dense flow costs ~6 ms a pair
        resid = float(np.median(np.abs(r)))
        resid_still = float(np.median(np.abs(same - np.median(same))))
        raw = resid / max(resid_still, 1e-6)
        ff = free_flow(yh) if free_flow is not None and lv == 1.0 and raw > FREE_MIN_RAW_RATIO else None
        if ff is not None and ff.shape[:2] == g_l.shape:
            fx = cv2.remap(ff[..., 0], x0[:, 0].reshape(1, -1), x0[:, 1].reshape(1, -1), cv2.INTER_LINEAR)
            fy = cv2.remap(ff[..., 1], x0[:, 0].reshape(1, -1), x0[:, 1].reshape(1, -1), cv2.INTER_LINEAR)
            mxf = x0[:, 0].reshape(1, -1) + fx
            myf = x0[:, 1].reshape(1, -1) + fy
            in_f = ((mxf >= 1) & (myf >= 1) & (mxf <= Wl - 2) & (myf <= Hl - 2)).ravel() & inside
            if in_f.sum() >= 30:
                rf = (cv2.remap(g_l, mxf, myf, cv2.INTER_LINEAR).ravel() - tmpl)[in_f]
                resid_free = float(np.median(np.abs(rf - np.median(rf))))
                # does the free flow see the plane's motion? (its floor means nothing otherwise)
                dpl = (x2 - x0.astype(np.float64))[in_f]
                dfr = np.stack([fx.ravel(), fy.ravel()], 1)[in_f]
                free_epe = float(np.median(np.hypot(*(dfr - dpl).T)))
                # the part of the plane's flow its translation makes (rotation alone: tx = tz = 0)
                q_rot = np.array([q[0], 0.0, 0.0, q[3]])
                x_rot = ground_homography_apply(full, q_rot, f, cx, yh, h) * k - 0.5
                trans_flow = float(np.median(np.hypot(*(x2 - x_rot)[in_f].T)))
        pick = np.nonzero(inside)[0]
        pick = pick[np.linspace(0, len(pick) - 1, min(150, len(pick))).astype(int)]
        out = {"x": q.copy(), "cov": cov_full[:4, :4], "n": int(inside.sum()),
               "inlier_frac": float(np.mean(np.abs(r) < 3.0 * max(sig, 1.0))),
               "resid": resid, "resid_still": resid_still,
               "resid_free": resid_free, "free_epe": free_epe, "trans_flow": trans_flow,
               "level": lv, "horizon_y": float(yh),
               "horizon_var": float(cov_full[4, 4]) if fit_horizon else math.nan,
               "horizon_var_data": var_h_data,
               "cov5": cov_full[:5, :5].copy() if fit_horizon else None,
               "samples": full[pick].copy()}
        out["ratio"] = _fit_ratio(out)
    return out


def _horizon_prior(cam: CameraModel) -> tuple[float, float]:
    """Horizon prior (row, sd in px) from the camera model's source."""
    sd_frac = {"config": 0.02, "cars": 0.05, "lanes": 0.06}.get(cam.horizon_source, 0.12)
    return cam.horizon_y, sd_frac * cam.height


def _wmedian(x: np.ndarray, w: np.ndarray) -> float:
    o = np.argsort(x)
    c = np.cumsum(w[o])
    return float(x[o][min(len(x) - 1, int(np.searchsorted(c, 0.5 * c[-1])))])


def _fuse_horizon(cam: CameraModel, obs) -> tuple[float, float, str]:
    """Horizon (row, sd px, source): the prior fused with the road-flow measurements' weighted median."""
    prior, prior_sd = _horizon_prior(cam)
    if len(obs) < 3:
        return prior, prior_sd, cam.horizon_source
    y = np.array([o[0] for o in obs])
    var = np.array([o[1] for o in obs]) + HORIZON_SD_FLOOR_PX ** 2
    w = 1.0 / var
    med = _wmedian(y, w)
    # spread of the measurements around their median gives the estimate's real uncertainty
    mad = 1.4826 * _wmedian(np.abs(y - med), w)
    n_eff = w.sum() ** 2 / np.sum(w ** 2)
    sd = max(mad, HORIZON_SD_FLOOR_PX) / math.sqrt(max(n_eff, 1.0))
    sd = max(sd, 0.5)
    wp, wf = 1.0 / prior_sd ** 2, 1.0 / sd ** 2
    fused = (wp * prior + wf * med) / (wp + wf)
    return float(fused), float(1.0 / math.sqrt(wp + wf)), "road_flow"


def _local_horizon(steps, t, hz: float, hz_sd: float) -> np.ndarray:
    """Per pair: the horizon over +-HORIZON_LOCAL_S (road slope changes), pulled to the global one."""
    m = len(steps)
    out = np.full(m, hz)
    out_sd = np.full(m, math.hypot(hz_sd, PITCH_JITTER_PX))
    tj = np.array([t[st.j] for st in steps]) if m else np.zeros(0)
    have = [(k, st.ground["horizon_y"], st.ground["horizon_var_data"]) for k, st in enumerate(steps)
            if st.ground is not None and st.ground.get("horizon_informative")
            and np.isfinite(st.ground["horizon_var_data"])
            and st.ground["horizon_var_data"] < HORIZON_OBS_MAX_SD ** 2]
    if len(have) < 3:
        return out, out_sd
    ks = np.array([h[0] for h in have])
    ys = np.array([h[1] for h in have])
    ws = 1.0 / (np.array([h[2] for h in have]) + HORIZON_SD_FLOOR_PX ** 2)
    tk = tj[ks]
    wg = 1.0 / max(hz_sd, 0.5) ** 2
    for k in range(m):
        sel = np.abs(tk - tj[k]) <= HORIZON_LOCAL_S
        if sel.sum() < 5:
            continue
        med = _wmedian(ys[sel], ws[sel])
        mad = 1.4826 * _wmedian(np.abs(ys[sel] - med), ws[sel])
        n_eff = ws[sel].sum() ** 2 / np.sum(ws[sel] ** 2)
        sd = max(mad, HORIZON_SD_FLOOR_PX) / math.sqrt(max(n_eff, 1.0))
        wl = 1.0 / sd ** 2
        out[k] = (wg * hz + wl * med) / (wg + wl)
        out_sd[k] = math.hypot(1.0 / math.sqrt(wg + wl), PITCH_JITTER_PX)
    return out, out_sd


def _condition_on_horizon(g: dict, hz: float, hz_sd: float):
    """The pair's motion given a horizon prior N(hz, hz_sd^2): Gaussian conditioning of the fit's
    joint (q, horizon) estimate. A pair whose own horizon is sharp keeps its motion; one whose
    horizon is vague (slow driving) is re-expressed at the prior's horizon."""
    if g.get("cov5") is None:
        return g["x"], g["cov"]
    C = g["cov5"]
    Cqy = C[:4, 4]
    Syy = C[4, 4] + hz_sd ** 2
    gain = Cqy / Syy
    q = g["x"] + gain * (hz - g["horizon_y"])
    cq = C[:4, :4] - np.outer(gain, Cqy)
    return q, cq


def _refit_at_horizon(fits: list[dict], horizons, cam: CameraModel):
    """Re-express each pair's fitted motion at another horizon row.

    The fitted (q, horizon) maps the pair's sample road points to their positions in the second
    frame; q' at the new horizon is the batched Gauss-Newton least-squares fit of those
    correspondences. Returns (k,4) q' and the forward-translation sd (m) carried over from the fit.
    """
    f, cx, h = cam.focal_px, cam.cx, cam.camera_height_m
    K = len(fits)
    q_new = np.full((K, 4), np.nan)
    sd_tz = np.full(K, np.nan)
    for i, (g, yh_new) in enumerate(zip(fits, horizons)):
        a = g["samples"]
        sd_tz[i] = math.sqrt(max(g["cov"][2, 2], 0.0))
        if abs(yh_new - g["horizon_y"]) < 0.05:
            q_new[i] = g["x"]
            continue
        b = ground_homography_apply(a, g["x"], f, cx, g["horizon_y"], h)
        ok = (a[:, 1] - yh_new > 2.0) & np.all(np.isfinite(b), axis=1)
        if ok.sum() < 10:
            continue
        a, b = a[ok], b[ok]
        q = g["x"].copy()
        # with a lower horizon the same image motion means a larger depth: scale the start
        for _ in range(8):
            x2, Jp = ground_homography_jacobian(a, q, f, cx, yh_new, h)
            r = (x2 - b).ravel()
            J = Jp.reshape(-1, 4)
            try:
                delta = -np.linalg.lstsq(J, r, rcond=None)[0]
            except np.linalg.LinAlgError:
                break
            q += delta
            if np.max(np.abs(delta)) < 1e-6:
                break
        q_new[i] = q
        if abs(g["x"][2]) > 1e-6:
            sd_tz[i] *= abs(q[2] / g["x"][2])
    return q_new, sd_tz


def _ca_smooth(t: np.ndarray, z: np.ndarray, r: np.ndarray, q_psd: float):
    """Constant-acceleration Kalman filter + RTS smoother over frame times.

    ``z[k]`` (NaN = none) measures the value at the middle of the interval ending at frame k
    (``x - a*dt/2``) with variance ``r[k]``. Innovations beyond GATE_SIGMA are rejected (three in
    a row are accepted: the value really changed). Returns value, derivative, value sd and the mask
    of accepted measurements. Before the first and after the last accepted measurement the value
    is held (not extrapolated) and the derivative is NaN.
    """
    n = len(t)
    val = np.full(n, np.nan)
    der = np.full(n, np.nan)
    sd = np.full(n, np.nan)
    used = np.zeros(n, bool)
    first = np.nonzero(np.isfinite(z) & np.isfinite(r))[0]
    if len(first) == 0:
        return val, der, sd, used
    xs = np.zeros((n, 2))
    Ps = np.zeros((n, 2, 2))
    xp_s = np.zeros((n, 2))
    Pp_s = np.zeros((n, 2, 2))
    # start from the median of the first measurements (one bad first pair must not anchor the gate)
    z0 = z[first[:5]]
    spread = 1.4826 * float(np.median(np.abs(z0 - np.median(z0))))
    x = np.array([float(np.median(z0)), 0.0])
    P = np.diag([max(float(np.median(r[first[:5]])), 0.01) * 4 + spread ** 2 + 1.0, 4.0])
    rejected = 0
    for k in range(n):
        dtk = t[k] - t[k - 1] if k > 0 else 0.0
        if k > 0:
            F = np.array([[1.0, dtk], [0.0, 1.0]])
            Q = q_psd * np.array([[dtk ** 3 / 3, dtk ** 2 / 2], [dtk ** 2 / 2, dtk]])
            x = F @ x
            P = F @ P @ F.T + Q
        xp_s[k], Pp_s[k] = x, P
        if np.isfinite(z[k]) and np.isfinite(r[k]):
            Hm = np.array([1.0, -dtk / 2.0])
            S = float(Hm @ P @ Hm + r[k])
            innov = float(z[k] - Hm @ x)
            if innov * innov <= GATE_SIGMA ** 2 * S or rejected >= 2:
                K = P @ Hm / S
                x = x + K * innov
                P = P - np.outer(K, Hm @ P)
                used[k] = True
                rejected = 0
            else:
                rejected += 1
        xs[k], Ps[k] = x, P
    # RTS smoother
    for k in range(n - 2, -1, -1):
        dtk = t[k + 1] - t[k]
        F = np.array([[1.0, dtk], [0.0, 1.0]])
        try:
            C = Ps[k] @ F.T @ np.linalg.inv(Pp_s[k + 1])
        except np.linalg.LinAlgError:
            continue
        xs[k] = xs[k] + C @ (xs[k + 1] - xp_s[k + 1])
        Ps[k] = Ps[k] + C @ (Ps[k + 1] - Pp_s[k + 1]) @ C.T
    val, der = xs[:, 0].copy(), xs[:, 1].copy()
    sd = np.sqrt(np.maximum(Ps[:, 0, 0], 0.0))
    # Beyond the first and last accepted measurements the model would carry the trend on (a yaw
    # rate rising at 2.7 rad/s^2 when the fits stop at an impact became a 2 rad/s "spin" 0.5 s
    # later): hold the value at the boundary instead; its sd keeps growing as predicted, and the
    # derivative there is not known.
    if used.any():
        k0, k1 = int(np.argmax(used)), n - 1 - int(np.argmax(used[::-1]))
        val[:k0], val[k1 + 1:] = val[k0], val[k1]
        der[:k0] = np.nan
        der[k1 + 1:] = np.nan
    return val, der, sd, used


def _near_measurement(t: np.ndarray, used: np.ndarray, max_gap: float) -> np.ndarray:
    """Frames within ``max_gap`` s of an accepted measurement (the interval before it included)."""
    if not used.any():
        return np.zeros(len(t), bool)
    tu = t[used]
    idx = np.searchsorted(tu, t)
    d_next = np.where(idx < len(tu), tu[np.minimum(idx, len(tu) - 1)] - t, np.inf)
    d_prev = np.where(idx > 0, t - tu[np.maximum(idx - 1, 0)], np.inf)
    return np.minimum(d_next, d_prev) <= max_gap


def _running_median(t: np.ndarray, v: np.ndarray, window_s: float) -> np.ndarray:
    out = np.full(len(v), np.nan)
    lo = np.searchsorted(t, t - window_s / 2, side="left")
    hi = np.searchsorted(t, t + window_s / 2, side="right")
    for i in range(len(v)):
        seg = v[lo[i]:hi[i]]
        seg = seg[np.isfinite(seg)]
        if len(seg):
            out[i] = np.median(seg)
    return out


def _focal_from_rotation(a: np.ndarray, b: np.ndarray, cam: CameraModel, hz: float,
                         scale: float) -> float | None:
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
    if abs(A) * scale < FOCAL_MIN_SHIFT_PX or A * B <= 0:
        return None
    try:
        cov = np.linalg.inv((M * w[:, None]).T @ (M * w[:, None])) * sig ** 2
    except np.linalg.LinAlgError:
        return None
    if abs(B) < 3.0 * math.sqrt(max(cov[1, 1], 0.0)):
        return None
    f = math.sqrt(A / B)
    return f if 0.2 * cam.width < f < 3.0 * cam.width else None


def _fuse_log(prior: float, prior_sd: float, obs, obs_floor: float, min_obs: int,
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


def _thirds(gray: np.ndarray) -> tuple[float, float, float, float]:
    """Mean brightness and mean absolute vertical+horizontal gradient of the top and bottom thirds."""
    h = gray.shape[0] // 3
    g = gray.astype(np.float32)
    out = []
    for part in (g[:h], g[-h:]):
        tex = float(np.abs(np.diff(part, axis=0)).mean() + np.abs(np.diff(part, axis=1)).mean()) if h > 1 else 0.0
        out.append((float(part.mean()), tex))
    return out[0][0], out[1][0], out[0][1], out[1][1]
