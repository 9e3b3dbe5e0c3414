"""Timeline of WHY a video matched: the rule's signals per track, soft score, gates, event span.

One linked-x plot per rule field (a curve per candidate track), one for the per-frame soft score,
one for gate satisfaction (one lane per gate, labelled); the event span shaded; a playhead bound
to the player both ways. A click anywhere seeks the player there (a click on a curve also selects
its track); hovering reads the values at the cursor; a legend names each track's colour.
Items are pooled and updated with ``setData``: nothing is re-created per frame.

Every track is drawn, however many: the ``MAX_TRACKS`` best (the peak track first), the ego
series and the selected track as their own curves in their colour, named in the legend and read
by the hover; the others thin and dim, batched into one curve per colour and row (NaN-separated),
so a 200-track video costs a handful of items per row, not a thousand. "Other tracks" hides them;
the track list names every track with its score (a click selects it). Clicks pick the nearest
curve in pixels over all drawn tracks (`_pick_track`), not pyqtgraph's per-item hit test.

Sequence rules (``strived.rules.sequence``) get a "steps" row: one lane per step with a band over
the step's span, labelled with the unit that realised it ("step 1 lead brakes: car #3 2.1–3.4 s"),
then one lane per negation with its window and its offender, if any. A click on a band selects the
step (``step_selected``): its track and its span.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QToolButton, QVBoxLayout, QWidget)

from strived.rules.model import FIELD_UNITS

from .player import TRACK_COLORS, track_color
from .span_select import SpanSelector

MAX_TRACKS = 8          # tracks drawn as their own curves (with the ego and the selected one)
PICK_PX = 6.0           # a click within this many pixels of a curve picks its track
UNITS = FIELD_UNITS     # every rule field's unit (the jolt of a collision step, the derived road offset...)


def _track_key(track) -> int:
    try:
        return int(track)
    except (TypeError, ValueError):
        return -1                      # the ego series


def _trace_label(tr) -> str:
    tid = _track_key(tr.track)
    return "ego" if tid < 0 else f"{getattr(tr, 'cls', '') or 'track'} #{tid}"


def _best(combined) -> float:
    """A trace's best per-frame score (0 when it has none)."""
    a = np.asarray(combined, float)
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def _span_text(tr) -> str:
    t = np.asarray(tr.t, float)
    return f"{t[0]:.1f}–{t[-1]:.1f} s" if len(t) else "never"


def unit_text(track, cls) -> str:
    """The unit of a step or an offender in words: "the ego vehicle" or "car #3"."""
    tid = _track_key(track)
    return "ego" if tid < 0 else f"{cls or 'track'} #{tid}"


#: the least height of a signal row's plot (px)
MIN_ROW_PX = 32


def step_text(st: dict, prev: dict | None = None) -> str:
    """One realised step of a sequence rule (``StepMatch.to_dict``), as measured:
    "step 1 lead brakes: car #3 2.1–3.4 s (1.3 s)"; a step seen on one sample only says so
    rather than "lasting 0 s", and one that begins before the previous step (``prev``) ends says
    that too (the steps' anchors are ordered, their spans may overlap)."""
    a, b = (float(v) for v in st["span_s"])
    when = f"at {a:.1f} s (one sample)" if b - a < 0.05 else f"{a:.1f}–{b:.1f} s ({b - a:.1f} s)"
    text = f"step {int(st['step']) + 1} {st.get('name') or ''}: {unit_text(st.get('track'), st.get('cls'))} {when}"
    if prev is not None and a < float(prev["span_s"][1]) - 0.05:
        text += f", begins before step {int(prev['step']) + 1} ends ({float(prev['span_s'][1]):.1f} s)"
    return text


def absent_text(ab: dict) -> str:
    """One negation at the best assignment (``AbsenceMatch.to_dict``): its window around its
    step's anchor, the strongest offender there (or none) and the factor it put on the score."""
    a, b = ab["window_s"]
    name = ab.get("name") or f"negation {int(ab.get('absent', 0)) + 1}"
    where = f"{float(a):.1f}–{float(b):.1f} s (around step {int(ab.get('step', 0)) + 1})"
    if ab.get("track") is None:
        who = "none there"
    else:
        at = f" at {float(ab['time_s']):.1f} s" if ab.get("time_s") is not None else ""
        who = f"{unit_text(ab['track'], ab.get('cls'))} there{at}"
    return f"not {name} in {where}: {who} · score ×{float(ab.get('factor', 1.0)):.2f}"


