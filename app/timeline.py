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

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QListWidget, QToolButton,
                               QVBoxLayout, QWidget)

from .player import TRACK_COLORS, track_color
from .span_select import SpanSelector
from .timeline_rows import (
    MIN_ROW_PX,
    UNITS,
    TimelineRow,
    row_series,
    set_lane_labels,
    set_row_axes,
)
from .timeline_tracks import TimelineTracks
from .timeline_text import (
    MAX_TRACKS,
    _best,
    _trace_label,
    _track_key,
    absent_text,
    sequence_parts,
    step_text,
    title_text,
)

PICK_PX = 6.0           # a click within this many pixels of a curve picks its track


class TimelineWidget(TimelineTracks, QWidget):
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
        self._build_layout()
        self._init_state()

    def _build_layout(self) -> None:
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

    def _init_state(self) -> None:
        self.show_others = True
        self._order: list[int] = []             # every track, best first (the peak first)
        self._traces: dict[int, object] = {}
        self._scores: dict[int, float] = {}
        self._all_labels: dict[int, str] = {}
        self._focus: list[int] = []             # tracks drawn as their own curves
        self._set_track_controls()
        self.rows: list[TimelineRow] = []
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
    def _row(self, i: int) -> TimelineRow:
        while len(self.rows) <= i:
            plot = pg.PlotItem(viewBox=self.selector.view_box())
            self.selector.attach(plot)
            self.view.ci.addItem(plot, row=len(self.rows), col=0)
            plot.showGrid(x=True, y=True, alpha=0.15)
            plot.setMenuEnabled(False)
            plot.getAxis("left").setWidth(58)
            if self.rows:
                plot.setXLink(self.rows[0].plot)
            self.rows.append(TimelineRow(self, plot))
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
        traces = self._take_traces(explanation)
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
            lane_names = gate_names if name == "gates" else lanes if name == "steps" else []
            self._fill_row(i, name, traces, gate_names, lane_names, span, i == len(names) - 1)
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
        self.title.setText(title_text(explanation, traces, self._order, title,
                                      getattr(self, "unknown", None), self.cuts, self.steps,
                                      self.absent, lanes))
        self.set_time(self.t_s)

    def _take_traces(self, explanation) -> list:
        """The explanation's traces, the peak track first, then the most convincing ones; keeps
        their order, scores and labels."""
        traces = list(getattr(explanation, "traces", []) or [])
        peak = getattr(explanation, "peak_track", None)
        scores = {_track_key(tr.track): _best(tr.combined) for tr in traces}
        traces.sort(key=lambda tr: (_track_key(tr.track) != _track_key(peak),
                                    -scores[_track_key(tr.track)], _track_key(tr.track)))
        self._order = [_track_key(tr.track) for tr in traces]
        self._traces = {_track_key(tr.track): tr for tr in traces}
        self._scores = scores
        self._all_labels = {_track_key(tr.track): _trace_label(tr) for tr in traces}
        if self.highlighted not in self._traces:
            self.highlighted = None
        return traces

    def _fill_row(self, i: int, name: str, traces, gate_names: list[str], lane_names: list[str],
                  span, last: bool) -> None:
        """Row ``i`` shows ``name``: its series, label, height, lanes, axes, span and cuts."""
        row = self._row(i)
        row.data = row_series(name, traces, gate_names, _track_key)
        unit = UNITS.get(name, "")
        # small type: five stacked rows leave little height for a rotated label
        row.name_label.setText(f"{name} ({unit})" if unit else name)
        row.name_label.setVisible(name != "steps")      # each lane is labelled already
        row.plot.getAxis("left").setLabel(None)
        # the gates and steps rows get a lane's worth of height per lane, the others one share
        self.view.ci.layout.setRowStretchFactor(i, max(1, len(lane_names)))
        # ... and never less than a label's height per lane (steps: label above its band)
        per_lane = 24 if name == "steps" else 26
        # a signal row is never squeezed below a readable curve (a graphics item's minimum
        # does not reach the window's layout: the view's own minimum is set below)
        row.plot.setMinimumHeight(per_lane * len(lane_names) + 24 if lane_names else MIN_ROW_PX)
        self._draw_bands(row, name == "steps")
        set_lane_labels(row, lane_names)
        set_row_axes(row, name, lane_names, last)
        if span:
            row.region.setRegion(span)
            row.region.show()
        else:
            row.region.hide()
        row.set_cuts(self.cuts)


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

    def _pick_arrays(self, r: TimelineRow, focus: set[int]):
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

    def _pick_track(self, r: TimelineRow, scene_pos) -> int | None:
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
