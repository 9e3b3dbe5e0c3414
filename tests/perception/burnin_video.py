"""A synthetic dashcam clip with its speed burnt into the frame (cv2.putText), for the OCR tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

FPS = 10.0
DURATION_S = 12.0
GAP = (5.5, 9.5)          # the overlay shows "---km/h" (no GPS fix): nothing to read
GLITCH = (3.0, 3.5)       # the overlay shows an impossible value for half a second
GLITCH_KMH = 188


def drawn_kmh(t: float) -> float | None:
    """The speed printed at time ``t`` (km/h, updated twice a second like a 2 Hz GPS), None in GAP."""
    if GAP[0] <= t < GAP[1]:
        return None
    if GLITCH[0] <= t < GLITCH[1]:
        return GLITCH_KMH
    return float(round(40 + 3.0 * (np.floor(2 * t) / 2)))


def true_kmh(t: float) -> float:
    return float(round(40 + 3.0 * (np.floor(2 * t) / 2)))


def write_overlay_video(path: Path, size=(640, 360), unit: str = "km/h") -> Path:
    import cv2

    w, h = size
    rng = np.random.default_rng(1)
    texture = cv2.GaussianBlur(rng.integers(0, 255, (h, w * 4), dtype=np.uint8), (0, 0), 1.5)
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (w, h))
    assert wr.isOpened()
    for k in range(int(DURATION_S * FPS)):
        t = k / FPS
        x0 = w * 3 - 4 * k
        img = cv2.cvtColor(np.ascontiguousarray(texture[:, x0 - w:x0]), cv2.COLOR_GRAY2BGR)
        cv2.rectangle(img, (0, h - 34), (w, h), (20, 20, 20), -1)
        v = drawn_kmh(t)
        speed = "---" if v is None else f"{int(v):03d}"
        text = f"2024/05/01 12:00:{int(t):02d}   {speed}{unit}"
        cv2.putText(img, text, (12, h - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (255, 255, 255), 2, cv2.LINE_AA)
        wr.write(img)
    wr.release()
    return path
