"""Frame-exact video player: decodes with cv2 in a worker, draws frames and track boxes itself.

``QVideoWidget`` is blank in grabs and not frame-exact (STACK.md), so frames are decoded by
``FrameDecoder`` on the player's own single-thread pool (latest request wins) and painted here.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QObject, QRectF, QRunnable, QSize, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPen
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QSizePolicy, QSlider, QStyle,
                               QStyleOptionSlider, QToolButton, QVBoxLayout, QWidget)

from .frames import BoxOverlay, FrameDecoder

TRACK_COLORS = ["#4cc9f0", "#f8961e", "#90be6d", "#f94144", "#c77dff", "#f9c74f", "#43aa8b",
                "#ff70a6", "#577590", "#e9ff70"]


def track_color(track_id: int) -> QColor:
    return QColor(TRACK_COLORS[int(track_id) % len(TRACK_COLORS)])


def rgb_to_qimage(rgb: np.ndarray) -> QImage:
    h, w, _ = rgb.shape
    return QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


class _DecodeSignals(QObject):
    """Signals of a decode task."""

    decoded = Signal(int, int, QImage)     # generation, frame_idx, image
    failed = Signal(int, int, str)


class _DecodeTask(QRunnable):
    """Decodes one frame unless a newer request superseded it before it ran."""

    def __init__(self, player: "PlayerWidget", decoder: FrameDecoder, generation: int,
                 frame_idx: int):
        super().__init__()
        self.player, self.decoder = player, decoder
        self.generation, self.frame_idx = generation, frame_idx
        self.signals = player._decode_signals

    def run(self) -> None:
        if self.player._wanted != (self.generation, self.frame_idx):
            return
        try:
            rgb = self.decoder.frame(self.frame_idx)
        except Exception as exc:  # noqa: BLE001 - shown in the player, never a crash
            self.signals.failed.emit(self.generation, self.frame_idx, str(exc))
            return
        self.signals.decoded.emit(self.generation, self.frame_idx, rgb_to_qimage(rgb))


class VideoCanvas(QWidget):
    """Paints the current frame letterboxed, with boxes and track ids when the overlay is on."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.image: QImage | None = None
        self.boxes: list = []
        self.overlay = True
        self.highlight: int | None = None
        self.message = "No video"
        self.setMinimumSize(320, 180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(640, 360)

    def image_rect(self) -> QRectF:
        if self.image is None:
            return QRectF(self.rect())
        iw, ih = self.image.width(), self.image.height()
        s = min(self.width() / iw, self.height() / ih)
        w, h = iw * s, ih * s
        return QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#0b0d10"))
        if self.image is None:
            p.setPen(QColor("#8a9099"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.message)
            return
        r = self.image_rect()
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        p.drawImage(r, self.image)
        if not self.overlay:
            return
        s = r.width() / self.image.width()
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.9))
        p.setFont(font)
        for tid, cls, (x1, y1, x2, y2) in self.boxes:
            hi = self.highlight == tid
            col = QColor("#ffffff") if hi else track_color(tid)
            p.setPen(QPen(col, 3.0 if hi else 1.5))
            box = QRectF(r.x() + x1 * s, r.y() + y1 * s, (x2 - x1) * s, (y2 - y1) * s)
            p.drawRect(box)
            label = f"{cls} #{tid}"
            tw = p.fontMetrics().horizontalAdvance(label) + 6
            th = p.fontMetrics().height()
            tag = QRectF(box.x(), box.y() - th, tw, th)
            p.fillRect(tag, col)
            p.setPen(QColor("#0b0d10"))
            p.drawText(tag, Qt.AlignmentFlag.AlignCenter, label)


