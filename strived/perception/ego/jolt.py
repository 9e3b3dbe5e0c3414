"""Jolt (rad/s): the magnitude of the camera's angular rates minus their running median.

A shaken camera (an impact, a loose mount, a hand-held pan) rotates faster than any car yaws:
where the jolt passes SHAKE_JOLT_RAD_S the rotation is the camera's, not the vehicle's.
"""

from __future__ import annotations

import numpy as np

from .config import EGO, EgoConfig
from .pairs import PairStep


def jolt_series(steps: list[PairStep], t: np.ndarray, p_rate: np.ndarray, w_road: np.ndarray,
                cfg: EgoConfig = EGO) -> np.ndarray:
    """Per frame: the jolt of the far-point (yaw, pitch, roll) rates, or of the road's yaw and pitch
    (roll 0) where the far points gave none; NaN where neither."""
    n = len(t)
    comps = np.full((3, n), np.nan)
    for k, st in enumerate(steps):
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
        base = running_median(t, comps[c], cfg.JOLT_WINDOW_S)
        hp[c] = comps[c] - base
    out[ok] = np.sqrt(np.sum(hp[:, ok] ** 2, axis=0))
    return out


def shaken(jolt: np.ndarray, cfg: EgoConfig = EGO) -> np.ndarray:
    """Frames where the camera is shaken: no vehicle yaw is measured there."""
    return np.nan_to_num(jolt) > cfg.SHAKE_JOLT_RAD_S


def running_median(t: np.ndarray, v: np.ndarray, window_s: float) -> np.ndarray:
    out = np.full(len(v), np.nan)
    lo = np.searchsorted(t, t - window_s / 2, side="left")
    hi = np.searchsorted(t, t + window_s / 2, side="right")
    for i in range(len(v)):
        seg = v[lo[i]:hi[i]]
        seg = seg[np.isfinite(seg)]
        if len(seg):
            out[i] = np.median(seg)
    return out

