"""The per-unit series of a corpus (`Series`) and the kernels the fast scorer's features are
computed with: window extremes, temporal change, steady runs, held runs, per-unit statistics,
the ego heading.

Object-frames of all tracks are concatenated (track-major, time-ordered inside a track); ``start``
and ``length`` index each track's slice. The ego series of each video is one more "track" in a
separate table, so the same kernels serve both roles.

`window_change` implements the paper's soft-score kernel (appendix, Eq. "dsl_soft"):
``max_{0 < t2 - t1 <= window} phi(t2) - phi(t1)`` (positive direction) and the mirrored negative
one; the unsigned change is the larger of the two. NaN samples take no part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Windows are inclusive to within this many seconds, so that frame times with rounding noise
#: (4.3 - 0.3 = 3.9999999999999996 or 4.000000000000001) count the same on every path.
T_EPS = 1e-3
#: Two consecutive samples further apart than this break a monotonic run (a dropped track stretch).
TREND_MAX_GAP_S = 1.0
US = 1_000_000  # time quantum for exact window search: microseconds
#: samples per chunk of whole units when a feature is computed over a large corpus: bounds the
#: temporary arrays (a few float64 copies of a chunk) whatever the library size; read at call
#: time (``kernels.CHUNK_SAMPLES``) by `integrate`, `chunks` and the column cache writer (`rows`)
CHUNK_SAMPLES = 2_000_000


@dataclass
class Series:
    """Concatenated per-frame values of many tracks (or ego series)."""

    owner: np.ndarray  # int32 [T] video index of each track
    start: np.ndarray  # int64 [T]
    length: np.ndarray  # int64 [T]
    t: np.ndarray  # float64 [N] time of each sample
    values: dict[str, np.ndarray]  # field -> float32 [N]
    _feat: dict = field(default_factory=dict)
    #: "t" / field -> `colcache.FileColumn` of the memory-mapped arrays of a column cache: features read
    #: those by ranges (pread), so the samples they read do not stay mapped in this process
    files: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.start.shape[0])

    def sample_track(self) -> np.ndarray:
        """Track index of every sample (int32 [N])."""
        key = ("sample_track",)
        if key not in self._feat:
            self._feat[key] = np.repeat(np.arange(self.n, dtype=np.int32), self.length)
        return self._feat[key]


@dataclass
class ColumnParts:
    """What a `columns.TrackColumns` is built from (`rows`, `colcache`): the corpus' videos, its
    track and ego series, each track's class code and id, and for a library the units' content
    identities and the videos whose rows are damaged ({video_id: reason})."""

    video_ids: list[str]
    tracks: Series
    ego: Series
    track_cls: np.ndarray  # int16 [T] code into cls_names
    cls_names: list[str]
    track_ids: np.ndarray  # int64 [T]
    ego_ident: np.ndarray | None = None
    track_ident: np.ndarray | None = None
    broken: dict[str, str] = field(default_factory=dict)


def build_series(owner, length, t_list, vals) -> Series:
    start = np.zeros(len(length), np.int64)
    if len(length):
        start[1:] = np.cumsum(length)[:-1]
    t = np.concatenate(t_list).astype(np.float64) if t_list else np.zeros(0)
    values = {f: (np.concatenate(v).astype(np.float32) if v else np.zeros(0, np.float32))
              for f, v in vals.items()}
    return Series(owner=owner, start=start, length=length, t=t, values=values)


def compare(v: np.ndarray, op: str, x: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        if op == "lt":
            return v < x
        if op == "le":
            return v <= x
        if op == "gt":
            return v > x
        return v >= x


def _valid_view(s: Series, v: np.ndarray):
    """Compress to valid (non-NaN) samples: values, times, track index, per-track count/start."""
    valid = ~np.isnan(v)
    st = s.sample_track()
    if valid.all():
        vv, tt, tr = v.astype(np.float64), s.t, st
        cnt = s.length
    else:
        vv, tt, tr = v[valid].astype(np.float64), s.t[valid], st[valid]
        cnt = np.bincount(tr, minlength=s.n).astype(np.int64)
    vstart = np.zeros(s.n, np.int64)
    if s.n:
        vstart[1:] = np.cumsum(cnt)[:-1]
    return vv, tt, tr, cnt, vstart


def _track_keys(tt: np.ndarray, tr: np.ndarray, window_s: float) -> tuple[np.ndarray, int]:
    """(sorted integer key of every sample, window in the same units): track-major, microsecond
    time relative to the track's first sample (tracks are contiguous and ordered), so one
    searchsorted finds every sample's window inside its own track."""
    t_us = np.round(tt * US).astype(np.int64)
    first = np.zeros(int(tr.max()) + 1, np.int64)
    change = np.flatnonzero(np.r_[True, tr[1:] != tr[:-1]])
    first[tr[change]] = t_us[change]
    rel = t_us - first[tr]
    w_us = _window_us(window_s, rel)
    span = int(rel.max()) + w_us + 1
    return tr.astype(np.int64) * span + rel, w_us


