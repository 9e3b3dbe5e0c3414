"""Fixtures for perception tests: tiny synthetic videos and a fake detector."""

from pathlib import Path

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")


def write_video(path: Path, n_frames: int = 30, fps: float = 10.0, size=(320, 180), shift_px: float = 0.0,
                box_speed_px: float = 4.0) -> Path:
    """A textured scene drifting by ``shift_px`` per frame with a dark 'car' block moving right."""
    w, h = size
    rng = np.random.default_rng(0)
    texture = rng.integers(0, 255, (h, w * 3), dtype=np.uint8)
    texture = cv2.GaussianBlur(texture, (0, 0), 1.5)
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    assert wr.isOpened()
    for k in range(n_frames):
        x0 = int(w - k * shift_px) if shift_px else w
        img = cv2.cvtColor(np.ascontiguousarray(texture[:, x0 - w:x0] if shift_px else texture[:, :w]),
                           cv2.COLOR_GRAY2BGR)
        bx = int(40 + box_speed_px * k)
        cv2.rectangle(img, (bx, 90), (bx + 50, 130), (0, 0, 200), -1)
        wr.write(img)
    wr.release()
    return path


class FakeDetector:
    """Finds the red block of write_video by colour (fast, deterministic)."""

    name = "fake"
    device = "cpu"
    config = {"detector": "fake"}

    def __init__(self):
        self.calls = 0

    def detect(self, frames):
        self.calls += 1
        out = []
        for f in frames:
            m = (f[:, :, 2] > 150) & (f[:, :, 0] < 80) & (f[:, :, 1] < 80)
            ys, xs = np.nonzero(m)
            if len(xs) < 20:
                out.append(np.zeros((0, 6), np.float32))
            else:
                out.append(np.array([[xs.min(), ys.min(), xs.max(), ys.max(), 0.9, 0]], np.float32))
        return out


@pytest.fixture
def tiny_video(tmp_path) -> Path:
    return write_video(tmp_path / "clip.mp4")


@pytest.fixture
def fake_detector():
    return FakeDetector()


@pytest.fixture
def make_video():
    return write_video
