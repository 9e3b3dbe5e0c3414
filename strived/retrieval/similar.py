"""More like this: the kernels (numpy only; `strived.similar` runs them over a library).

Every series (a video's ego, a track) is resampled once onto the absolute time grid ``k * GRID_S``
(`grid_units`): linear interpolation between two samples at most `MAX_GAP_S` apart, else unknown
(NaN). An example span becomes a signature: its series at up to `MAX_POINTS` grid points spread
over the span (`span_points`). Candidates are windows of the same length over every unit of the
library, started every ~1/8 of the span (`best_windows`).

Distance of a window to the signature (`best_windows`): the mean, over the points and channels
known in both, of ``|a - b| / SCALES[channel]``: values are compared as measured (a stop is not a
cruise, a cut-in at 10 m is not one at 60 m), each in units of a physically meaningful difference
fixed beforehand (below), so no channel dominates by its units. Unknown points are skipped, never
read as 0; a window needs at least `MIN_OVERLAP` of the signature's known points to be compared.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import Cancelled

#: the grid every series is resampled onto (s): twice the rate of the shortest rule window (0.4 s)
GRID_S = 0.2
#: at most this many points per signature (longer spans take every q-th grid point)
MAX_POINTS = 16
#: interpolation never bridges a gap longer than this (s): that stretch is unknown
MAX_GAP_S = 1.0
#: a signature needs at least 3 grid points
MIN_SPAN_S = 2 * GRID_S
#: share of the signature's known points a window must also know to be compared
MIN_OVERLAP = 0.5
#: window starts per signature length (a start every 1/8 of the span)
STARTS_PER_SPAN = 8

EGO_CHANNELS = ("speed", "accel", "yaw_rate")
TRACK_CHANNELS = ("distance", "loc_x", "lane_rel")
#: one unit of distance per channel: a difference the product already treats as an event's size:
#: 4 m/s of speed (a hard brake's drop, `describe.HARD_BRAKE_DROP_MPS`), 2 m/s² (firm braking),
#: 0.1 rad/s of yaw rate (a turn of ~35° over 6 s), 8 m of distance (`describe.APPROACH_MIN_M`),
#: 1.5 m of lateral offset (`describe.CROSS_SIDE_M`, under half a lane), one lane
SCALES = {"speed": 4.0, "accel": 2.0, "yaw_rate": 0.1, "distance": 8.0, "loc_x": 1.5, "lane_rel": 1.0}
#: classes compared with each other: a truck's cut-in is like a car's
CLASS_GROUPS = ({"car", "truck", "bus"}, {"motorcycle", "bicycle"}, {"pedestrian"})
#: windows per batch of the distance computation (bounds the temporary arrays)
WINDOW_BATCH = 1 << 20
_T_EPS = 1e-4


def class_group(cls: str) -> set[str]:
    """The classes a track of ``cls`` is compared with."""
    for g in CLASS_GROUPS:
        if cls in g:
            return set(g)
    return {cls}


def span_points(t0: float, t1: float) -> tuple[int, int, int]:
    """(first grid index, number of points P, grid steps q between points) of the signature of
    [t0, t1]: P <= MAX_POINTS points q grid steps apart, covering the span to within a step."""
    k0 = int(round(t0 / GRID_S))
    steps = max(2, int(round((t1 - t0) / GRID_S)))
    q = max(1, math.ceil(steps / (MAX_POINTS - 1)))
    return k0, steps // q + 1, q


def grid_units(t: np.ndarray, start: np.ndarray, length: np.ndarray, values: list[np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resample units onto the grid: unit u's samples are ``t[start[u]:start[u] + length[u]]``
    (time-ordered), ``values`` one array per channel aligned with ``t``. Returns (first grid index
    k0 [U], grid points n [U], values float32 [sum n, channels]); point i of unit u is at time
    ``(k0[u] + i) * GRID_S``."""
    t = np.asarray(t, np.float64)
    start = np.asarray(start, np.int64)
    length = np.asarray(length, np.int64)
    n_units, n_ch = len(start), len(values)
    has = length > 0
    first = np.where(has, t[np.where(has, start, 0)] if t.size else 0.0, 0.0)
    last = np.where(has, t[np.where(has, start + length - 1, 0)] if t.size else 0.0, 0.0)
    k0 = np.where(has, np.ceil(first / GRID_S - 1e-6), 0).astype(np.int64)
    k1 = np.where(has, np.floor(last / GRID_S + 1e-6), -1).astype(np.int64)
    n = np.maximum(0, k1 - k0 + 1)
    total = int(n.sum())
    out = np.full((total, n_ch), np.nan, np.float32)
    if total == 0:
        return k0, n, out
    unit = np.repeat(np.arange(n_units), n)
    k = np.repeat(k0, n) + (np.arange(total) - np.repeat(np.cumsum(n) - n, n))
    g = k * GRID_S
    # one sorted key over all units: time from the unit's first sample + unit * (longest unit + 1)
    big = float(np.max(last - first)) + 2 * MAX_GAP_S + 1.0
    s_unit = np.repeat(np.arange(n_units), length)
    s_key = t - first[s_unit] + s_unit * big
    q_key = g - first[unit] + unit * big
    j = np.searchsorted(s_key, q_key - _T_EPS, side="left")
    lo_b, hi_b = start[unit], start[unit] + length[unit] - 1
    right = np.clip(j, lo_b, hi_b)
    left = np.clip(j - 1, lo_b, hi_b)
    tl, tr = t[left], t[right]
    exact = np.abs(tr - g) <= _T_EPS
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(tr > tl, (g - tl) / (tr - tl), 0.0)
    inside = (tl < g) & (g < tr) & (tr - tl <= MAX_GAP_S)
    for c, v in enumerate(values):
        v = np.asarray(v, np.float32)
        out[:, c] = np.where(exact, v[right], np.where(inside, v[left] * (1 - w) + v[right] * w, np.nan))
    return k0, n, out


