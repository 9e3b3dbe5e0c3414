"""The road-relative lateral offset of track samples (``loc_x_road``): ``loc_x`` with the sweep the
ego's own rotation gives every object taken out, and the matching of track samples to their
video's frames it needs."""

from __future__ import annotations

import numpy as np

from .kernels import US, Series

#: Derived object fields: the lateral offset with the ego's own rotation taken out (`road_lateral`),
#: signed and absolute.
ROAD_FIELDS = ("loc_x_road", "abs_loc_x_road")
#: The road-relative offset is defined while the ego points within this angle (rad, 20 deg) of its
#: heading at the track's reference sample; through a larger turn the other road users turn with
#: the road, so a fixed heading no longer follows it and the field is unknown (NaN) there. A lane
#: change or a motorway bend turns the ego by well under 0.2 rad in a few seconds, a junction ~1.6.
ROAD_MAX_TURN_RAD = 0.35


def match_frames(e: Series, vids: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The ego-series sample of each (video, time) pair: track samples are a subset of their
    video's frames, matched by time (to the microsecond). Reads the ego times of these videos only."""
    if t.shape[0] == 0:
        return np.zeros(0, np.int64)
    u, inv = np.unique(vids, return_inverse=True)
    lens = e.length[u].astype(np.int64)
    first = np.cumsum(lens) - lens
    eidx = np.repeat(e.start[u].astype(np.int64), lens) + (np.arange(int(lens.sum())) - np.repeat(first, lens))
    if eidx.size == 0:
        return np.zeros(t.shape[0], np.int64)
    e_us = np.round(np.asarray(e.t[eidx], np.float64) * US).astype(np.int64)
    t_us = np.round(t * US).astype(np.int64)
    lo = min(int(e_us.min()), int(t_us.min()))
    span = max(int(e_us.max()), int(t_us.max())) - lo + 1
    e_key = np.repeat(np.arange(len(u), dtype=np.int64), lens) * span + (e_us - lo)
    t_key = inv.astype(np.int64) * span + (t_us - lo)
    order = np.argsort(e_key, kind="stable")
    pos = np.minimum(np.searchsorted(e_key[order], t_key, side="left"), len(order) - 1)
    return eidx[order[pos]]


def road_lateral(track: np.ndarray, loc_x: np.ndarray, loc_z: np.ndarray, distance: np.ndarray,
                  heading: np.ndarray) -> np.ndarray:
    """Lateral offset relative to the road (float32 per sample): ``loc_x`` with the sideways sweep
    the ego's own rotation gives every object taken out. When the ego turns left by dθ, an object
    at depth z moves z·dθ to the right in the camera's frame (``loc_x`` + = right, heading + =
    left), so ``loc_x_road(t) = loc_x(t) + Σ z̄·Δheading`` over the track's later samples: the offset
    as seen from where the ego points at the track's last sample (equal to ``loc_x`` there).

    ``track``: the track of each sample (samples of a track contiguous, in time order);
    ``heading``: the ego heading (rad, `integrate`) at each sample's frame; z̄: the mean depth of
    the two samples (``loc_z``, else ``distance``; one side when the other is unknown; no depth,
    no correction). Where the ego's yaw rate was not estimated the heading holds, so nothing is
    taken out there. NaN ``loc_x`` stays NaN, and so does every sample taken while the ego pointed
    more than `ROAD_MAX_TURN_RAD` away from its heading at the track's last sample (a turn)."""
    z = np.where(np.isfinite(loc_z), loc_z, distance).astype(np.float64)
    n = z.shape[0]
    if n == 0:
        return np.zeros(0, np.float32)
    z0, z1 = z[:-1], z[1:]
    with np.errstate(invalid="ignore"):
        zbar = np.where(np.isnan(z0), z1, np.where(np.isnan(z1), z0, 0.5 * (z0 + z1)))
    step = np.zeros(n)                    # step[i]: the correction from sample i to i + 1 (same track)
    same = track[1:] == track[:-1]
    step[:-1] = np.where(same, np.nan_to_num(zbar, nan=0.0) * np.diff(heading), 0.0)
    # each sample's sum over its track's later steps, added from the track's end backwards: the same
    # additions in the same order whatever range of tracks is read (chunking changes no value)
    last = np.flatnonzero(np.r_[~same, True])                       # each track's last sample
    own_last = np.repeat(last, np.diff(np.r_[-1, last]))            # ... for every sample
    rem = own_last - np.arange(n)                                   # samples after this one
    later = np.zeros(n)
    by_rem = np.argsort(rem, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(rem))]
    for r in range(1, len(bounds) - 1):
        i = by_rem[bounds[r]:bounds[r + 1]]
        later[i] = later[i + 1] + step[i]
    out = loc_x.astype(np.float64) + later
    out[np.abs(heading - heading[own_last]) > ROAD_MAX_TURN_RAD] = np.nan   # through a turn: unknown
    return out.astype(np.float32)
