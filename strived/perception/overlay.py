"""Draw records over video frames (boxes, track ids, classes, distances) for checking by eye."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..safepaths import output_path, safe_filename
from .video import iter_frames

_PALETTE = [(255, 56, 56), (255, 157, 151), (255, 112, 31), (255, 178, 29), (207, 210, 49),
            (72, 249, 10), (146, 204, 23), (61, 219, 134), (26, 147, 52), (0, 212, 187),
            (44, 153, 168), (0, 194, 255), (52, 69, 147), (100, 115, 255), (0, 24, 236)]


def draw_frame(img: np.ndarray, rec, pos: int, horizon_y: float | None = None) -> np.ndarray:
    """Return a copy of ``img`` with the objects of sampled frame ``pos`` of ``rec`` drawn on it."""
    import cv2

    out = img.copy()
    if horizon_y is not None:
        cv2.line(out, (0, int(horizon_y)), (out.shape[1], int(horizon_y)), (0, 255, 255), 1)
    for tr in rec.tracks:
        k = np.nonzero(tr.pos == pos)[0]
        if len(k) == 0 or tr.bbox is None:
            continue
        k = int(k[0])
        x1, y1, x2, y2 = (int(v) for v in tr.bbox[k])
        color = _PALETTE[tr.track_id % len(_PALETTE)]
        cv2.rectangle(out, (x1, y1), (x2, y2), color, 2)
        z, x, lane = (tr.fields[f][k] for f in ("distance", "loc_x", "lane_rel"))
        label = f"#{tr.track_id} {tr.cls} {z:.0f}m x{x:+.1f} L{lane:+.0f}"
        if tr.attrs.get("color"):
            label += f" {tr.attrs['color']}"
        (tw, th), _ = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, 0.5, 1)
        cv2.rectangle(out, (x1, max(0, y1 - th - 6)), (x1 + tw + 4, y1), color, -1)
        cv2.putText(out, label, (x1 + 2, y1 - 4), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    t = float(rec.t[pos])
    ego = " ".join(f"{k}={rec.ego[k][pos]:+.2f}" for k in ("speed", "yaw_rate", "accel"))
    cv2.putText(out, f"t={t:.1f}s {ego}", (10, 24), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2, cv2.LINE_AA)
    return out


def save_overlays(video_path: str | os.PathLike, rec, out_dir: str | os.PathLike, times_s: list[float],
                  max_width: int = 960) -> list[Path]:
    """Write PNG overlays of ``rec`` on the sampled frames nearest ``times_s``; return their paths."""
    import cv2

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    want = sorted({int(np.argmin(np.abs(rec.t - t))) for t in times_s})
    wanted_idx = {int(rec.frame_idx[p]): p for p in want}
    horizon = (rec.info.attrs.get("camera") or {}).get("horizon_y")
    paths = []
    for f in iter_frames(video_path, 0):
        p = wanted_idx.get(f.frame_idx)
        if p is None:
            continue
        img = draw_frame(f.image, rec, p, horizon)
        if img.shape[1] > max_width:
            s = max_width / img.shape[1]
            img = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)

        path = output_path(out_dir, safe_filename(f"{rec.info.id}_t{rec.t[p]:05.1f}") + ".png")
        cv2.imwrite(str(path), img)
        paths.append(path)
        if len(paths) == len(want):
            break
    return paths
