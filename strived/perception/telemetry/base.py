"""The telemetry series (`Telemetry`) and its resampling onto video frame times.

Conventions: ``speed`` m/s; ``heading`` rad clockwise from true north (course over ground, or the bearing of
consecutive positions where no course is reported); ``yaw_rate`` rad/s, + = turning left (= -d heading/dt);
``accel`` m/s^2. Everything is NaN outside the telemetry's span or across gaps longer than ``max_gap_s``;
yaw rate and heading are NaN below ``min_speed`` (GPS course is noise at a standstill).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KNOT_MPS = 1852.0 / 3600.0
KMH_MPS = 1.0 / 3.6
MPH_MPS = 0.44704
MAX_GAP_S = 2.0                         # no interpolation / differentiation across longer gaps
MIN_COURSE_SPEED_MPS = 1.5              # below this, course over ground is meaningless
DERIV_WINDOW_S = 1.5                    # local linear fit window for accel / yaw rate (>= 3 samples)


class TelemetryError(ValueError):
    """A telemetry source exists but cannot be used (the message says why)."""


def as_float(x) -> float:
    """float(x), NaN when it is not a finite number."""
    try:
        v = float(x)
        return v if math.isfinite(v) else math.nan
    except (TypeError, ValueError):
        return math.nan


@dataclass
class Telemetry:
    t: np.ndarray             # s from the video's first frame, strictly increasing
    speed: np.ndarray         # m/s, NaN where unknown
    heading: np.ndarray       # rad, clockwise from true north, NaN where unknown
    source: str               # "nmea:NAME.gps", "gpx:NAME.gpx", "gpmf"
    lat: np.ndarray | None = None
    lon: np.ndarray | None = None
    alignment: str = ""       # how sample times were tied to the video
    t0_utc: float | None = None   # unix time of the video's t = 0 when known
    speed_from: str = "reported"  # "reported", "positions" or "reported+positions"
    heading_from: str = "reported"

    def __len__(self) -> int:
        return len(self.t)

    def resample(self, t_video, *, max_gap_s: float = MAX_GAP_S, min_speed: float = MIN_COURSE_SPEED_MPS,
                 window_s: float = DERIV_WINDOW_S) -> dict:
        """Values at the video times ``t_video`` (s): speed, yaw_rate, accel, heading, coverage, source."""
        tq = np.asarray(t_video, np.float64).reshape(-1)
        t = self.t
        dt_med = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
        edge = min(0.5, 0.5 * dt_med)  # hold the end values this far beyond the first/last sample
        win = max(window_s, 2.2 * dt_med)

        speed = _interp(t, self.speed, tq, max_gap_s, edge)
        accel = _interp(t, _local_slope(t, self.speed, win, max_gap_s), tq, max_gap_s, edge)

        head = np.where(self.speed >= min_speed, self.heading, np.nan)  # NaN speed -> NaN too
        ok = np.isfinite(head)
        unwrapped = np.full_like(head, np.nan)
        if ok.any():
            unwrapped[ok] = np.unwrap(head[ok])
        yaw = -_interp(t, _local_slope(t, unwrapped, win, max_gap_s), tq, max_gap_s, edge)
        heading = np.mod(_interp(t, unwrapped, tq, max_gap_s, edge), 2 * math.pi)
        slow = ~(speed >= min_speed)
        yaw[slow] = np.nan
        heading[slow] = np.nan

        out = {"speed": speed, "yaw_rate": yaw, "accel": accel, "heading": heading}
        n = len(tq)
        out["coverage"] = {k: (float(np.isfinite(v).mean()) if n else float("nan")) for k, v in out.items()}
        out["source"] = self.source
        return out


def _interp(t: np.ndarray, v: np.ndarray, tq: np.ndarray, max_gap_s: float, edge_s: float) -> np.ndarray:
    """Linear interpolation that is NaN across gaps > max_gap_s, next to NaN samples and outside the span
    (except within ``edge_s`` of the first/last sample, where that sample's value is held)."""
    out = np.full(tq.shape, np.nan)
    n = len(t)
    if n == 0 or len(tq) == 0:
        return out
    i = np.searchsorted(t, tq, side="right") - 1
    inner = (i >= 0) & (i < n - 1)
    ii = i[inner]
    t0, t1 = t[ii], t[ii + 1]
    w = (tq[inner] - t0) / (t1 - t0)
    val = v[ii] * (1 - w) + v[ii + 1] * w
    # close to a sample, accept its value even when the other neighbour is NaN
    val = np.where(np.isnan(val) & (w < 1e-9), v[ii], val)
    val[(t1 - t0) > max_gap_s] = np.nan
    out[inner] = val
    at_end = (i == n - 1) & (tq - t[-1] <= edge_s)
    out[at_end] = v[-1]
    before = (i < 0) & (t[0] - tq <= edge_s)
    out[before] = v[0]
    return out


def _local_slope(t: np.ndarray, y: np.ndarray, window_s: float, max_gap_s: float) -> np.ndarray:
    """d y / d t by least squares over a centred window, within runs of finite samples without long gaps.

    Vectorised with cumulative sums (O(n)); NaN where the run holds a single sample."""
    n = len(t)
    out = np.full(n, np.nan)
    ok = np.isfinite(y)
    if ok.sum() < 2:
        return out
    new_run = np.ones(n, bool)
    new_run[1:] = (~ok[:-1]) | (np.diff(t) > max_gap_s)
    run = np.cumsum(new_run)[ok]
    tv, yv = t[ok], y[ok]
    m = len(tv)
    run_lo = np.searchsorted(run, run, side="left")
    run_hi = np.searchsorted(run, run, side="right")
    lo = np.maximum(np.searchsorted(tv, tv - window_s / 2, side="left"), run_lo)
    hi = np.minimum(np.searchsorted(tv, tv + window_s / 2, side="right"), run_hi)
    tc = tv - tv[run_lo]                      # per-run origin keeps the sums well conditioned
    yc = yv - yv[run_lo]
    # origin differs per run, but a window never leaves its run, so sums over [lo, hi) share one origin
    cs = lambda a: np.concatenate(([0.0], np.cumsum(a)))  # noqa: E731
    s1, st, sy, stt, sty = cs(np.ones(m)), cs(tc), cs(yc), cs(tc * tc), cs(tc * yc)
    cnt = s1[hi] - s1[lo]
    sum_t, sum_y = st[hi] - st[lo], sy[hi] - sy[lo]
    sum_tt, sum_ty = stt[hi] - stt[lo], sty[hi] - sty[lo]
    den = cnt * sum_tt - sum_t * sum_t
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (cnt * sum_ty - sum_t * sum_y) / den
    slope[(cnt < 2) | ~(den > 1e-12 * np.maximum(cnt * sum_tt, 1e-300))] = np.nan
    out[ok] = slope
    return out
