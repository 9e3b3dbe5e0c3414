"""Per-track signals robust to detector jitter: a robust Kalman smoother and a track quality score.

Monocular ranging from a jittering box is noisy frame to frame (a 5 % change of box height is a 5 %
change of range), and a rule's ``temporal_change`` takes the largest change within its window: on
raw series, noise alone reads as motion ("a car overtakes us" fires on most clips). Two defences:

- ``robust_smooth``: a constant-velocity Kalman filter with a Rauch-Tung-Striebel backward pass
  over the track's own (irregular) sample times. Innovations beyond 3 sigma are down-weighted
  (Huber-style inflation of the measurement noise), so one bad box cannot pull the track. The
  measurement noise follows the ranging error model (relative for distance, growing with distance
  for the lateral offset); the process noise is a physically plausible relative acceleration, so
  a real cut-in or overtake survives while frame-to-frame jitter does not.
- ``track_quality``: how much a track can be trusted (duration, how often it was detected in its
  life, detector confidence), 0..1, stored in ``track.attrs["quality"]``; tracks below
  ``MIN_QUALITY`` or shorter than ``MIN_DURATION_S`` are not published.

Everything is in seconds, never frames, so it does not depend on the sampling rate.
"""

from __future__ import annotations

import math

import numpy as np

# one set of constants for every video (no per-clip tuning)
LOG_DIST_NOISE = 0.08          # measurement sigma of log(distance): ~8 % frame-to-frame range noise
LOG_DIST_ACCEL = 0.45           # process noise: std of d²log(z)/dt² in 1/s² (a 6 m/s² change at 10 m)
LAT_NOISE_REL = 0.04           # lateral sigma = 0.15 m + 4 % of the distance
LAT_NOISE_ABS = 0.15
LAT_ACCEL = 2.0                # lateral acceleration std, m/s² (a brisk lane change)
GATE_SIGMA = 3.0               # innovations beyond this many sigmas are down-weighted
MIN_DURATION_S = 0.5           # a track must live at least this long to be published
MIN_QUALITY = 0.15


def robust_smooth(t_s: np.ndarray, y: np.ndarray, meas_sigma, accel_sigma: float,
                  gate: float = GATE_SIGMA) -> np.ndarray:
    """Smoothed values of ``y`` at ``t_s`` (NaN where ``y`` is NaN).

    ``meas_sigma``: scalar or per-sample measurement noise; ``accel_sigma``: process noise as the
    std of the second derivative (units of y per s²). Gaps longer than 1.5 s restart the filter,
    so two stretches of a track are never bridged by a straight line.
    """
    t = np.asarray(t_s, np.float64)
    y = np.asarray(y, np.float64)
    n = len(y)
    out = np.full(n, np.nan)
    r_all = np.broadcast_to(np.asarray(meas_sigma, np.float64), (n,))
    ok = np.flatnonzero(np.isfinite(y) & np.isfinite(r_all))
    if len(ok) == 0:
        return out
    # split into segments at long gaps
    breaks = np.flatnonzero(np.diff(t[ok]) > 1.5) + 1
    for seg in np.split(ok, breaks):
        out[seg] = _rts(t[seg], y[seg], r_all[seg], accel_sigma, gate)
    return out


