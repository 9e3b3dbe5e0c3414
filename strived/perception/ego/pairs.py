"""What the estimator gathered: per frame pair (``PairStep``), over the clip (``Evidence``), and the
per-pair motion the series stage derives from it (``PairSeries``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class PairStep:
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
                                          # above the image noise (``noise_floor.fit_ratio``; kept or not)
    resid_still: float = math.nan         # median change of the road pixels between the frames


@dataclass
class Evidence:
    """Everything the frames gave, for the series stage (the estimator's own lists, not copies)."""

    t_s: list[float]
    brightness: list[float]               # mean gray per frame
    steps: list[PairStep]
    horizon_obs: list[tuple[float, float]]            # (row, variance) per pair, full-frame px
    sky_stats: list[tuple[float, float, float, float]]  # top/bottom third brightness, texture
    car_obs: list[tuple[float, float]]                # (box bottom y, box height), full-frame px
    focal_obs: list[float]                            # focal lengths measured from turns (px)
    scale: float                                      # work-image width / frame width


@dataclass
class PairSeries:
    """Per pair: speed (m/s) and road yaw rate (rad/s) with their sd, pitch rate (rad/s), and
    whether the pair is still / the ego stationary there. Stages edit the arrays in place."""

    v: np.ndarray
    v_sd: np.ndarray
    w_road: np.ndarray
    w_road_sd: np.ndarray
    p_rate: np.ndarray
    still: np.ndarray
    stationary_step: np.ndarray

    @classmethod
    def empty(cls, m: int) -> PairSeries:
        return cls(np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan),
                   np.full(m, np.nan), np.zeros(m, bool), np.zeros(m, bool))

    def drop(self, sel) -> None:
        """No speed, road yaw or pitch for the pairs ``sel`` (a mask, a slice or an index)."""
        self.v[sel] = self.w_road[sel] = self.p_rate[sel] = np.nan
