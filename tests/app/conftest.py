"""Fixtures for the app tests: offscreen Qt, temp settings, a real library (bench-dev records +
generated clips with their own tracks), screenshots saved to tests/app/screenshots/."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

BENCH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "bench-dev"
SHOTS = Path(__file__).resolve().parent / "screenshots"


def make_clip(path, n_frames=60, fps=20.0, size=(640, 360), cut_in=True, seed=0):
    """An mp4v clip: road, a 'car' box that (cut_in) slides from the right lane into ours, and the
    frame index written as 12 binary blocks along the top (read back by ``frame_code``).
    Returns the per-frame boxes of the car (x1, y1, x2, y2)."""
    import cv2

    w, h = size
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    rng = np.random.default_rng(seed)
    boxes = []
    for i in range(n_frames):
        img = np.full((h, w, 3), 60, np.uint8)
        img[h // 2:, :] = (70, 75, 80)
        cv2.line(img, (w // 2 - 40, h // 2), (w // 4, h), (230, 230, 230), 3)
        cv2.line(img, (w // 2 + 40, h // 2), (3 * w // 4, h), (230, 230, 230), 3)
        frac = min(1.0, max(0.0, (i - n_frames * 0.3) / (n_frames * 0.4))) if cut_in else 0.0
        cx = int(w * (0.75 - 0.25 * frac))
        bw, bh = w // 8, h // 8
        box = (cx - bw // 2, int(h * 0.55), cx + bw // 2, int(h * 0.55) + bh)
        cv2.rectangle(img, box[:2], box[2:], (40, 40, 200), -1)
        for b in range(12):
            on = (i >> b) & 1
            img[0:16, b * 20:(b + 1) * 20] = 255 if on else 0
        img = np.clip(img.astype(int) + rng.integers(-3, 4, img.shape), 0, 255).astype(np.uint8)
        vw.write(img)
        boxes.append(box)
    vw.release()
    return boxes


def frame_code(rgb) -> int:
    """The frame index a clip from ``make_clip`` wrote into this decoded frame."""
    return sum(1 << b for b in range(12) if rgb[4:12, b * 20 + 5:b * 20 + 15].mean() > 127)


def clip_records(video_id, path, boxes, fps, cut_in=True):
    """Records for a generated clip, sampled at 10 fps: track 1 is the car (loc_x 3.5 m → 0 m when
    it cuts in), track 2 a car far ahead in our lane."""
    from strived.records import VideoRecords

    step = max(1, int(round(fps / 10)))
    frames = []
    n = len(boxes)
    for i in range(0, n, step):
        frac = min(1.0, max(0.0, (i - n * 0.3) / (n * 0.4))) if cut_in else 0.0
        b = boxes[i]
        frames.append({"i": i, "t": i / fps, "ego": {"speed": 12.0, "yaw_rate": 0.0, "accel": 0.0},
                       "objects": [
                           {"track": 1, "cls": "car", "bbox": list(map(float, b)),
                            "distance": 14.0 - 12.5 * frac, "loc_x": 3.5 * (1 - frac), "loc_z": 14.0,
                            "lane_rel": 1 if frac < 0.5 else 0, "bbox_area": float((b[2] - b[0]) * (b[3] - b[1]))},
                           {"track": 2, "cls": "car", "bbox": [300.0, 190.0, 340.0, 215.0],
                            "distance": 40.0, "loc_x": 0.1, "loc_z": 40.0, "lane_rel": 0,
                            "bbox_area": 1000.0}]})
    doc = {"format": "strived.records/1",
           "video": {"id": video_id, "path": str(path), "fps": fps, "n_frames": n, "width": 640,
                     "height": 360, "source": "generated test clip"},
           "frames": frames}
    return VideoRecords.from_json_dict(doc)


@pytest.fixture(scope="session")
def clips_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    out = {}
    for vid, cut, seed, n in (("gen_cutin_a", True, 1, 120), ("gen_cutin_b", True, 2, 140),
                              ("gen_plain", False, 3, 100)):
        p = d / f"{vid}.mp4"
        boxes = make_clip(p, n_frames=n, cut_in=cut, seed=seed)
        out[vid] = (p, boxes, cut)
    return d, out


@pytest.fixture(scope="session")
def library_dir(tmp_path_factory, clips_dir):
    """A real library: bench-dev records (real tracks) + generated clips with their tracks."""
    from strived.records import VideoRecords
    from strived.store.library import Library

    folder = tmp_path_factory.mktemp("library")
    lib = Library.open(folder, create=True)
    recs = []
    if BENCH.exists():
        for f in sorted((BENCH / "records").glob("*.json")):
            recs.append(VideoRecords.load(f))
    for vid, (p, boxes, cut) in clips_dir[1].items():
        recs.append(clip_records(vid, p, boxes, 20.0, cut))
    lib.add_videos(recs)
    from app import library_ops as ops

    for vid, (p, _b, _c) in clips_dir[1].items():
        ops.make_thumbnail(lib, vid, str(p), 1.0)
    from strived.retrieval.sources import ensure_text_index

    ensure_text_index(lib)          # BM25 summaries + dense index, as `strived index` builds them
    lib.close()
    return folder


@pytest.fixture()
def library_copy(library_dir, tmp_path):
    """A private copy of the session library (tests that write marks, searches, rules)."""
    import shutil

    dst = tmp_path / "lib"
    shutil.copytree(library_dir, dst)
    return dst


@pytest.fixture()
def app_settings(tmp_path):
    from PySide6.QtCore import QSettings

    from app.settings import AppSettings

    return AppSettings(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))


@pytest.fixture()
def window(qtbot, app_settings):
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.theme import apply_theme

    apply_theme(QApplication.instance())
    w = MainWindow(app_settings)
    qtbot.addWidget(w)
    w.resize(1440, 900)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def shot(widget, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    p = SHOTS / f"{name}.png"
    widget.grab().save(str(p))
    return p


def wait_frame(qtbot, player, timeout=5000):
    with qtbot.waitSignal(player.frame_shown, timeout=timeout) as blocker:
        pass
    return blocker.args


# A rule the generated cut-in clips satisfy (a user's edit of the calibrated cut-in rule).
CUTIN_RULE = {"event": "cut_in_right", "entity": {"role": "object", "class_filter": ["car"],
              "selection": "any", "agg_mode": "any"},
              "hard_gates": [{"field": "abs_loc_x", "op": "lt", "value": 1.0}],
              "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 4.0,
                               "magnitude": 3.0, "direction": "negative", "weight": 1.0}]}