def _rts(t: np.ndarray, y: np.ndarray, r: np.ndarray, q: float, gate: float) -> np.ndarray:
    n = len(y)
    if n == 1:
        return y.copy()
    xs = np.zeros((n, 2))
    Ps = np.zeros((n, 2, 2))
    xp = np.zeros((n, 2))
    Pp = np.zeros((n, 2, 2))
    x = np.array([y[0], 0.0])
    P = np.array([[r[0] ** 2, 0.0], [0.0, 1e2]])
    for k in range(n):
        if k > 0:
            dt = max(t[k] - t[k - 1], 1e-3)
            F = np.array([[1.0, dt], [0.0, 1.0]])
            Q = q * q * np.array([[dt ** 3 / 3, dt ** 2 / 2], [dt ** 2 / 2, dt]])
            x = F @ x
            P = F @ P @ F.T + Q
        xp[k], Pp[k] = x, P
        R = r[k] ** 2
        innov = y[k] - x[0]
        S = P[0, 0] + R
        d2 = innov * innov / S
        if d2 > gate * gate:  # an outlier: trust it less, in proportion to how far out it is
            R *= d2 / (gate * gate)
            S = P[0, 0] + R
        K = P[:, 0] / S
        x = x + K * innov
        P = P - np.outer(K, P[0, :])
        xs[k], Ps[k] = x, P
    # Rauch-Tung-Striebel backward pass
    sm = xs.copy()
    for k in range(n - 2, -1, -1):
        dt = max(t[k + 1] - t[k], 1e-3)
        F = np.array([[1.0, dt], [0.0, 1.0]])
        try:
            C = Ps[k] @ F.T @ np.linalg.inv(Pp[k + 1])
        except np.linalg.LinAlgError:
            continue
        sm[k] = xs[k] + C @ (sm[k + 1] - xp[k + 1])
    return sm[:, 0]


def smooth_track_fields(t_s: np.ndarray, distance: np.ndarray, loc_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distance, loc_x) of one track, robustly smoothed (distance in log space)."""
    d = np.asarray(distance, np.float64)
    logd = np.log(np.where(d > 0, d, np.nan))
    z = np.exp(robust_smooth(t_s, logd, LOG_DIST_NOISE, LOG_DIST_ACCEL))
    zf = np.where(np.isfinite(z), z, d)
    lat_sigma = LAT_NOISE_ABS + LAT_NOISE_REL * np.where(np.isfinite(zf), zf, 20.0)
    x = robust_smooth(t_s, loc_x, lat_sigma, LAT_ACCEL)
    return z, x


def track_quality(t_s: np.ndarray, pos: np.ndarray, scores: np.ndarray, sample_dt: float) -> dict:
    """Quality of one track: {"duration_s", "fill", "mean_score", "quality"}.

    ``fill`` is the share of sampled frames in the track's life on which it was detected;
    ``quality`` = min(1, duration / 2 s) * fill * mean detector score, in 0..1.
    """
    tt = np.asarray(t_s, np.float64)[np.asarray(pos)]
    dur = float(tt[-1] - tt[0]) if len(tt) > 1 else 0.0
    expected = max(1.0, dur / max(sample_dt, 1e-3) + 1.0)
    fill = float(min(1.0, len(tt) / expected))
    sc = np.asarray(scores, np.float64)
    ms = float(np.nanmean(sc)) if np.isfinite(sc).any() else 0.5
    q = min(1.0, dur / 2.0) * fill * ms
    return {"duration_s": round(dur, 3), "fill": round(fill, 3), "mean_score": round(ms, 3),
            "quality": round(float(q), 3)}


def publishable(quality: dict) -> bool:
    """Whether a track is trustworthy enough to be published in the records."""
    return quality["duration_s"] >= MIN_DURATION_S - 1e-9 and quality["quality"] >= MIN_QUALITY


def lane_with_hysteresis(t_s: np.ndarray, lane: np.ndarray, hold_s: float = 0.4) -> np.ndarray:
    """Integer lanes that change only when the new lane has held for ``hold_s`` seconds, so a
    box wobbling on a lane line does not read as repeated lane changes."""
    lane = np.asarray(lane, np.float64)
    t = np.asarray(t_s, np.float64)
    out = np.full(len(lane), np.nan)
    cur = math.nan
    cand, cand_t = math.nan, 0.0
    for i, v in enumerate(lane):
        if not np.isfinite(v):
            continue
        if not np.isfinite(cur):
            cur = v
        elif v != cur:
            if v != cand:
                cand, cand_t = v, t[i]
            if t[i] - cand_t >= hold_s - 1e-9:
                cur = v
        else:
            cand = math.nan
        out[i] = cur
    return out
