"""Video intake: find videos, probe them, decode with per-frame timestamps, sample by time.

Frame times come from the container (``CAP_PROP_POS_MSEC`` after each grab), so variable frame rate
footage is sampled by real time, never by assuming a fixed rate. ``frame_idx`` is the 0-based index of
the frame in decode order.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import VideoDecodeError

VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".avi", ".ts")

# A decode that stops this far before the container's announced end is reported as truncated.
TRUNCATION_TOLERANCE_S = 1.0
TRUNCATION_TOLERANCE_FRAC = 0.05


def find_videos(folder: str | os.PathLike, errors: list | None = None) -> list[Path]:
    """Return video files under ``folder`` (recursive, extension case-insensitive), sorted by path.

    Hidden files and folders (name starting with '.') are skipped. Sub-folders that cannot be read
    are skipped too and, when ``errors`` is a list, appended to it as (path, reason). Raises
    ``FileNotFoundError`` when ``folder`` is not a directory.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"not a folder: {root}")
    found: list[Path] = []

    def onerror(e: OSError) -> None:
        if errors is not None:
            errors.append((str(e.filename or root), e.strerror or str(e)))

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            if os.path.splitext(name)[1].lower() in VIDEO_EXTENSIONS:
                found.append(Path(dirpath) / name)
    return sorted(found)


def survey_videos(folder: str | os.PathLike, time_budget_s: float = 3.0) -> dict:
    """How many videos (and bytes, sub-folders holding them) lie under ``folder``, as
    ``find_videos`` would find them, within ``time_budget_s`` (a home folder can hold millions of
    files): ``complete`` False means the counts are a lower bound. For a confirmation before a
    folder is indexed."""
    import time

    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"not a folder: {root}")
    deadline = time.monotonic() + time_budget_s
    n, size, dirs, complete = 0, 0, set(), True
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.startswith(".") and os.path.splitext(name)[1].lower() in VIDEO_EXTENSIONS:
                n += 1
                dirs.add(dirpath)
                try:
                    size += os.stat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        if time.monotonic() > deadline:
            complete = False
            break
    return {"videos": n, "bytes": size, "folders": len(dirs), "complete": complete}


@dataclass(frozen=True)
class VideoProbe:
    """What the container says about a video (dimensions after rotation is applied)."""

    path: str
    fps: float
    n_frames: int
    width: int
    height: int
    duration_s: float
    rotation_deg: int
    codec: str

    def to_dict(self) -> dict:
        return asdict(self)


def _fourcc(cap) -> str:
    import cv2

    code = int(cap.get(cv2.CAP_PROP_FOURCC))
    chars = "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4))
    return chars.strip("\x00 ").lower() if chars.isprintable() else ""


def _open(path: str):
    """Open ``path`` with OpenCV or raise a VideoDecodeError that says why it cannot be used."""
    import cv2

    p = Path(path)
    if not p.exists():
        raise VideoDecodeError(str(path), "file not found (moved or deleted?)")
    if not os.access(p, os.R_OK):
        raise VideoDecodeError(str(path), "permission denied (file is not readable)")
    if p.stat().st_size == 0:
        raise VideoDecodeError(str(path), "empty file (0 bytes)")
    cap = cv2.VideoCapture(str(p))
    if not cap.isOpened():
        cap.release()
        raise VideoDecodeError(str(path), "not a video or an unsupported/corrupt container "
                                          "(a truncated .mp4 without its index also looks like this)")
    return cap


def probe_video(path: str | os.PathLike) -> VideoProbe:
    """Read container metadata. Raises ``VideoDecodeError`` when the file cannot be opened."""
    import cv2

    cap = _open(str(path))
    try:
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        w = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH) or 0)
        h = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT) or 0)
        rot = int(cap.get(cv2.CAP_PROP_ORIENTATION_META) or 0) % 360
        codec = _fourcc(cap)
        # OpenCV auto-rotates decoded frames (CAP_PROP_ORIENTATION_AUTO) and, depending on its
        # version, reports the container's or the rotated size: the first decoded frame is the
        # truth the rest of perception sees.
        ok, first = cap.read()
        if ok and first is not None and first.ndim >= 2:
            h, w = int(first.shape[0]), int(first.shape[1])
        elif rot in (90, 270):
            w, h = h, w
    finally:
        cap.release()
    if fps <= 0 or fps > 1000:
        fps = 0.0
    duration = n / fps if fps > 0 and n > 0 else 0.0
    return VideoProbe(str(path), fps, max(n, 0), w, h, duration, rot, codec)