def _regular_steps(tt: np.ndarray, tr: np.ndarray, window_s: float):
    """When every track's samples are evenly spaced (the same step, in whole microseconds, in
    every track: a fixed frame rate without gaps), (window in steps, first index of each
    sample's track, last index of it); else None. Then a sample's window is plain index
    arithmetic, the same as `_track_keys`' search gives (both use microsecond times)."""
    if tt.size < 2:
        return None
    t_us = np.round(tt * US).astype(np.int64)
    same = tr[1:] == tr[:-1]
    d = np.diff(t_us)[same]
    if d.size == 0 or d[0] <= 0 or not np.all(d == d[0]):
        return None
    step = int(d[0])
    change = np.flatnonzero(np.r_[True, ~same])
    lens = np.diff(np.r_[change, tt.size])
    first = np.repeat(change, lens)
    last = first + np.repeat(lens, lens) - 1
    rel_max = int((lens.max() - 1) * step)
    return _window_us(window_s, np.array([rel_max])) // step, first, last


def _window_end(tt: np.ndarray, tr: np.ndarray, window_s: float) -> np.ndarray:
    """For each sample i, the last index j of the same track with t_j - t_i <= window (+T_EPS)."""
    if tt.size == 0:
        return np.zeros(0, np.int64)
    reg = _regular_steps(tt, tr, window_s)
    if reg is not None:
        k, _, last = reg
        return np.minimum(np.arange(tt.size) + k, last)
    key, w_us = _track_keys(tt, tr, window_s)
    return np.searchsorted(key, key + w_us, side="right") - 1


def _window_us(window_s: float, rel: np.ndarray) -> int:
    """The window (+T_EPS) in microseconds, capped just above the longest track: a window longer
    than every track gives the same result, and the integer keys cannot overflow."""
    cap = (int(rel.max()) if rel.size else 0) + 1
    w = float(window_s) + T_EPS
    if not np.isfinite(w) or w * US >= cap:
        return cap
    return int(round(w * US))


def _window_start(tt: np.ndarray, tr: np.ndarray, window_s: float) -> np.ndarray:
    """For each sample j, the first index i of the same track with t_j - t_i <= window (+T_EPS)."""
    if tt.size == 0:
        return np.zeros(0, np.int64)
    reg = _regular_steps(tt, tr, window_s)
    if reg is not None:
        k, first, _ = reg
        return np.maximum(np.arange(tt.size) - k, first)
    key, w_us = _track_keys(tt, tr, window_s)
    return np.searchsorted(key, key - w_us, side="left")


def end_change(s: Series, v: np.ndarray, window_s: float, direction: str | None) -> np.ndarray:
    """Per sample j, over the earlier valid samples i of the same track with t_j - t_i <= window:
    the best rise ``max(0, v_j - min v_i)`` (positive), fall ``max(0, max v_i - v_j)`` (negative)
    or the larger of the two (None); 0 at NaN samples and where no earlier sample is in the
    window. float64 [N]."""
    n = v.shape[0]
    res = np.zeros(n, np.float64)
    valid = ~np.isnan(v)
    vidx = np.flatnonzero(valid)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return res
    v32 = vv.astype(np.float32)
    start = _window_start(tt, tr, window_s)
    j = np.arange(vv.size)
    has = start < j
    lo, hi = start[has], j[has] - 1
    base = vv[has]
    del start, j
    out = np.zeros(lo.shape[0], np.float64)
    fns = {None: (np.minimum, np.maximum), "positive": (np.minimum,), "negative": (np.maximum,)}[direction]
    for fn, ext in zip(fns, range_extremes(v32, lo, hi, fns)):
        if fn is np.minimum:
            out = np.maximum(out, base - ext.astype(np.float64))
        else:
            out = np.maximum(out, ext.astype(np.float64) - base)
    res[vidx[has]] = out
    return res


