"""Building the series from fixes (shared by all sources): sort, de-duplicate, and fill speed and heading
from the positions where the source does not report them."""

from __future__ import annotations

import math

import numpy as np

from .base import MAX_GAP_S, TelemetryError

EARTH_RADIUS_M = 6371008.8


def _enu(lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local east/north metres (equirectangular about the median latitude; fine over a drive)."""
    lat0 = np.nanmedian(lat)
    x = np.radians(lon - np.nanmedian(lon)) * EARTH_RADIUS_M * math.cos(math.radians(lat0))
    y = np.radians(lat - lat0) * EARTH_RADIUS_M
    return x, y


def _position_velocity(t, lat, lon, max_gap_s: float, half_window_s: float = 0.5, min_move_m: float = 1.0):
    """Speed (m/s) and bearing (rad, cw from north) from the chord between the positions about
    ``half_window_s`` (at least one sample) either side, within runs without gaps > max_gap_s."""
    n = len(t)
    speed = np.full(n, np.nan)
    bearing = np.full(n, np.nan)
    if n < 2 or lat is None:
        return speed, bearing
    x, y = _enu(lat, lon)
    good = np.isfinite(x) & np.isfinite(y)
    if good.sum() < 2:
        return speed, bearing
    new_run = np.ones(n, bool)
    new_run[1:] = (~good[:-1]) | (np.diff(t) > max_gap_s)
    run = np.cumsum(new_run)[good]
    tv, xv, yv = t[good], x[good], y[good]
    h = max(half_window_s, float(np.median(np.diff(tv))))
    run_lo = np.searchsorted(run, run, side="left")
    run_hi = np.searchsorted(run, run, side="right") - 1
    a = np.maximum(np.searchsorted(tv, tv - h * 1.001, side="left"), run_lo)
    b = np.minimum(np.searchsorted(tv, tv + h * 1.001, side="right") - 1, run_hi)
    ok = b > a
    a, b = a[ok], b[ok]
    dx, dy, dt = xv[b] - xv[a], yv[b] - yv[a], tv[b] - tv[a]
    dist = np.hypot(dx, dy)
    sp = np.full(len(tv), np.nan)
    br = np.full(len(tv), np.nan)
    sp[ok] = dist / dt
    br[ok] = np.where(dist >= min_move_m, np.mod(np.arctan2(dx, dy), 2 * math.pi), np.nan)
    speed[good], bearing[good] = sp, br
    return speed, bearing



def build_fixes(t_abs, lat, lon, speed, course, source: str, *, max_gap_s: float = MAX_GAP_S) -> dict:
    """Sort and de-duplicate fixes, fill speed/heading from positions where not reported."""
    t_abs = np.asarray(t_abs, np.float64)
    order = np.argsort(t_abs, kind="stable")
    t_abs = t_abs[order]
    keep = np.ones(len(t_abs), bool)
    keep[1:] = np.diff(t_abs) > 1e-6
    sel = order[keep]
    t_abs = t_abs[keep]

    def col(a):
        return np.full(len(t_abs), np.nan) if a is None else np.asarray(a, np.float64)[sel]

    lat, lon, speed, course = col(lat), col(lon), col(speed), col(course)
    if len(t_abs) < 2:
        raise TelemetryError(f"{source}: fewer than 2 valid fixes")
    has_pos = bool(np.isfinite(lat).any())
    pspeed, pbear = _position_velocity(t_abs, lat if has_pos else None, lon, max_gap_s)
    rep_s, rep_c = np.isfinite(speed), np.isfinite(course)
    speed_from = "reported" if rep_s.all() else ("positions" if not rep_s.any() else "reported+positions")
    heading_from = "reported" if rep_c.all() else ("positions" if not rep_c.any() else "reported+positions")
    speed = np.where(rep_s, speed, pspeed)
    heading = np.where(rep_c, course, pbear)
    if not np.isfinite(speed).any():
        raise TelemetryError(f"{source}: neither speed nor usable positions")
    return dict(t_abs=t_abs, lat=lat if has_pos else None, lon=lon if has_pos else None, speed=speed,
                heading=heading, speed_from=speed_from, heading_from=heading_from, pspeed=pspeed)
