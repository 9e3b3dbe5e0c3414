"""Plain-language descriptions of a video's perception records, for BM25 summaries and for the
text-of-perception dense path.

Everything here is derived from the numeric records (and metadata), so it works for items that have
records but no video file. The phrases are deliberately everyday words ("a car approaches", "ego
turns left", "ego stops"), not event names: a user's query and a caption would use such words.
Thresholds are fixed and documented in docs/retrieval.md (section "Generated text").
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..records import Track, VideoRecords

# Extra surface words a caption writer would use for each class (BM25 does no stemming).
CLASS_WORDS = {
    "car": "car", "truck": "truck lorry", "bus": "bus", "pedestrian": "pedestrian person",
    "motorcycle": "motorcycle motorbike scooter", "bicycle": "bicycle cyclist bike",
    "barrier": "barrier", "traffic_cone": "traffic cone", "other": "object",
}
TURN_WINDOW_S = 8.0
TURN_MIN_RAD = 0.6          # net heading change within TURN_WINDOW_S that counts as a turn (~35°)
STOP_SPEED_MPS = 0.5
MOVING_SPEED_MPS = 3.0
HARD_BRAKE_DROP_MPS = 4.0   # speed drop within BRAKE_WINDOW_S
JOLT_RAD_S = 0.4            # a sudden shake of the camera (impact, hard bump): ego "jolt" above this
BRAKE_WINDOW_S = 2.0
APPROACH_WINDOW_S = 4.0
APPROACH_MIN_M = 8.0
NEAR_M = 20.0
VERY_CLOSE_M = 3.0
CROSS_SIDE_M = 1.5
_DATE = re.compile(r"(?<!\d)(20\d\d|19\d\d)[-_.]?(0[1-9]|1[0-2])[-_.]?(0[1-9]|[12]\d|3[01])(?!\d)")
_MONTHS = ("january february march april may june july august september october november "
           "december").split()


def name_words(*names: str | None) -> str:
    """File/folder names and ids as words: ``Dashcam_2021-06-03_Rainy`` → ``dashcam 2021 06 03
    rainy`` plus ``june 2021`` for a recognisable date."""
    out = []
    for name in names:
        if not name:
            continue
        stem = re.sub(r"\.(mp4|mov|avi|mkv|json|hevc|h264|ts|m4v)$", "", name, flags=re.I)
        words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", stem)
        words = re.sub(r"[^0-9A-Za-z]+", " ", words).strip().lower()
        if words:
            out.append(words)
        m = _DATE.search(name)
        if m:
            out.append(f"{_MONTHS[int(m.group(2)) - 1]} {m.group(1)}")
    return " ".join(out)


def _heading(t: np.ndarray, yaw_rate: np.ndarray) -> np.ndarray:
    """Integrated heading (rad, + = left) from the yaw rate (missing samples count as 0)."""
    w = np.nan_to_num(yaw_rate.astype(np.float64), nan=0.0)
    dt = np.diff(t, prepend=t[0])
    return np.cumsum(w * dt)


def _max_change(t: np.ndarray, x: np.ndarray, window_s: float) -> tuple[float, float]:
    """(largest rise, largest fall) of x between two samples at most ``window_s`` apart
    (NaNs skipped). Vectorised: every sample against the (at most w) samples after it in its
    window, O(n · w) work in numpy, in row blocks so memory stays bounded for long videos."""
    ok = np.isfinite(x)
    t, x = t[ok], x[ok]
    n = len(x)
    if n < 2:
        return 0.0, 0.0
    j1 = np.searchsorted(t, t + window_s, side="right")     # first sample beyond each window
    w = int((j1 - np.arange(n)).max()) - 1                  # most later samples in one window
    if w < 1:
        return 0.0, 0.0
    rise = fall = 0.0
    offs = np.arange(1, w + 1)
    step = max(1, 2_000_000 // w)
    for a in range(0, n, step):
        i = np.arange(a, min(n, a + step))
        j = i[:, None] + offs[None, :]
        valid = j < j1[i, None]
        d = x[np.minimum(j, n - 1)] - x[i, None]
        if valid.any():
            rise = max(rise, float(np.where(valid, d, -np.inf).max()))
            fall = max(fall, float(-np.where(valid, d, np.inf).min()))
    return rise, fall


def ego_phrases(rec: VideoRecords, t0_s: float | None = None, t1_s: float | None = None) -> list[str]:
    """Ego motion in the window (whole video by default): speed level, turns, stops, braking."""
    t = rec.t
    m = np.ones(len(t), bool)
    if t0_s is not None:
        m &= (t >= t0_s) & (t < t1_s)
    if m.sum() < 2:
        return []
    tt = t[m]
    out = []
    speed = rec.ego.get("speed", np.full(len(t), np.nan))[m]
    if np.isfinite(speed).sum() >= 2:
        v = speed[np.isfinite(speed)]
        stopped_frac = float(np.mean(v < STOP_SPEED_MPS))
        kmh = float(np.median(v)) * 3.6
        if stopped_frac > 0.8:
            out.append("ego stationary, standing still, waiting")
        elif kmh >= 80:
            out.append(f"ego drives fast, highway speed about {kmh:.0f} km/h")
        elif kmh >= 30:
            out.append(f"ego drives at about {kmh:.0f} km/h")
        else:
            out.append(f"ego drives slowly, about {kmh:.0f} km/h")
        if 0.05 < stopped_frac <= 0.8:
            first_moving = np.argmax(v > MOVING_SPEED_MPS) if (v > MOVING_SPEED_MPS).any() else None
            last_stop = np.flatnonzero(v < STOP_SPEED_MPS)
            if first_moving is not None and last_stop.size and last_stop[-1] > first_moving:
                out.append("ego slows down and stops")
            elif first_moving is not None:
                out.append("ego starts moving from a stop")
        # a drop within the window is at most the range of the speeds: the scan only when it can pass
        if v.max() - v.min() >= HARD_BRAKE_DROP_MPS and \
                _max_change(tt, speed, BRAKE_WINDOW_S)[1] >= HARD_BRAKE_DROP_MPS:
            out.append("ego brakes hard, sharp slowdown")
    jolt = rec.ego.get("jolt", np.full(len(t), np.nan))[m]
    if np.isfinite(jolt).any() and float(np.nanmax(jolt)) >= JOLT_RAD_S:
        out.append("the camera jolts suddenly, a hard shake or impact")
    yaw = rec.ego.get("yaw_rate", np.full(len(t), np.nan))[m]
    if np.isfinite(yaw).sum() >= 2:
        heading = _heading(tt, yaw)
        left = right = 0.0
        if heading.max() - heading.min() >= TURN_MIN_RAD:     # else neither turn can reach it
            left, right = _max_change(tt, heading, TURN_WINDOW_S)
        if left >= TURN_MIN_RAD and left >= right:
            out.append("ego turns left")
        elif right >= TURN_MIN_RAD:
            out.append("ego turns right")
    return out


def _track_view(rec: VideoRecords, tr: Track, t0_s, t1_s, tt: np.ndarray | None = None):
    """(times, fields) of a track inside [t0_s, t1_s): slices (views) of its sorted time axis.
    ``tt``: the track's times when the caller has them already."""
    if tt is None:
        tt = rec.t[tr.pos]
    if t0_s is None:
        return tt, tr.fields
    if len(tt) > 1 and not bool((tt[1:] >= tt[:-1]).all()):
        m = (tt >= t0_s) & (tt < t1_s)
        return tt[m], {k: v[m] for k, v in tr.fields.items()}
    a, b = np.searchsorted(tt, (t0_s, t1_s), side="left")
    return tt[a:b], {k: v[a:b] for k, v in tr.fields.items()}