class SeekBar(QSlider):
    """The seek slider with the event intervals drawn on it. A click jumps to the frame under the
    pointer, inside an interval too; a click on an interval's start (within ``SNAP_PX``), or
    anywhere on an interval too narrow to aim into, snaps to its start. Dragging the handle works
    as usual."""

    interval_clicked = Signal(int, int)      # first and last frame of the interval clicked

    SNAP_PX = 4

    def __init__(self, parent=None):
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.intervals: list[tuple[int, int]] = []
        self.setMinimumHeight(22)

    def set_intervals(self, intervals: list[tuple[int, int]]) -> None:
        self.intervals = [(int(a), int(b)) for a, b in intervals]
        self.setToolTip("Event intervals (amber): click its left edge to jump to its start"
                        if self.intervals else "")
        self.update()

    def _groove(self) -> tuple[float, float]:
        opt = QStyleOptionSlider()
        self.initStyleOption(opt)
        groove = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                             QStyle.SubControl.SC_SliderGroove, self)
        handle = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                             QStyle.SubControl.SC_SliderHandle, self)
        return groove.x() + handle.width() / 2, groove.right() - handle.width() / 2

    def x_of(self, value: float) -> float:
        x0, x1 = self._groove()
        span = max(1, self.maximum() - self.minimum())
        return x0 + (value - self.minimum()) / span * (x1 - x0)

    def value_at(self, x: float) -> int:
        x0, x1 = self._groove()
        frac = 0.0 if x1 <= x0 else min(1.0, max(0.0, (x - x0) / (x1 - x0)))
        return int(round(self.minimum() + frac * (self.maximum() - self.minimum())))

    def interval_at(self, x: float) -> tuple[int, int] | None:
        for a, b in self.intervals:
            if self.x_of(a) - self.SNAP_PX <= x <= self.x_of(b) + self.SNAP_PX:
                return a, b
        return None

    def paintEvent(self, event) -> None:
        if self.intervals and self.maximum() > self.minimum():
            p = QPainter(self)
            h = self.height()
            for a, b in self.intervals:
                xa, xb = self.x_of(a), self.x_of(b)
                p.fillRect(QRectF(xa, h * 0.5 + 3, max(3.0, xb - xa), 5), QColor(255, 200, 60, 200))
            p.end()
        super().paintEvent(event)

    def mousePressEvent(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton or not self.isEnabled():
            return super().mousePressEvent(event)
        opt = QStyleOptionSlider()
        self.initStyleOption(opt)
        handle = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                             QStyle.SubControl.SC_SliderHandle, self)
        x = event.position().x()
        if handle.contains(event.position().toPoint()):
            return super().mousePressEvent(event)         # drag the handle
        iv = self.interval_at(x)
        if iv is not None and (abs(x - self.x_of(iv[0])) <= self.SNAP_PX
                               or self.x_of(iv[1]) - self.x_of(iv[0]) < 4 * self.SNAP_PX):
            self.setValue(iv[0])
            self.interval_clicked.emit(*iv)
        else:
            self.setValue(self.value_at(x))
        event.accept()


