"""Fixtures for the app tests: offscreen Qt, temp settings, a real library (bench-dev records +
generated clips with their own tracks), screenshots saved to tests/app/screenshots/."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

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
    activate(qtbot, w)
    yield w
    w.close()


def activate(qtbot, w):
    """Make ``w`` the active window (as a user's click on it does): window shortcuts need it."""
    from PySide6.QtWidgets import QApplication

    w.raise_()
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=3000)


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


# -- the user's hand: real mouse clicks and key presses (QTest), never signals emitted by hand
def plot_pos(timeline_or_view, row, x, y):
    """Viewport pixel of data point (x, y) in a pyqtgraph row (a timeline ``_Row`` or PlotItem)."""
    from PySide6.QtCore import QPointF

    view = getattr(timeline_or_view, "view", timeline_or_view)
    plot = row if hasattr(row, "getViewBox") else row.plot
    scene = plot.getViewBox().mapViewToScene(QPointF(float(x), float(y)))
    return view.mapFromScene(scene)


def click_plot(qtbot, timeline_or_view, row, x, y, button=None):
    """Left click at data point (x, y) of a pyqtgraph plot, on its viewport."""
    from PySide6.QtCore import Qt

    view = getattr(timeline_or_view, "view", timeline_or_view)
    pos = plot_pos(view, row, x, y)
    qtbot.mouseMove(view.viewport(), pos)
    qtbot.wait(30)                  # pyqtgraph drops moves closer than 1/mouseRateLimit (10 ms)
    qtbot.mouseClick(view.viewport(), button or Qt.MouseButton.LeftButton, pos=pos)
    return pos


def drag_playhead(qtbot, timeline, row_index, t_to):
    """Press on the playhead of row ``row_index``, move in steps, release at time ``t_to``."""
    from PySide6.QtCore import Qt

    row = timeline.rows[row_index]
    lo, hi = row.plot.getViewBox().viewRange()[1]
    y = (lo + hi) / 2
    vp = timeline.view.viewport()
    start = plot_pos(timeline, row, timeline.t_s, y)
    end = plot_pos(timeline, row, t_to, y)
    qtbot.mouseMove(vp, start)
    qtbot.wait(30)                  # pyqtgraph drops moves closer than 1/mouseRateLimit (10 ms)
    qtbot.mousePress(vp, Qt.MouseButton.LeftButton, pos=start)
    for k in range(1, 9):
        qtbot.wait(30)
        qtbot.mouseMove(vp, start + (end - start) * (k / 8))
    qtbot.wait(30)
    qtbot.mouseRelease(vp, Qt.MouseButton.LeftButton, pos=end)


def answer_dialogs(qtbot, *handlers, timeout_ms=20000):
    """Answer the next modal dialogs like a user: each handler gets the dialog when it is shown
    (a QMessageBox, a QInputDialog...) and clicks or types in it. Returns the list of dialogs met."""
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    met = []
    clock = QElapsedTimer()
    clock.start()

    def poll(i=0):
        if i >= len(handlers) or clock.elapsed() > timeout_ms:
            return
        d = QApplication.activeModalWidget()
        if d is None or d in met or not d.isVisible():
            QTimer.singleShot(20, lambda: poll(i))
            return
        met.append(d)
        handlers[i](d)
        QTimer.singleShot(20, lambda: poll(i + 1))

    QTimer.singleShot(0, poll)
    return met


def click_button(qtbot, dialog, text):
    """Click the dialog's button whose text contains ``text`` (case-insensitive, & ignored)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QAbstractButton

    for b in dialog.findChildren(QAbstractButton):
        if text.lower() in b.text().replace("&", "").lower() and b.isVisible():
            qtbot.mouseClick(b, Qt.MouseButton.LeftButton)
            return b
    raise AssertionError(f"no button {text!r} in {[b.text() for b in dialog.findChildren(QAbstractButton)]}")


def type_into_input_dialog(qtbot, dialog, text):
    """Select the input dialog's text, type ``text`` and press OK."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLineEdit

    edit = dialog.findChild(QLineEdit)
    edit.setFocus()
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(edit, text)
    click_button(qtbot, dialog, "OK")


