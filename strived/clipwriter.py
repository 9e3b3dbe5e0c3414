"""Writing exported clips: H.264 through PyAV, whose wheels ship FFmpeg with the libx264 encoder
(so it works offline on every platform the wheels cover), else OpenCV's writer (H.264 where the
platform's OpenCV has an encoder for it, else MPEG-4 Part 2, which many players and tools reject:
the stated fallback). ``STRIVED_EXPORT_CODEC`` forces an OpenCV FourCC (``avc1``, ``mp4v``)."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

#: OpenCV FourCCs tried when PyAV is not installed, best first
CV_CODECS = ("avc1", "mp4v")
_CHOSEN: list[str] = []


def _pyav_h264() -> bool:
    try:
        import av

        av.codec.Codec("libx264", "w")
        return True
    except Exception:  # not installed, or a build without libx264
        return False


def _cv_probe() -> str:
    import tempfile

    import cv2

    with tempfile.TemporaryDirectory() as d:
        for c in CV_CODECS[:-1]:
            # a missing encoder makes FFmpeg print errors on the C stderr: keep the probe quiet
            saved = os.dup(2)
            try:
                with open(os.devnull, "w") as null:
                    os.dup2(null.fileno(), 2)
                    w = cv2.VideoWriter(os.path.join(d, f"probe_{c}.mp4"), cv2.VideoWriter_fourcc(*c),
                                        10.0, (64, 48))
                    ok = w.isOpened()
                    w.release()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            if ok:
                return c
    return CV_CODECS[-1]


def cv_codec() -> str:
    """The best OpenCV FourCC this machine writes (for callers that need OpenCV's writer: the
    mirrored benchmark keeps the container and frame size of its source exactly)."""
    forced = os.environ.get("STRIVED_EXPORT_CODEC")
    if forced and len(forced) == 4:
        return forced
    return _cv_probe()


def clip_codec() -> str:
    """What re-encoded clips are written with on this machine: ``libx264`` (PyAV), or an OpenCV
    FourCC (probed once per process)."""
    forced = os.environ.get("STRIVED_EXPORT_CODEC")
    if forced:
        return forced
    if not _CHOSEN:
        _CHOSEN.append("libx264" if _pyav_h264() else _cv_probe())
    return _CHOSEN[0]


class _PyAVWriter:
    """H.264 (yuv420p, CRF 18) in MP4; odd frame sizes lose their last row/column (4:2:0)."""

    def __init__(self, path: Path, fps: float, w: int, h: int):
        import av

        self.w, self.h = w - w % 2, h - h % 2
        self.rate = Fraction(fps).limit_denominator(1001) if fps > 0 else Fraction(25)
        self.box = av.open(str(path), mode="w", format="mp4")
        self.stream = self.box.add_stream("libx264", rate=self.rate)
        self.stream.width, self.stream.height, self.stream.pix_fmt = self.w, self.h, "yuv420p"
        self.stream.options = {"crf": "18", "preset": "veryfast"}
        self.n = 0
        self.closed = False

    def isOpened(self) -> bool:  # noqa: N802  (cv2.VideoWriter's name)
        return True

    def write(self, bgr) -> None:
        import av

        frame = av.VideoFrame.from_ndarray(bgr[: self.h, : self.w], format="bgr24")
        frame.pts, frame.time_base = self.n, 1 / self.rate
        self.n += 1
        for pkt in self.stream.encode(frame):
            self.box.mux(pkt)

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            for pkt in self.stream.encode(None):
                self.box.mux(pkt)
        finally:
            self.box.close()


def open_writer(path: Path, fps: float, w: int, h: int):
    """A writer with ``isOpened()``, ``write(bgr)`` and ``release()`` (safe to call twice)."""
    codec = clip_codec()
    if codec == "libx264":
        try:
            return _PyAVWriter(path, fps, w, h)
        except OSError:
            raise
        except Exception:  # PyAV refused this stream (size, rate): OpenCV's writer instead
            codec = _cv_probe()
    import cv2

    return cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), fps, (w, h))