class Grid:
    """Grid values of one role (ego series or tracks): unit u's points are rows
    ``off[u]:off[u + 1]`` of ``x``, the first at grid index ``k0[u]``."""

    def __init__(self, k0: np.ndarray, n: np.ndarray, x: np.ndarray, channels: tuple[str, ...]):
        self.k0 = np.asarray(k0, np.int64)
        self.n = np.asarray(n, np.int64)
        self.off = np.r_[0, np.cumsum(self.n)].astype(np.int64)
        self.x = x
        self.channels = channels
        self._cols: dict[int, np.ndarray] = {}

    def col(self, c: int) -> np.ndarray:
        """Channel ``c`` of every point as one contiguous float32 array (made on first use)."""
        a = self._cols.get(c)
        if a is None:
            a = self._cols[c] = np.ascontiguousarray(self.x[:, c], np.float32)
        return a

    def at(self, units: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Values [len(units), channels] of each unit at absolute grid index k (NaN outside)."""
        rel = k - self.k0[units]
        ok = (rel >= 0) & (rel < self.n[units])
        idx = np.where(ok, self.off[units] + rel, 0)
        vals = np.asarray(self.x[idx], np.float32) if len(self.x) else np.full((len(idx), len(self.channels)), np.nan, np.float32)
        vals[~ok] = np.nan
        return vals


def signature(grid: Grid, unit: int, ego: Grid | None, video: int, k0: int, p: int, q: int) -> np.ndarray:
    """The [P, channels] values of ``unit`` (and, for a track, its video's ego) at the points."""
    k = k0 + q * np.arange(p)
    parts = [grid.at(np.full(p, unit), k)]
    if ego is not None:
        parts.append(ego.at(np.full(p, video), k))
    return np.concatenate(parts, axis=1)


def best_windows(grid: Grid, units: np.ndarray, owner: np.ndarray, sig: np.ndarray, q: int,
                 ego: Grid | None = None, exclude: tuple[int, float, float] | None = None,
                 cancel=None) -> dict:
    """The window of each video closest to ``sig`` ([P, channels]; NaN = unknown), over the
    candidate ``units`` (sorted; ``owner``: each unit's video, non-decreasing) of ``grid`` (with
    the ego channels of ``ego`` after the grid's own, for tracks). ``exclude`` = (video, t0, t1):
    windows of that video overlapping the span are not candidates. Returns arrays per video
    ranked best first: video, unit, k (first grid index), dist, known (points compared) and the
    counts windows / compared."""
    p = sig.shape[0]
    width = (p - 1) * q
    stride = max(1, round(width / STARTS_PER_SPAN))
    scales = np.asarray([SCALES[c] for c in grid.channels + (ego.channels if ego is not None else ())],
                        np.float32)
    known_sig = np.isfinite(sig)
    need = max(1, math.ceil(MIN_OVERLAP * int(known_sig.sum())))
    units = np.asarray(units, np.int64)
    n = grid.n[units]
    # an ego window lies inside its video; a track's from half a window before the track's first
    # point to half a window after its last (a car that comes into view mid-manoeuvre), inside
    # its video's ego series
    lo = -(width // 2) if ego is not None else 0
    hi = width - width // 2 if ego is not None else width
    n_starts = np.maximum(0, (n - 1 - hi - lo) // stride + 1)
    n_starts[n == 0] = 0
    total = int(n_starts.sum())
    found: list[tuple] = []
    compared = 0
    cum = np.r_[0, np.cumsum(n_starts)]
    # batches of whole units
    bounds = [0]
    while bounds[-1] < len(units):
        b = int(np.searchsorted(cum, cum[bounds[-1]] + WINDOW_BATCH, side="right")) - 1
        bounds.append(max(b, bounds[-1] + 1))
    n_own = len(grid.channels)
    own_sig, ego_sig = sig[:, :n_own], sig[:, n_own:]
    ego_sum = ego_cnt = None
    if ego is not None and np.isfinite(ego_sig).any():
        # the ego's part of a track window's distance depends on (video, start) only: computed
        # once per start of every ego series, then looked up by each track window
        ego_sum, ego_cnt = _partial(ego, np.repeat(np.arange(len(ego.n)), ego.n),
                                    np.concatenate([np.arange(k, k + m) for k, m in zip(ego.k0.tolist(), ego.n.tolist())])
                                    if len(ego.n) else np.zeros(0, np.int64), ego_sig, q, scales[n_own:])
    for a, b in zip(bounds[:-1], bounds[1:]):
        if cancel is not None and cancel():
            raise Cancelled()
        ns = n_starts[a:b]
        if int(ns.sum()) == 0:
            continue
        wu = np.repeat(units[a:b], ns)
        first = np.repeat(cum[a:b] - cum[a], ns)
        k_start = grid.k0[wu] + lo + (np.arange(len(wu)) - first) * stride
        vid = owner[np.searchsorted(units, wu)] if ego is not None else wu
        dsum, cnt = _partial(grid, wu, k_start, own_sig, q, scales[:n_own])
        if ego_sum is not None:
            rel = k_start - ego.k0[vid]
            ok = (rel >= 0) & (rel < ego.n[vid])
            at = np.where(ok, ego.off[vid] + rel, 0)
            dsum += np.where(ok, ego_sum[at], 0)
            cnt += np.where(ok, ego_cnt[at], 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            dist = np.where(cnt >= need, dsum / np.maximum(cnt, 1), np.inf)
        _rule_out(dist, vid, k_start, width, ego, exclude)
        compared += int(np.isfinite(dist).sum())
        found.append(_best_of_each_video(vid, wu, k_start, dist, cnt))
    v, u, k, d, c = _merge_batches(found)
    # a video split across two batches: keep its better window
    order = np.lexsort((v, d))
    _, first_of = np.unique(v[order], return_index=True)
    sel = order[np.sort(first_of)]
    sel = sel[np.lexsort((v[sel], d[sel]))]
    return {"video": v[sel], "unit": u[sel], "k": k[sel], "dist": d[sel], "known": c[sel],
            "windows": total, "compared": compared, "points": p, "step": q, "need": need}


def _rule_out(dist: np.ndarray, vid: np.ndarray, k_start: np.ndarray, width: int, ego: Grid | None,
              exclude: tuple[int, float, float] | None) -> None:
    """Set to inf (in place) the windows overlapping the excluded span and, for tracks, the
    windows not inside their video's ego series."""
    if exclude is not None:
        ev, e0, e1 = exclude
        hit = (vid == ev) & (k_start * GRID_S < e1) & ((k_start + width) * GRID_S > e0)
        dist[hit] = np.inf
    if ego is not None:
        ek0, en = ego.k0[vid], ego.n[vid]
        dist[(k_start < ek0) | (k_start + width > ek0 + en - 1)] = np.inf


def _best_of_each_video(vid: np.ndarray, wu: np.ndarray, k_start: np.ndarray, dist: np.ndarray,
                        cnt: np.ndarray) -> tuple:
    """(video, unit, k, dist, known) of the best finite window of each video of a batch (videos
    are contiguous runs: units sorted by video; ties: the first window)."""
    runs = np.flatnonzero(np.r_[True, vid[1:] != vid[:-1]])
    best = np.minimum.reduceat(dist, runs)
    lens = np.diff(np.r_[runs, len(dist)])
    pos = np.where(dist == np.repeat(best, lens), np.arange(len(dist)), len(dist))
    at = np.minimum.reduceat(pos, runs)
    keep = np.isfinite(best)
    at = at[keep]
    return vid[at], wu[at], k_start[at], dist[at], cnt[at]


def _merge_batches(found: list[tuple]) -> tuple[np.ndarray, ...]:
    """The batches' (video, unit, k, dist, known) arrays concatenated (a video split across two
    batches appears twice: the caller keeps its better window)."""
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
    cols = list(zip(*found)) if found else [[], [], [], [], []]
    return tuple(cat(list(xs), dt) for xs, dt in zip(cols, (np.int64, np.int64, np.int64, np.float64, np.int64)))


def _partial(grid: Grid, wu: np.ndarray, k_start: np.ndarray, sig: np.ndarray, q: int,
             scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of |difference| / scale, known pairs) of windows of ``grid`` (unit ``wu`` from grid
    index ``k_start``) against the signature's columns ``sig`` [P, grid channels]."""
    dsum = np.zeros(len(wu), np.float32)
    cnt = np.zeros(len(wu), np.int32)
    known = np.isfinite(sig)
    base_rel = k_start - grid.k0[wu]
    n = grid.n[wu]
    off = grid.off[wu]
    for m in range(sig.shape[0]):
        cols = np.flatnonzero(known[m])
        if cols.size == 0:
            continue
        rel = base_rel + m * q
        ok = (rel >= 0) & (rel < n)
        idx = np.where(ok, off + rel, 0)
        for c in cols.tolist():
            d = np.abs(grid.col(c)[idx] - sig[m, c])
            d *= np.float32(1.0 / scales[c])
            good = ok & (d == d)                 # NaN: unknown, skipped
            dsum += np.where(good, d, np.float32(0))
            cnt += good
    return dsum, cnt
