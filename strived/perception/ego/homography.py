"""Ground-plane homography of a planar camera motion, and its analytic derivatives.

Ground point ``(X, Z)`` (metres, camera height ``h``) images at ``x = c_x + f X / Z``,
``y = y_h + f h / Z``; a planar motion ``q = (w, tx, tz, p)`` (yaw, lateral and forward translation,
vertical image shift) maps the ground points of one frame to those of the next.
"""

from __future__ import annotations

import math

import numpy as np


def _ground_to_image(f: float, cx: float, yh: float, h: float) -> tuple[np.ndarray, np.ndarray]:
    """G: ground (X, Z, 1) -> image (homogeneous), and its inverse."""
    G = np.array([[f, cx, 0.0], [0.0, yh, f * h], [0.0, 1.0, 0.0]])
    # inverse of G: Z = w', X = (u' - cx w') / f, 1 = (v' - yh w') / (f h)
    Gi = np.array([[1.0 / f, 0.0, -cx / f], [0.0, 0.0, 1.0], [0.0, 1.0 / (f * h), -yh / (f * h)]])
    return G, Gi


def _planar_motion(q) -> tuple[np.ndarray, np.ndarray, float, float]:
    """T: the ground points' motion (yaw w, then translation tx, tz); P: the image shift p; cos w, sin w."""
    w, tx, tz, p = q
    c, s_ = math.cos(w), math.sin(w)
    T = np.array([[c, s_, -(c * tx + s_ * tz)], [-s_, c, s_ * tx - c * tz], [0.0, 0.0, 1.0]])
    P = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, p], [0.0, 0.0, 1.0]])
    return T, P, c, s_


def ground_homography(q, f: float, cx: float, yh: float, h: float) -> np.ndarray:
    """3x3 image homography of ground points under the planar motion ``q = (w, tx, tz, p)``."""
    G, Gi = _ground_to_image(f, cx, yh, h)
    T, P, _, _ = _planar_motion(q)
    return P @ G @ T @ Gi


def ground_homographies(qs: np.ndarray, f: float, cx: float, yh: float, h: float) -> np.ndarray:
    """``ground_homography`` of each row of (k,4) ``qs`` at once: (k,3,3)."""
    qs = np.asarray(qs, dtype=np.float64)
    w, tx, tz, p = qs.T
    G, Gi = _ground_to_image(f, cx, yh, h)
    c, s_ = np.cos(w), np.sin(w)
    T = np.zeros((len(qs), 3, 3))
    T[:, 0, 0], T[:, 0, 1], T[:, 0, 2] = c, s_, -(c * tx + s_ * tz)
    T[:, 1, 0], T[:, 1, 1], T[:, 1, 2] = -s_, c, s_ * tx - c * tz
    T[:, 2, 2] = 1.0
    P = np.zeros((len(qs), 3, 3))
    P[:, 0, 0] = P[:, 1, 1] = P[:, 2, 2] = 1.0
    P[:, 1, 2] = p
    return P @ G @ T @ Gi


def ground_homography_apply(pts: np.ndarray, q, f: float, cx: float, yh: float, h: float) -> np.ndarray:
    """Map (n,2) image points of the ground through ``ground_homography``."""
    Hm = ground_homography(q, f, cx, yh, h)
    x = pts @ Hm[:, :2].T + Hm[:, 2]
    z = x[:, 2:3]
    z = np.where(np.abs(z) < 1e-9, 1e-9, z)
    return x[:, :2] / z


def ground_homography_jacobian(pts: np.ndarray, q, f: float, cx: float, yh: float, h: float,
                               with_horizon: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``ground_homography_apply`` and its analytic derivatives.

    Returns the mapped (n,2) points and (n,2,m) d(u,v)/d(w, tx, tz, p[, yh]), m = 4 or 5: the
    homography ``P G T Gi`` is linear in each factor, so each derivative is one 3x3 matrix applied
    to the points, then the quotient rule of the perspective division.
    """
    _, tx, tz, _ = q
    G, Gi = _ground_to_image(f, cx, yh, h)
    T, P, c, s_ = _planar_motion(q)
    dT = np.array([
        [[-s_, c, s_ * tx - c * tz], [-c, -s_, c * tx + s_ * tz], [0.0, 0.0, 0.0]],  # d/dw
        [[0.0, 0.0, -c], [0.0, 0.0, s_], [0.0, 0.0, 0.0]],  # d/dtx
        [[0.0, 0.0, -s_], [0.0, 0.0, -c], [0.0, 0.0, 0.0]],  # d/dtz
    ])
    PG = P @ G
    TGi = T @ Gi
    mats = [PG @ dT[0] @ Gi, PG @ dT[1] @ Gi, PG @ dT[2] @ Gi,
            np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]) @ G @ TGi]  # d/dp
    if with_horizon:
        dG = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
        dGi = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -1.0 / (f * h)]])
        mats.append(P @ (dG @ TGi + G @ T @ dGi))
    Hm = PG @ TGi
    D = np.concatenate([Hm] + mats)  # (3 (1+m), 3): every matrix's rows, one product for all
    xh = pts @ D[:, :2].T + D[:, 2]  # (n, 3 (1+m))
    z = xh[:, 2]
    z = np.where(np.abs(z) < 1e-9, 1e-9, z)
    iz = 1.0 / z
    uv = xh[:, :2] * iz[:, None]
    d = xh[:, 3:].reshape(len(pts), len(mats), 3)  # each derivative matrix's image of the points
    J = np.empty((len(pts), 2, len(mats)))
    J[:, 0] = (d[..., 0] - uv[:, 0:1] * d[..., 2]) * iz[:, None]
    J[:, 1] = (d[..., 1] - uv[:, 1:2] * d[..., 2]) * iz[:, None]
    return uv, J