class PlayerWidget(QWidget):
    """A video with play/pause, frame stepping, a seek slider, exact frame + time, box overlay."""

    frame_shown = Signal(int, float)          # frame_idx, t_s: after the frame is on screen
    position_changed = Signal(int, float)     # as soon as the position is requested
    playing_changed = Signal(bool)
    failed = Signal(str)
    # a step or playback went past the last (+1) or before the first (-1) frame; was it playing
    edge_reached = Signal(int, bool)

    def __init__(self, parent=None, *, cache_frames: int = 24, compact: bool = False):
        super().__init__(parent)
        self.decoder: FrameDecoder | None = None
        self.overlay_data = BoxOverlay()
        self.frame_idx = 0
        self.fps = 25.0
        self.n_frames = 0
        self.span_frames: tuple[int, int] | None = None
        self._cache_frames = cache_frames
        self._generation = 0
        self._wanted: tuple[int, int] = (0, -1)
        self._pending = False
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._scan_pool = QThreadPool(self)      # background JPEG pass that makes seeks cheap
        self._scan_pool.setMaxThreadCount(1)
        self.prefetch = True
        self._decode_signals = _DecodeSignals()
        self._decode_signals.decoded.connect(self._on_decoded)
        self._decode_signals.failed.connect(self._on_decode_failed)
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._on_tick)

        self.canvas = VideoCanvas(self)
        self.play_button = QToolButton(self, text="▶", toolTip="Play / pause (Space)")
        self.back_button = QToolButton(self, text="◀|", toolTip="Previous frame (←)")
        self.fwd_button = QToolButton(self, text="|▶", toolTip="Next frame (→)")
        self.slider = SeekBar(self)
        self.slider.setEnabled(False)
        self.intervals_s: list[tuple[float, float]] = []
        self.position_label = QLabel("frame –", self)
        self.position_label.setObjectName("mono")
        self.position_label.setMinimumWidth(170 if not compact else 120)
        self.overlay_box = QCheckBox("Boxes", self, checked=True, toolTip="Show boxes and track ids")
        for b in (self.play_button, self.back_button, self.fwd_button):
            b.setAutoRaise(True)
        self.play_button.clicked.connect(self.toggle_play)
        self.back_button.clicked.connect(lambda: self.step(-1))
        self.fwd_button.clicked.connect(lambda: self.step(1))
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.overlay_box.toggled.connect(self.set_overlay)

        bar = QHBoxLayout()
        bar.setContentsMargins(4, 0, 4, 0)
        for w in (self.back_button, self.play_button, self.fwd_button):
            bar.addWidget(w)
        bar.addWidget(self.slider, 1)
        bar.addWidget(self.position_label)
        bar.addWidget(self.overlay_box)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.canvas, 1)
        lay.addLayout(bar)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    # -- loading
    def load(self, path: str, records=None, span_s: tuple[float, float] | None = None,
             start_at_span: bool = True) -> bool:
        """Open ``path``; returns False (and shows why in the canvas) when it cannot be decoded."""
        self.pause()
        self._generation += 1
        old, self.decoder = self.decoder, None
        if old is not None:
            self._pool.start(old.close)      # release on the decode thread, after pending tasks
        self.canvas.image = None
        self.overlay_data = BoxOverlay(records)
        self.canvas.boxes = []
        try:
            self.decoder = FrameDecoder(path, cache_frames=self._cache_frames)
        except Exception as exc:  # noqa: BLE001
            self.canvas.message = f"Cannot play this video:\n{exc}"
            self.slider.setEnabled(False)
            self.position_label.setText("frame –")
            self.canvas.update()
            self.failed.emit(str(exc))
            return False
        self.fps, self.n_frames = self.decoder.fps, self.decoder.n_frames
        self.span_frames = None
        start = 0
        if span_s is not None:
            self.span_frames = (self.frame_at(span_s[0]), self.frame_at(span_s[1]))
            start = self.span_frames[0] if start_at_span else 0
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, self.n_frames - 1))
        self.slider.blockSignals(False)
        self.slider.setEnabled(True)
        self.set_intervals([span_s] if span_s is not None else [])
        self.seek(start)
        if self.prefetch:
            gen, dec = self._generation, self.decoder
            self._scan_pool.start(lambda: dec.scan(cancel=lambda: gen != self._generation))
        return True

    def clear(self, message: str = "No video") -> None:
        self.pause()
        self._generation += 1
        self.decoder = None
        self.slider.setEnabled(False)
        self.set_intervals([])
        self.canvas.image = None
        self.canvas.message = message
        self.canvas.update()

    def set_intervals(self, intervals_s) -> None:
        """Event intervals (t0_s, t1_s) drawn on the seek bar; a click on one jumps to its start."""
        self.intervals_s = [(float(a), float(b)) for a, b in intervals_s or []]
        self.slider.set_intervals([(self.frame_at(a), self.frame_at(b)) for a, b in self.intervals_s])

    def frame_at(self, t_s: float) -> int:
        f = int(round(t_s * self.fps))
        return max(0, min(f, self.n_frames - 1)) if self.n_frames else max(0, f)

    def time_of(self, frame_idx: int) -> float:
        return frame_idx / self.fps if self.fps else 0.0

    # -- navigation
    def seek(self, frame_idx: int) -> None:
        if self.decoder is None:
            return
        if self.n_frames:
            frame_idx = max(0, min(int(frame_idx), self.n_frames - 1))
        self.frame_idx = frame_idx
        self._update_position_ui()
        self.position_changed.emit(frame_idx, self.time_of(frame_idx))
        self._wanted = (self._generation, frame_idx)
        cached = self.decoder.cached(frame_idx)
        if cached is not None:
            self._show(frame_idx, rgb_to_qimage(cached))
            return
        self._pending = True
        self._pool.start(_DecodeTask(self, self.decoder, self._generation, frame_idx))

    def seek_time(self, t_s: float) -> None:
        self.seek(self.frame_at(t_s))

    def step(self, n: int = 1) -> None:
        self.pause()
        edge = self.decoder is not None and self.n_frames and (
            (n > 0 and self.frame_idx >= self.n_frames - 1) or (n < 0 and self.frame_idx <= 0))
        self.seek(self.frame_idx + n)
        if edge:             # the next (previous) file of a drive may follow: app/drive_player.py
            self.edge_reached.emit(1 if n > 0 else -1, False)

    def play(self) -> None:
        if self.decoder is None or self._timer.isActive():
            return
        if self.n_frames and self.frame_idx >= self.n_frames - 1:
            self.seek(0)
        self._timer.start(max(5, int(round(1000.0 / self.fps))))
        self.play_button.setText("❚❚")
        self.playing_changed.emit(True)

    def pause(self) -> None:
        if self._timer.isActive():
            self._timer.stop()
            self.play_button.setText("▶")
            self.playing_changed.emit(False)

    def toggle_play(self) -> None:
        self.pause() if self.is_playing else self.play()

    @property
    def is_playing(self) -> bool:
        return self._timer.isActive()

    def set_overlay(self, on: bool) -> None:
        self.canvas.overlay = bool(on)
        if self.overlay_box.isChecked() != bool(on):
            self.overlay_box.setChecked(bool(on))
        self.canvas.update()

    def highlight_track(self, track_id: int | None) -> None:
        self.canvas.highlight = track_id
        self.canvas.update()

    def wait_idle(self, timeout_ms: int = 2000, scan: bool = False) -> bool:
        """Tests and benchmarks: wait for the decode (and scan) threads; no UI events processed."""
        ok = self._pool.waitForDone(timeout_ms)
        return (self._scan_pool.waitForDone(timeout_ms) and ok) if scan else ok

    def shutdown(self) -> None:
        self.pause()
        self._generation += 1
        self._pool.clear()
        self._pool.waitForDone(3000)
        self._scan_pool.clear()
        self._scan_pool.waitForDone(3000)
        if self.decoder is not None:
            self.decoder.close()
            self.decoder = None

    # -- handlers
    def _on_tick(self) -> None:
        if self._pending:          # decoding is behind: drop this tick rather than queue up
            return
        if self.n_frames and self.frame_idx >= self.n_frames - 1:
            self.pause()
            self.edge_reached.emit(1, True)
            return
        self.seek(self.frame_idx + 1)

    def _on_slider_value_changed(self, value: int) -> None:
        if value != self.frame_idx:
            self.seek(value)

    def _on_decoded(self, generation: int, frame_idx: int, image: QImage) -> None:
        if (generation, frame_idx) != self._wanted:
            return
        self._show(frame_idx, image)

    def _on_decode_failed(self, generation: int, frame_idx: int, message: str) -> None:
        if generation != self._generation:
            return
        self._pending = False
        self.pause()
        self.position_label.setText(f"frame {frame_idx}: cannot decode")
        self.failed.emit(message)

    def _show(self, frame_idx: int, image: QImage) -> None:
        self._pending = False
        self.canvas.image = image
        self.canvas.boxes = self.overlay_data.boxes_at(frame_idx)
        self.canvas.update()
        self.frame_shown.emit(frame_idx, self.time_of(frame_idx))

    def _update_position_ui(self) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(self.frame_idx)
        self.slider.blockSignals(False)
        last = max(0, self.n_frames - 1)
        self.position_label.setText(
            f"frame {self.frame_idx} / {last}   {self.time_of(self.frame_idx):7.3f} s")

    def keyPressEvent(self, event) -> None:
        key = event.key()
        if key == Qt.Key.Key_Space:
            self.toggle_play()
        elif key == Qt.Key.Key_Left:
            self.step(-10 if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else -1)
        elif key == Qt.Key.Key_Right:
            self.step(10 if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else 1)
        else:
            super().keyPressEvent(event)