def end_trend(s: Series, v: np.ndarray, direction: str) -> np.ndarray:
    """Per sample j: the duration (s) of the steady run ending at j (as `trend_run` defines runs);
    0 where no run ends there. float64 [N]."""
    n = v.shape[0]
    res = np.zeros(n, np.float64)
    vidx = np.flatnonzero(~np.isnan(v))
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return res
    sm = smooth3(vv, tr)
    sign = 1.0 if direction == "increasing" else -1.0
    step_ok = ((tr[1:] == tr[:-1]) & ((tt[1:] - tt[:-1]) <= TREND_MAX_GAP_S)
               & (sign * (sm[1:] - sm[:-1]) > 0))
    reset = np.r_[True, ~step_ok]             # sample j starts a new run unless step j-1 -> j is ok
    run_start = np.maximum.accumulate(np.where(reset, np.arange(vv.size), 0))
    dur = tt - tt[run_start]
    res[vidx] = np.where(reset, 0.0, dur)
    return res


def range_extreme(vv: np.ndarray, lo: np.ndarray, hi: np.ndarray, fn) -> np.ndarray:
    """fn (np.maximum or np.minimum) over vv[lo:hi+1] for every query (lo <= hi)."""
    return range_extremes(vv, lo, hi, (fn,))[0]


def _level_probes(lo: np.ndarray, hi: np.ndarray, top: int | None = None):
    """Range queries vv[lo:hi+1] grouped by sparse-table level (floor(log2(length)), exact):
    (top level, per level None or (query indices or None for all, first entry, second entry))."""
    q = lo.shape[0]
    level = np.frexp((hi - lo + 1).astype(np.float64))[1] - 1 if q else np.zeros(0, np.int64)
    if top is None:
        top = int(level.max()) if q else 0
    counts = np.bincount(level, minlength=top + 1)
    probes = []
    for k in range(top + 1):
        if counts[k] == 0:
            probes.append(None)
        elif counts[k] == q:
            probes.append((None, lo, hi - (1 << k) + 1))
        else:
            sel = np.flatnonzero(level == k)
            probes.append((sel, lo[sel], hi[sel] - (1 << k) + 1))
    return top, probes


def _sparse_levels(vv: np.ndarray, fn, top: int):
    """(k, level k) for k = 0..top: level k holds fn over 2^k consecutive values, built from
    level k-1 (one level in memory at a time, each shorter by 2^(k-1))."""
    cur = vv
    for k in range(top + 1):
        yield k, cur
        if k < top:
            cur = fn(cur[:-(1 << k)], cur[(1 << k):])


def range_extremes(vv: np.ndarray, lo: np.ndarray, hi: np.ndarray, fns) -> list[np.ndarray]:
    """For each fn of ``fns`` (np.maximum / np.minimum): fn over vv[lo:hi+1] for every query
    (lo <= hi). Sparse table (`_sparse_levels`); a query of length n reads two entries of level
    floor(log2 n). The queries are grouped by level once for all fns."""
    q = lo.shape[0]
    outs = [np.empty(q, vv.dtype) for _ in fns]
    if q == 0:
        return outs
    top, probes = _level_probes(lo, hi)
    for fn, out in zip(fns, outs):
        for k, cur in _sparse_levels(vv, fn, top):
            if probes[k] is not None:
                sel, a, b = probes[k]
                if sel is None:
                    out[:] = fn(cur[a], cur[b])
                else:
                    out[sel] = fn(cur[a], cur[b])
    return outs


