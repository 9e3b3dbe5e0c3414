"""Cheap searchable attributes: a track's dominant colour, a video's day/night."""

from __future__ import annotations

import numpy as np

COLOR_NAMES = ("black", "white", "gray", "red", "orange", "yellow", "green", "blue", "purple")
NIGHT_BRIGHTNESS = 70.0  # median V (0-255) of the upper half below which a video is "night"


def color_votes(bgr: np.ndarray, box: np.ndarray, cls: str) -> np.ndarray | None:
    """Per-colour pixel shares (len(COLOR_NAMES)) in the body region of a box, or None if too small.

    Vehicles: the central band (avoids windows, tyres, road); people: the torso. HSV buckets:
    V < 50 black; S < 45 white (V > 165) or gray; else hue red/orange/yellow/green/blue/purple.
    Chromatic shares are weighted x2, as grey reflections and shadows are everywhere.
    """
    import cv2

    x1, y1, x2, y2 = (float(v) for v in box[:4])
    w, h = x2 - x1, y2 - y1
    if w < 12 or h < 12:
        return None
    if cls == "pedestrian":
        fx, fy = (0.3, 0.7), (0.2, 0.5)
    else:
        fx, fy = (0.2, 0.8), (0.35, 0.7)
    H, W = bgr.shape[:2]
    cx1, cx2 = int(max(0, x1 + fx[0] * w)), int(min(W, x1 + fx[1] * w))
    cy1, cy2 = int(max(0, y1 + fy[0] * h)), int(min(H, y1 + fy[1] * h))
    if cx2 - cx1 < 3 or cy2 - cy1 < 3:
        return None
    crop = cv2.resize(bgr[cy1:cy2, cx1:cx2], (16, 16), interpolation=cv2.INTER_AREA)
    hsv = cv2.cvtColor(crop, cv2.COLOR_BGR2HSV).reshape(-1, 3).astype(np.int32)
    hue, sat, val = hsv[:, 0], hsv[:, 1], hsv[:, 2]
    cat = np.full(len(hsv), 2)  # gray
    chroma = (sat >= 45) & (val >= 50)
    cat[(sat < 45) & (val > 165)] = 1
    cat[val < 50] = 0
    hue_cat = np.select([(hue < 8) | (hue >= 165), hue < 20, hue < 33, hue < 85, hue < 130],
                        [3, 4, 5, 6, 7], default=8)
    cat[chroma] = hue_cat[chroma]
    counts = np.bincount(cat, minlength=len(COLOR_NAMES)).astype(np.float64)
    counts[3:] *= 2.0
    return counts / counts.sum()


def dominant_color(votes: list[np.ndarray]) -> str | None:
    """Name of the colour with the largest summed share over a track's observations."""
    if not votes:
        return None
    total = np.sum(votes, axis=0)
    return COLOR_NAMES[int(np.argmax(total))]


def upper_brightness(gray: np.ndarray) -> float:
    """Mean intensity (0-255) of the upper half of a grayscale frame (sky, street lights)."""
    return float(gray[: gray.shape[0] // 2].mean())


def day_night(brightness: list[float]) -> str | None:
    """'night' when the median upper-half brightness is below NIGHT_BRIGHTNESS, else 'day'."""
    if not brightness:
        return None
    return "night" if float(np.median(brightness)) < NIGHT_BRIGHTNESS else "day"
