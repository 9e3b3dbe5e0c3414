"""The road's horizon row: the camera's prior fused with what the road's motion measures.

Ground points move down as ``(y - y_h)^2`` and sideways as ``(x - c_x)(y - y_h)``, so pairs with
enough translation measure ``y_h`` (the road's vanishing line, whatever the camera's pitch). Their
weighted median (locally over +-HORIZON_LOCAL_S) is fused with the prior from camera.json / cars /
lanes / mid-frame, and each pair's motion is re-expressed at it.
"""

from __future__ import annotations

import math

import numpy as np

from ..geometry import CameraModel
from .config import EGO, EgoConfig
from .homography import ground_homography_apply, ground_homography_jacobian


def _horizon_prior(cam: CameraModel) -> tuple[float, float]:
    """Horizon prior (row, sd in px) from the camera model's source."""
    sd_frac = {"config": 0.02, "cars": 0.05, "lanes": 0.06}.get(cam.horizon_source, 0.12)
    return cam.horizon_y, sd_frac * cam.height


def _wmedian(x: np.ndarray, w: np.ndarray) -> float:
    o = np.argsort(x)
    c = np.cumsum(w[o])
    return float(x[o][min(len(x) - 1, int(np.searchsorted(c, 0.5 * c[-1])))])


def fuse_horizon(cam: CameraModel, obs, cfg: EgoConfig = EGO) -> tuple[float, float, str]:
    """Horizon (row, sd px, source): the prior fused with the road-flow measurements' weighted median."""
    prior, prior_sd = _horizon_prior(cam)
    if len(obs) < 3:
        return prior, prior_sd, cam.horizon_source
    y = np.array([o[0] for o in obs])
    var = np.array([o[1] for o in obs]) + cfg.HORIZON_SD_FLOOR_PX ** 2
    w = 1.0 / var
    med = _wmedian(y, w)
    # spread of the measurements around their median gives the estimate's real uncertainty
    mad = 1.4826 * _wmedian(np.abs(y - med), w)
    n_eff = w.sum() ** 2 / np.sum(w ** 2)
    sd = max(mad, cfg.HORIZON_SD_FLOOR_PX) / math.sqrt(max(n_eff, 1.0))
    sd = max(sd, 0.5)
    wp, wf = 1.0 / prior_sd ** 2, 1.0 / sd ** 2
    fused = (wp * prior + wf * med) / (wp + wf)
    return float(fused), float(1.0 / math.sqrt(wp + wf)), "road_flow"


def local_horizon(steps, t, hz: float, hz_sd: float, cfg: EgoConfig = EGO) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the horizon over +-HORIZON_LOCAL_S (road slope changes), pulled to the global one."""
    m = len(steps)
    out = np.full(m, hz)
    out_sd = np.full(m, math.hypot(hz_sd, cfg.PITCH_JITTER_PX))
    tj = np.array([t[st.j] for st in steps]) if m else np.zeros(0)
    have = [(k, st.ground["horizon_y"], st.ground["horizon_var_data"]) for k, st in enumerate(steps)
            if st.ground is not None and st.ground.get("horizon_informative")
            and np.isfinite(st.ground["horizon_var_data"])
            and st.ground["horizon_var_data"] < cfg.HORIZON_OBS_MAX_SD ** 2]
    if len(have) < 3:
        return out, out_sd
    ks = np.array([h[0] for h in have])
    ys = np.array([h[1] for h in have])
    ws = 1.0 / (np.array([h[2] for h in have]) + cfg.HORIZON_SD_FLOOR_PX ** 2)
    tk = tj[ks]
    wg = 1.0 / max(hz_sd, 0.5) ** 2
    for k in range(m):
        sel = np.abs(tk - tj[k]) <= cfg.HORIZON_LOCAL_S
        if sel.sum() < 5:
            continue
        med = _wmedian(ys[sel], ws[sel])
        mad = 1.4826 * _wmedian(np.abs(ys[sel] - med), ws[sel])
        n_eff = ws[sel].sum() ** 2 / np.sum(ws[sel] ** 2)
        sd = max(mad, cfg.HORIZON_SD_FLOOR_PX) / math.sqrt(max(n_eff, 1.0))
        wl = 1.0 / sd ** 2
        out[k] = (wg * hz + wl * med) / (wg + wl)
        out_sd[k] = math.hypot(1.0 / math.sqrt(wg + wl), cfg.PITCH_JITTER_PX)
    return out, out_sd


def condition_on_horizon(g: dict, hz: float, hz_sd: float):
    """The pair's motion given a horizon prior N(hz, hz_sd^2): Gaussian conditioning of the fit's
    joint (q, horizon) estimate. A pair whose own horizon is sharp keeps its motion; one whose
    horizon is vague (slow driving) is re-expressed at the prior's horizon."""
    if g.get("cov5") is None:
        return g["x"], g["cov"]
    C = g["cov5"]
    Cqy = C[:4, 4]
    Syy = C[4, 4] + hz_sd ** 2
    gain = Cqy / Syy
    q = g["x"] + gain * (hz - g["horizon_y"])
    cq = C[:4, :4] - np.outer(gain, Cqy)
    return q, cq


def refit_at_horizon(fits: list[dict], horizons, cam: CameraModel):
    """Re-express each pair's fitted motion at another horizon row.

    The fitted (q, horizon) maps the pair's sample road points to their positions in the second
    frame; q' at the new horizon is the batched Gauss-Newton least-squares fit of those
    correspondences. Returns (k,4) q' and the forward-translation sd (m) carried over from the fit.
    """
    f, cx, h = cam.focal_px, cam.cx, cam.camera_height_m
    K = len(fits)
    q_new = np.full((K, 4), np.nan)
    sd_tz = np.full(K, np.nan)
    for i, (g, yh_new) in enumerate(zip(fits, horizons)):
        a = g["samples"]
        sd_tz[i] = math.sqrt(max(g["cov"][2, 2], 0.0))
        if abs(yh_new - g["horizon_y"]) < 0.05:
            q_new[i] = g["x"]
            continue
        b = ground_homography_apply(a, g["x"], f, cx, g["horizon_y"], h)
        ok = (a[:, 1] - yh_new > 2.0) & np.all(np.isfinite(b), axis=1)
        if ok.sum() < 10:
            continue
        a, b = a[ok], b[ok]
        q = g["x"].copy()
        # with a lower horizon the same image motion means a larger depth: scale the start
        for _ in range(8):
            x2, Jp = ground_homography_jacobian(a, q, f, cx, yh_new, h)
            r = (x2 - b).ravel()
            J = Jp.reshape(-1, 4)
            try:
                delta = -np.linalg.lstsq(J, r, rcond=None)[0]
            except np.linalg.LinAlgError:
                break
            q += delta
            if np.max(np.abs(delta)) < 1e-6:
                break
        q_new[i] = q
        if abs(g["x"][2]) > 1e-6:
            sd_tz[i] *= abs(q[2] / g["x"][2])
    return q_new, sd_tz

