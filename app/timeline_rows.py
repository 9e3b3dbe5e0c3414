"""The timeline's plot rows: one pyqtgraph plot each, with its pooled curves, span region,
playhead, shot-cut lines and lane labels (gates, a sequence rule's steps)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from strived.api import FIELD_UNITS

if TYPE_CHECKING:
    from .timeline import TimelineWidget

#: the least height of a signal row's plot (px)
MIN_ROW_PX = 32
UNITS = FIELD_UNITS     # every rule field's unit (the jolt of a collision step, the derived road offset...)


class TimelineRow:
    """One plot of the timeline with its pooled curves, span region and playhead."""

    def __init__(self, timeline: "TimelineWidget", plot: pg.PlotItem):
        self.plot = plot
        self.curves: list[pg.PlotDataItem] = []
        self.bg: list[pg.PlotCurveItem] = []       # the other tracks, one batched item per colour
        self.data: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}   # track -> (t, y) drawn
        self.pick: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.labels: list[pg.TextItem] = []
        self.in_layout = True
        self.region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(255, 200, 60, 40),
                                          pen=pg.mkPen(255, 200, 60, 90))
        self.region.setZValue(-10)
        plot.addItem(self.region)
        self.playhead = pg.InfiniteLine(pos=0, angle=90, movable=True,
                                        pen=pg.mkPen("#ff5c5c", width=2),
                                        hoverPen=pg.mkPen("#ffffff", width=3))
        self.playhead.setZValue(20)
        plot.addItem(self.playhead)
        self.playhead.sigDragged.connect(timeline._on_playhead_dragged)
        self.hover = pg.InfiniteLine(pos=0, angle=90, movable=False,
                                     pen=pg.mkPen(200, 200, 200, 110, width=1,
                                                  style=Qt.PenStyle.DashLine))
        self.hover.setZValue(15)
        self.hover.hide()
        plot.addItem(self.hover)
        self.cut_lines: list[pg.InfiniteLine] = []   # edits of the clip (perception: shot cuts)
        self.gate_names: list[str] = []
        self.lane_x: list[float] = []             # steps row: each lane label's preferred x
        self.bands: list[pg.PlotDataItem] = []    # steps row: one filled band per lane
        # the row's name and unit inside the plot, top left (a rotated axis title does not fit
        # in a row a few tens of pixels high)
        self.name_label = pg.TextItem(color="#aeb4bd", anchor=(0, 0), fill=pg.mkBrush(21, 24, 29, 190))
        font = self.name_label.textItem.font()
        font.setPointSizeF(7.5)
        self.name_label.textItem.setFont(font)
        self.name_label.setZValue(26)
        plot.addItem(self.name_label, ignoreBounds=True)
        plot.getViewBox().sigRangeChanged.connect(lambda *_: self.place_labels())

    def curve(self, i: int, timeline: "TimelineWidget") -> pg.PlotDataItem:
        while len(self.curves) <= i:
            c = pg.PlotDataItem(clipToView=True, autoDownsample=True)
            self.plot.addItem(c)
            self.curves.append(c)
        return self.curves[i]

    def background(self, i: int) -> pg.PlotCurveItem:
        """Pooled batched curve ``i``: many tracks of one colour in one item (NaN-separated)."""
        while len(self.bg) <= i:
            c = pg.PlotCurveItem(antialias=False)    # thin and dim: half the paint time
            c.setZValue(-1)
            self.plot.addItem(c)
            self.bg.append(c)
        return self.bg[i]

    def set_cuts(self, cuts) -> None:
        """A dotted line at each shot cut: tracks end there and the ego series has a gap."""
        while len(self.cut_lines) < len(cuts):
            ln = pg.InfiniteLine(pos=0, angle=90, movable=False,
                                 pen=pg.mkPen(150, 190, 255, 170, width=1, style=Qt.PenStyle.DotLine))
            ln.setZValue(12)
            self.plot.addItem(ln)
            self.cut_lines.append(ln)
        for k, ln in enumerate(self.cut_lines):
            if k < len(cuts):
                ln.setValue(float(cuts[k]))
                ln.show()
            else:
                ln.hide()

    def place_labels(self) -> None:
        """The row's name at the top left; each gate's label inside its own lane (lane k spans y
        in [k, k + 0.7]), at the left edge of the visible time range."""
        vb = self.plot.getViewBox()
        (x0, _x1), (_y0, y1) = vb.viewRange()
        px = vb.viewPixelSize()[0]
        x0 += 3 * (px if px == px else 0.0)                              # 3 px in from the edge
        if self.gate_names:
            self.name_label.setPos(x0 + 0.45 * (vb.viewRange()[0][1] - x0), y1)
        else:
            self.name_label.setPos(x0, y1)
        x1 = vb.viewRange()[0][1]
        for k, lab in enumerate(self.labels[:len(self.gate_names)]):
            if k < len(self.lane_x):          # steps: above the band, at its start, kept in view
                wv = lab.boundingRect().width() * (px if px == px else 0.0)
                y = len(self.lane_x) - 1 - k      # step 1 on top
                lab.setPos(max(x0, min(self.lane_x[k], x1 - wv)), y + 0.72)
            else:
                lab.setPos(x0, k + 0.35)

    def band(self, i: int) -> pg.PlotDataItem:
        while len(self.bands) <= i:
            b = pg.PlotDataItem()
            b.setZValue(5)
            self.plot.addItem(b)
            self.bands.append(b)
        return self.bands[i]


def row_series(name: str, traces, gate_names: list[str], key) -> dict:
    """track -> [(t, y), ...] of row ``name``: a field's values, the soft score, or one series
    per gate lane (lane k at y in [k, k + 0.7])."""
    data = {}
    for tr in traces:
        tid = key(tr.track)
        t = np.asarray(tr.t, dtype=float)
        if name == "soft score":
            series = [np.asarray(tr.combined, float)]
        elif name == "gates":
            series = [np.asarray(tr.gates[g], float) * 0.7 + k
                      for k, g in enumerate(gate_names) if g in tr.gates]
        elif name in tr.values:
            series = [np.asarray(tr.values[name], float)]
        else:
            series = []
        if series:
            data[tid] = [(t[:min(len(t), len(y))], y[:min(len(t), len(y))]) for y in series]
    return data


def set_lane_labels(row: TimelineRow, lane_names: list[str]) -> None:
    """One pooled label per lane (gates, steps); the spare ones hidden."""
    while lane_names and len(row.labels) < len(lane_names):
        lab = pg.TextItem(color="#c9ced6", anchor=(0, 0.5), fill=pg.mkBrush(21, 24, 29, 170))
        font = lab.textItem.font()
        font.setPointSizeF(7.5)
        lab.textItem.setFont(font)
        lab.setZValue(25)
        row.plot.addItem(lab)
        row.labels.append(lab)
    row.gate_names = list(lane_names)
    for k, lab in enumerate(row.labels):
        if k < len(lane_names):
            lab.setText(lane_names[k])
            lab.show()
        else:
            lab.hide()


def set_row_axes(row: TimelineRow, name: str, lane_names: list[str], last: bool) -> None:
    """The y ticks and range of a row (lanes, the 0..1 soft score, or auto); time values on the
    last row only."""
    if lane_names:
        row.plot.getAxis("left").setTicks([[(k, "") for k in range(len(lane_names))]])
        row.plot.setYRange(-0.15, len(lane_names) - 0.15 + (0.15 if name == "steps" else 0),
                           padding=0)
    elif name == "soft score":   # 0..1: two ticks, which a short row prints without overlap
        row.plot.getAxis("left").setTicks([[(0.0, "0"), (1.0, "1")], []])
    else:
        row.plot.getAxis("left").setTicks(None)
        row.plot.enableAutoRange(axis="y")
    if name == "soft score":
        row.plot.setYRange(0, 1.05, padding=0)
    row.plot.getAxis("bottom").setStyle(showValues=last)