def sequence_parts(explanation) -> tuple[list[dict], list[dict]]:
    """(steps, negations) of a sequence rule's explanation as dicts; ([], []) otherwise."""
    fn = getattr(explanation, "steps_dicts", None)
    if fn is None:
        return [], []
    steps, absent = fn()
    return list(steps or []), list(absent or [])


class _Row:
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


class TimelineWidget(QWidget):
    """Per-track rule signals over time with the event span and a draggable playhead."""

    seek_requested = Signal(float)          # t_s, from dragging the playhead
    track_selected = Signal(int)            # track id, from clicking a curve
    step_selected = Signal(int)             # lane of the steps row: step k, then negations

    def __init__(self, parent=None):
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        self.view = pg.GraphicsLayoutWidget(self)
        self.view.setBackground("#15181d")
        self.title = QLabel("Select a result to see why it matched.", self)
        self.title.setObjectName("dim")
        self.title.setWordWrap(True)
        self.legend = QLabel("", self)
        self.legend.setObjectName("timelineLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.legend.linkActivated.connect(self._on_legend_link)
        self.readout = QLabel("", self)
        self.readout.setObjectName("mono")
        self.readout.setWordWrap(True)
        # a fixed two-line height: a readout that grew with its text moved the plots under the
        # pointer (a click aimed at one step's band landed on the next)
        self.readout.setFixedHeight(2 * self.readout.fontMetrics().lineSpacing() + 6)
        self.readout.setToolTip("Values at the mouse pointer (move over the plots)")
        self.others_check = QCheckBox("other tracks", self)
        self.others_check.setObjectName("timelineOthers")
        self.others_check.setChecked(True)
        self.others_check.setToolTip("Draw every other track too (thin, dim); a click on one "
                                     "selects it")
        self.others_check.toggled.connect(self.set_show_others)
        self.list_button = QToolButton(self)
        self.list_button.setObjectName("timelineTrackListButton")
        self.list_button.setCheckable(True)
        self.list_button.setText("Track list")
        self.list_button.setToolTip("Every track of this video with its score: a click selects it")
        self.track_list = QListWidget(self)
        self.track_list.setObjectName("timelineTracks")
        self.track_list.setFixedWidth(150)
        self.track_list.setUniformItemSizes(True)
        self.track_list.hide()
        self.track_list.itemClicked.connect(self._on_track_item_clicked)
        self.track_list.itemActivated.connect(self._on_track_item_clicked)
        self.list_button.toggled.connect(self.track_list.setVisible)
        # Shift+drag selects a span; its button asks for moments like it (app/span_select.py)
        self.selector = SpanSelector(self, lambda: self.highlighted,
                                     lambda tid: self._all_labels.get(tid, f"track #{tid}"))
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.legend, 1)
        head.addWidget(self.others_check, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.list_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.selector.button, 0, Qt.AlignmentFlag.AlignTop)
        mid = QHBoxLayout()
        mid.setContentsMargins(0, 0, 0, 0)
        mid.setSpacing(2)
        mid.addWidget(self.view, 1)
        mid.addWidget(self.track_list)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.title)
        lay.addLayout(head)
        lay.addLayout(mid, 1)
        lay.addWidget(self.readout)
        self.show_others = True
        self._order: list[int] = []             # every track, best first (the peak first)
        self._traces: dict[int, object] = {}
        self._scores: dict[int, float] = {}
        self._all_labels: dict[int, str] = {}
        self._focus: list[int] = []             # tracks drawn as their own curves
        self._set_track_controls()
        self.rows: list[_Row] = []
        self.row_names: list[str] = []
        self.explanation = None
        self.cuts: list[float] = []
        self.highlighted: int | None = None
        self.steps: list[dict] = []             # a sequence rule's realised steps
        self.absent: list[dict] = []            # ... and its negations
        self.selected_lane: int | None = None
        self.t_s = 0.0
        self._curve_track: dict[int, int] = {}     # id(PlotDataItem) -> track
        self._track_label: dict[int, str] = {}     # the tracks drawn as their own curves
        self.view.viewport().setMouseTracking(True)
        self.view.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.view.scene().sigMouseMoved.connect(self._on_scene_mouse_moved)

    # -- content
    def _row(self, i: int) -> _Row:
        while len(self.rows) <= i:
            plot = pg.PlotItem(viewBox=self.selector.view_box())
            self.selector.attach(plot)
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
        self.cuts = []
        self.steps, self.absent, self.selected_lane = [], [], None
        self.selector.clear()
        self.title.setText(message)
        self.legend.setText("")
        self.readout.setText("")
        for r in self.rows:
            for c in r.curves:
                c.setData([], [])
            for c in r.bg:
                c.setData([], [])
            r.data, r.pick = {}, None
            r.set_cuts([])
            self._draw_bands(r, False)
        self._use_rows(0)
        self._order, self._traces, self._scores, self._all_labels = [], {}, {}, {}
        self._focus, self._track_label = [], {}
        self._curve_track.clear()
        self.track_list.clear()
        self._set_track_controls()

    def set_explanation(self, explanation, title: str = "", cuts=(), unknown: str | None = None) -> None:
        """Show an ``engine.explain`` result (traces per track, span, peak track). ``cuts``: the
        times (s) of the clip's shot cuts (``video.attrs["shot_cuts_s"]``): drawn on every row.
        ``unknown``: why the rule cannot judge this video (fields not estimated): the title says
        the score is unknown instead of showing the 0 the scorer computes without them."""
        self.explanation = explanation
        self.unknown = unknown
        self.selector.clear()                   # a selection belongs to one video
        self.cuts = [float(c) for c in (cuts or ())]
        traces = list(getattr(explanation, "traces", []) or [])
        peak = getattr(explanation, "peak_track", None)
        # the peak track first, then the most convincing ones
        scores = {_track_key(tr.track): _best(tr.combined) for tr in traces}
        traces.sort(key=lambda tr: (_track_key(tr.track) != _track_key(peak),
                                    -scores[_track_key(tr.track)], _track_key(tr.track)))
        self._order = [_track_key(tr.track) for tr in traces]
        self._traces = {_track_key(tr.track): tr for tr in traces}
        self._scores = scores
        self._all_labels = {_track_key(tr.track): _trace_label(tr) for tr in traces}
        if self.highlighted not in self._traces:
            self.highlighted = None
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
        self.steps, self.absent = sequence_parts(explanation)
        self.selected_lane = None
        lanes = [step_text(st, self.steps[k - 1] if k else None) for k, st in enumerate(self.steps)] + \
            [absent_text(ab) for ab in self.absent]
        names = fields + ["soft score"] + (["gates"] if gate_names else []) + \
            (["steps"] if lanes else [])
        self.row_names = names
        span = getattr(explanation, "span_s", None)
        self._row(len(names) - 1)
        self._use_rows(len(names))
        for i, name in enumerate(names):
            row = self._row(i)
            row.data = {}
            for tr in traces:
                tid = _track_key(tr.track)
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
                    row.data[tid] = [(t[:min(len(t), len(y))], y[:min(len(t), len(y))])
                                     for y in series]
            unit = UNITS.get(name, "")
            # small type: five stacked rows leave little height for a rotated label
            row.name_label.setText(f"{name} ({unit})" if unit else name)
            row.name_label.setVisible(name != "steps")      # each lane is labelled already
            row.plot.getAxis("left").setLabel(None)
            lane_names = gate_names if name == "gates" else lanes if name == "steps" else []
            # the gates and steps rows get a lane's worth of height per lane, the others one share
            self.view.ci.layout.setRowStretchFactor(i, max(1, len(lane_names)))
            # ... and never less than a label's height per lane (steps: label above its band)
            per_lane = 24 if name == "steps" else 26
            # a signal row is never squeezed below a readable curve (a graphics item's minimum
            # does not reach the window's layout: the view's own minimum is set below)
            row.plot.setMinimumHeight(per_lane * len(lane_names) + 24 if lane_names else MIN_ROW_PX)
            self._draw_bands(row, name == "steps")
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
            row.plot.getAxis("bottom").setStyle(showValues=(i == len(names) - 1))
            if span:
                row.region.setRegion(span)
                row.region.show()
            else:
                row.region.hide()
            row.set_cuts(self.cuts)
        if self.rows:
            self.rows[0].plot.enableAutoRange(axis="x")
            ts = [float(v) for tr in traces for v in (tr.t[:1] if len(tr.t) else [])] + \
                 [float(tr.t[-1]) for tr in traces if len(tr.t)]
            if ts:
                self.rows[0].plot.setXRange(min(ts), max(ts), padding=0.02)
        # the rows' minimum heights, made the view's: the splitter then shrinks the player, not the
        # plots (at 1024x680 the signal rows were squeezed to nothing)
        self.view.setMinimumHeight(int(sum(r.plot.minimumHeight() for r in self.rows[:len(names)])) + 8)
        for r in self.rows[len(names):]:
            self._draw_bands(r, False)
        for r in self.rows[len(names):]:
            r.data, r.pick = {}, None
            r.set_cuts([])
        self._fill_track_list()
        self._set_track_controls()
        self._draw()
        for r in self.rows[:len(names)]:
            r.place_labels()
        self.readout.setText("")
        score = getattr(explanation, "score", None)
        bits = [title] if title else []
        if getattr(self, "unknown", None):
            bits.append(f"rule score unknown ({self.unknown})")
        elif score is not None:
            bits.append(f"rule score {float(score):.3f}")
        if span:
            bits.append(f"event {span[0]:.1f}–{span[1]:.1f} s")
        if peak is not None:
            bits.append(f"peak track #{peak}")
        n_obj = sum(1 for tid in self._order if tid >= 0)
        if n_obj > MAX_TRACKS:
            bits.append(f"{n_obj} tracks: the {MAX_TRACKS} best in colour")
        if not traces:
            bits.append("no candidate track for this rule")
        if self.cuts:
            bits.append("edited clip: shot cut at " + ", ".join(f"{c:.1f}" for c in self.cuts) + " s "
                        "(dotted; no track continues across a cut)")
        if self.steps:
            bits.append(f"sequence of {len(self.steps)} steps" +
                        (f", {len(self.absent)} negation(s)" if self.absent else ""))
        bits.append("time axis in s · gates: high = met" + (" · steps: click a band" if lanes else "")
                    + " · Shift+drag: select a span (More like this)")
        self.title.setText("   ·   ".join(bits))
        self.set_time(self.t_s)

    def _lane_unit(self, lane: int) -> tuple[int | None, tuple[float, float] | None]:
        """(track, span or window) of a lane of the steps row: a step, then a negation."""
        if 0 <= lane < len(self.steps):
            st = self.steps[lane]
            return _track_key(st.get("track")), (float(st["span_s"][0]), float(st["span_s"][1]))
        k = lane - len(self.steps)
        if 0 <= k < len(self.absent):
            ab = self.absent[k]
            tid = None if ab.get("track") is None else _track_key(ab["track"])
            return tid, (float(ab["window_s"][0]), float(ab["window_s"][1]))
        return None, None

    def lane_text(self, lane: int) -> str:
        n = len(self.steps)
        if lane < n:
            return step_text(self.steps[lane], self.steps[lane - 1] if lane else None)
        return absent_text(self.absent[lane - n])

    def lane_count(self) -> int:
        return len(self.steps) + len(self.absent)

    def _draw_bands(self, row: "_Row", on: bool) -> None:
        """The steps row's bands: each step's span in its unit's colour (lane k of n at
        y in [n-1-k, n-1-k+0.45]: step 1 on top),
        each negation's window (red when something was there, grey when clear); the selected lane
        outlined."""
        n = self.lane_count() if on else 0
        row.lane_x = []
        for k in range(n):
            tid, (a, b) = self._lane_unit(k)
            if b - a < 0.05:                      # a one-sample step: still a visible band
                a, b = a - 0.05, b + 0.05
            neg = k >= len(self.steps)
            if neg:
                col = pg.mkColor("#ff6b6b" if tid is not None else "#6b717a")
            else:
                col = track_color(tid) if tid is not None and tid >= 0 else pg.mkColor("#d0d4da")
            fill = pg.mkColor(col)
            fill.setAlpha(90 if neg else 150)
            sel = k == self.selected_lane
            band = row.band(k)
            y = n - 1 - k
            band.setData([a, b], [y + 0.45, y + 0.45], fillLevel=y, brush=pg.mkBrush(fill))
            band.setPen(pg.mkPen("#ffffff" if sel else col, width=2.5 if sel else 1.0))
            band.show()
            row.lane_x.append(a)
        for band in row.bands[n:]:
            band.setData([], [])
            band.hide()

    def steps_row(self) -> "_Row | None":
        if "steps" in self.row_names:
            return self.rows[self.row_names.index("steps")]
        return None

    def select_lane(self, lane: int | None) -> None:
        """Outline the lane's band and select its unit's track (no seek: the caller decides)."""
        self.selected_lane = lane
        r = self.steps_row()
        if r is not None:
            self._draw_bands(r, True)
        tid, _span = self._lane_unit(lane) if lane is not None else (None, None)
        if tid is not None:
            self.highlight_track(tid)

    def _pen(self, tid: int):
        col = track_color(tid) if tid >= 0 else pg.mkColor("#d0d4da")
        hi = self.highlighted is not None and tid == self.highlighted
        return pg.mkPen(col, width=3.5 if hi else 1.6)

    def highlight_track(self, track_id: int | None) -> None:
        """Draw ``track_id`` thick (as its own curve, if it was among the others)."""
        self.highlighted = track_id
        if self.explanation is not None and self._focus_tracks() != self._focus:
            self._draw()
        else:
            for r in self.rows:
                for c in r.curves:
                    if c.isVisible() and id(c) in self._curve_track:
                        c.setPen(self._pen(self._curve_track[id(c)]))
        if self.explanation is not None:
            self._set_legend(None)
        self._sync_track_list()
        self.selector.refresh()

    # -- many tracks: focus curves, batched others, the track list
    def _focus_tracks(self) -> list[int]:
        """The tracks drawn as their own curves: the best ``MAX_TRACKS`` object tracks, the ego,
        and the selected track."""
        objs = [t for t in self._order if t >= 0][:MAX_TRACKS]
        out = [t for t in self._order if t < 0 or t in objs]
        if self.highlighted is not None and self.highlighted in self._traces and \
                self.highlighted not in out:
            out.append(self.highlighted)
        return out

    def _draw(self) -> None:
        """(Re)assign the pooled items: focus tracks one curve each, the others batched."""
        self._focus = self._focus_tracks()
        focus = set(self._focus)
        self._curve_track.clear()
        self._track_label = {tid: self._all_labels[tid] for tid in self._focus}
        for r in self.rows:
            if not r.in_layout:
                continue
            used = 0
            for tid in self._focus:
                for t, y in r.data.get(tid, []):
                    c = r.curve(used, self)
                    c.setData(t, y, connect="finite")
                    c.setPen(self._pen(tid))
                    c.show()
                    self._curve_track[id(c)] = tid
                    used += 1
            for c in r.curves[used:]:
                c.setData([], [])
                c.hide()
            groups: dict[int, list] = {}
            if self.show_others:
                for tid in self._order:
                    if tid not in focus:
                        groups.setdefault(tid % len(TRACK_COLORS) if tid >= 0 else -1, []).extend(
                            r.data.get(tid, []))
            k = 0
            for key, parts in sorted(groups.items()):
                if not parts:
                    continue
                nan = np.array([np.nan])
                xs = np.concatenate([a for t, _y in parts for a in (t, nan)])
                ys = np.concatenate([a for _t, y in parts for a in (y, nan)])
                col = pg.mkColor(TRACK_COLORS[key] if key >= 0 else "#d0d4da")
                col.setAlpha(110)
                b = r.background(k)
                b.setData(xs, ys, connect="finite")
                b.setPen(pg.mkPen(col, width=1.0))
                b.show()
                k += 1
            for b in r.bg[k:]:
                b.setData([], [])
                b.hide()
            r.pick = None                    # built on the first click (`_pick_track`)
        self._set_legend(None)

    def _pick_arrays(self, r: "_Row", focus: set[int]):
        """Every drawn sample of the row as (t, y, track, same series as the next sample),
        focus tracks first (a click on overlapping curves picks the focus one)."""
        ts, ys, ids, link = [], [], [], []
        for tid in self._focus + ([t for t in self._order if t not in focus] if self.show_others else []):
            for t, y in r.data.get(tid, []):
                if not len(t):
                    continue
                ts.append(t)
                ys.append(y)
                ids.append(np.full(len(t), tid))
                lk = np.ones(len(t), bool)
                lk[-1] = False
                link.append(lk)
        if not ts:
            return None
        return np.concatenate(ts), np.concatenate(ys), np.concatenate(ids), np.concatenate(link)

    def _pick_track(self, r: "_Row", scene_pos) -> int | None:
        """The track whose drawn curve passes nearest the click (within ``PICK_PX`` pixels)."""
        if r.pick is None:
            r.pick = self._pick_arrays(r, set(self._focus))
        if r.pick is None:
            return None
        t, y, ids, link = r.pick
        vb = r.plot.getViewBox()
        sx, sy = vb.viewPixelSize()
        if not (sx > 0 and sy > 0):
            return None
        p = vb.mapSceneToView(scene_pos)
        X = (t - float(p.x())) / sx                      # pixels from the click
        Y = (y - float(p.y())) / sy
        ok = np.isfinite(X) & np.isfinite(Y)
        d = np.where(ok, np.hypot(X, Y), np.inf)        # to each sample
        seg = link[:-1] & ok[:-1] & ok[1:]               # to each segment between two samples
        if seg.any():
            ax, ay = X[:-1][seg], Y[:-1][seg]
            bx, by = X[1:][seg], Y[1:][seg]
            dx, dy = bx - ax, by - ay
            ll = dx * dx + dy * dy
            u = np.clip(np.where(ll > 0, -(ax * dx + ay * dy) / np.where(ll > 0, ll, 1), 0), 0, 1)
            ds = np.hypot(ax + u * dx, ay + u * dy)
            dseg = np.full(len(t), np.inf)
            dseg[:-1][seg] = ds
            d = np.minimum(d, dseg)
        k = int(np.argmin(d))
        return int(ids[k]) if d[k] <= PICK_PX else None

    def set_show_others(self, on: bool) -> None:
        """Draw the tracks outside the focus (thin, dim) or not."""
        self.show_others = bool(on)
        if self.others_check.isChecked() != self.show_others:
            self.others_check.setChecked(self.show_others)
        if self.explanation is not None:
            self._draw()

    def track_count(self) -> int:
        """Tracks of the shown explanation (the ego series not counted)."""
        return sum(1 for t in self._order if t >= 0)

    def drawn_tracks(self) -> set[int]:
        """Object tracks with at least one drawn curve (their own, or in a batched one)."""
        shown = set(self._focus) | (set(self._order) if self.show_others else set())
        return {t for t in shown if t >= 0 and any(r.in_layout and r.data.get(t) for r in self.rows)}

    def _set_track_controls(self) -> None:
        n = self.track_count()
        self.others_check.setVisible(n > MAX_TRACKS)
        self.others_check.setText(f"the other {n - MAX_TRACKS} tracks" if n > MAX_TRACKS
                                  else "other tracks")
        self.list_button.setVisible(n > 1)
        self.list_button.setText(f"Track list ({n})")
        if not n:
            self.list_button.setChecked(False)

    def _fill_track_list(self) -> None:
        self.track_list.clear()
        for tid in self._order:
            if tid < 0:
                continue
            it = QListWidgetItem(f"{self._all_labels[tid]}  ·  {self._scores.get(tid, 0.0):.2f}")
            it.setData(Qt.ItemDataRole.UserRole, tid)
            it.setForeground(track_color(tid))
            it.setToolTip(f"{self._all_labels[tid]}: best per-frame score "
                          f"{self._scores.get(tid, 0.0):.3f}; seen "
                          f"{_span_text(self._traces[tid])}")
            self.track_list.addItem(it)
        self._sync_track_list()

    def _sync_track_list(self) -> None:
        self.track_list.blockSignals(True)
        try:
            self.track_list.clearSelection()
            for k in range(self.track_list.count()):
                it = self.track_list.item(k)
                if it.data(Qt.ItemDataRole.UserRole) == self.highlighted:
                    self.track_list.setCurrentItem(it)
                    self.track_list.scrollToItem(it)
                    break
        finally:
            self.track_list.blockSignals(False)

    def _on_track_item_clicked(self, item: QListWidgetItem) -> None:
        """Select the track; when it is not seen at the playhead, go to its best moment."""
        tid = int(item.data(Qt.ItemDataRole.UserRole))
        self.highlight_track(tid)
        self.track_selected.emit(tid)
        tr = self._traces.get(tid)
        if tr is None or not len(tr.t):
            return
        t = np.asarray(tr.t, float)
        if not (t[0] - 1e-6 <= self.t_s <= t[-1] + 1e-6):
            c = np.nan_to_num(np.asarray(tr.combined, float), nan=-1.0)
            at = float(t[int(np.argmax(c))]) if len(c) == len(t) else float(t[0])
            self.set_time(at)
            self.seek_requested.emit(at)

    def _set_legend(self, traces) -> None:
        """One entry per track drawn in its own colour (a click on an entry selects the track);
        the others are counted."""
        items = []
        for tid, label in self._track_label.items():
            col = track_color(tid).name() if tid >= 0 else "#d0d4da"
            text = html.escape(label)
            if tid == self.highlighted:
                text = f"<b>{text}</b>"
            items.append(f"<a href='track:{tid}' style='color:{col}; text-decoration:none'>"
                         f"■ {text}</a>")
        peak = getattr(self.explanation, "peak_track", None)
        note = " &nbsp;(thick = selected; click a curve or a name)" if items else ""
        others = sum(1 for t in self._order if t >= 0 and t not in self._track_label)
        if others:
            note += (f" &nbsp;+ {others} other tracks " +
                     ("(thin)" if self.show_others else "(hidden)"))
        self.legend.setText(" &nbsp; ".join(items) + note if items else "")
        self.legend.setToolTip(f"peak track #{peak}" if peak is not None else "")

    def _on_legend_link(self, link: str) -> None:
        if link.startswith("track:"):
            tid = int(link.split(":", 1)[1])
            if tid >= 0:
                self.highlight_track(tid)
                self.track_selected.emit(tid)

    def event_intervals(self, min_s: float = 0.0) -> list[tuple[float, float]]:
        """Where the event holds, in s: the span the result list shows, and every stretch where a
        track's soft score is >= 0.5 with all of its gates met (merged, sorted)."""
        exp = self.explanation
        if exp is None:
            return []
        out: list[tuple[float, float]] = []
        span = getattr(exp, "span_s", None)
        if span:
            out.append((float(span[0]), float(span[1])))
        for tr in getattr(exp, "traces", []) or []:
            if _track_key(tr.track) < 0 or not len(tr.t):
                continue
            ok = np.nan_to_num(np.asarray(tr.combined, float)) >= 0.5
            for g in (tr.gates or {}).values():
                ok &= np.asarray(g, bool)[:len(ok)]
            t = np.asarray(tr.t, float)
            k = 0
            while k < len(ok):
                if ok[k]:
                    j = k
                    while j + 1 < len(ok) and ok[j + 1]:
                        j += 1
                    if t[j] - t[k] >= min_s:
                        out.append((float(t[k]), float(t[j])))
                    k = j + 1
                else:
                    k += 1
        out.sort()
        merged: list[tuple[float, float]] = []
        for a, b in out:
            if merged and a <= merged[-1][1] + 1e-6:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        return merged

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

    # -- mouse: click to seek, hover to read
    def _row_at(self, scene_pos):
        for r in self.rows:
            if r.in_layout and r.plot.isVisible() and \
                    r.plot.getViewBox().sceneBoundingRect().contains(scene_pos):
                return r
        return None

    def _on_scene_clicked(self, ev) -> None:
        """A left click anywhere in a plot seeks the player to that time."""
        if self.explanation is None or ev.button() != Qt.MouseButton.LeftButton or ev.double():
            return
        r = self._row_at(ev.scenePos())
        if r is None:
            return
        p = r.plot.getViewBox().mapSceneToView(ev.scenePos())
        t = float(p.x())
        if not math.isfinite(t):
            return
        if r is self.steps_row():               # a click in a lane selects its step or negation
            lane = self.lane_count() - 1 - int(math.floor(float(p.y()) + 0.15))
            if 0 <= lane < self.lane_count():
                self.step_selected.emit(lane)
                return
        else:                                    # a click on a curve selects its track
            tid = self._pick_track(r, ev.scenePos())
            if tid is not None and tid >= 0:
                self.highlight_track(tid)
                self.track_selected.emit(tid)
        t = max(0.0, t)
        self.set_time(t)
        self.seek_requested.emit(t)

    def _on_scene_mouse_moved(self, scene_pos) -> None:
        r = self._row_at(scene_pos) if self.explanation is not None else None
        for row in self.rows:
            row.hover.setVisible(r is not None)
        if r is None:
            return
        t = float(r.plot.getViewBox().mapSceneToView(scene_pos).x())
        for row in self.rows:
            row.hover.setValue(t)
        self.readout.setText(self.values_at(t, self.row_names[self.rows.index(r)]))

    def values_at(self, t: float, row_name: str) -> str:
        """The readout: each plotted track's value of ``row_name`` at the sample nearest ``t``."""
        exp = self.explanation
        if exp is None:
            return ""
        bits = []
        for tr in getattr(exp, "traces", []) or []:
            tid = _track_key(tr.track)
            if tid not in self._track_label or not len(tr.t):
                continue
            tt = np.asarray(tr.t, float)
            k = int(np.clip(np.searchsorted(tt, t), 0, len(tt) - 1))
            if k > 0 and abs(tt[k - 1] - t) < abs(tt[k] - t):
                k -= 1
            if abs(tt[k] - t) > 0.5:          # this track is not seen near t
                continue
            if row_name == "steps":
                break
            if row_name == "soft score":
                v = f"{float(np.asarray(tr.combined)[k]):.2f}"
                unknown = list(getattr(tr, "unknown", None) or [])
                if unknown:
                    # no value to judge on this track: the term counts its expected value over the
                    # corpus (not 0, not left out), or is not counted when no track knows it
                    names = list(tr.soft)      # in the rule's order (term index -> name)
                    imp = {names[i]: x for i, x in (getattr(tr, "imputed", None) or {}).items()
                           if i < len(names)}
                    parts = [f"{n} → corpus mean {imp[n]:.2f}" if n in imp else f"{n} not counted"
                             for n in unknown]
                    v += f" (unknown: {', '.join(parts)})"
            elif row_name == "gates":
                met = [g for g, a in tr.gates.items() if bool(np.asarray(a)[k])]
                v = f"{len(met)}/{len(tr.gates)} met" if tr.gates else "–"
            elif row_name in tr.values:
                x = float(np.asarray(tr.values[row_name])[k])
                unit = UNITS.get(row_name, "")
                v = "–" if not math.isfinite(x) else f"{x:.2f}{(' ' + unit) if unit else ''}"
            else:
                continue
            bits.append(f"{self._track_label[tid]}: {v}")
        if row_name == "steps":
            bits = [self.lane_text(k) for k in range(self.lane_count())
                    if (span := self._lane_unit(k)[1]) and span[0] - 0.05 <= t <= span[1] + 0.05]
            return f"t = {t:6.2f} s · steps: " + ("; ".join(bits) if bits else "no step here")
        return f"t = {t:6.2f} s · {row_name}: " + ("; ".join(bits) if bits else "no track here")
