"""Join the records of a long file's segments (`long_file.py`) into the file's records.

Each segment contributes the frames of its core; its ego series is cut there. A track seen by two
neighbouring segments is one object when their boxes overlap (mean IoU >= ``MATCH_IOU`` on at least
``MATCH_FRAMES`` of the sampled frames both segments read around the boundary): it becomes one
track, the earlier segment's samples before the boundary and the later one's after it. Track ids
are renumbered 1.. in order of first appearance.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..records import EGO_FIELDS, OBJECT_FIELDS, Track, VideoRecords
from . import signals

MATCH_IOU = 0.5
MATCH_FRAMES = 3


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1 = np.maximum(a[:, 0], b[:, 0])
    y1 = np.maximum(a[:, 1], b[:, 1])
    x2 = np.minimum(a[:, 2], b[:, 2])
    y2 = np.minimum(a[:, 3], b[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda z: (z[:, 2] - z[:, 0]) * (z[:, 3] - z[:, 1])  # noqa: E731
    return inter / np.maximum(area(a) + area(b) - inter, 1e-9)


def match_tracks(left, right) -> dict[int, int]:
    """Track id in ``left`` -> track id in ``right`` (neighbouring segments' records) for the
    tracks that are one object on the frames both read."""
    cands = []
    for a in left.tracks:
        if a.bbox is None:
            continue
        fa = left.frame_idx[a.pos]
        for b in right.tracks:
            if b.bbox is None:
                continue
            common, ia, ib = np.intersect1d(fa, right.frame_idx[b.pos], return_indices=True)
            if len(common) < MATCH_FRAMES:
                continue
            score = float(np.nanmean(_iou(a.bbox[ia], b.bbox[ib])))
            if score >= MATCH_IOU:
                cands.append((score, a.track_id, b.track_id))
    out: dict[int, int] = {}
    used: set[int] = set()
    for _, ta, tb in sorted(cands, reverse=True):
        if ta not in out and tb not in used:
            out[ta] = tb
            used.add(tb)
    return out


def join_segments(parts: list, segments: list, sample_fps: float, extra_attrs: dict | None = None):
    """The file's `VideoRecords` from ``parts`` (one per segment, in order) and their ``segments``
    (`long_file.Segment`)."""
    cores = [(r.t >= s.t0) & (r.t < s.t1) for r, s in zip(parts, segments)]
    first = [int(np.argmax(c)) if c.any() else 0 for c in cores]
    offset = np.cumsum([0] + [int(c.sum()) for c in cores])
    t = np.concatenate([r.t[c] for r, c in zip(parts, cores)])
    frame_idx = np.concatenate([r.frame_idx[c] for r, c in zip(parts, cores)])
    ego = {k: np.concatenate([np.asarray(r.ego[k], np.float64)[c] for r, c in zip(parts, cores)])
           for k in EGO_FIELDS}

    links = [match_tracks(parts[k], parts[k + 1]) for k in range(len(parts) - 1)]
    linked_to = {(k + 1, tb) for k, m in enumerate(links) for tb in m.values()}
    chains = []
    for k, r in enumerate(parts):
        for tr in r.tracks:
            if (k, tr.track_id) in linked_to:
                continue
            chain, kk, tid = [], k, tr.track_id
            while tid is not None:
                chain.append((kk, parts[kk].track(tid)))
                tid = links[kk].get(tid) if kk < len(links) else None
                kk += 1
            chains.append(chain)

    sample_dt = 1.0 / sample_fps if sample_fps > 0 else 0.1
    tracks = []
    for chain in chains:
        pieces = []
        for k, tr in chain:
            keep = cores[k][tr.pos]
            if keep.any():
                pieces.append((k, tr, keep))
        if not pieces:
            continue
        pos = np.concatenate([offset[k] + tr.pos[keep] - first[k] for k, tr, keep in pieces]).astype(np.int32)
        fields = {f: np.concatenate([tr.fields[f][keep] for _, tr, keep in pieces]).astype(np.float32)
                  for f in OBJECT_FIELDS}
        bbox = None
        if all(tr.bbox is not None for _, tr, _ in pieces):
            bbox = np.concatenate([tr.bbox[keep] for _, tr, keep in pieces]).astype(np.float32)
        main = max(pieces, key=lambda p: int(p[2].sum()))[1]
        attrs = dict(main.attrs)
        if "quality" in attrs:
            attrs["quality"] = signals.track_quality(t, pos, fields["score"], sample_dt)
        tracks.append(Track(track_id=0, cls=main.cls, pos=pos, fields=fields, bbox=bbox, attrs=attrs))
    tracks.sort(key=lambda tr: (int(tr.pos[0]), int(tr.pos[-1])))
    for i, tr in enumerate(tracks, start=1):
        tr.track_id = i

    info = parts[0].info
    info.attrs = _join_attrs([r.info.attrs for r in parts], [int(c.sum()) for c in cores],
                             [(s.t0, s.t1) for s in segments])
    info.attrs.update(extra_attrs or {})
    return VideoRecords(info=info, frame_idx=frame_idx, t=t, ego=ego, tracks=tracks)


def _join_attrs(attrs: list[dict], weights: list[int], cores: list[tuple[float, float]]) -> dict:
    """The file's attributes: the first segment's, with the ones that describe the whole file
    combined over the segments (weighted by their frames)."""
    out = dict(attrs[0])
    out["shot_cuts_s"] = [c for a, (t0, t1) in zip(attrs, cores) for c in a.get("shot_cuts_s") or []
                          if t0 <= c < t1]
    fr = [(a.get("lanes_found_frac"), w) for a, w in zip(attrs, weights) if a.get("lanes_found_frac") is not None]
    if fr:
        out["lanes_found_frac"] = round(sum(f * w for f, w in fr) / max(1, sum(w for _, w in fr)), 3)
    votes: Counter = Counter()
    for a, w in zip(attrs, weights):
        if a.get("daynight") is not None:
            votes[a["daynight"]] += w
    if votes:
        out["daynight"] = votes.most_common(1)[0][0]
    if any(a.get("speed_source") for a in attrs):
        out["speed_source"] = next(a["speed_source"] for a in attrs if a.get("speed_source"))
    for key in ("telemetry", "burnin", "telemetry_warnings"):
        got = next((a[key] for a in attrs if a.get(key)), None)
        if got is not None:
            out[key] = got
    out["availability"] = _join_availability([a.get("availability") or {} for a in attrs], weights)
    return out


def _join_availability(avails: list[dict], weights: list[int]) -> dict:
    """Per field: estimated where any segment estimated it (its source, the frame-weighted mean
    quality, and the reason the other segments gave, with their count); else the first
    segment's entry."""
    out: dict[str, dict] = {}
    for f in {f for a in avails for f in a}:
        got = [(a[f], w) for a, w in zip(avails, weights) if isinstance(a.get(f), dict)]
        ok = [(e, w) for e, w in got if e.get("reason") is None]
        if not ok:
            out[f] = dict(got[0][0])
            continue
        e = dict(ok[0][0])
        q = [(e2["quality"], w) for e2, w in ok if e2.get("quality") is not None]
        if q:
            e["quality"] = float(sum(v * w for v, w in q) / max(1, sum(w for _, w in q)))
        missing = [e2 for e2, _ in got if e2.get("reason") is not None]
        if missing:   # what the segments that did not estimate it said
            why = Counter(str(e2["reason"]) for e2 in missing).most_common(1)[0][0]
            e["reason"] = f"in {len(missing)} of {len(avails)} segments: {why}"
        out[f] = e
    return out
