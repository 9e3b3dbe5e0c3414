"""Per-frame images of the road fit, computed once per frame.

Each sampled frame is the second frame of one pair and the first of the next, so its blurred
pyramid levels and their gradients (``road_fit``) serve both pairs. Results are the very arrays
the fit would compute for each pair on its own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class FrameCache:
    """Values derived from a frame, keyed by the frame array itself (its identity) and a name.

    Keeps the ``keep`` most recently added frames (the cache holds them, so an identity is not
    reused while cached)."""

    def __init__(self, keep: int = 3):
        self.keep = keep
        self._frames: dict[int, tuple[np.ndarray, dict]] = {}

    def get(self, img: np.ndarray, key, make: Callable[[np.ndarray], object]):
        """``make(img)``, computed the first time ``(img, key)`` is asked for."""
        ent = self._frames.get(id(img))
        if ent is None or ent[0] is not img:
            ent = (img, {})
            self._frames[id(img)] = ent
            while len(self._frames) > self.keep:
                del self._frames[next(iter(self._frames))]  # oldest first (insertion order)
        vals = ent[1]
        if key not in vals:
            vals[key] = make(img)
        return vals[key]
