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
        _, drop = _max_change(tt, speed, BRAKE_WINDOW_S)
        if drop >= HARD_BRAKE_DROP_MPS:
            out.append("ego brakes hard, sharp slowdown")
    jolt = rec.ego.get("jolt", np.full(len(t), np.nan))[m]
    if np.isfinite(jolt).any() and float(np.nanmax(jolt)) >= JOLT_RAD_S:
        out.append("the camera jolts suddenly, a hard shake or impact")
    yaw = rec.ego.get("yaw_rate", np.full(len(t), np.nan))[m]
    if np.isfinite(yaw).sum() >= 2:
        left, right = _max_change(tt, _heading(tt, yaw), TURN_WINDOW_S)
        if left >= TURN_MIN_RAD and left >= right:
            out.append("ego turns left")
        elif right >= TURN_MIN_RAD:
            out.append("ego turns right")
    return out


def _track_view(rec: VideoRecords, tr: Track, t0_s, t1_s):
    """(times, fields) of a track inside [t0_s, t1_s): slices (views) of its sorted time axis."""
    tt = rec.t[tr.pos]
    if t0_s is None:
        return tt, tr.fields
    if len(tt) > 1 and not bool((tt[1:] >= tt[:-1]).all()):
        m = (tt >= t0_s) & (tt < t1_s)
        return tt[m], {k: v[m] for k, v in tr.fields.items()}
    a, b = np.searchsorted(tt, (t0_s, t1_s), side="left")
    return tt[a:b], {k: v[a:b] for k, v in tr.fields.items()}


def _first_last(x: np.ndarray):
    ok = np.isfinite(x)
    i = int(ok.argmax()) if len(x) else 0
    if not len(x) or not ok[i]:
        return (np.nan, np.nan)
    return x[i], x[len(x) - 1 - int(ok[::-1].argmax())]


def track_phrases(rec: VideoRecords, tr: Track, t0_s=None, t1_s=None) -> list[str]:
    """Everyday-word motion of one tracked object relative to the ego vehicle."""
    return _view_phrases(tr, *_track_view(rec, tr, t0_s, t1_s))


def _view_phrases(tr: Track, tt: np.ndarray, f: dict) -> list[str]:
    if len(tt) < 3:
        return []
    color = tr.attrs.get("color") or tr.attrs.get("colour")
    noun = CLASS_WORDS.get(tr.cls, tr.cls.replace("_", " ")).split()[0]
    who = f"{color} {noun}" if color else noun
    art = "an" if who[0] in "aeiou" else "a"
    out = []
    dist = f.get("distance")
    if dist is None or not np.isfinite(dist).any():
        dist = f.get("loc_z")
    lx = f.get("loc_x")
    if dist is not None and np.isfinite(dist).any():
        dmin = float(np.nanmin(np.abs(dist)))
        if dmin < NEAR_M:     # cheap test first: never near, never "approaches"
            ahead = np.where(dist > 0, dist, np.nan)  # objects behind do not "approach"
            _, fall = _max_change(tt, ahead, APPROACH_WINDOW_S)
            if fall >= APPROACH_MIN_M:
                out.append(f"{art} {who} approaches")
        if dmin < VERY_CLOSE_M:  # the gap is never below |distance|
            gap = np.abs(dist) if lx is None else np.hypot(dist, np.nan_to_num(lx, nan=0.0))
            if np.isfinite(gap).any() and np.nanmin(gap) < VERY_CLOSE_M:
                out.append(f"{art} {who} comes very close")
    if lx is not None and np.isfinite(lx).sum() >= 3 and dist is not None:
        a, b = _first_last(lx)
        if np.isfinite(a) and np.isfinite(b) and abs(a) >= CROSS_SIDE_M \
                and abs(b) >= CROSS_SIDE_M and np.sign(a) != np.sign(b) \
                and (np.isfinite(dist) & (np.abs(dist) < 30)).any():
            side = "right" if a > 0 else "left"
            out.append(f"{art} {who} crosses in front from the {side}")
    lane = f.get("lane_rel")
    if lane is not None and np.isfinite(lane).sum() >= 3:
        a, b = _first_last(np.round(lane))
        if a in (-1, 1) and b == 0:
            out.append(f"{art} {who} moves into our lane from the {'right' if a > 0 else 'left'}")
        elif a == 0 and b in (-1, 1):
            out.append(f"the {who} ahead moves out of our lane to the {'right' if b > 0 else 'left'}")
    lz = f.get("loc_z")
    if lz is not None and lx is not None and np.isfinite(lz).sum() >= 3:
        a, b = _first_last(lz)
        side_x = np.nan
        if a < 2.0 and b > 8.0 and np.isfinite(lx).any():
            side_x = np.nanmedian(lx)
        if np.isfinite(side_x) and abs(side_x) >= CROSS_SIDE_M:
            out.append(f"{art} {who} overtakes us on the {'right' if side_x > 0 else 'left'}")
    return out


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
    for tr in sorted(rec.tracks, key=lambda x: x.track_id):
        for p in track_phrases(rec, tr):
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
    """[t0, t1) windows of ``segment_s`` covering the sampled frames (the last may be shorter)."""
    if len(rec.t) == 0:
        return [(0.0, max(segment_s, rec.info.n_frames / max(rec.info.fps, 1e-6)))]
    start, end = float(rec.t[0]), round(float(rec.t[-1]) + 1e-3, 3)
    n = max(1, int(np.ceil((end - start) / segment_s)))
    return [(start + k * segment_s, min(end, start + (k + 1) * segment_s)) for k in range(n)]


def segment_text(rec: VideoRecords, t0_s: float, t1_s: float) -> str:
    """A short description of what the records show in [t0_s, t1_s)."""
    views = [(tr, *_track_view(rec, tr, t0_s, t1_s)) for tr in rec.tracks]
    counts = Counter(tr.cls for tr, tt, _ in views if len(tt) >= 2)
    bits = [scene_words(rec)]
    bits += ego_phrases(rec, t0_s, t1_s)
    bits.append(_objects_sentence(counts, Counter()))
    nearest = None
    for tr, tt, f in views:
        d = f.get("distance")
        if d is None or not len(d) or not np.isfinite(d).any():
            continue
        lx = f.get("loc_x")
        d = np.where(d > 0, d, np.inf)          # NaN and behind never count as nearest ahead
        k = int(d.argmin())
        if not np.isfinite(d[k]):
            continue
        ahead = d[k] > 0 and (lx is None or not np.isfinite(lx[k]) or abs(lx[k]) < CROSS_SIDE_M)
        if ahead and (nearest is None or d[k] < nearest[0]):
            nearest = (float(d[k]), tr.cls)
    if nearest:
        bits.append(f"nearest {CLASS_WORDS.get(nearest[1], nearest[1]).split()[0]} ahead "
                    f"at {nearest[0]:.0f} m")
    seen = set()
    for tr, tt, f in views:
        for p in _view_phrases(tr, tt, f):
            if p not in seen and len(seen) < 6:
                seen.add(p)
                bits.append(p)
    return ". ".join(b for b in bits if b)