def window_change(s: Series, v: np.ndarray, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(positive, negative) per-track max change within the window."""
    pos_res = np.zeros(s.n, np.float64)
    neg_res = np.zeros(s.n, np.float64)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return pos_res, neg_res
    v32 = vv.astype(np.float32)  # the values are float32: extremes are exact in float32
    n = vv.size
    idx = np.arange(n)
    reg = _regular_steps(tt, tr, window_s)
    if reg is not None:                      # evenly spaced: most windows are k samples long
        k, _, last = reg
        end = np.minimum(idx + k, last)
        has = end > idx
        mx, mn = _regular_window_extremes(v32, k, end, has, (np.maximum, np.minimum))
    else:
        end = _window_end(tt, tr, window_s)
        has = end > idx                      # a later sample of the same track in the window
        # every sample is a query (no compressions): one without a later sample in its window
        # reads any valid range and is masked out below
        lo = np.minimum(idx + 1, n - 1)
        hi = np.maximum(end, lo)
        mx, mn = range_extremes(v32, lo, hi, (np.maximum, np.minimum))
    best = mx.astype(np.float64)
    best -= vv
    best = np.where(has, best, 0.0)
    np.maximum(best, 0.0, out=best)
    _group_max(pos_res, tr, best)
    best = mn.astype(np.float64)
    np.subtract(vv, best, out=best)
    best = np.where(has, best, 0.0)
    np.maximum(best, 0.0, out=best)
    _group_max(neg_res, tr, best)
    return pos_res, neg_res


def _regular_window_extremes(vv: np.ndarray, k: int, end: np.ndarray, has: np.ndarray, fns) -> list[np.ndarray]:
    """For each fn: fn over vv[i+1 : end_i+1] for every sample i with ``has`` (its window holds a
    later sample; the others get a meaningless value), where ``end_i = min(i + k, last of its
    track)``: `range_extremes`' sparse table, but a window of the full k samples (most of them)
    reads its two entries of level floor(log2 k) as two shifted slices of that level for all
    such windows at once, and only the windows cut short by their track's end are looked up one
    by one. The same entries are combined, so the values are those of `range_extremes`."""
    n = vv.size
    outs = [np.empty(n, vv.dtype) for _ in fns]
    if n == 0:
        return outs
    idx = np.arange(n)
    w = 1 << (int(k).bit_length() - 1)        # 2^floor(log2 k)
    m = max(n - k, 0)                         # samples that can have k later samples
    full = (end[:m] == idx[:m] + k)
    cut = np.flatnonzero(has & (np.r_[~full, np.ones(n - m, bool)]))
    top, probes = _level_probes(cut + 1, end[cut], top=w.bit_length() - 1)
    for fn, out in zip(fns, outs):
        for lev, cur in _sparse_levels(vv, fn, top):
            if probes[lev] is not None:
                sel, a, b = probes[lev]
                out[cut if sel is None else cut[sel]] = fn(cur[a], cur[b])
            if lev == top and m:
                np.copyto(out[:m], fn(cur[1:m + 1], cur[k - w + 1:m + k - w + 1]), where=full)
    return outs


def _group_max(res: np.ndarray, groups: np.ndarray, vals: np.ndarray) -> None:
    """res[g] = max(res[g], max of vals in group g); groups are sorted."""
    if vals.size == 0:
        return
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    m = np.maximum.reduceat(vals, starts)
    g = groups[starts]
    res[g] = np.maximum(res[g], m)


def smooth3(vv: np.ndarray, tr: np.ndarray) -> np.ndarray:
    """Centred 3-sample moving average inside each track (ends use the samples that exist)."""
    n = vv.size
    if n == 0:
        return vv.copy()
    same_prev = np.r_[False, tr[1:] == tr[:-1]]
    same_next = np.r_[tr[:-1] == tr[1:], False]
    prev = np.where(same_prev, np.r_[0.0, vv[:-1]], 0.0)
    nxt = np.where(same_next, np.r_[vv[1:], 0.0], 0.0)
    return (vv + prev + nxt) / (1.0 + same_prev + same_next)


def trend_run(s: Series, v: np.ndarray, direction: str) -> np.ndarray:
    """Longest run (s) of consecutive valid samples along which the 3-sample-smoothed field moves
    strictly in ``direction``; a gap over TREND_MAX_GAP_S breaks a run."""
    res = np.zeros(s.n, np.float64)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return res
    sm = smooth3(vv, tr)
    sign = 1.0 if direction == "increasing" else -1.0
    step_ok = ((tr[1:] == tr[:-1]) & ((tt[1:] - tt[:-1]) <= TREND_MAX_GAP_S)
               & (sign * (sm[1:] - sm[:-1]) > 0))
    if not step_ok.any():
        return res
    # runs of consecutive ok steps: step k joins sample k and k+1
    ok = step_ok.astype(np.int8)
    d = np.diff(np.r_[0, ok, 0])
    run_start = np.flatnonzero(d == 1)  # first step index
    run_end = np.flatnonzero(d == -1)  # one past last step index
    dur = tt[run_end] - tt[run_start]  # sample run_end is the last sample of the run
    _group_max(res, tr[run_start], dur)
    return res


def held_run(s: Series, v: np.ndarray, op: str, x: float) -> np.ndarray:
    """Per unit: the longest run (s) of consecutive samples where op(v, x) holds; a NaN sample
    holds nothing, so it breaks a run (unlike `_valid_view` kernels, which skip NaNs)."""
    res = np.zeros(s.n, np.float64)
    ok = compare(np.asarray(v, np.float64), op, x)   # as the reference compares; NaN: False
    if not ok.any():
        return res
    st = s.sample_track()
    t = np.asarray(s.t, np.float64)
    same_prev = np.r_[False, st[1:] == st[:-1]]
    same_next = np.r_[st[:-1] == st[1:], False]
    prev_ok = np.r_[False, ok[:-1]] & same_prev
    next_ok = np.r_[ok[1:], False] & same_next
    first = np.flatnonzero(ok & ~prev_ok)        # run starts, in order
    last = np.flatnonzero(ok & ~next_ok)         # run ends, paired with the starts
    _group_max(res, st[first], t[last] - t[first])
    return res


def minmax(s: Series, v: np.ndarray):
    mn = np.full(s.n, np.nan)
    mx = np.full(s.n, np.nan)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    nz = np.flatnonzero(cnt > 0)
    if nz.size:
        mn[nz] = np.minimum.reduceat(vv, vstart[nz])
        mx[nz] = np.maximum.reduceat(vv, vstart[nz])
    return mn, mx


def valid_count(s: Series, v: np.ndarray) -> np.ndarray:
    """Per unit: the number of its samples with a value (not NaN)."""
    return np.bincount(s.sample_track()[~np.isnan(v)], minlength=s.n).astype(np.int64)


def mean(s: Series, v: np.ndarray):
    out = np.full(s.n, np.nan)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    nz = np.flatnonzero(cnt > 0)
    if nz.size:
        out[nz] = np.add.reduceat(vv, vstart[nz]) / cnt[nz]
    return out


def integrate(s: Series, yaw_rate: np.ndarray) -> np.ndarray:
    """Heading (rad) per ego sample: trapezoidal integral of yaw_rate from the series start;
    NaN yaw_rate contributes nothing (heading holds). One running sum over all series (a series
    start adds a 0 step) from which each series' value at its start is subtracted, worked out in
    chunks of whole series with the sum carried across (the same additions in the same order as
    one pass, so the same values), so its float64 work space is a chunk's, not the library's."""
    n = yaw_rate.shape[0]
    out = np.zeros(n, np.float32)
    if n < 2:
        return out
    nz = s.length > 0
    starts, lens = s.start[nz], s.length[nz]
    carry = 0.0                               # the running sum at the chunk's first sample
    i = 0
    while i < starts.size:
        j = max(i + 1, int(np.searchsorted(starts, starts[i] + CHUNK_SAMPLES, side="left")))
        j = min(j, starts.size)
        a, b = int(starts[i]), int(starts[j - 1] + lens[j - 1])
        y = np.nan_to_num(yaw_rate[a:b].astype(np.float64), nan=0.0)
        inc = 0.5 * (y[1:] + y[:-1]) * np.diff(s.t[a:b])
        inc[starts[i + 1:j] - a - 1] = 0.0    # the step into a series start adds nothing
        cum = np.cumsum(np.r_[carry, inc])
        out[a:b] = cum - np.repeat(cum[starts[i:j] - a], lens[i:j])
        carry = float(cum[-1])                # + the 0 step into the next series
        i = j
    return out
