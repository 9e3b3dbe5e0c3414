"""The generated segment texts test every track of a window together (`describe._TrackStack`).
Checked here against a plain one-track-at-a-time reference of the same rules, on random tracks
with missing values, missing fields, times out of order and tracks behind or beside us."""

from __future__ import annotations

import numpy as np
import pytest

from strived.records import Track, VideoInfo, VideoRecords
from strived.retrieval import describe as D


def _first_last(x):
    ok = np.flatnonzero(np.isfinite(x))
    return (x[ok[0]], x[ok[-1]]) if ok.size else (np.nan, np.nan)


def _ref_phrases(tr, tt, f):
    """The phrase rules for one track's samples in a window, written out plainly."""
    if len(tt) < 3:
        return []
    who = f"{tr.attrs['color']} {tr.cls}" if tr.attrs.get("color") else tr.cls
    art = "an" if who[0] in "aeiou" else "a"
    out = []
    dist = f.get("distance")
    if dist is None or not np.isfinite(dist).any():
        dist = f.get("loc_z")
    lx = f.get("loc_x")
    if dist is not None and np.isfinite(dist).any():
        dmin = np.nanmin(np.abs(dist))
        if dmin < D.NEAR_M:
            _, fall = D._max_change(tt, np.where(dist > 0, dist, np.nan), D.APPROACH_WINDOW_S)
            if fall >= D.APPROACH_MIN_M:
                out.append(f"{art} {who} approaches")
        if dmin < D.VERY_CLOSE_M:
            gap = np.abs(dist) if lx is None else np.hypot(dist, np.nan_to_num(lx, nan=0.0))
            if np.nanmin(gap) < D.VERY_CLOSE_M:
                out.append(f"{art} {who} comes very close")
    if lx is not None and dist is not None and np.isfinite(lx).sum() >= 3:
        a, b = _first_last(lx)
        if min(abs(a), abs(b)) >= D.CROSS_SIDE_M and (a > 0) != (b > 0) \
                and (np.isfinite(dist) & (np.abs(dist) < 30)).any():
            out.append(f"{art} {who} crosses in front from the {'right' if a > 0 else 'left'}")
    lane = f.get("lane_rel")
    if lane is not None and np.isfinite(lane).sum() >= 3:
        a, b = np.round(_first_last(lane))
        if a in (-1, 1) and b == 0:
            out.append(f"{art} {who} moves into our lane from the {'right' if a > 0 else 'left'}")
        elif a == 0 and b in (-1, 1):
            out.append(f"the {who} ahead moves out of our lane to the {'right' if b > 0 else 'left'}")
    lz = f.get("loc_z")
    if lz is not None and lx is not None and np.isfinite(lz).sum() >= 3:
        a, b = _first_last(lz)
        if a < 2.0 and b > 8.0 and np.isfinite(lx).any():
            side = np.nanmedian(lx)
            if abs(side) >= D.CROSS_SIDE_M:
                out.append(f"{art} {who} overtakes us on the {'right' if side > 0 else 'left'}")
    return out


def _ref_nearest(views):
    best = None
    for tr, tt, f in views:
        d = f.get("distance")
        if d is None or not len(d) or not np.isfinite(d).any():
            continue
        d = np.where(d > 0, d, np.inf)
        k = int(d.argmin())
        if not np.isfinite(d[k]):
            continue
        lx = f.get("loc_x")
        if (lx is None or not np.isfinite(lx[k]) or abs(lx[k]) < D.CROSS_SIDE_M) \
                and (best is None or d[k] < best[0]):
            best = (float(d[k]), tr.cls)
    return best


def _random_video(rng, k):
    n = 60
    t = np.arange(n) / 5.0
    tracks = []
    for j in range(int(rng.integers(0, 9))):
        m = int(rng.integers(1, n))
        s0 = int(rng.integers(0, n - m + 1))
        pos = np.arange(s0, s0 + m)
        if rng.random() < 0.1:
            pos = rng.permutation(pos)          # samples out of time order
        fields = {}
        for name, scale, off in (("distance", 25, 5), ("loc_z", 25, -2), ("loc_x", 4, -2), ("lane_rel", 1.4, -0.7)):
            if rng.random() < 0.8:
                if name == "lane_rel":
                    x = np.round(np.linspace(rng.uniform(-1.6, 1.6), rng.uniform(-1.6, 1.6), m))
                else:
                    x = off + scale * np.cumsum(rng.normal(0, 0.15, m)) + rng.uniform(-scale, scale)
                x = x.astype(np.float32)
                x[rng.random(m) < rng.choice([0.0, 0.3, 0.9])] = np.nan
                fields[name] = x
        attrs = {"color": "orange"} if rng.random() < 0.3 else {}
        tracks.append(Track(track_id=j, cls=str(rng.choice(["car", "truck", "pedestrian"])), pos=pos,
                            fields=fields, attrs=attrs))
    info = VideoInfo(id=f"v{k}", path=None, fps=5.0, n_frames=n)
    return VideoRecords(info=info, frame_idx=np.arange(n), t=t, ego={}, tracks=tracks)


@pytest.mark.parametrize("seed", range(4))
def test_stacked_tracks_say_what_each_track_says_alone(seed):
    rng = np.random.default_rng(seed)
    checked = said = 0
    for k in range(120):
        rec = _random_video(rng, k)
        stack = D.track_stack(rec)
        for t0, t1 in [(None, None)] + D.segment_bounds(rec, 4.0):
            views = [(tr, *D._track_view(rec, tr, t0, t1)) for tr in rec.tracks]
            st, a, b = stack.window(t0, t1)
            got = st.window_phrases(a, b)
            want = [_ref_phrases(*v) for v in views]
            assert got == want, (seed, k, t0)
            assert st.nearest_ahead(a, b) == _ref_nearest(views), (seed, k, t0)
            checked += len(views)
            said += sum(map(len, want))
    assert checked > 1000 and said > 100      # the random tracks do produce phrases


def test_a_lane_change_with_missing_values_at_the_end_is_still_seen():
    lane = np.array([1, 1, 1, 0, 0, 0, np.nan, np.nan], np.float32)
    tr = Track(track_id=1, cls="car", pos=np.arange(8), fields={"lane_rel": lane})
    info = VideoInfo(id="v", path=None, fps=5.0, n_frames=8)
    rec = VideoRecords(info=info, frame_idx=np.arange(8), t=np.arange(8) / 5.0, ego={}, tracks=[tr])
    assert D.track_phrases(rec, tr) == ["a car moves into our lane from the right"]
