"""A drive of 3 consecutive dashcam files (Viofo-style time-stamped names, 10 s each at 10 fps) with
a hard braking that runs from 8.0 s in file 1 to 2.0 s in file 2 (drive time 8.0-12.0 s), and a
second braking inside file 3 (5.0-7.0 s). Each frame shows its file number (the blue level) and
its frame index (8 binary blocks along the top)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FPS, N = 10.0, 100
NAMES = ("2026_11_28_101500", "2026_11_28_101510", "2026_11_28_101520")
BRAKING = {0: (8.0, 9.9), 1: (0.0, 2.0), 2: (5.0, 7.0)}   # per file: first and last braking sample
RULE = {"event": "hard_braking", "entity": {"role": "ego"},
        "hard_gates": [{"field": "accel", "op": "lt", "value": -3.0, "min_seconds": 1.0}], "soft_scores": []}


def write_clip(path: Path, file_no: int) -> None:
    import cv2

    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (160, 96))
    for i in range(N):
        img = np.zeros((96, 160, 3), np.uint8)
        img[40:, :, 0] = 60 + 80 * file_no
        for b in range(8):
            img[0:12, b * 20:(b + 1) * 20] = 255 if (i >> b) & 1 else 0
        vw.write(img)
    vw.release()


def frame_code(bgr_or_rgb) -> int:
    return sum(1 << b for b in range(8) if bgr_or_rgb[3:9, b * 20 + 5:b * 20 + 15].mean() > 127)


def file_no(bgr) -> int:
    """The file number a frame shows (BGR order: blue is channel 0)."""
    return int(round((float(bgr[60:90, :, 0].mean()) - 60) / 80))


def records(vid: str, path: Path, k: int) -> dict:
    lo, hi = BRAKING[k]
    frames = []
    for i in range(N):
        t = round(i / FPS, 4)
        accel = -5.0 if lo - 1e-6 <= t <= hi + 1e-6 else 0.0
        frames.append({"i": i, "t": t, "ego": {"speed": 15.0, "yaw_rate": 0.0, "accel": accel}, "objects": []})
    return {"format": "strived.records/1",
            "video": {"id": vid, "path": str(path), "fps": FPS, "n_frames": N, "width": 160, "height": 96,
                      "source": "generated drive"},
            "frames": frames}


def make_drive(root: Path) -> tuple[Path, Path, list[Path]]:
    """(records folder, rule file, video paths) of the drive under ``root``."""
    vids, recs = root / "videos", root / "records"
    vids.mkdir(parents=True)
    recs.mkdir()
    paths = []
    for k, name in enumerate(NAMES):
        p = vids / f"{name}.mp4"
        write_clip(p, k)
        paths.append(p)
        (recs / f"{name}.json").write_text(json.dumps(records(name, p, k)))
    rule = root / "braking.json"
    rule.write_text(json.dumps(RULE))
    return recs, rule, paths
