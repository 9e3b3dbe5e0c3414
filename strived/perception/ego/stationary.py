"""Stationary: road and background still while something in the image moves -> speed 0 with high
confidence; identical frames or a scene where nothing moves -> NaN (a parked car and a frozen feed
look the same). Still counts only on corners of the scenery (``Scenery``), and only when it lasts.
"""

from __future__ import annotations

import numpy as np

from ..geometry import CameraModel
from .config import EGO, EgoConfig
from .pairs import PairSeries, PairStep


class Scenery:
    """Grid (SCENE_CELL_PX work px) of the cells where background corners moved with the scene."""

    def __init__(self, cfg: EgoConfig = EGO):
        self.cfg = cfg
        self.cells: np.ndarray | None = None  # scenery grid: corners moved there with the scene
        self.pairs = 0                        # pairs whose background swept by

    def evidence(self, a: np.ndarray, mags: np.ndarray, step: PairStep, shape) -> None:
        """Mark the grid cells where background corners moved while the scene swept by, and keep the
        cells of a still pair's corners. A windscreen reflection or the dashboard never moves with the
        scene: once the scene has been seen moving, a pair is "still" only on corners of the scenery."""
        cell = self.cfg.SCENE_CELL_PX
        gh, gw = (shape[0] + cell - 1) // cell, (shape[1] + cell - 1) // cell
        if self.cells is None or self.cells.shape != (gh, gw):
            self.cells = np.zeros((gh, gw), bool)
        cells = (np.clip(a[:, 1] // cell, 0, gh - 1).astype(int) * gw
                 + np.clip(a[:, 0] // cell, 0, gw - 1).astype(int))
        if step.bg_flow_px > self.cfg.MOVING_FLOW_PX:
            self.cells.flat[cells[mags > self.cfg.MOVING_FLOW_PX]] = True
            self.pairs += 1
        elif step.bg_flow_px < self.cfg.STILL_FLOW_PX:
            step.bg_cells = cells

    def on_scenery(self, st: PairStep) -> bool:
        """Do a still pair's corners show the scenery (not only what never moves with it)?"""
        if self.pairs < self.cfg.STATIC_MIN_MOVING_FRAMES or st.bg_cells is None:
            return True   # the scene was never seen moving: nothing to tell scenery from overlays
        return float(np.mean(self.cells.flat[st.bg_cells])) >= self.cfg.SCENE_MIN_SHARE


def drop_still_road_against_moving_scene(ps: PairSeries, steps: list[PairStep], cam: CameraModel, scale: float,
                                         cfg: EgoConfig = EGO) -> None:
    """"The road stands still" while the background sweeps by without a turn: contradiction.
    A textureless or washed-out road (glare, compression) fits "no motion" about as well as any
    motion; such a fit is a measurement only when the rest of the scene agrees."""
    v = ps.v
    for k, st in enumerate(steps):
        bg = st.bg_flow_p75 if np.isfinite(st.bg_flow_p75) else st.bg_flow_px
        if np.isfinite(v[k]) and abs(v[k]) < cfg.STILL_CHECK_SPEED_MPS and np.isfinite(bg) \
                and bg > cfg.MOVING_FLOW_PX:
            rot_px = abs(st.rates[0] * st.dt * cam.focal_px * scale) if np.isfinite(st.rates[0]) else 0.0
            if rot_px < 0.8 * bg:  # a pure rotation moves every background point alike
                ps.drop(k)


def mark_still(ps: PairSeries, steps: list[PairStep], scenery: Scenery, cfg: EgoConfig = EGO) -> None:
    """Still pairs (background and road): stationary (speed 0) where something else moves,
    unknown where nothing does."""
    v, v_sd = ps.v, ps.v_sd
    for k, st in enumerate(steps):
        if st.frozen:
            continue
        bg_still = (np.isfinite(st.bg_flow_px) and st.bg_flow_px < cfg.STILL_FLOW_PX
                    and not (np.isfinite(st.bg_flow_p75) and st.bg_flow_p75 > cfg.MOVING_FLOW_PX)
                    and scenery.on_scenery(st))
        road_still = (not np.isfinite(v[k])) or abs(v[k]) < cfg.STILL_SPEED_MPS
        if bg_still and road_still:
            ps.still[k] = True
            if st.objects_move:
                ps.stationary_step[k] = True
                v[k], v_sd[k] = 0.0, 0.05
                ps.w_road[k], ps.w_road_sd[k] = 0.0, cfg.YAW_SIGMA_FLOOR
            else:  # nothing moves anywhere: a parked car and a frozen feed look the same
                v[k] = v_sd[k] = np.nan


def keep_lasting_stops(ps: PairSeries, cfg: EgoConfig = EGO) -> None:
    """A car does not stop for one frame pair in the middle of a drive: a still stretch counts as
    stationary only when it lasts (one glare-washed pair reads as "nothing moves")."""
    stationary_step, v, v_sd = ps.stationary_step, ps.v, ps.v_sd
    m = len(v)
    k = 0
    while k < m:
        if not stationary_step[k]:
            k += 1
            continue
        e = k
        while e < m and stationary_step[e]:
            e += 1
        if e - k < cfg.MIN_STATIONARY_STEPS and not (k == 0 and e == m):
            stationary_step[k:e] = False
            v[k:e] = v_sd[k:e] = np.nan
            ps.w_road[k:e] = np.nan
        k = e


def apply_stationary(out: dict, ps: PairSeries, j: np.ndarray, n: int) -> None:
    """``out["stationary"]`` (1 stopped, 0 moving, NaN unknown) per frame; stopped frames read speed
    and accel 0 with a confidence of at least 0.9."""
    stat = np.full(n, np.nan)
    stat[j] = np.where(ps.stationary_step, 1.0, np.where(np.isfinite(ps.v) & ~ps.still, 0.0, np.nan))
    if n and np.isfinite(stat[min(1, n - 1)]):
        stat[0] = stat[min(1, n - 1)]
    out["stationary"] = stat
    stat_frames = stat == 1.0
    out["speed"][stat_frames] = 0.0
    out["accel"][stat_frames & np.isfinite(out["accel"])] = 0.0
    out["speed_conf"][stat_frames] = np.maximum(np.nan_to_num(out["speed_conf"][stat_frames]), 0.9)
