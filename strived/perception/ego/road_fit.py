"""The road fit: the planar motion of the road ahead between two frames, from its pixels directly.

A coarse grid search of ``(w, t_z)`` on a 1/4-scale image gives the start (fast motion and repeated
markings do not trap the fit); a photometric Gauss-Newton alignment (coarse to fine, Huber
weights) under the ground-plane homography refines it, horizon row included; ``fit_ok`` says
whether the result is a plausible car motion that explains the road's change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..geometry import CameraModel
from .config import EGO, EgoConfig
from .frame_cache import FrameCache
from .homography import ground_homographies, ground_homography_apply, ground_homography_jacobian
from .noise_floor import fit_ratio, free_floor
from .numeric import median


def fit_ok(g: dict, dt: float, cam: CameraModel, cfg: EgoConfig = EGO) -> bool:
    """Is the fit a plausible car motion over a road that it explains?"""
    q = g["x"]
    if not np.all(np.isfinite(q)) or abs(q[2]) / dt > cfg.MAX_SPEED_MPS:
        return False
    if g["n"] < cfg.ROAD_MIN_PIXELS or g["inlier_frac"] < cfg.FIT_MIN_INLIER_FRAC:
        return False
    # a car moves along its heading: sideways only by its yaw times the camera's lever arm (and a
    # little slip), so a fit that slides the camera sideways traded rotation for translation
    if abs(q[1]) / dt > max(cfg.MAX_LATERAL_MPS, cfg.MAX_LATERAL_REL * abs(q[2]) / dt):
        return False
    # the model must explain the change much better than "nothing moved"
    if g["ratio"] > cfg.MAX_RESID_RATIO and g["resid_still"] > 2.0:
        return False
    hz = g["horizon_y"]
    if not (0.15 * cam.height < hz < 0.85 * cam.height):
        return False
    return math.sqrt(max(g["cov"][2, 2], 0.0)) / dt < 2.0



def _small(img: np.ndarray) -> np.ndarray:
    """The coarse search's 1/4-scale blurred copy of a frame."""
    import cv2

    return cv2.resize(cv2.GaussianBlur(img, (0, 0), 2.0), None, fx=0.25, fy=0.25, interpolation=cv2.INTER_AREA)


def coarse_search(prev, gray, road_mask, scale: float, cam: CameraModel, hz: float, dt: float,
                  w0: float, q_prev: np.ndarray | None, occluder: np.ndarray | None = None, cfg: EgoConfig = EGO,
                  cache: FrameCache | None = None):
    """Best (w, 0, tz, 0) on a grid by photometric error of textured road pixels at 1/4 scale.

    ``cache`` keeps the frames' small copies for the next pair. Returns (q or None, number of
    textured road pixels at work scale)."""
    import cv2

    n_tex = len(textured(*sobel8(prev), road_mask, cfg.GRAD_MIN)[0])
    if n_tex < cfg.ROAD_MIN_PIXELS:
        return None, n_tex
    c = 0.25
    cache = cache or FrameCache()
    p_small = cache.get(prev, "small", _small)
    g_small = cache.get(gray, "small", _small)
    m_small = cv2.resize(road_mask, (p_small.shape[1], p_small.shape[0]), interpolation=cv2.INTER_NEAREST)
    ys, xs, _ = textured(*sobel8(p_small), m_small, 1.0)
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
    vals1 = cv2.remap(cache.get(gray, "small32", lambda im: g_small.astype(np.float32)), mx, my, cv2.INTER_LINEAR)
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


def strongest(vals: np.ndarray, k: int) -> np.ndarray:
    """Ascending positions of the ``k`` largest ``vals``, ties going to the earlier position (the
    set a stable descending sort would keep), by partition rather than a full sort."""
    n = len(vals)
    if k >= n:
        return np.arange(n)
    thr = np.partition(vals, n - k)[n - k]
    above = np.flatnonzero(vals > thr)
    tied = np.flatnonzero(vals == thr)[:k - len(above)]
    return np.sort(np.concatenate([above, tied]))


