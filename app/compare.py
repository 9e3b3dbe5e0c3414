"""Side-by-side comparison: 2+ players on one clock, each aligned to its own event start.

The shared clock is time relative to each clip's event start (t_rel = 0 at every event start);
play, pause, seek and step act on all players together. Under each player a plot of its rule
signal (the soft score per track, the peak track thick) on the same relative time axis, with a
playhead that follows the clock; a click in any plot moves every player there.
"""

from __future__ import annotations

import os

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtWidgets import (QGridLayout, QHBoxLayout, QLabel, QSlider, QToolButton, QVBoxLayout,
                               QWidget)

from .player import PlayerWidget, track_color

SLIDER_STEPS_PER_S = 100


class _Slot:
    """One compared clip: its player, caption, signal plot and event start."""

    def __init__(self, player: PlayerWidget, caption: QLabel, start_s: float, duration_s: float,
                 plot: "pg.PlotWidget | None" = None, playhead=None):
        self.player, self.caption = player, caption
        self.start_s, self.duration_s = start_s, duration_s
        self.plot, self.playhead = plot, playhead
        self.curves: dict[int, object] = {}       # track id -> PlotDataItem


def _signal_plot(parent, explanation, start_s: float, peak_track, on_click):
    """A small plot of ``explanation``'s soft score per track, x = t - event start (s)."""
    pw = pg.PlotWidget(parent)
    pw.setObjectName("comparePlot")
    pw.setBackground("#15181d")
    pw.setMinimumHeight(90)
    pw.setMaximumHeight(140)
    pi = pw.getPlotItem()
    pi.setMenuEnabled(False)
    pi.showGrid(x=True, y=True, alpha=0.15)
    pi.getAxis("left").setWidth(34)
    pi.getAxis("left").setLabel("soft", **{"font-size": "7pt"})
    pi.getAxis("bottom").setLabel("t − t_event (s)", **{"font-size": "7pt"})
    pi.setYRange(0, 1.05, padding=0)
    pi.setMouseEnabled(x=False, y=False)
    pi.addItem(pg.InfiniteLine(pos=0, angle=90, movable=False,
                               pen=pg.mkPen(255, 200, 60, 160, width=1)))
    curves = {}
    traces = list(getattr(explanation, "traces", []) or []) if explanation is not None else []
    for tr in traces:
        try:
            tid = int(tr.track)
        except (TypeError, ValueError):
            continue
        if tid < 0 or not len(tr.t):
            continue
        hi = peak_track is not None and tid == int(peak_track)
        col = track_color(tid)
        c = pg.PlotDataItem(np.asarray(tr.t, float) - start_s, np.asarray(tr.combined, float),
                            pen=pg.mkPen(col, width=3.0 if hi else 1.2), connect="finite")
        if not hi:
            c.setOpacity(0.6)
        pi.addItem(c)
        curves[tid] = c
    if not curves:
        msg = pg.TextItem("no rule signal for this clip", color="#8a9099", anchor=(0.5, 0.5))
        pi.addItem(msg)
        msg.setPos(0, 0.5)
    head = pg.InfiniteLine(pos=0, angle=90, movable=False, pen=pg.mkPen("#ff5c5c", width=2))
    head.setZValue(20)
    pi.addItem(head)
    pw.viewport().setMouseTracking(True)

    def clicked(ev):
        if ev.button() == Qt.MouseButton.LeftButton and \
                pi.getViewBox().sceneBoundingRect().contains(ev.scenePos()):
            on_click(float(pi.getViewBox().mapSceneToView(ev.scenePos()).x()))

    pw.scene().sigMouseClicked.connect(clicked)
    return pw, head, curves


