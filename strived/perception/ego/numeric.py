"""Small numeric helpers of the ego stage's inner loops."""

from __future__ import annotations

import numpy as np


def median(a: np.ndarray):
    """``np.median`` of a 1-D float array (the same value, NaN included), without its generic
    overhead: the road fit takes thousands of medians of a few hundred values per clip."""
    n = a.size
    if n == 0 or a.ndim != 1 or a.dtype.kind != "f":
        return np.median(a)
    h = n // 2
    if n % 2:
        p = np.partition(a, [h, n - 1])
        return p[n - 1] if np.isnan(p[n - 1]) else p[h]
    p = np.partition(a, [h - 1, h, n - 1])
    return p[n - 1] if np.isnan(p[n - 1]) else (p[h - 1] + p[h]) / 2