def track_phrases(rec: VideoRecords, tr: Track, t0_s=None, t1_s=None) -> list[str]:
    """Everyday-word motion of one tracked object relative to the ego vehicle."""
    return _TrackStack.of(rec, [tr]).phrases(t0_s, t1_s)[0]


_STACK_FIELDS = ("distance", "loc_z", "loc_x", "lane_rel")


class _Column:
    """One field of every track end to end (float64; NaN where a track lacks the field; one NaN
    after the last sample) with prefix counts of finite samples and each sample's nearest finite
    sample at or after / at or before it: per window [a, b) of the stacked samples, how many are
    known and the first and last known value, without a pass over the window."""

    def __init__(self, parts: list, lens: np.ndarray):
        x = np.concatenate([np.full(n, np.nan) if p is None else np.asarray(p, np.float64)
                            for p, n in zip(parts, lens)] + [np.full(1, np.nan)])
        ok = np.isfinite(x)
        self.cnt = np.zeros(x.size + 1, np.int64)
        np.cumsum(ok, out=self.cnt[1:])
        at = np.arange(x.size)
        self.nxt = np.minimum.accumulate(np.where(ok, at, x.size - 1)[::-1])[::-1]   # the NaN at the end
        self.prv = np.maximum.accumulate(np.where(ok, at, -1))     # -1: the NaN at the end
        self.x = x

    def known(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.cnt[b] - self.cnt[a]

    def first(self, a: np.ndarray) -> np.ndarray:
        """The first finite value at or after a (valid where the window has one)."""
        return self.x[self.nxt[a]]

    def last(self, b: np.ndarray) -> np.ndarray:
        """The last finite value before b (valid where the window has one)."""
        return self.x[self.prv[np.maximum(b - 1, 0)]]


def _reduce_windows(fn, x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fn over x[a_k:b_k] per window (x ends with a sentinel, so a_k, b_k < x.size); an empty
    window gets a meaningless value (callers mask it)."""
    return fn.reduceat(x, np.column_stack([a, b]).ravel())[::2]


class _TrackStack:
    """Tracks stacked once (their times and the fields the phrases read), so a time window's
    per-track tests are a few array operations for all tracks together; only the tracks that
    pass a cheap exact bound get a closer look (a window scan, a median)."""

    def __init__(self, tracks: list, times: list, fields: list):
        self.tracks, self.times, self.fields = tracks, times, fields
        self.lens = np.fromiter((len(tt) for tt in times), np.int64, len(times))
        self.off = np.cumsum(self.lens) - self.lens
        self.sorted = all(len(tt) < 2 or bool((tt[1:] >= tt[:-1]).all()) for tt in times)
        self.cols = {name: _Column([f.get(name) for f in fields], self.lens) for name in _STACK_FIELDS}
        with np.errstate(invalid="ignore"):
            self.abs_d = {name: np.abs(self.cols[name].x) for name in ("distance", "loc_z")}
            d = self.cols["distance"].x
            self.ahead = np.where(d > 0, d, np.inf)   # NaN and behind: never the nearest ahead

    @classmethod
    def of(cls, rec: VideoRecords, tracks: list | None = None) -> "_TrackStack":
        """The tracks of ``rec`` (or those of ``tracks``, in that order) stacked."""
        tracks = rec.tracks if tracks is None else tracks
        return cls(tracks, [rec.t[tr.pos] for tr in tracks], [tr.fields for tr in tracks])

    def window(self, t0_s, t1_s) -> tuple["_TrackStack", np.ndarray, np.ndarray]:
        """(stack, a, b): each track's samples in [t0_s, t1_s) as stacked positions [a, b)."""
        end = self.off + self.lens
        if t0_s is None:
            return self, self.off, end
        if not self.sorted:       # a track's times out of order: its window is a mask, not a range
            views = [_track_view(None, tr, t0_s, t1_s, tt) for tr, tt in zip(self.tracks, self.times)]
            sub = _TrackStack(self.tracks, [v[0] for v in views], [v[1] for v in views])
            return sub, sub.off, sub.off + sub.lens
        a, b = self.off.copy(), self.off.copy()
        for k, tt in enumerate(self.times):
            lo, hi = tt.searchsorted((t0_s, t1_s))
            a[k] += lo
            b[k] += hi
        return self, a, b

    def view(self, k: int, a: int, b: int):
        """(times, fields) of track k between stacked positions a and b (slices, no copies)."""
        o = int(self.off[k])
        return self.times[k][a - o:b - o], {f: v[a - o:b - o] for f, v in self.fields[k].items()}

    def phrases(self, t0_s=None, t1_s=None) -> list[list[str]]:
        """Per track, its phrases in [t0_s, t1_s) (the whole track for None)."""
        st, a, b = self.window(t0_s, t1_s)
        return st.window_phrases(a, b)

    def window_phrases(self, a: np.ndarray, b: np.ndarray) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in self.tracks]
        n = b - a
        if not (n >= 3).any():
            return out
        c = self.cols
        dist_known = c["distance"].known(a, b)
        use_dist = dist_known > 0                      # a track reads its distance, else its loc_z
        dknown = np.where(use_dist, dist_known, c["loc_z"].known(a, b))
        dmin = np.where(use_dist, _reduce_windows(np.fmin, self.abs_d["distance"], a, b),
                        _reduce_windows(np.fmin, self.abs_d["loc_z"], a, b))
        has_d = dknown > 0
        lx, lane, lz = c["loc_x"], c["lane_rel"], c["loc_z"]
        lxk, lanek, lzk = lx.known(a, b), lane.known(a, b), lz.known(a, b)
        lx0, lx1 = lx.first(a), lx.last(b)
        ln0, ln1 = np.round(lane.first(a)), np.round(lane.last(b))
        z0, z1 = lz.first(a), lz.last(b)
        with np.errstate(invalid="ignore"):
            near = has_d & (dmin < NEAR_M)
            close = has_d & (dmin < VERY_CLOSE_M)
            cross = ((lxk >= 3) & (np.abs(lx0) >= CROSS_SIDE_M) & (np.abs(lx1) >= CROSS_SIDE_M)
                     & ((lx0 > 0) != (lx1 > 0)))
            lane_in = (lanek >= 3) & (np.abs(ln0) == 1) & (ln1 == 0)
            lane_out = (lanek >= 3) & (ln0 == 0) & (np.abs(ln1) == 1)
            overtake = (lzk >= 3) & (z0 < 2.0) & (z1 > 8.0) & (lxk > 0)
        look = (n >= 3) & (near | close | cross | lane_in | lane_out | overtake)
        for k in np.flatnonzero(look).tolist():
            tr = self.tracks[k]
            tt, f = self.view(k, int(a[k]), int(b[k]))
            color = tr.attrs.get("color") or tr.attrs.get("colour")
            noun = CLASS_WORDS.get(tr.cls, tr.cls.replace("_", " ")).split()[0]
            who = f"{color} {noun}" if color else noun
            art = "an" if who[0] in "aeiou" else "a"
            ph = out[k]
            dist = f.get("distance") if use_dist[k] else f.get("loc_z")
            x = f.get("loc_x")
            if near[k]:
                ahead = np.where(dist > 0, dist, np.nan)  # objects behind do not "approach"
                # a fall within the window is at most the range of the values: skip the scan below
                if np.fmax.reduce(ahead) - np.fmin.reduce(ahead) >= APPROACH_MIN_M:
                    _, fall = _max_change(tt, ahead, APPROACH_WINDOW_S)
                    if fall >= APPROACH_MIN_M:
                        ph.append(f"{art} {who} approaches")
            if close[k]:          # the gap is never below |distance|
                gap = np.abs(dist) if x is None else np.hypot(dist, np.nan_to_num(x, nan=0.0))
                if np.isfinite(gap).any() and np.nanmin(gap) < VERY_CLOSE_M:
                    ph.append(f"{art} {who} comes very close")
            if cross[k] and dist is not None and (np.isfinite(dist) & (np.abs(dist) < 30)).any():
                ph.append(f"{art} {who} crosses in front from the {'right' if lx0[k] > 0 else 'left'}")
            if lane_in[k]:
                ph.append(f"{art} {who} moves into our lane from the {'right' if ln0[k] > 0 else 'left'}")
            elif lane_out[k]:
                ph.append(f"the {who} ahead moves out of our lane to the {'right' if ln1[k] > 0 else 'left'}")
            if overtake[k]:
                side_x = np.nanmedian(x)
                if np.isfinite(side_x) and abs(side_x) >= CROSS_SIDE_M:
                    ph.append(f"{art} {who} overtakes us on the {'right' if side_x > 0 else 'left'}")
        return out

    def nearest_ahead(self, a: np.ndarray, b: np.ndarray) -> tuple[float, str] | None:
        """(distance, class) of the nearest object ahead in the windows: per track its smallest
        positive distance, counted when that sample is within CROSS_SIDE_M of our lane centre (or
        its lateral offset is unknown); the first track wins a tie."""
        if not len(self.tracks):
            return None
        m = _reduce_windows(np.minimum, self.ahead, a, b)
        m = np.where((b > a) & (self.cols["distance"].known(a, b) > 0), m, np.inf)
        best = None
        lx = self.cols["loc_x"].x
        for k in np.flatnonzero(np.isfinite(m)).tolist():
            if best is not None and not m[k] < best[0]:
                continue
            i = int(a[k]) + int(np.argmin(self.ahead[a[k]:b[k]]))   # its first closest sample
            if not np.isfinite(lx[i]) or abs(lx[i]) < CROSS_SIDE_M:
                best = (float(m[k]), self.tracks[k].cls)
        return best


def class_counts(rec: VideoRecords, t0_s=None, t1_s=None, min_samples: int = 3) -> Counter:
    c = Counter()
    for tr in rec.tracks:
        n = len(tr.pos) if t0_s is None else len(_track_view(rec, tr, t0_s, t1_s)[0])
        if n >= min_samples:
            c[tr.cls] += 1
    return c


def _objects_sentence(counts: Counter, colors: Counter) -> str:
    if not counts:
        return "no tracked objects"
    parts = []
    for cls, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        parts.append(f"{CLASS_WORDS.get(cls, cls.replace('_', ' '))} ({n})")
    s = "objects: " + ", ".join(parts)
    if colors:
        s += "; colours: " + ", ".join(f"{c} {cls}" for (c, cls), _ in colors.most_common(6))
    return s


def scene_words(rec: VideoRecords) -> str:
    """Day/night, weather and other scene attributes the perception or the user recorded."""
    a = rec.info.attrs or {}
    words = []
    dn = a.get("daynight") or a.get("time_of_day")
    if dn:
        words.append({"day": "daytime day", "night": "night dark"}.get(str(dn), str(dn)))
    for k in ("weather", "scene", "place", "location", "road"):
        if a.get(k):
            words.append(str(a[k]))
    return " ".join(words)


def video_summary(rec: VideoRecords, max_phrases: int = 12) -> str:
    """The generated BM25 summary of a whole video."""
    info = rec.info
    counts = class_counts(rec)
    colors = Counter((tr.attrs.get("color"), tr.cls) for tr in rec.tracks if tr.attrs.get("color"))
    phrases = ego_phrases(rec)
    seen = set(phrases)
    stack = _TrackStack.of(rec, sorted(rec.tracks, key=lambda x: x.track_id))
    for p in (p for ph in stack.phrases() for p in ph):
        if p not in seen and len(phrases) < max_phrases:
            seen.add(p)
            phrases.append(p)
    folder = None
    if info.path:
        parts = re.split(r"[\\/]", info.path)
        folder = parts[-2] if len(parts) > 1 else None
        fname = parts[-1]
    else:
        fname = None
    bits = [name_words(info.id, fname, folder), scene_words(rec),
            f"{rec.duration_s:.0f} s", _objects_sentence(counts, colors)]
    bits += phrases
    if info.source:
        bits.append("source: " + info.source[:200])
    return ". ".join(b for b in bits if b)


def segment_bounds(rec: VideoRecords, segment_s: float = 4.0) -> list[tuple[float, float]]:
    """[t0, t1) windows of ``segment_s`` covering the sampled frames (the last may be shorter).
    Only windows that hold a sample: their number is bounded by the number of samples, so one far
    time stamp (a unit mistake, a sentinel, a PTS jump) adds one window, not one per 4 s of the
    gap (issue 37: a t of 1e9 ran `strived import` out of memory)."""
    if len(rec.t) == 0:
        return [(0.0, max(segment_s, rec.info.n_frames / max(rec.info.fps, 1e-6)))]
    start, end = float(rec.t[0]), round(float(rec.t[-1]) + 1e-3, 3)
    ks = np.unique(np.floor((np.asarray(rec.t, np.float64) - start) / segment_s).astype(np.int64))
    return [(start + k * segment_s, min(end, start + (k + 1) * segment_s)) for k in ks.tolist()]


def segment_text(rec: VideoRecords, t0_s: float, t1_s: float, stack: "_TrackStack | None" = None) -> str:
    """A short description of what the records show in [t0_s, t1_s). ``stack``: the video's
    tracks stacked once (`track_stack`) when several segments of one video are described."""
    if stack is None:
        stack = _TrackStack.of(rec)
    st, a, b = stack.window(t0_s, t1_s)
    counts = Counter(tr.cls for tr, n in zip(st.tracks, (b - a).tolist()) if n >= 2)
    bits = [scene_words(rec)]
    bits += ego_phrases(rec, t0_s, t1_s)
    bits.append(_objects_sentence(counts, Counter()))
    nearest = st.nearest_ahead(a, b)
    if nearest:
        bits.append(f"nearest {CLASS_WORDS.get(nearest[1], nearest[1]).split()[0]} ahead "
                    f"at {nearest[0]:.0f} m")
    seen = set()
    for ph in st.window_phrases(a, b):
        for p in ph:
            if p not in seen and len(seen) < 6:
                seen.add(p)
                bits.append(p)
    return ". ".join(b for b in bits if b)


def track_stack(rec: VideoRecords) -> _TrackStack:
    """A video's tracks stacked once, shared by the descriptions of its segments."""
    return _TrackStack.of(rec)