def sobel8(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The image's x and y Sobel gradients / 8 (float32)."""
    import cv2

    f = img.astype(np.float32)
    return cv2.Sobel(f, cv2.CV_32F, 1, 0, ksize=3) / 8.0, cv2.Sobel(f, cv2.CV_32F, 0, 1, ksize=3) / 8.0


def grad_mag(img: np.ndarray) -> np.ndarray:
    """Gradient magnitude of the whole image (``textured`` evaluates it on a mask's pixels)."""
    return np.hypot(*sobel8(img))


def textured(gx: np.ndarray, gy: np.ndarray, mask: np.ndarray, thr: float):
    """Rows, columns (row-major, as ``np.nonzero``) and gradient magnitudes of the pixels inside
    ``mask`` whose magnitude exceeds ``thr``: ``grad_mag`` evaluated on the mask's pixels only."""
    rows = np.flatnonzero(mask.any(axis=1))
    if len(rows) == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0, np.float32)
    y0, y1 = int(rows[0]), int(rows[-1]) + 1    # the mask's bounding box
    cols = np.flatnonzero(mask[y0:y1].any(axis=0))
    x0, x1 = int(cols[0]), int(cols[-1]) + 1
    mag = np.hypot(gx[y0:y1, x0:x1], gy[y0:y1, x0:x1])
    sel = (mask[y0:y1, x0:x1] > 0) & (mag > thr)
    ys, xs = np.nonzero(sel)
    return ys + y0, xs + x0, mag[sel]




@dataclass
class _Level:
    """One pyramid level of a pair for the direct fit: the second frame and its gradients, the
    chosen textured road pixels of the first (``tmpl`` gray, ``full`` full-frame px)."""

    lv: float                   # fraction of the work image
    k: float                    # full-frame px -> level px
    g_l: np.ndarray
    gx2: np.ndarray
    gy2: np.ndarray
    occ_l: np.ndarray | None
    tmpl: np.ndarray
    full: np.ndarray


