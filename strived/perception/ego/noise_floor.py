"""The road fit's noise floor: how much of the road's change the planar motion leaves unexplained
*above the image noise*.

A dense optical flow (DIS) on the road pixels follows anything but the noise, so its residual is
the pair's floor: the block noise of heavily compressed video no longer reads as "not a flat road".
"""

from __future__ import annotations

import math

import numpy as np

from .config import EGO, EgoConfig
from .homography import ground_homography_apply
from .numeric import median


def free_flow(prev: np.ndarray, gray: np.ndarray, top_row: int = 0, cfg: EgoConfig = EGO) -> np.ndarray | None:
    """Dense optical flow prev -> gray (work px; DIS) from ``top_row`` down (zero above): a motion
    model free enough to follow anything on the road but its noise, so that its residual is the
    pair's noise floor."""
    import cv2

    top = int(min(max(top_row, 0), max(prev.shape[0] - 16, 0)))
    flow = np.zeros(prev.shape + (2,), np.float32)
    try:
        dis = cv2.DISOpticalFlow_create(cfg.FREE_FLOW_PRESET)
        dis.setPatchStride(cfg.FREE_FLOW_STRIDE)
        dis.setGradientDescentIterations(cfg.FREE_FLOW_ITERS)
        flow[top:] = dis.calc(np.ascontiguousarray(prev[top:]), np.ascontiguousarray(gray[top:]), None)
    except cv2.error:
        return None
    return flow


def fit_ratio(g: dict, cfg: EgoConfig = EGO) -> float:
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
    if not np.isfinite(free) or free > g["resid"] or g["resid_still"] - free < cfg.FREE_MIN_SIGNAL:
        return raw
    # ... and only where the free flow sees the plane's own motion: noise that moves from frame to
    # frame (rain streaks, wipers) lets it explain change no scene motion made, and then any plane,
    # a wrong one included, would look good against that floor. Judged against the flow the plane's
    # translation makes, so a fit right about a turn and wrong about the speed gets no floor either.
    epe = g.get("free_epe", math.nan)
    if np.isfinite(epe) and epe > max(cfg.FREE_MAX_EPE_PX, cfg.FREE_MAX_EPE_REL * g.get("trans_flow", 0.0)):
        return raw
    return min(raw, (g["resid"] - free) / (g["resid_still"] - free))


def free_floor(ff: np.ndarray | None, g_l: np.ndarray, tmpl: np.ndarray, x0: np.ndarray, x2: np.ndarray,
               inside: np.ndarray, full: np.ndarray, k: float, q: np.ndarray,
               geom: tuple[float, float, float, float]) -> tuple[float, float, float]:
    """The free flow ``ff`` (work px, or None) judged on the fit's road pixels of one level.

    ``tmpl``: their gray in the first frame; ``x0`` / ``x2``: where they sit / where the plane maps
    them (level px); ``full``: the same points in full-frame px, ``k`` full-frame px -> level px;
    ``geom``: (f, c_x, y_h, h). Returns ``(resid_free, free_epe, trans_flow)`` (NaN where not measured):
    the flow's residual, its median endpoint difference from the plane's flow, and the flow the
    plane's translation makes there."""
    import cv2

    resid_free = free_epe = trans_flow = math.nan
    if ff is None or ff.shape[:2] != g_l.shape:
        return resid_free, free_epe, trans_flow
    Wl, Hl = g_l.shape[1], g_l.shape[0]
    f, cx, yh, h = geom
    fx = cv2.remap(ff[..., 0], x0[:, 0].reshape(1, -1), x0[:, 1].reshape(1, -1), cv2.INTER_LINEAR)
    fy = cv2.remap(ff[..., 1], x0[:, 0].reshape(1, -1), x0[:, 1].reshape(1, -1), cv2.INTER_LINEAR)
    mxf = x0[:, 0].reshape(1, -1) + fx
    myf = x0[:, 1].reshape(1, -1) + fy
    in_f = ((mxf >= 1) & (myf >= 1) & (mxf <= Wl - 2) & (myf <= Hl - 2)).ravel() & inside
    if in_f.sum() >= 30:
        rf = (cv2.remap(g_l, mxf, myf, cv2.INTER_LINEAR).ravel() - tmpl)[in_f]
        resid_free = float(median(np.abs(rf - median(rf))))
        # does the free flow see the plane's motion? (its floor means nothing otherwise)
        dpl = (x2 - x0.astype(np.float64))[in_f]
        dfr = np.stack([fx.ravel(), fy.ravel()], 1)[in_f]
        free_epe = float(median(np.hypot(*(dfr - dpl).T)))
        # the part of the plane's flow its translation makes (rotation alone: tx = tz = 0)
        q_rot = np.array([q[0], 0.0, 0.0, q[3]])
        x_rot = ground_homography_apply(full, q_rot, f, cx, yh, h) * k - 0.5
        trans_flow = float(median(np.hypot(*(x2 - x_rot)[in_f].T)))
    return resid_free, free_epe, trans_flow
