"""Frame-exact decoding with OpenCV and a small LRU cache (no Qt widgets here).

``FrameDecoder`` is used from one decode thread at a time (the player's own single-thread pool);
the cache has a lock because the UI thread reads it to show cached frames without a round trip.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from strived.api import VideoDecodeError

class FrameDecoder:
    """Decodes frame ``frame_idx`` (0-based) of one video, reading forward when that is cheaper."""

    #: reading up to this many frames forward beats a seek (which decodes from the keyframe anyway)
    READ_AHEAD_MAX = 12

    def __init__(self, path: str, cache_frames: int = 24):
        import cv2

        self.path = str(path)
        self._cap = cv2.VideoCapture(self.path)
        if not self._cap.isOpened():
            raise VideoDecodeError(self.path, "the file cannot be opened (missing or not a video)")
        self.fps = float(self._cap.get(cv2.CAP_PROP_FPS)) or 25.0
        self.n_frames = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
        self.width = int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self._next = 0                      # index of the frame the next read() returns
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache_frames = cache_frames
        self._lock = threading.Lock()
        self._jpeg: dict[int, bytes] = {}   # filled by scan(): any frame then costs one JPEG decode
        self._jpeg_bytes = 0
        self.scanned = False

    def cached(self, frame_idx: int) -> np.ndarray | None:
        with self._lock:
            img = self._cache.get(frame_idx)
            if img is not None:
                self._cache.move_to_end(frame_idx)
            return img

    def _put(self, frame_idx: int, img: np.ndarray) -> None:
        with self._lock:
            self._cache[frame_idx] = img
            self._cache.move_to_end(frame_idx)
            while len(self._cache) > self._cache_frames:
                self._cache.popitem(last=False)

    def frame(self, frame_idx: int) -> np.ndarray:
        """RGB uint8 (h, w, 3) of frame ``frame_idx``; raises VideoDecodeError past the end."""
        import cv2

        hit = self.cached(frame_idx)
        if hit is not None:
            return hit
        if self.n_frames:
            frame_idx = max(0, min(frame_idx, self.n_frames - 1))
        with self._lock:
            blob = self._jpeg.get(frame_idx)
        # read forward when the target is just ahead; otherwise a stored JPEG beats a keyframe seek
        if blob is not None and not (self._next <= frame_idx <= self._next + 2):
            rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(blob, np.uint8), cv2.IMREAD_COLOR),
                               cv2.COLOR_BGR2RGB)
            self._put(frame_idx, rgb)
            return rgb
        if not (self._next <= frame_idx <= self._next + self.READ_AHEAD_MAX):
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, frame_idx)
            self._next = frame_idx
        ok, bgr = False, None
        while self._next <= frame_idx:
            ok, bgr = self._cap.read()
            if not ok:
                break
            idx = self._next
            self._next += 1
            if idx < frame_idx and frame_idx - idx <= 2:
                self._put(idx, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        if not ok or bgr is None:
            self._next = 10**9      # force a seek next time
            raise VideoDecodeError(self.path, "no frame (end of file or corrupt stream)", frame_idx)
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        self._put(frame_idx, rgb)
        return rgb

    def scan(self, cancel=None, max_bytes: int = 256 * 2**20, quality: int = 90) -> int:
        """Decode the whole clip once on a second capture and keep each frame as a JPEG.

        Keyframe seeks cost 50-600 ms on dashcam H.264 (long GOPs); a JPEG decode costs ~5 ms at
        720p, so after this pass every seek is fast. Returns the number of frames stored.
        """
        import cv2

        cap = cv2.VideoCapture(self.path)
        i = 0
        try:
            while not (cancel and cancel()):
                ok, bgr = cap.read()
                if not ok:
                    break
                ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
                if ok:
                    with self._lock:
                        if self._jpeg_bytes + len(buf) > max_bytes:
                            break
                        self._jpeg[i] = buf.tobytes()
                        self._jpeg_bytes += len(buf)
                i += 1
            else:
                return i
        finally:
            cap.release()
        self.scanned = True
        return i

    def close(self) -> None:
        self._cap.release()
        with self._lock:
            self._jpeg.clear()
            self._cache.clear()


class BoxOverlay:
    """Per-frame boxes of a video's tracks, looked up by decoded frame index.

    Records are sampled (e.g. 10 fps of a 25 fps clip): a video frame shows the boxes of the nearest
    sampled frame when it lies within half a sampling step, so boxes never drift onto other frames.
    """

    def __init__(self, records=None):
        self.frame_idx = np.zeros(0, dtype=np.int64)
        self._per_sample: list[list[tuple[int, str, tuple[float, float, float, float]]]] = []
        if records is None:
            return
        self.frame_idx = np.asarray(records.frame_idx, dtype=np.int64)
        per = [[] for _ in range(len(self.frame_idx))]
        for tr in records.tracks:
            if tr.bbox is None:
                continue
            bb = np.asarray(tr.bbox, dtype=float)
            for k, p in enumerate(np.asarray(tr.pos, dtype=np.int64)):
                if np.all(np.isfinite(bb[k])):
                    per[int(p)].append((int(tr.track_id), str(tr.cls), tuple(float(v) for v in bb[k])))
        self._per_sample = per
        steps = np.diff(self.frame_idx)
        self._half = max(0.5, float(np.median(steps)) / 2.0) if len(steps) else 0.5

    def boxes_at(self, frame_idx: int):
        if not len(self.frame_idx):
            return []
        k = int(np.searchsorted(self.frame_idx, frame_idx))
        best = None
        for j in (k - 1, k):
            if 0 <= j < len(self.frame_idx):
                d = abs(int(self.frame_idx[j]) - frame_idx)
                if best is None or d < best[0]:
                    best = (d, j)
        if best is None or best[0] > self._half:
            return []
        return self._per_sample[best[1]]

    @property
    def has_boxes(self) -> bool:
        return any(self._per_sample)
