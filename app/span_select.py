"""A span selected on the timeline for "More like this" (issue 36): Shift+drag over any row
draws it (a plain drag still pans), its edges can then be dragged; the "More like this" button
beside the legend asks for moments like it, with the track selected in the timeline (a click on
its curve or in the track list), or the ego when none is."""

from __future__ import annotations

from typing import Callable

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QToolButton, QWidget

#: a selection narrower than this (s) is a slip of the hand, not a span
MIN_SELECT_S = 0.2

_HINT = ("Shift+drag over the timeline to select a span, then find the moments most like it "
         "across the library: the selected track's distance, lateral offset and lane with the "
         "ego's speed, acceleration and yaw rate (the ego's alone when no track is selected), "
         "and the span's text")


class SpanViewBox(pg.ViewBox):
    """A timeline row's view box: Shift+left drag selects a span, any other drag pans as before."""

    def __init__(self, selector: "SpanSelector"):
        super().__init__()
        self._selector = selector
        self._selecting = False

    def mouseDragEvent(self, ev, axis=None):
        if ev.button() == Qt.MouseButton.LeftButton and axis is None:
            if ev.isStart():
                self._selecting = bool(ev.modifiers() & Qt.KeyboardModifier.ShiftModifier)
            if self._selecting:
                ev.accept()
                a = float(self.mapSceneToView(ev.buttonDownScenePos()).x())
                b = float(self.mapSceneToView(ev.scenePos()).x())
                self._selector.set_span((max(0.0, min(a, b)), max(0.0, max(a, b))),
                                        final=ev.isFinish())
                if ev.isFinish():
                    self._selecting = False
                return
        super().mouseDragEvent(ev, axis)


class SpanSelector(QObject):
    """The selection shown on every row of a timeline (one region item per row, kept in step)
    and its "More like this" button. ``track_of()`` gives the selected track (None or < 0: the
    ego) and ``label_of(track)`` its name."""

    requested = Signal(float, float, object)     # t0, t1, track id or None (the ego)

    def __init__(self, parent: QWidget, track_of: Callable[[], int | None],
                 label_of: Callable[[int], str]):
        super().__init__(parent)
        self._track_of, self._label_of = track_of, label_of
        self.items: list[pg.LinearRegionItem] = []
        self.span: tuple[float, float] | None = None
        self._syncing = False
        self.button = QToolButton(parent)
        self.button.setObjectName("timelineMoreLikeThis")
        self.button.clicked.connect(self._on_clicked)
        self.refresh()

    def view_box(self) -> SpanViewBox:
        return SpanViewBox(self)

    def attach(self, plot: pg.PlotItem) -> None:
        """Give a new row its region item (hidden until a span is selected)."""
        it = pg.LinearRegionItem(movable=True, brush=pg.mkBrush(90, 170, 255, 50),
                                 pen=pg.mkPen(90, 170, 255, 200, width=1.5),
                                 hoverBrush=pg.mkBrush(90, 170, 255, 80))
        it.setZValue(8)
        it.hide()
        plot.addItem(it, ignoreBounds=True)
        it.sigRegionChanged.connect(lambda item=it: self._on_item_moved(item))
        self.items.append(it)
        if self.span is not None:
            self._show(self.span)

    def _show(self, span) -> None:
        self._syncing = True
        try:
            for it in self.items:
                if span is None:
                    it.hide()
                else:
                    it.setRegion(span)
                    it.show()
        finally:
            self._syncing = False

    def set_span(self, span: tuple[float, float] | None, final: bool = True) -> None:
        """Select ``span`` (s) on every row; None, or narrower than ``MIN_SELECT_S`` once the
        drag ends, clears it."""
        if span is not None and final and span[1] - span[0] < MIN_SELECT_S:
            span = None
        self.span = None if span is None else (float(span[0]), float(span[1]))
        self._show(self.span)
        self.refresh()

    def clear(self) -> None:
        self.set_span(None)

    def _on_item_moved(self, item) -> None:
        if self._syncing:
            return
        a, b = (float(v) for v in item.getRegion())
        self.span = (max(0.0, min(a, b)), max(0.0, max(a, b)))
        self._syncing = True
        try:
            for it in self.items:
                if it is not item:
                    it.setRegion(self.span)
        finally:
            self._syncing = False
        self.refresh()

    def track(self) -> int | None:
        tid = self._track_of()
        return int(tid) if tid is not None and int(tid) >= 0 else None

    def refresh(self) -> None:
        """The button says what it will compare (span and track), or how to select a span."""
        b = self.button
        if self.span is None:
            b.setText("More like this")
            b.setEnabled(False)
            b.setToolTip(_HINT)
            return
        tid = self.track()
        who = self._label_of(tid) if tid is not None else "ego"
        b.setText(f"More like this: {self.span[0]:.1f}–{self.span[1]:.1f} s, {who}")
        b.setEnabled(True)
        b.setToolTip(f"Find the moments most like {self.span[0]:.1f}–{self.span[1]:.1f} s of this "
                     f"video ({'the ego' if tid is None else who}; click another curve to compare "
                     "another track). " + _HINT)

    def _on_clicked(self) -> None:
        if self.span is not None:
            self.requested.emit(self.span[0], self.span[1], self.track())