def _frame_level(img: np.ndarray, lv: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blurred level ``lv`` of one frame (float32) and its Sobel gradients (/ 8)."""
    import cv2

    if lv < 1.0:
        i_l = cv2.resize(cv2.GaussianBlur(img, (0, 0), 0.5 / lv), None, fx=lv, fy=lv, interpolation=cv2.INTER_AREA)
    else:
        i_l = cv2.GaussianBlur(img, (3, 3), 0.8)
    i_l = i_l.astype(np.float32)
    gx = cv2.Sobel(i_l, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(i_l, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    return i_l, gx, gy


def _level(prev: np.ndarray, gray: np.ndarray, road_mask: np.ndarray, occluder: np.ndarray | None,
           lv: float, scale: float, max_points: int, cfg: EgoConfig, cache: FrameCache) -> _Level | None:
    """The level ``lv`` of the pair, or None when its road has too little texture."""
    import cv2

    k = lv * scale  # full-frame px -> level px
    p_l, pgx, pgy = cache.get(prev, ("level", lv), lambda im: _frame_level(im, lv))
    g_l, gx2, gy2 = cache.get(gray, ("level", lv), lambda im: _frame_level(im, lv))
    m_l = road_mask
    if lv < 1.0:
        m_l = cv2.resize(road_mask, (p_l.shape[1], p_l.shape[0]), interpolation=cv2.INTER_NEAREST)
    occ_l = None
    if occluder is not None:
        occ_l = cv2.resize(occluder, (p_l.shape[1], p_l.shape[0]), interpolation=cv2.INTER_AREA)
        occ_l = cv2.dilate(occ_l, np.ones((3, 3), np.uint8)) if lv < 1.0 else occ_l
    ys, xs, mag = textured(pgx, pgy, m_l, cfg.GRAD_MIN)
    if len(xs) < 40:
        return None
    if len(xs) > max_points:
        order = strongest(mag, max_points * 2)
        order = order[np.linspace(0, len(order) - 1, max_points).astype(int)]
        ys, xs = ys[order], xs[order]
    tmpl = p_l[ys, xs]
    full = (np.stack([xs, ys], 1).astype(np.float64) + 0.5) / k
    return _Level(lv, k, g_l, gx2, gy2, occ_l, tmpl, full)


def _gauss_newton(L: _Level, q: np.ndarray, geom: tuple[float, float, float], yh, yh0: float, bright,
                  iters: int, fit_horizon: bool, horizon_sd: float):
    """Huber-weighted Gauss-Newton on one level, ``q`` updated in place; weak priors hold ``tx`` and
    ``p`` near 0 and the horizon near ``yh0``. Returns (yh, bright, A, A_data): the horizon and
    brightness offset reached, the last normal matrix with and without the priors (None: no step)."""
    import cv2

    f, cx, h = geom
    npar = 5 if fit_horizon else 4
    prior_sd = np.array([np.inf, 0.1, np.inf, 4.0])
    k, g_l, tmpl, full = L.k, L.g_l, L.tmpl, L.full
    Wl, Hl = g_l.shape[1], g_l.shape[0]
    A = A_data = None
    for _ in range(iters):
        x2 = ground_homography_apply(full, q, f, cx, yh, h) * k - 0.5
        mx = x2[:, 0].astype(np.float32).reshape(1, -1)
        my = x2[:, 1].astype(np.float32).reshape(1, -1)
        inside = ((mx >= 1) & (my >= 1) & (mx <= Wl - 2) & (my <= Hl - 2)).ravel()
        if L.occ_l is not None:
            inside &= cv2.remap(L.occ_l, mx, my, cv2.INTER_NEAREST).ravel() == 0
        if inside.sum() < 30:
            break
        i2 = cv2.remap(g_l, mx, my, cv2.INTER_LINEAR).ravel()[inside]
        ix = cv2.remap(L.gx2, mx, my, cv2.INTER_LINEAR).ravel()[inside]
        iy = cv2.remap(L.gy2, mx, my, cv2.INTER_LINEAR).ravel()[inside]
        r = i2 - tmpl[inside] - bright
        J = np.empty((len(r), npar + 1))
        _, dxy = ground_homography_jacobian(full[inside], q, f, cx, yh, h, with_horizon=fit_horizon)
        J[:, :npar] = (ix[:, None] * dxy[:, 0] + iy[:, None] * dxy[:, 1]) * k
        J[:, npar] = -1.0
        sig = 1.4826 * median(np.abs(r - median(r))) + 1e-3
        cth = 1.345 * max(sig, 1.0)
        a = np.abs(r)
        wts = np.where(a <= cth, 1.0, cth / np.maximum(a, 1e-9))
        s2 = max(sig, 1.0) ** 2
        Jw = (J * wts[:, None]).T
        A = Jw @ J / s2
        g = Jw @ r / s2
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
    return yh, bright, A, A_data


def _fit_exists(L: _Level, q: np.ndarray, geom: tuple[float, float, float], yh, A: np.ndarray,
                A_data: np.ndarray, fit_horizon: bool) -> bool:
    """Does ``_level_fit`` give statistics here (its pixels stay in the frame, its normal matrices
    invert)? The same tests, without the statistics."""
    f, cx, h = geom
    Wl, Hl = L.g_l.shape[1], L.g_l.shape[0]
    x2 = ground_homography_apply(L.full, q, f, cx, yh, h) * L.k - 0.5
    mx = x2[:, 0].astype(np.float32)
    my = x2[:, 1].astype(np.float32)
    if ((mx >= 1) & (my >= 1) & (mx <= Wl - 2) & (my <= Hl - 2)).sum() < 30:
        return False
    try:
        np.linalg.inv(A)
        if fit_horizon:
            np.linalg.inv(A_data + 1e-9 * np.eye(len(A_data)))
    except np.linalg.LinAlgError:
        return False
    return True


def _level_fit(L: _Level, q: np.ndarray, geom: tuple[float, float, float], yh, bright, A: np.ndarray,
               A_data: np.ndarray, fit_horizon: bool, free_flow, cfg: EgoConfig) -> dict | None:
    """The fit's statistics at the level it reached (see ``direct_ground_fit``), or None when its
    pixels left the frame or its normal matrix is singular."""
    import cv2

    f, cx, h = geom
    npar = 5 if fit_horizon else 4
    k, g_l, tmpl, full = L.k, L.g_l, L.tmpl, L.full
    Wl, Hl = g_l.shape[1], g_l.shape[0]
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
    sig = 1.4826 * median(np.abs(r - median(r))) + 1e-3
    try:
        cov_full = np.linalg.inv(A)
        var_h_data = float(np.linalg.inv(A_data + 1e-9 * np.eye(npar + 1))[4, 4]) if fit_horizon else math.nan
    except np.linalg.LinAlgError:
        return None
    # the floor is needed only where the raw ratio could matter (above FREE_MIN_RAW_RATIO every
    # decision on it is unchanged); the dense flow costs ~6 ms a pair
    resid = float(median(np.abs(r)))
    resid_still = float(median(np.abs(same - median(same))))
    raw = resid / max(resid_still, 1e-6)
    ff = free_flow(yh) if free_flow is not None and L.lv == 1.0 and raw > cfg.FREE_MIN_RAW_RATIO else None
    resid_free, free_epe, trans_flow = free_floor(ff, g_l, tmpl, x0, x2, inside, full, k, q, (f, cx, yh, h))
    pick = np.nonzero(inside)[0]
    pick = pick[np.linspace(0, len(pick) - 1, min(150, len(pick))).astype(int)]
    out = {"x": q.copy(), "cov": cov_full[:4, :4], "n": int(inside.sum()),
           "inlier_frac": float(np.mean(np.abs(r) < 3.0 * max(sig, 1.0))),
           "resid": resid, "resid_still": resid_still,
           "resid_free": resid_free, "free_epe": free_epe, "trans_flow": trans_flow,
           "level": L.lv, "horizon_y": float(yh),
           "horizon_var": float(cov_full[4, 4]) if fit_horizon else math.nan,
           "horizon_var_data": var_h_data,
           "cov5": cov_full[:5, :5].copy() if fit_horizon else None,
           "samples": full[pick].copy()}
    out["ratio"] = fit_ratio(out, cfg)
    return out


def direct_ground_fit(prev: np.ndarray, gray: np.ndarray, road_mask: np.ndarray, scale: float,
                      f: float, cx: float, yh: float, h: float, q0: np.ndarray,
                      levels=(0.25, 0.5, 1.0), max_points: int = 2000, iters: int = 8,
                      fit_horizon: bool = False, horizon_sd: float = 5.0,
                      occluder: np.ndarray | None = None, free_flow=None, cfg: EgoConfig = EGO,
                      cache: FrameCache | None = None) -> dict | None:
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
    judged against). ``ratio`` (``noise_floor.fit_ratio``) is the share of the change the fit leaves
    unexplained. ``cache`` keeps the frames' levels for the next pair (each frame is in two).
    """
    cache = cache or FrameCache()
    q = np.asarray(q0, dtype=np.float64).copy()
    yh0 = float(yh)
    bright = 0.0
    last = None  # the last level fitted: its statistics are the result (a coarser level's are not used)
    for lv in levels:
        L = _level(prev, gray, road_mask, occluder, lv, scale, max_points, cfg, cache)
        if L is None:
            continue
        yh, bright, A, A_data = _gauss_newton(L, q, (f, cx, h), yh, yh0, bright, iters, fit_horizon, horizon_sd)
        if A is None:
            continue
        if not _fit_exists(L, q, (f, cx, h), yh, A, A_data, fit_horizon):
            return None  # what ``_level_fit`` would say at this level
        last = (L, q.copy(), yh, bright, A, A_data)
    if last is None:
        return None
    L, q, yh, bright, A, A_data = last
    return _level_fit(L, q, (f, cx, h), yh, bright, A, A_data, fit_horizon, free_flow, cfg)
