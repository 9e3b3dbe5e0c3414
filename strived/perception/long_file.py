"""Long recordings in segments: the plan of time ranges and the frames of one range.

A file longer than ``long_file_s`` is perceived as independent segments of ``segment_s`` seconds of
video (its *core*), each read with ``overlap_s`` more on both sides: the tracker, the ego-motion
estimator and the shot detector start fresh in every segment and warm up in the overlap, and the
segments' records are joined at the core boundaries (``stitch.join_segments``). Segments do not
depend on each other, so a killed run redoes only the unfinished ones and gets the same records
as an uninterrupted run, and several workers can perceive one long file at once.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterator

from ..errors import VideoDecodeError
from .video import SampledFrame, TimeSampler, VideoProbe, _open, frame_time, probe_video

SEGMENT_S = 60.0          # seconds of video per segment (its core)
OVERLAP_S = 4.0           # read before and after the core: warm-up, and the frames tracks are joined on
LONG_FILE_S = 300.0       # files longer than this are perceived in segments
SEGMENT_ENV, LONG_FILE_ENV = "STRIVED_SEGMENT_S", "STRIVED_LONG_FILE_S"


@dataclass(frozen=True)
class Segment:
    """One segment: ``core`` [t0, t1) is what it contributes; it reads [read0, read1)."""

    index: int
    t0: float
    t1: float
    read0: float
    read1: float

    @property
    def time_range(self) -> tuple[float, float]:
        return (self.read0, self.read1)


def _env_float(name: str, default: float) -> float:
    try:
        v = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return v if math.isfinite(v) and v > 0 else default


def segment_settings(segment_s: float | None = None, long_file_s: float | None = None) -> tuple[float, float]:
    """(segment length, long-file threshold) in seconds: the arguments, else ``STRIVED_SEGMENT_S``
    and ``STRIVED_LONG_FILE_S``, else SEGMENT_S and LONG_FILE_S."""
    seg = float(segment_s) if segment_s else _env_float(SEGMENT_ENV, SEGMENT_S)
    long_ = float(long_file_s) if long_file_s else _env_float(LONG_FILE_ENV, LONG_FILE_S)
    return seg, max(long_, seg)


def plan_segments(duration_s: float, segment_s: float, overlap_s: float = OVERLAP_S) -> list[Segment]:
    """Segments covering [0, duration_s); the last one takes a remainder shorter than half a
    segment (no tiny segment at the end). The last core ends at +inf: every frame after it
    (a container that under-reports its duration) belongs to it."""
    n = max(1, int(round(duration_s / segment_s)))
    out = []
    for k in range(n):
        t0 = k * segment_s
        t1 = math.inf if k == n - 1 else (k + 1) * segment_s
        out.append(Segment(k, t0, t1, max(0.0, t0 - overlap_s), t1 + overlap_s))
    return out


def probe_duration(path: str | os.PathLike) -> float | None:
    """The container's duration in seconds (frame count / rate, no frame decoded), or None when
    the file cannot be opened or does not say (its worker will tell why)."""
    import cv2

    try:
        cap = _open(str(path))
    except Exception:  # noqa: BLE001 - any failure here is reported when the file is perceived
        return None
    try:
        fps, n = float(cap.get(cv2.CAP_PROP_FPS) or 0.0), float(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0.0)
    finally:
        cap.release()
    return n / fps if 0 < fps <= 1000 and n > 0 else None


def iter_frames_range(path: str | os.PathLike, sample_fps: float, start_s: float, end_s: float, *,
                      probe: VideoProbe | None = None) -> Iterator[SampledFrame]:
    """The frames ``iter_frames`` would choose in [start_s, end_s), decoded from a seek.

    The decoder seeks to the frame at ``start_s`` (OpenCV decodes from the keyframe before it, so
    the frame is exact) and ``frame_idx`` counts on from there; the sampler's grid starts at
    ``start_s``, a multiple of the sampling period, so the instants are those of a whole-file
    decode. Raises ``VideoDecodeError`` when nothing decodes in the range.
    """
    import cv2

    path = str(path)
    probe = probe or probe_video(path)
    src_fps = probe.fps if probe.fps > 0 else 30.0
    first = max(0, int(math.floor(start_s * src_fps)) - 1)
    cap = _open(path)
    sampler = TimeSampler(sample_fps, probe.fps)
    sampler.next_t = start_s if start_s > 0 else None
    n_yielded = 0
    try:
        if first > 0 and not (cap.set(cv2.CAP_PROP_POS_FRAMES, first)
                              and int(cap.get(cv2.CAP_PROP_POS_FRAMES) or 0) == first):
            cap.release()    # a container the decoder cannot seek in: decode from the start
            cap = _open(path)
        frame_idx = int(cap.get(cv2.CAP_PROP_POS_FRAMES) or 0) - 1
        last_t, n_grabbed = -1.0, 0
        while True:
            if not cap.grab():
                break
            frame_idx += 1
            t = frame_time(cap.get(cv2.CAP_PROP_POS_MSEC), last_t, n_grabbed > 0, probe.fps)
            last_t = t
            n_grabbed += 1
            if t >= end_s:
                break
            if t + 0.5 / src_fps < start_s or not sampler.take(t):
                continue
            ok, img = cap.retrieve()
            if not ok or img is None:
                continue
            n_yielded += 1
            yield SampledFrame(frame_idx, float(t), img)
    finally:
        cap.release()
    if n_yielded == 0:
        raise VideoDecodeError(path, f"no frame could be decoded between {start_s:.1f} s and "
                                     f"{min(end_s, probe.duration_s or end_s):.1f} s (truncated or corrupt there)")
