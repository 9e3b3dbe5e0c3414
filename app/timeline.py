"""Timeline of WHY a video matched: the rule's signals per track, soft score, gates, event span.

One linked-x plot per rule field (a curve per candidate track), one for the per-frame soft score,
one for gate satisfaction; the event span shaded; a playhead bound to the player both ways.
Items are pooled and updated with ``setData``: nothing is re-created per frame.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from .player import track_color

MAX_TRACKS = 8
UNITS = {"distance": "m", "loc_x": "m", "loc_z": "m", "lane_rel": "lanes", "bbox_area": "px²",
         "abs_loc_x": "m", "speed": "m/s", "yaw_rate": "rad/s", "accel": "m/s²", "heading": "rad"}


def _track_key(track) -> int:
    try:
        return int(track)
    except (TypeError, ValueError):
        return -1                      # the ego series


class _Row:
    """One plot of the timeline with its pooled curves, span region and playhead."""

    def __init__(self, timeline: "TimelineWidget", plot: pg.PlotItem):
        self.plot = plot
        self.curves: list[pg.PlotDataItem] = []
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

    def curve(self, i: int, timeline: "TimelineWidget") -> pg.PlotDataItem:
        while len(self.curves) <= i:
            c = pg.PlotDataItem(clipToView=True, autoDownsample=True)
            c.setCurveClickable(True, width=8)
            c.sigClicked.connect(timeline._on_curve_clicked)
            self.plot.addItem(c)
            self.curves.append(c)
        return self.curves[i]


class TimelineWidget(QWidget):
    """Per-track rule signals over time with the event span and a draggable playhead."""

    seek_requested = Signal(float)          # t_s, from dragging the playhead
    track_selected = Signal(int)            # track id, from clicking a curve

    def __init__(self, parent=None):
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        self.view = pg.GraphicsLayoutWidget(self)
        self.view.setBackground("#15181d")
        self.title = QLabel("Select a result to see why it matched.", self)
        self.title.setObjectName("dim")
        self.title.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.title)
        lay.addWidget(self.view, 1)
        self.rows: list[_Row] = []
        self.row_names: list[str] = []
        self.explanation = None
        self.highlighted: int | None = None
        self.t_s = 0.0
        self._curve_track: dict[int, int] = {}     # id(curve) -> track id

    # -- content
    def _row(self, i: int) -> _Row:
        while len(self.rows) <= i:
            plot = pg.PlotItem()
            self.view.ci.addItem(plot, row=len(self.rows), col=0)
            plot.showGrid(x=True, y=True, alpha=0.15)
            plot.setMenuEnabled(False)
            plot.getAxis("left").setWidth(58)
            if self.rows:
                plot.setXLink(self.rows[0].plot)
            self.rows.append(_Row(self, plot))
        return self.rows[i]

    def _use_rows(self, n: int) -> None:
        """Keep exactly the first ``n`` pooled plots in the layout (hidden items would keep space)."""
        for i, r in enumerate(self.rows):
            if i < n and not r.in_layout:
                self.view.ci.addItem(r.plot, row=i, col=0)
                r.in_layout = True
            elif i >= n and r.in_layout:
                self.view.ci.removeItem(r.plot)
                r.in_layout = False

    def clear(self, message: str = "Select a result to see why it matched.") -> None:
        self.explanation = None
        self.title.setText(message)
        for r in self.rows:
            for c in r.curves:
                c.setData([], [])
        self._use_rows(0)

    def set_explanation(self, explanation, title: str = "") -> None:
        """Show an ``engine.explain`` result (traces per track, span, peak track)."""
        self.explanation = explanation
        traces = list(getattr(explanation, "traces", []) or [])
        peak = getattr(explanation, "peak_track", None)
        # the peak track first, then the most convincing ones
        traces.sort(key=lambda tr: (_track_key(tr.track) != _track_key(peak),
                                    -float(np.nanmax(tr.combined)) if len(tr.combined) else 0.0,
                                    _track_key(tr.track)))
        traces = traces[:MAX_TRACKS]
        fields: list[str] = []
        for tr in traces:
            for f in tr.values:
                if f not in fields:
                    fields.append(f)
        gate_names: list[str] = []
        for tr in traces:
            for g in tr.gates:
                if g not in gate_names:
                    gate_names.append(g)
        names = fields + ["soft score"] + (["gates"] if gate_names else [])
        self.row_names = names
        self._curve_track.clear()
        span = getattr(explanation, "span_s", None)
        self._row(len(names) - 1)
        self._use_rows(len(names))
        for i, name in enumerate(names):
            row = self._row(i)
            used = 0
            for tr in traces:
                tid = _track_key(tr.track)
                t = np.asarray(tr.t, dtype=float)
                if name == "soft score":
                    series = [(np.asarray(tr.combined, float), "")]
                elif name == "gates":
                    series = [(np.asarray(tr.gates[g], float) * 0.7 + k, g)
                              for k, g in enumerate(gate_names) if g in tr.gates]
                elif name in tr.values:
                    series = [(np.asarray(tr.values[name], float), "")]
                else:
                    series = []
                for y, _ in series:
                    c = row.curve(used, self)
                    n = min(len(t), len(y))
                    c.setData(t[:n], y[:n], connect="finite",
                              stepMode=None)
                    c.setPen(self._pen(tid))
                    c.show()
                    self._curve_track[id(c)] = tid
                    used += 1
            for c in row.curves[used:]:
                c.setData([], [])
                c.hide()
            unit = UNITS.get(name, "")
            # small type: five stacked rows leave little height for a rotated label
            row.plot.getAxis("left").setLabel(f"{name} ({unit})" if unit else name, **{"font-size": "7pt"})
            for k in range(len(gate_names) if name == "gates" else 0):
                if k >= len(row.labels):
                    lab = pg.TextItem(color="#c9ced6", anchor=(0, 1))
                    row.plot.addItem(lab)
                    row.labels.append(lab)
            for k, lab in enumerate(row.labels):
                if name == "gates" and k < len(gate_names):
                    t0 = float(min((tr.t[0] for tr in traces if len(tr.t)), default=0.0))
                    lab.setText(gate_names[k])
                    lab.setPos(t0, k + 1.0)
                    lab.show()
                else:
                    lab.hide()
            if name == "gates":
                row.plot.getAxis("left").setTicks([[(k, "") for k in range(len(gate_names))]])
                row.plot.setYRange(-0.2, len(gate_names) + 0.1, padding=0)
            else:
                row.plot.getAxis("left").setTicks(None)
                row.plot.enableAutoRange(axis="y")
            if name == "soft score":
                row.plot.setYRange(0, 1.05, padding=0)
            row.plot.getAxis("bottom").setStyle(showValues=(i == len(names) - 1))
            if span:
                row.region.setRegion(span)
                row.region.show()
            else:
                row.region.hide()
        if self.rows:
            self.rows[0].plot.enableAutoRange(axis="x")
        score = getattr(explanation, "score", None)
        bits = [title] if title else []
        if score is not None:
            bits.append(f"rule score {float(score):.3f}")
        if span:
            bits.append(f"event {span[0]:.1f}–{span[1]:.1f} s")
        if peak is not None:
            bits.append(f"peak track #{peak}")
        if not traces:
            bits.append("no candidate track for this rule")
        bits.append("time axis in s · gates: high = met")
        self.title.setText("   ·   ".join(bits))
        self.set_time(self.t_s)

    def _pen(self, tid: int):
        col = track_color(tid) if tid >= 0 else pg.mkColor("#d0d4da")
        hi = self.highlighted is not None and tid == self.highlighted
        return pg.mkPen(col, width=3.5 if hi else 1.6)

    def highlight_track(self, track_id: int | None) -> None:
        self.highlighted = track_id
        for r in self.rows:
            for c in r.curves:
                if c.isVisible() and id(c) in self._curve_track:
                    c.setPen(self._pen(self._curve_track[id(c)]))

    # -- playhead
    def set_time(self, t_s: float) -> None:
        """Move the playhead (from the player); does not emit seek_requested."""
        self.t_s = float(t_s)
        for r in self.rows:
            r.playhead.blockSignals(True)
            r.playhead.setValue(self.t_s)
            r.playhead.blockSignals(False)

    def _on_playhead_dragged(self, line) -> None:
        t = float(line.value())
        self.set_time(t)
        self.seek_requested.emit(t)

    def _on_curve_clicked(self, curve, *_args) -> None:
        tid = self._curve_track.get(id(curve))
        if tid is None or tid < 0:
            return
        self.highlight_track(tid)
        self.track_selected.emit(tid)
