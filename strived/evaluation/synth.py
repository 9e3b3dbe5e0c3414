"""Synthetic drive logs for scale benchmarks: records that look like a dashcam library's (20 s at
10 fps, 15 tracked objects of mixed classes with random-walk distance and lateral offset, an ego
speed/yaw trace), reproducible from a seed. Synthetic: they measure cost, not retrieval quality."""

from __future__ import annotations

import numpy as np

from ..records import Track, VideoInfo, VideoRecords

CLASSES = ("car", "car", "car", "truck", "bus", "pedestrian", "bicycle", "motorcycle")


def make_video(k: int, rng: np.random.Generator, duration_s: float = 20.0, fps: float = 10.0,
               n_tracks: int = 15) -> VideoRecords:
    """Video ``v{k:06d}``: every track spans the clip (15 x 200 = 3,000 object-frames)."""
    n = int(duration_s * fps)
    t = np.arange(n) / fps
    tracks = []
    for j in range(n_tracks):
        pos = np.arange(n, dtype=np.int32)
        z = np.abs(30 + np.cumsum(rng.normal(0, 0.8, n))).astype(np.float32)
        x = (rng.normal(0, 4) + np.cumsum(rng.normal(0, 0.15, n))).astype(np.float32)
        fields = {"distance": z, "loc_x": x, "loc_z": z, "lane_rel": np.round(x / 3.5).astype(np.float32),
                  "bbox_area": (2e5 / (1 + z)).astype(np.float32), "score": np.full(n, 0.8, np.float32)}
        tracks.append(Track(j + 1, CLASSES[(k + j) % len(CLASSES)], pos, fields, None))
    speed = np.abs(10 + np.cumsum(rng.normal(0, 0.3, n)))
    ego = {"speed": speed, "yaw_rate": rng.normal(0, 0.05, n), "accel": np.gradient(speed, t)}
    info = VideoInfo(f"v{k:06d}", None, fps, n, 1280, 720, "synthetic")
    return VideoRecords(info, np.arange(n, dtype=np.int64), t, ego, tracks)