@dataclass
class SampledFrame:
    """One decoded frame chosen by the sampler."""

    frame_idx: int
    t_s: float
    image: np.ndarray  # BGR, uint8, HxWx3


class TimeSampler:
    """Chooses, for each sampling instant k/sample_fps, the frame nearest to it, one frame at a time.

    A frame is taken when its time reaches the next instant minus half a source frame interval;
    after a gap in the stream the schedule restarts from the frame's time instead of bursting.
    ``sample_fps <= 0`` takes every frame.
    """

    def __init__(self, sample_fps: float, source_fps: float = 0.0):
        self.period = 1.0 / sample_fps if sample_fps > 0 else 0.0
        self.half_dt = 0.5 / source_fps if source_fps > 0 else 0.0
        self.next_t: float | None = None

    def take(self, t_s: float) -> bool:
        """Return True when the frame at ``t_s`` (non-decreasing across calls) is to be kept."""
        if self.period <= 0:
            return True
        if self.next_t is None:
            self.next_t = t_s
        if t_s + self.half_dt + 1e-9 < self.next_t:
            return False
        self.next_t += self.period
        if self.next_t <= t_s:
            self.next_t = t_s + self.period
        return True


def select_times(times_s, sample_fps: float, source_fps: float = 0.0) -> np.ndarray:
    """Boolean mask of the frames :class:`TimeSampler` keeps on the timeline ``times_s``."""
    times_s = np.asarray(times_s, dtype=np.float64)
    if source_fps <= 0 and len(times_s) > 1:
        source_fps = 1.0 / max(float(np.median(np.diff(times_s))), 1e-6)
    sampler = TimeSampler(sample_fps, source_fps)
    return np.array([sampler.take(float(t)) for t in times_s], dtype=bool)


def frame_time(t_ms: float | None, last_t: float, follows: bool, src_fps: float) -> float:
    """The time in seconds of a grabbed frame from the decoder's ``t_ms`` (its POS_MSEC).

    Some demuxers report 0, nothing or non-increasing times: a frame that ``follows`` another
    (``last_t``) and is not later than it is placed one nominal frame period after it (30 fps
    when the container gives no rate). Shared by whole-file and seeking decodes so both place the
    same frame at the same instant.
    """
    t = t_ms / 1000.0 if t_ms is not None and t_ms >= 0 else -1.0
    if follows and t <= last_t:
        t = last_t + 1.0 / (src_fps if src_fps > 0 else 30.0)
    return t


def iter_frames(path: str | os.PathLike, sample_fps: float = 10.0, *, probe: VideoProbe | None = None,
                max_width: int | None = None) -> Iterator[SampledFrame]:
    """Decode ``path`` and yield the frames chosen at ``sample_fps`` (<= 0: every frame).

    Only chosen frames are converted (``retrieve``); the others are just grabbed. ``max_width``
    downsizes yielded images (aspect kept). Raises ``VideoDecodeError`` when nothing decodes (e.g. AV1
    without a decoder) or when decoding stops well before the announced end (truncated file).
    """
    import cv2

    path = str(path)
    probe = probe or probe_video(path)
    cap = _open(path)
    src_fps = probe.fps
    sampler = TimeSampler(sample_fps, src_fps)
    last_t = -1.0
    frame_idx = -1
    n_yielded = 0
    try:
        while True:
            if not cap.grab():
                break
            frame_idx += 1
            t = last_t = frame_time(cap.get(cv2.CAP_PROP_POS_MSEC), last_t, frame_idx > 0, src_fps)
            if not sampler.take(t):
                continue
            ok, img = cap.retrieve()
            if not ok or img is None:
                continue
            if max_width and img.shape[1] > max_width:
                scale = max_width / img.shape[1]
                img = cv2.resize(img, (max_width, int(round(img.shape[0] * scale))),
                                 interpolation=cv2.INTER_AREA)
            n_yielded += 1
            yield SampledFrame(frame_idx, float(t), img)
    finally:
        cap.release()
    if n_yielded == 0:
        codec = f" (codec '{probe.codec}')" if probe.codec else ""
        raise VideoDecodeError(path, f"no frame could be decoded{codec}; the codec may be unsupported "
                                     "by this OpenCV build (AV1 is not), or the file is corrupt")
    n_decoded = frame_idx + 1
    if probe.n_frames > 0 and src_fps > 0:
        missing = probe.n_frames - n_decoded
        if missing / src_fps > TRUNCATION_TOLERANCE_S and missing > TRUNCATION_TOLERANCE_FRAC * probe.n_frames:
            raise VideoDecodeError(path, f"truncated: decoding stopped after {n_decoded} of "
                                         f"{probe.n_frames} frames", frame_idx=n_decoded)
