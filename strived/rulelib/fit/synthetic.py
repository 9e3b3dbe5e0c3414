"""Synthetic corpora with planted events, for calibration tests and the speed benchmark.

Each video: 10 s at 10 fps, an ego series (cruising speed with noise) and 3-6 background tracks
that wander (lateral jitter, distance drift). Planted events (each with probability
``p_event``): a cut-in from the right, ego braking, a pedestrian crossing, a lead-vehicle brake.
Distractors of smaller amplitude make the starting numbers sub-optimal on purpose, so
calibration has something to find. Deterministic for a seed.
"""

from __future__ import annotations

import numpy as np

from ...records import Track, VideoInfo, VideoRecords
from .weak_labels import WeakLabels

PLANTED = ("cut_in_right", "ego_brake", "pedestrian_crossing", "lead_brake")


def _ramp(t, t0, dur, a, b):
    x = np.clip((t - t0) / dur, 0.0, 1.0)
    return a + (b - a) * x


def synthetic_corpus(n_videos: int, seed: int = 0, p_event: float = 0.15,
                     duration_s: float = 10.0, fps: float = 10.0):
    """(list of VideoRecords, WeakLabels) with planted events as positives."""
    rng = np.random.default_rng(seed)
    n = int(duration_s * fps)
    t = np.arange(n) / fps
    recs, pos = [], {k: set() for k in PLANTED}
    for v in range(n_videos):
        vid = f"syn{seed}_{v:05d}"
        speed = 10 + rng.normal(0, 1.5) + np.cumsum(rng.normal(0, 0.05, n))
        tracks = []
        tid = 0

        def add(cls, dist, x):
            nonlocal tid
            f = {"distance": dist.astype(np.float32), "loc_x": x.astype(np.float32),
                 "loc_z": dist.astype(np.float32),
                 "lane_rel": np.round(x / 3.5).astype(np.float32),
                 "bbox_area": (2e5 / np.maximum(dist, 1) ** 1.5).astype(np.float32),
                 "score": np.full(n, np.nan, np.float32)}
            tracks.append(Track(tid, cls, np.arange(n), f))
            tid += 1

        for _ in range(rng.integers(3, 7)):
            lane = rng.choice([-2, -1, 1, 2, 0])
            d0 = rng.uniform(8, 60)
            dist = np.maximum(2, d0 + np.cumsum(rng.normal(0, 0.25, n)))
            jitter_amp = rng.uniform(0.1, 2.5)        # distractor: lateral wobble
            x = lane * 3.5 + jitter_amp * np.sin(t * rng.uniform(0.3, 1.2) + rng.uniform(0, 6))
            add(str(rng.choice(["car", "car", "truck", "bus"])), dist, x)
        if rng.random() < 0.3:                        # distractor: a parked pedestrian
            add("pedestrian", np.full(n, rng.uniform(8, 30)), np.full(n, rng.uniform(5, 9)))
        if rng.random() < p_event:
            t0 = rng.uniform(1, 6)
            add("car", np.full(n, rng.uniform(10, 25)), _ramp(t, t0, 2.0, 3.6, 0.2) + rng.normal(0, .1, n))
            pos["cut_in_right"].add(vid)
        if rng.random() < p_event:
            t0 = rng.uniform(1, 5)
            speed = speed - _ramp(t, t0, 3.0, 0, rng.uniform(5, 9))
            pos["ego_brake"].add(vid)
        if rng.random() < p_event:
            t0 = rng.uniform(0.5, 5)
            add("pedestrian", np.full(n, rng.uniform(8, 20)), _ramp(t, t0, 4.0, -5.0, 5.0))
            pos["pedestrian_crossing"].add(vid)
        if rng.random() < p_event:
            t0 = rng.uniform(1, 6)
            add("car", _ramp(t, t0, 3.0, 25.0, 8.0) + rng.normal(0, .2, n), rng.normal(0, .15, n))
            pos["lead_brake"].add(vid)
        speed = np.maximum(speed, 0.0)
        accel = np.gradient(speed, t)
        ego = {"speed": speed, "yaw_rate": rng.normal(0, 0.01, n), "accel": accel}
        info = VideoInfo(vid, None, fps, n, 1280, 720, "synthetic")
        recs.append(VideoRecords(info, np.arange(n), t.copy(), ego, tracks))
    labels = WeakLabels([r.info.id for r in recs], pos, {}, {}, [f"synthetic:{seed}"])
    return recs, labels
