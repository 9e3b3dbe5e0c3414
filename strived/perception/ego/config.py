"""The ego-motion estimator's tuning constants: one set for every video.

Distances are in camera heights (h), rows in fractions of the frame height (H), pixel tolerances in
pixels of the work image (the downscaled gray frame) unless a name says "full-frame". ``EGO`` is the
set the product uses; a test or an experiment passes ``dataclasses.replace(EGO, NAME=value)`` to
``EgoMotionEstimator(config=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EgoConfig:
    # ---- road region and road fit (road_fit.py)
    ROAD_MAX_LATERAL_H: float = 2.0       # h: road pixels |X| < 2 h (ego lane and its edges; wider takes in
    #                                       raised verges)
    ROAD_MAX_DEPTH_H: float = 20.0        # h: ... Z < 20 h
    ROAD_MIN_DEPTH_H: float = 3.0         # h: ... Z > 3 h: nearer, a car's own bonnet hides the road (the sight
    #                                       line over a bonnet edge ~1.5 m ahead, ~0.4 m below the camera meets
    #                                       the road ~5 m = ~3.7 h out; KITTI's roof camera sees none nearer
    #                                       than 3.6 h): what shows there is bonnet, dashboard or its reflection
    ROAD_MIN_BELOW_HORIZON: float = 0.03  # H: ... at least 3 % of H below the horizon
    ROAD_MIN_PIXELS: int = 150            # textured road pixels needed for a fit
    GRAD_MIN: float = 2.0                 # gray levels per pixel: "textured"
    FIT_MIN_INLIER_FRAC: float = 0.55     # share of road pixels a fit must explain within 3 sigma
    MAX_SPEED_MPS: float = 70.0           # m/s: faster road fits are refused
    MAX_LATERAL_MPS: float = 1.5          # m/s: a road fit's sideways camera speed may not exceed max(1.5 m/s,
    MAX_LATERAL_REL: float = 0.3          # 30 % of its forward speed) (a car does not slide: yaw x lever arm
    #                                       ~ 1 m/s at most)
    ROAD_DELAY_FRAMES: int = 10           # frames: road fits run this many frames late (static mask learnt first)
    DARK_ROAD_GRAY: float = 20.0          # gray: a road region darker than this is not used at all
    MAX_RESID_RATIO: float = 0.6          # a pair's road fit must explain its change at least this well
    MAX_MEDIAN_RESID_RATIO: float = 0.45  # ... and the video's median fit (else: not a flat road ahead)

    # ---- noise floor of the road fit (noise_floor.py)
    FREE_FLOW_PRESET: int = 2             # cv2.DISOPTICAL_FLOW_PRESET_MEDIUM (FAST fits clean roads worse than
    #                                       the plane)
    FREE_FLOW_STRIDE: int = 4             # px: ... with the patch stride and descent iterations of a lighter
    FREE_FLOW_ITERS: int = 8              #     preset (finest scale 1/2 is what matters; ~40 % cheaper)
    FREE_MIN_RAW_RATIO: float = 0.25      # below this raw ratio a pair is well explained: no floor needed
    FREE_MIN_SIGNAL: float = 2.0          # gray levels: a pair whose free optical flow explains less than this
    #                                       of the road's change carries no motion signal above the noise (raw
    #                                       ratio kept)
    FREE_MAX_EPE_PX: float = 1.0          # px: the free flow must agree with the plane's flow on the road
    FREE_MAX_EPE_REL: float = 0.65        # pixels: median endpoint difference <= max(1 px, 65 % of the flow the
    #                                       plane's translation makes there), else its residual is no floor for
    #                                       this plane (rain streaks, a fit that is right about the turn and
    #                                       wrong about the speed: raw kept)

    # ---- whole-clip sanity (sanity.py)
    NOT_ROAD_LOCAL_S: float = 1.5         # s: "not a flat road" judged over the pairs within +-1.5 s (a busy,
    #                                       turning or occluded stretch does not void the rest of the clip)
    NOT_ROAD_MIN_KEPT: float = 0.3        # ... unless fewer than 30 % of the fitted pairs pass: then the whole
    #                                       video
    SMOOTH_ROAD_CHANGE: float = 4.0       # gray: median change of road pixels between frames below which an
    #                                       unexplained road means "no texture", not "no road"
    MIN_TURN_RADIUS_M: float = 4.0        # m: a car cannot turn on the spot: |yaw rate| <= |v| / 4 m (+ noise)
    UPSIDE_DOWN_BRIGHTER: float = 20.0    # gray levels by which a sky at the bottom outshines the road at the top
    DARK_MEAN_GRAY: float = 45.0          # gray: darker frames (median): speed confidence reduced

    # ---- background corners and static pixels (estimator.py, static_pixels.py)
    MIN_FAR_POINTS: int = 12              # background corners above the horizon band needed for far-point rates
    STATIC_MIN_MOVING_FRAMES: int = 10    # frames in motion needed before pixels can be called static
    STATIC_CHANGE_FRAC: float = 0.12      # a static pixel changes in < 12 % of moving frames ...
    STATIC_MIN_GRAD: float = 10.0         # gray/px: ... and is textured in the time-averaged image
    STATIC_MIN_CORNER: float = 20.0       # gray^2: ... with corners (min eigenvalue of the structure tensor)
    MOVING_FLOW_PX: float = 1.0           # px: median background flow above this: the scene moves

    # ---- stationary (stationary.py)
    STILL_FLOW_PX: float = 0.3            # px: median background flow below this (and road still): nothing moves
    STILL_SPEED_MPS: float = 0.4          # m/s: a road fit slower than this counts as a still road
    STILL_CHECK_SPEED_MPS: float = 2.0    # m/s: a road fit slower than this must agree with a still background
    MIN_STATIONARY_STEPS: int = 3         # consecutive still pairs needed to call the ego stopped
    SCENE_CELL_PX: int = 16               # px: scenery evidence grid: cells where corners moved with the scene
    SCENE_MIN_SHARE: float = 0.5          # a still pair's corners must lie on such cells this often, once the
    #                                       scene has been seen moving (>= STATIC_MIN_MOVING_FRAMES pairs), to
    #                                       mean "stopped"

    # ---- horizon (horizon.py)
    HORIZON_SD_FLOOR_PX: float = 2.0      # full-frame px: per-pair horizon precision is never taken as better
    HORIZON_LOCAL_S: float = 1.5          # s: local horizon over the pairs within +-1.5 s (road slope changes)
    HORIZON_MID_ROW: float = 0.25         # H: translation flow measured a quarter frame height below the horizon
    HORIZON_MIN_FLOW_PX: float = 2.5      # px: ... must reach 2.5 work px for the pair to measure the horizon
    HORIZON_OBS_MAX_SD: float = 4.0       # full-frame px: a pair's horizon counts as a measurement when its own
    #                                       sd < 4 px
    PITCH_JITTER_PX: float = 3.0          # full-frame px: frame-to-frame wander of the road horizon (bumps, pitch)

    # ---- smoothing (smoother.py, series.py)
    JERK_PSD: float = 0.5                 # m^2/s^5: Kalman process noise of the speed model
    YAW_ACC_PSD: float = 0.3              # (rad/s^2)^2/s: ... of the yaw-rate model
    SPEED_SIGMA_FLOOR: float = 0.3        # m/s per measurement (measured scatter on KITTI)
    SPEED_REL_SIGMA: float = 0.05         # + 5 % of the speed
    YAW_SIGMA_FAR: float = 0.015          # rad/s: far-point yaw
    YAW_SIGMA_FLOOR: float = 0.01         # rad/s: road yaw is never taken as more precise
    GATE_SIGMA: float = 4.0               # innovations beyond 4 sigma are rejected (three in a row accepted)
    MAX_GAP_S: float = 1.0                # s: no value more than this far from an accepted measurement
    MIN_STEPS_FOR_SPEED: int = 2          # frame pairs needed before any speed is published

    # ---- jolt (jolt.py)
    JOLT_WINDOW_S: float = 1.0            # s: the running median the angular rates are compared with
    SHAKE_JOLT_RAD_S: float = 0.5         # rad/s: camera rotation this far off its 1 s median (> 5 rad/s^2
    #                                       within a frame pair at 10 fps): a shaken camera, no vehicle yaw
    #                                       measured there. A car turning at a junction reads <= 0.25
    #                                       (ccd_000838 before its impact)

    # ---- metric scale: focal length x camera height (scale.py)
    CAM_REL_ERR_CONFIG: float = 0.03      # relative error of a configured focal length, and of a height
    SPEED_CONF_TOL_MPS: float = 0.5       # m/s: confidence 0.5 where the expected error is max(0.5 m/s, 15 %)
    SPEED_CONF_TOL_REL: float = 0.15
    CAR_MIN_SCORE: float = 0.4            # detector score of a car box that measures the camera height
    CAR_MIN_HEIGHT: float = 0.04          # H: car boxes at least 4 % of H tall
    CAR_HEIGHT_M: float = 1.5             # m: geometry.CLASS_SIZE_PRIORS["car"]
    CAR_MIN_OBS: int = 15                 # car boxes needed before they move the camera height off its prior
    FOCAL_MIN_OBS: int = 8                # turns needed before they move the focal length off its prior
    FOCAL_MIN_SHIFT_PX: float = 4.0       # px: rotation shift for a pair to measure the focal length
    PRIOR_LOG_SD: float = 0.2             # log units: assumed FOV / camera height: ~20 % uncertain


EGO = EgoConfig()

# Not tuning: the published fields and the reasons given when they are not estimated.
FIELDS = ("speed", "accel", "yaw_rate", "jolt")
REASON_SMOOTH = "no road texture (smooth road surface, blur or heavy compression)"
REASON_NOT_ROAD = ("road motion does not fit a flat road ahead (camera not facing forward, "
                   "rotated or tilted video?)")
