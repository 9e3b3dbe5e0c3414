"""Static pixels: timestamps, logos, dashboard, bonnet and letterbox bars.

Corners of the time-averaged image that change in < STATIC_CHANGE_FRAC of the frames in which the
scene moves (a lane line sliding along itself looks unchanged too, but has no corners and is kept),
grown over the static strokes that join them.
"""

from __future__ import annotations

import numpy as np

from .config import EGO, EgoConfig


class StaticPixels:
    """Learns, from the frames in which the scene moves, which work-image pixels never change."""

    def __init__(self, cfg: EgoConfig = EGO):
        self.cfg = cfg
        self._mov_sum: np.ndarray | None = None
        self._mov_changed: np.ndarray | None = None
        self._n_moving = 0
        self._static_cache: tuple[int, np.ndarray | None] = (-1, None)

    def restart(self) -> None:
        """The frame size changed: learn afresh."""
        self._mov_sum = None
        self._n_moving = 0

    def learn(self, gray: np.ndarray, diff: np.ndarray) -> None:
        """Add a frame in which the scene moves (``diff``: its absolute change from the previous)."""
        g = gray.astype(np.float32)
        if self._mov_sum is None or self._mov_sum.shape != g.shape:
            self._mov_sum = np.zeros_like(g)
            self._mov_changed = np.zeros_like(g)
            self._n_moving = 0
        self._mov_sum += g
        self._mov_changed += (diff > 6).astype(np.float32)
        self._n_moving += 1

    def mask(self) -> np.ndarray | None:
        """Work-image mask (255) of textured pixels that stay put while the scene moves, or None."""
        import cv2

        cfg = self.cfg
        if self._mov_sum is None or self._n_moving < cfg.STATIC_MIN_MOVING_FRAMES:
            return None
        if self._static_cache[0] == self._n_moving:
            return self._static_cache[1]
        mean = self._mov_sum / self._n_moving
        frac = self._mov_changed / self._n_moving
        # 2-D structure (corners: text, logos, dashboard parts) in the time-averaged image. A straight
        # edge sliding along itself (a solid lane line, the road's edge) also looks unchanged but is
        # scenery; it has no corners, so it is kept.
        corner = cv2.cornerMinEigenVal(mean.astype(np.float32), 5, 3) / 16.0
        seeds = ((frac < cfg.STATIC_CHANGE_FRAC) & (corner > cfg.STATIC_MIN_CORNER)).astype(np.uint8) * 255
        # grow the seeds over the static strokes that join them
        gx = cv2.Sobel(mean, cv2.CV_32F, 1, 0, ksize=3)
        gy = cv2.Sobel(mean, cv2.CV_32F, 0, 1, ksize=3)
        grad = np.sqrt(gx * gx + gy * gy) / 4.0
        strokes = (frac < cfg.STATIC_CHANGE_FRAC) & (grad > cfg.STATIC_MIN_GRAD)
        near = cv2.dilate(seeds, np.ones((15, 15), np.uint8)) > 0
        static = (seeds > 0) | (strokes & near)
        if self._n_moving >= 2 * cfg.STATIC_MIN_MOVING_FRAMES:  # edges that never changed at all
            static |= (frac < 0.02) & (grad > cfg.STATIC_MIN_GRAD)
        # letterbox / pillarbox bars: dark, unchanging border rows and columns
        bar = (mean < 24) & (frac < 0.05)
        for axis, n in ((0, static.shape[1]), (1, static.shape[0])):
            full = bar.mean(axis=axis) > 0.95
            for idx in (range(n), range(n - 1, -1, -1)):
                k = 0
                for i in idx:
                    if not full[i]:
                        break
                    k += 1
                if k:
                    lo, hi = (0, k + 6) if idx.start == 0 else (n - k - 6, n)
                    if axis == 0:
                        static[:, max(lo, 0):hi] = True
                    else:
                        static[max(lo, 0):hi, :] = True
        static = cv2.dilate(static.astype(np.uint8) * 255, np.ones((9, 9), np.uint8))
        out = static if static.any() else None
        self._static_cache = (self._n_moving, out)
        return out

    def bottom_limit(self) -> int | None:
        """First work-image row of a bonnet/dashboard band at the bottom (static across > 50 % of
        the width, within the bottom 40 %; a timestamp line is narrower), or None."""
        m = self.mask()
        if m is None:
            return None
        h = m.shape[0]
        rows = (m > 0).mean(axis=1)
        band = np.nonzero(rows[int(0.6 * h):] > 0.5)[0]
        if len(band) == 0:
            return None
        return int(0.6 * h) + int(band[0])