class CompareView(QWidget):
    """Synced players; ``t_rel`` is the shared time from each event start, in seconds."""

    position_changed = Signal(float)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.slots: list[_Slot] = []
        self.t_rel = 0.0
        self.grid = QGridLayout()
        self.grid.setSpacing(6)
        self.empty = QLabel("Select two or more results and press “Compare” (Ctrl+K).", self)
        self.empty.setObjectName("dim")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.grid.addWidget(self.empty, 0, 0)
        self.play_button = QToolButton(self, text="▶", toolTip="Play / pause all (Space)")
        self.back_button = QToolButton(self, text="◀|", toolTip="All back one frame (←)")
        self.fwd_button = QToolButton(self, text="|▶", toolTip="All forward one frame (→)")
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.label = QLabel("t − t_event = –", self)
        self.label.setObjectName("mono")
        self.play_button.clicked.connect(self.toggle_play)
        self.back_button.clicked.connect(lambda: self.step(-1))
        self.fwd_button.clicked.connect(lambda: self.step(1))
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        bar = QHBoxLayout()
        for w in (self.back_button, self.play_button, self.fwd_button):
            bar.addWidget(w)
        bar.addWidget(self.slider, 1)
        bar.addWidget(self.label)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(self.grid, 1)
        lay.addLayout(bar)
        self._timer = QTimer(self)
        self._timer.setInterval(33)
        self._timer.timeout.connect(self._on_tick)
        self._clock = QElapsedTimer()
        self._clock_t0 = 0.0
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._update_controls()

    # -- content
    def set_items(self, items: list[dict]) -> None:
        """items: dicts with ``path``, ``span_s`` (or None), ``records`` (or None), ``title``."""
        self.pause()
        for s in self.slots:
            s.player.shutdown()
            s.player.deleteLater()
            s.caption.deleteLater()
            if s.plot is not None:
                s.plot.deleteLater()
        self.slots = []
        self.empty.setText("Select two or more results and press “Compare” (Ctrl+K).")
        self.empty.setVisible(not items)
        cols = 2 if len(items) <= 4 else 3
        for k, it in enumerate(items):
            p = PlayerWidget(self, compact=True, cache_frames=12)
            for w in (p.play_button, p.back_button, p.fwd_button, p.slider):
                w.hide()
            cap = QLabel(it.get("title") or os.path.basename(it.get("path") or ""), self)
            cap.setObjectName("dim")
            p.load(it["path"], records=it.get("records"), span_s=it.get("span_s"))
            start = float(it["span_s"][0]) if it.get("span_s") else 0.0
            dur = p.n_frames / p.fps if p.n_frames else 0.0
            box = QVBoxLayout()
            box.addWidget(cap)
            box.addWidget(p, 1)
            plot = head = None
            curves = {}
            if "explanation" in it:
                plot, head, curves = _signal_plot(self, it.get("explanation"), start,
                                                  it.get("peak_track"), self._on_plot_clicked)
                lo = -start
                plot.getPlotItem().setXRange(lo, lo + max(dur, 0.1), padding=0.01)
                box.addWidget(plot)
            self.grid.addLayout(box, k // cols, k % cols)
            slot = _Slot(p, cap, start, dur, plot, head)
            slot.curves = curves
            self.slots.append(slot)
        self._update_controls()
        self.seek(0.0)

    def show_loading(self, n: int) -> None:
        """While the compared clips' records and explanations load (a worker)."""
        self.pause()
        self.empty.setText(f"Loading {n} clips…")
        self.empty.setVisible(True)

    def _on_plot_clicked(self, t_rel: float) -> None:
        self.pause()
        self.seek(t_rel)

    @property
    def rel_range(self) -> tuple[float, float]:
        if not self.slots:
            return (0.0, 0.0)
        lo = min(-s.start_s for s in self.slots)
        hi = max(s.duration_s - s.start_s for s in self.slots)
        return (lo, hi)

    def _update_controls(self) -> None:
        lo, hi = self.rel_range
        self.slider.blockSignals(True)
        self.slider.setRange(int(lo * SLIDER_STEPS_PER_S), int(hi * SLIDER_STEPS_PER_S))
        self.slider.blockSignals(False)
        for w in (self.play_button, self.back_button, self.fwd_button, self.slider):
            w.setEnabled(len(self.slots) > 0)

    # -- clock
    def seek(self, t_rel: float) -> None:
        lo, hi = self.rel_range
        self.t_rel = max(lo, min(float(t_rel), hi))
        for s in self.slots:
            s.player.seek_time(s.start_s + self.t_rel)
            if s.playhead is not None:
                s.playhead.setValue(self.t_rel)
        self.slider.blockSignals(True)
        self.slider.setValue(int(round(self.t_rel * SLIDER_STEPS_PER_S)))
        self.slider.blockSignals(False)
        self.label.setText(f"t − t_event = {self.t_rel:+7.3f} s")
        self.position_changed.emit(self.t_rel)

    def frames(self) -> list[int]:
        return [s.player.frame_idx for s in self.slots]

    def step(self, n: int = 1) -> None:
        self.pause()
        if not self.slots:
            return
        dt = 1.0 / max(s.player.fps for s in self.slots)
        self.seek(self.t_rel + n * dt)

    def play(self) -> None:
        if not self.slots or self._timer.isActive():
            return
        if self.t_rel >= self.rel_range[1]:
            self.seek(self.rel_range[0])
        self._clock_t0 = self.t_rel
        self._clock.start()
        self._timer.start()
        self.play_button.setText("❚❚")

    def pause(self) -> None:
        if self._timer.isActive():
            self._timer.stop()
            self.play_button.setText("▶")

    def toggle_play(self) -> None:
        self.pause() if self._timer.isActive() else self.play()

    @property
    def is_playing(self) -> bool:
        return self._timer.isActive()

    def shutdown(self) -> None:
        self.pause()
        for s in self.slots:
            s.player.shutdown()

    def _on_tick(self) -> None:
        t = self._clock_t0 + self._clock.elapsed() / 1000.0
        if t >= self.rel_range[1]:
            self.seek(self.rel_range[1])
            self.pause()
            return
        self.seek(t)

    def _on_slider_value_changed(self, v: int) -> None:
        self.pause()
        self.seek(v / SLIDER_STEPS_PER_S)

    def keyPressEvent(self, event) -> None:
        k = event.key()
        if k == Qt.Key.Key_Space:
            self.toggle_play()
        elif k == Qt.Key.Key_Left:
            self.step(-1)
        elif k == Qt.Key.Key_Right:
            self.step(1)
        else:
            super().keyPressEvent(event)
