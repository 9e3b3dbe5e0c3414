"""Synthetic records for tests and benchmarks (no real data needed)."""

from __future__ import annotations

import numpy as np

from strived.records import Track, VideoInfo, VideoRecords

CLASSES = ("car", "car", "car", "truck", "bus", "pedestrian", "bicycle", "motorcycle")


def synth_video(video_id: str, seed: int, duration_s: float = 20.0, fps: float = 10.0, n_tracks: int = 15,
                nan_frac: float = 0.05, jitter: bool = True) -> VideoRecords:
    """A random but plausible video: tracks with random-walk positions, gaps, NaNs, jittered times."""
    rng = np.random.default_rng(seed)
    n = int(duration_s * fps)
    t = np.arange(n) / fps
    if jitter:
        t = t + rng.uniform(-0.2, 0.2, n) / fps
        t[0] = 0.0
        t = np.maximum.accumulate(t + np.arange(n) * 1e-6)
    tracks = []
    for k in range(n_tracks):
        a = int(rng.integers(0, n // 2))
        b = int(rng.integers(a + 2, n + 1))
        pos = np.arange(a, b, dtype=np.int32)
        if len(pos) > 6 and rng.random() < 0.3:  # a gap inside the track
            cut = rng.integers(2, len(pos) - 3)
            pos = np.r_[pos[:cut], pos[cut + 2:]].astype(np.int32)
        m = len(pos)
        z = np.abs(30 + np.cumsum(rng.normal(0, 0.8, m)))
        x = rng.normal(0, 4) + np.cumsum(rng.normal(0, 0.15, m))
        fields = {"distance": z, "loc_x": x, "loc_z": z, "lane_rel": np.round(x / 3.5),
                  "bbox_area": 2e5 / (1 + z), "score": rng.uniform(0.3, 1.0, m)}
        fields = {f: np.asarray(v, np.float32) for f, v in fields.items()}
        for f in ("distance", "loc_x"):
            fields[f][rng.random(m) < nan_frac] = np.nan
        bbox = np.stack([np.full(m, 10.0), np.full(m, 20.0), np.full(m, 60.0), np.full(m, 80.0)], 1).astype(np.float32)
        tracks.append(Track(track_id=k + 1, cls=CLASSES[int(rng.integers(0, len(CLASSES)))], pos=pos,
                            fields=fields, bbox=bbox))
    speed = np.abs(10 + np.cumsum(rng.normal(0, 0.3, n)))
    ego = {"speed": speed, "yaw_rate": rng.normal(0, 0.05, n), "accel": np.gradient(speed, t)}
    ego["yaw_rate"][rng.random(n) < nan_frac] = np.nan
    info = VideoInfo(id=video_id, path=None, fps=fps, n_frames=n, width=1280, height=720, source="synthetic")
    return VideoRecords(info=info, frame_idx=np.arange(n, dtype=np.int64), t=t.astype(np.float64),
                        ego={k: np.asarray(v, np.float64) for k, v in ego.items()}, tracks=tracks)
