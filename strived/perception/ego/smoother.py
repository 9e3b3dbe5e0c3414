"""Constant-acceleration Kalman filter + RTS smoother over the per-pair measurements."""

from __future__ import annotations

import numpy as np

from .config import EGO, EgoConfig


def ca_smooth(t: np.ndarray, z: np.ndarray, r: np.ndarray, q_psd: float, cfg: EgoConfig = EGO):
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
            if innov * innov <= cfg.GATE_SIGMA ** 2 * S or rejected >= 2:
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


def near_measurement(t: np.ndarray, used: np.ndarray, max_gap: float) -> np.ndarray:
    """Frames within ``max_gap`` s of an accepted measurement (the interval before it included)."""
    if not used.any():
        return np.zeros(len(t), bool)
    tu = t[used]
    idx = np.searchsorted(tu, t)
    d_next = np.where(idx < len(tu), tu[np.minimum(idx, len(tu) - 1)] - t, np.inf)
    d_prev = np.where(idx > 0, t - tu[np.maximum(idx - 1, 0)], np.inf)
    return np.minimum(d_next, d_prev) <= max_gap

