"""The timeline's tracks and lanes: a sequence rule's step lanes (bands, selection), the track
list, the "other tracks" switch and the legend. Mixed into ``TimelineWidget`` (app/timeline.py):
its attributes are the widget's."""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidgetItem

from .player import track_color
from .timeline_rows import TimelineRow
from .timeline_text import MAX_TRACKS, _span_text, _track_key, absent_text, step_text


class TimelineTracks:
    """Steps lanes, the track list and the legend of ``TimelineWidget``."""

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

    def _draw_bands(self, row: TimelineRow, on: bool) -> None:
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

    def steps_row(self) -> "TimelineRow | None":
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
