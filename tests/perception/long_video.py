"""A generated long recording for the long-file tests: a drifting textured scene, and red blocks
(the colour `conftest.FakeDetector` finds) on screen during known time spans."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

# (first second on screen, last second + 1 frame): one crosses the 24 s segment boundary, one is late
BLOCKS = ((18.0, 30.0), (40.0, 44.0))


def write_long_video(path: Path, seconds: float = 48.0, fps: float = 10.0, size=(128, 72),
                     blocks=BLOCKS) -> Path:
    w, h = size
    rng = np.random.default_rng(0)
    texture = cv2.GaussianBlur(rng.integers(0, 255, (h, w * 4), dtype=np.uint8), (0, 0), 1.5)
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    assert wr.isOpened()
    for k in range(int(round(seconds * fps))):
        t = k / fps
        x0 = k % (w * 3)
        img = cv2.cvtColor(np.ascontiguousarray(texture[:, x0:x0 + w]), cv2.COLOR_GRAY2BGR)
        for a, b in blocks:
            if a - 1e-9 <= t < b - 1e-9:
                bx = int(10 + (t - a) * 3)
                cv2.rectangle(img, (bx, 30), (bx + 26, 56), (0, 0, 200), -1)
        wr.write(img)
    wr.release()
    return path
