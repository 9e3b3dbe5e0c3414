"""Side-by-side comparison: 2+ players on one clock, each aligned to its own event start.

The shared clock is time relative to each clip's event start (t_rel = 0 at every event start);
play, pause, seek and step act on all players together.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtWidgets import (QGridLayout, QHBoxLayout, QLabel, QSlider, QToolButton, QVBoxLayout,
                               QWidget)

from .player import PlayerWidget

SLIDER_STEPS_PER_S = 100


class _Slot:
    """One compared clip: its player, caption and event start."""

    def __init__(self, player: PlayerWidget, caption: QLabel, start_s: float, duration_s: float):
        self.player, self.caption = player, caption
        self.start_s, self.duration_s = start_s, duration_s


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
        self.slots = []
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
            self.grid.addLayout(box, k // cols, k % cols)
            self.slots.append(_Slot(p, cap, start, dur))
        self._update_controls()
        self.seek(0.0)

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