def right_click(qtbot, widget, pos):
    """A right click the way the window system delivers it (so a context menu event follows)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QCursor
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    qtbot.wait(QApplication.styleHints().mouseDoubleClickInterval() + 30)   # not a double click
    if QApplication.activeWindow() is not widget.window():
        activate(qtbot, widget.window())   # offscreen: a closed popup menu stays the active window
    win = widget.window().windowHandle()
    wpos = widget.mapTo(widget.window(), pos)
    QCursor.setPos(widget.mapToGlobal(pos))    # the pointer is there (a context menu goes to it)
    QTest.mouseMove(win, wpos)
    qtbot.wait(20)
    QTest.mousePress(win, Qt.MouseButton.RightButton, Qt.KeyboardModifier.NoModifier, wpos)
    qtbot.wait(20)
    QTest.mouseRelease(win, Qt.MouseButton.RightButton, Qt.KeyboardModifier.NoModifier, wpos)


def click_menu_action(qtbot, menu, text):
    """Click the entry ``text`` (substring) of a shown QMenu."""
    from PySide6.QtCore import Qt

    qtbot.waitUntil(menu.isVisible, timeout=3000)
    for a in menu.actions():
        if text.lower() in a.text().replace("&", "").lower():
            qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(a).center())
            return a
    raise AssertionError(f"no entry {text!r} in {[a.text() for a in menu.actions()]}")


# ------------------------------------------------ user journeys shared by the app tests

def type_query(qtbot, w, text):
    w.query.lineEdit().setFocus()
    qtbot.keyClick(w.query.lineEdit(), Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(w.query.lineEdit(), text)


def press_return(qtbot, w):
    """Return as the window system delivers it: to the completion popup when it is open (it
    closes and passes the key on to the query bar), else to the query bar."""
    qtbot.wait(30)                                # the completion popup settles (shown, active)
    qtbot.keyClick(QApplication.activePopupWidget() or w.query.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not w.query.completer().popup().isVisible(), timeout=2000)
    qtbot.wait(30)
    if QApplication.activeWindow() is not w:      # the offscreen platform leaves the closed popup
        activate(qtbot, w)                        # active, where a window manager would not


def run_search(qtbot, w, text="a car cuts in from the right", timeout=60000):
    type_query(qtbot, w, text)
    with qtbot.waitSignal(w.search_finished, timeout=timeout) as b:
        press_return(qtbot, w)
    assert not w.query.completer().popup().isVisible()
    return b.args[0]


def set_spin(qtbot, spin, text):
    """Select a spin box's text, type ``text`` and leave it with Tab (as a user edits it)."""
    spin.setFocus()
    qtbot.keyClick(spin, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(spin, text)
    qtbot.keyClick(spin, Qt.Key.Key_Tab)


def type_text(qtbot, edit, text):
    """Select a line edit's text and type ``text``."""
    edit.setFocus()
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(edit, text)


def click_row(qtbot, w, row, modifier=Qt.KeyboardModifier.NoModifier):
    w.table.scrollTo(w.model.index(row, 1))
    rect = w.table.visualRect(w.model.index(row, 1))
    qtbot.mouseClick(w.table.viewport(), Qt.MouseButton.LeftButton, modifier, rect.center())


def type_rule(qtbot, w, rule):
    """Select the rule text and type a new one (compact JSON, one line) like a user would."""
    w.tabs.setCurrentWidget(w.rule_editor)
    ed = w.rule_editor.text
    ed.setFocus()
    qtbot.keyClick(ed, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(ed, json.dumps(rule, separators=(",", ":")))


def rerank(qtbot, w, rule):
    type_rule(qtbot, w, rule)
    qtbot.waitUntil(lambda: w.rule_editor.apply_button.isEnabled(), timeout=3000)
    with qtbot.waitSignal(w.search_finished, timeout=30000) as b:
        qtbot.mouseClick(w.rule_editor.apply_button, Qt.MouseButton.LeftButton)
    return b.args[0]


def inspect_video(qtbot, w, video_id):
    w.tabs.setCurrentIndex(0)                                     # the Inspect tab
    with qtbot.waitSignal(w.inspect_finished, timeout=20000):
        click_row(qtbot, w, w.model.row_of(video_id))
    qtbot.waitUntil(lambda: w.player.canvas.image is not None, timeout=5000)


def many_tracks_records(video_id="many_tracks", n_tracks=200, duration_s=30.0, hz=10.0,
                        life_s=8.0, seed=0):
    """Records of a busy road: ``n_tracks`` car tracks (ids 0..n-1), each seen for ``life_s``
    seconds at a staggered start. Tracks 0-9 cut in (loc_x 3.5 m -> 0 m within 3 s); the others
    keep a lane (loc_x about -3.5, 0 or 3.5 m), except track 150, parked far right at loc_x 8 m
    (alone there: a click on it picks it and no other)."""
    from strived.records import Track, VideoInfo, VideoRecords

    rng = np.random.default_rng(seed)
    n = int(round(duration_s * hz))
    t = np.arange(n) / hz
    life = int(round(life_s * hz))
    tracks = []
    for k in range(n_tracks):
        start = int((k * 37) % max(1, n - life))
        pos = np.arange(start, start + life, dtype=np.int64)
        tt = t[pos] - t[start]
        if k < 10:
            loc_x = np.clip(3.5 - 3.5 * (tt - 2.0) / 3.0, 0.0, 3.5)
        elif k == 150:
            loc_x = np.full(life, 8.0)
        else:
            loc_x = np.full(life, (-3.5, 0.0, 3.5)[k % 3]) + rng.normal(0, 0.05, life)
        dist = 8.0 + (k % 40) + 0.3 * tt
        tracks.append(Track(k, "car", pos, {
            "distance": dist.astype(np.float32), "loc_x": loc_x.astype(np.float32),
            "loc_z": dist.astype(np.float32), "lane_rel": np.round(loc_x / 3.5).astype(np.float32),
            "bbox_area": np.full(life, 4000.0, np.float32), "score": np.full(life, 0.9, np.float32)}))
    return VideoRecords(VideoInfo(video_id, None, hz, n), np.arange(n), t,
                        {"speed": np.full(n, 12.0), "yaw_rate": np.zeros(n), "accel": np.zeros(n)},
                        tracks)
