"""Time alignment of sidecars (their times are UTC) to the video.

``camera.json`` key ``telemetry_offset_s`` puts the first sidecar sample at that video time (seconds, may
be negative). Otherwise the MP4/MOV ``mvhd`` creation time (UTC, seconds since 1904) is the video's first
frame when the telemetry overlaps the recording [creation, creation + duration] by at least half of the
shorter span; otherwise (no, zero or disagreeing creation time, e.g. a container stamped in local time) the
first fix is the first frame (BlackVue-style sidecars start with the recording).
"""

from __future__ import annotations

import numpy as np

from .mp4 import Mp4Info


def align_times(t_abs: np.ndarray, absolute: bool, info: Mp4Info | None, offset_s: float | None,
                name: str, warnings: list[str]) -> tuple[np.ndarray, str, float | None]:
    """(video times, how they were aligned, unix time of video t = 0 or None) for sidecar fix times."""
    a, b = float(t_abs[0]), float(t_abs[-1])
    if offset_s is not None:
        return t_abs - a + offset_s, f"telemetry_offset_s={offset_s:g} (first sample at that video time)", \
            (a - offset_s if absolute else None)
    if absolute and info is not None and info.creation_unix is not None:
        u, dur = info.creation_unix, info.duration_s
        span = b - a
        ov = min(b, u + dur) - max(a, u)
        need = 0.5 * min(dur, span) if dur > 0 and span > 0 else None
        if (need is not None and ov >= need) or (need is None and abs(a - u) <= 2.0):
            return t_abs - u, "container creation_time", u
        warnings.append(f"{name}: container creation time is {a - u:+.1f} s from the first fix and does not "
                        f"overlap the telemetry; assuming the first fix is the first frame")
    return t_abs - a, "first sample = first frame", (a if absolute else None)
