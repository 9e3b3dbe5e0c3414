"""The main window's Inspect side: a result's explanation (timeline, gate witnesses, sequence
steps) beside the player, and the keys that drive the player."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from strived import api
from strived.api import gate_witnesses, parse_rule

from .connections import library_job
from .drive_player import follow_drive
from .frames import BoxOverlay
from .player import PlayerWidget
from .timeline import TimelineWidget
from .timeline_text import absent_text, sequence_parts, step_text
from .workers import Worker


def inspect_job(library, video_id: str, rule: dict | None):
    """Records (for box overlays), the rule's explanation (for the timeline) of one video, and
    each hard gate's witness: the track (or the ego, track -1) that met it and when."""
    rec = library.get_video(video_id)
    if not rule:
        return rec, None, []
    r = parse_rule(rule)
    exp = api.explain(library, video_id, r)
    return rec, exp, gate_witnesses(exp, r) if r.hard_gates else []


def gate_witness_text(g: dict) -> str:
    """One hard gate's witness in words: which track met it, when, and whether it is the track
    the score (and the span) come from."""
    if not g.get("met"):
        return f"{g['gate']}: not met by any track"
    tid = int(g["track"])
    who = "the ego vehicle" if tid < 0 else f"{g.get('cls') or 'track'} #{tid}"
    when = (f", {g['first_s']:.1f}–{g['last_s']:.1f} s" if g.get("first_s") is not None else "")
    frac = g.get("fraction")
    share = f" ({frac:.0%} of its samples)" if frac is not None else ""
    if g.get("held_s") is not None:           # a gate held for a duration: its longest run
        share = f" (held {g['held_s']:.1f} s unbroken)"
    if tid < 0:
        whose = ""
    elif g.get("is_peak_track"):
        whose = " · the scoring track"
    else:
        whose = " · not the scoring track"
    return f"{g['gate']}: met by {who}{when}{share}{whose}"


def _unknown_reason(hit) -> str | None:
    """Why the rule could not judge ``hit``'s video ("speed not estimated for it"), or None."""
    ps = (getattr(hit, "per_source", None) or {}).get("rule") or {}
    if ps.get("status") != "cannot evaluate":
        return None
    fields = ", ".join(ps.get("missing_fields") or []) or "some fields"
    return f"{fields} not estimated for it: unknown, not a non-match"


class InspectControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

    # ------------------------------------------------------------------ inspect
    def _build_inspect(self) -> None:
        """The Inspect tab: the player above the timeline with the gates and steps lists."""
        self.player = PlayerWidget(self)
        self.timeline = TimelineWidget(self)
        self.gates_list = QListWidget(self)
        self.gates_list.setObjectName("gateWitnesses")
        self.gates_list.setToolTip("Each hard gate of the rule: the track that met it and when. "
                                   "Click one to select that track in the timeline and the player.")
        self.gates_list.itemClicked.connect(self._on_gate_clicked)
        self.gates_list.hide()
        self.steps_list = QListWidget(self)
        self.steps_list.setObjectName("sequenceSteps")
        self.steps_list.setToolTip("A sequence rule's steps: the track (or the ego) that realised "
                                   "each one and when, then each negation. Click one to select "
                                   "its track and go to its span.")
        self.steps_list.itemClicked.connect(self._on_step_item_clicked)
        self.steps_list.hide()
        why = QWidget(self)
        wl = QVBoxLayout(why)
        wl.setContentsMargins(0, 0, 0, 0)
        wl.setSpacing(2)
        lists = QHBoxLayout()
        lists.setSpacing(4)
        lists.addWidget(self.gates_list, 1)
        lists.addWidget(self.steps_list, 1)
        wl.addLayout(lists)
        wl.addWidget(self.timeline, 1)
        self.inspect_split = QSplitter(Qt.Orientation.Vertical, self)
        self.inspect_split.setObjectName("inspectSplit")
        self.inspect_split.addWidget(self.player)
        self.inspect_split.addWidget(why)
        self.inspect_split.setSizes([430, 370])      # the timeline's rows need height to be read

    def _connect_inspect(self) -> None:
        """The player, the timeline and the window follow each other."""
        self.player.frame_shown.connect(self._on_player_frame_shown)
        self.player.failed.connect(lambda m: self.statusBar().showMessage(m, 8000))
        self.player.overlay_box.toggled.connect(self.act_boxes.setChecked)
        self.timeline.seek_requested.connect(self.player.seek_time)
        self.timeline.track_selected.connect(self.player.highlight_track)
        self.timeline.step_selected.connect(self.select_step)

    def _on_current_row_changed(self, current, _previous) -> None:
        h = self.model.hit(current.row())
        if h is None or self.library is None:
            return
        spans = [h.span_s] if h.span_s else []
        if h.path and os.path.exists(h.path):
            self.player.load(h.path, span_s=h.span_s)
            self.player.set_intervals(spans)
            follow_drive(self.player, h)       # an event across files of a drive plays across them
        elif h.path:
            self.player.clear(f"The video file is missing:\n{h.path}\n(moved or deleted; the "
                              "records are still in the library)")
        else:
            self.player.clear("Records only: this item has no video file.")
        self.timeline.clear("Explaining…")
        self.set_gate_witnesses([])
        self.set_sequence_steps([], [])
        if self._inspect_worker is not None:
            self._inspect_worker.cancel()
        rule = self.response.rule_for(h.video_id) if self.response else None
        w = Worker(library_job, self.conns, inspect_job, h.video_id, rule,
                   pass_progress=False, pass_cancel=False, name="inspect")
        w.signals.finished.connect(lambda res, w=w, h=h: self._on_inspect_finished(w, h, res))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_inspect_errored(w, exc, tb))
        self._inspect_worker = self.jobs.submit(w)

    def _on_inspect_finished(self, worker, hit, result) -> None:
        if worker is not self._inspect_worker:
            return
        rec, exp, witnesses = result
        self.player.overlay_data = BoxOverlay(rec)
        self.player.seek(self.player.frame_idx)
        if exp is not None:
            if getattr(exp, "ego", None) is not None and exp.ego not in exp.traces:
                exp.traces = list(exp.traces) + [exp.ego]
            unknown = _unknown_reason(hit)
            self.timeline.set_explanation(exp, title=os.path.basename(hit.path or hit.video_id),
                                          cuts=(rec.info.attrs or {}).get("shot_cuts_s") or (), unknown=unknown)
            if exp.peak_track is not None:
                self.timeline.highlight_track(exp.peak_track)
                self.player.highlight_track(exp.peak_track)
            intervals = self.timeline.event_intervals()
            if intervals:
                self.player.set_intervals(intervals)
            self.set_gate_witnesses(witnesses)
            steps, absent = sequence_parts(exp)
            self.set_sequence_steps(steps, absent, self._is_sequence(hit), unknown)
        else:
            self.timeline.clear("A moment like the example (More like this): no rule to explain; the "
                                "player shows its span and track." if self.model.similar else
                                "No rule for this search (dense/BM25 only): nothing to explain.")
            if hit.peak_track is not None and hit.peak_track >= 0:
                self.player.highlight_track(hit.peak_track)
        self.inspect_finished.emit(hit.video_id)

    def _on_inspect_errored(self, worker, exc, tb) -> None:
        if worker is self._inspect_worker:
            self.timeline.clear(f"Cannot explain this video: {exc}")

    def set_gate_witnesses(self, witnesses: list[dict]) -> None:
        """The hard gates' witnesses under the player (hidden when the rule has no hard gate)."""
        self.gate_witnesses = list(witnesses)
        self.gates_list.clear()
        for g in witnesses:
            it = QListWidgetItem(gate_witness_text(g))
            if g.get("met"):
                it.setData(Qt.ItemDataRole.UserRole, (int(g["track"]), g.get("first_s")))
                it.setToolTip("Click to select this track in the timeline and the player, and "
                              "go to where it first meets the gate")
            else:
                it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsSelectable)
                it.setToolTip("No track of this video meets this gate")
            self.gates_list.addItem(it)
        if witnesses:                   # as tall as its rows (up to 4; it scrolls beyond)
            rows = min(4, len(witnesses))
            self.gates_list.setFixedHeight(rows * max(16, self.gates_list.sizeHintForRow(0))
                                           + 2 * self.gates_list.frameWidth() + 2)
        self.gates_list.setVisible(bool(witnesses))

    def _is_sequence(self, hit) -> bool:
        rule = self.response.rule_for(hit.video_id) if self.response is not None else None
        return bool(isinstance(rule, dict) and rule.get("sequence"))

    def set_sequence_steps(self, steps: list[dict], absent: list[dict],
                           is_sequence: bool = False, unknown: str | None = None) -> None:
        """A sequence rule's realised steps and negations beside the gates list (hidden for a
        single-pattern rule); a click on one selects its track and goes to its span."""
        self.sequence_steps, self.sequence_absent = list(steps), list(absent)
        sl = self.steps_list
        sl.clear()
        for k, st in enumerate(steps):
            it = QListWidgetItem(step_text(st, steps[k - 1] if k else None))
            it.setData(Qt.ItemDataRole.UserRole, k)
            it.setToolTip(f"anchor {float(st['anchor_s']):.1f} s · the step's own score "
                          f"{float(st['score']):.2f}. Click: select this "
                          f"{'track' if int(st['track']) >= 0 else 'ego series'} and go to the "
                          "step's start")
            sl.addItem(it)
        for k, ab in enumerate(absent):
            it = QListWidgetItem(absent_text(ab))
            it.setData(Qt.ItemDataRole.UserRole, len(steps) + k)
            it.setToolTip("A negation: the score is multiplied by this factor (1.00: nothing "
                          "there). Click: go to its window" +
                          (" and select the offender" if ab.get("track") is not None else ""))
            sl.addItem(it)
        if is_sequence and not steps:
            it = QListWidgetItem(f"the rule cannot judge this video: {unknown}" if unknown else
                                 "no assignment of the steps holds in this video (rule score 0)")
            it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsSelectable)
            sl.addItem(it)
        n = sl.count()
        if n:
            sl.setFixedHeight(min(5, n) * max(16, sl.sizeHintForRow(0)) + 2 * sl.frameWidth() + 2)
        sl.setVisible(bool(n))

    def select_step(self, lane: int) -> None:
        """Select step ``lane`` (then the negations, in the steps list's order): its row in the
        list, its band in the timeline, its track in the timeline and the player; pause and go to
        the start of its span (a negation: its offender's time, else its window's start)."""
        n_steps = len(self.sequence_steps)
        if not 0 <= lane < n_steps + len(self.sequence_absent):
            return
        self.steps_list.setCurrentRow(lane)
        self.timeline.select_lane(lane)
        if lane < n_steps:
            st = self.sequence_steps[lane]
            tid, t = int(st["track"]), float(st["span_s"][0])
        else:
            ab = self.sequence_absent[lane - n_steps]
            tid = None if ab.get("track") is None else int(ab["track"])
            t = float(ab["time_s"] if ab.get("time_s") is not None else ab["window_s"][0])
        self.player.highlight_track(tid if tid is not None and tid >= 0 else None)
        self.player.pause()
        self.timeline.set_time(t)
        self.player.seek_time(t)
        self.statusBar().showMessage(self.steps_list.item(lane).text(), 6000)

    def _on_step_item_clicked(self, item) -> None:
        lane = item.data(Qt.ItemDataRole.UserRole)
        if lane is not None:
            self.select_step(int(lane))

    def _on_gate_clicked(self, item) -> None:
        data = item.data(Qt.ItemDataRole.UserRole)
        if not data:
            return
        tid, first_s = data
        self.timeline.highlight_track(tid)
        self.player.highlight_track(tid)
        if first_s is not None:
            self.player.pause()
            self.player.seek_time(float(first_s))

    def _on_player_frame_shown(self, _frame: int, t_s: float) -> None:
        self.timeline.set_time(t_s)

    def _on_space(self) -> None:
        (self.compare.toggle_play if self.tabs.currentWidget() is self.compare
         else self.player.toggle_play)()

    def _on_arrow(self, n: int) -> None:
        (self.compare.step if self.tabs.currentWidget() is self.compare else self.player.step)(n)

    def go_to_event_start(self) -> None:
        if self.tabs.currentWidget() is self.compare:
            self.compare.seek(0.0)
        elif self.player.span_frames:
            self.player.pause()
            self.player.seek(self.player.span_frames[0])

    def open_current_result(self) -> None:
        """Context menu / double click: show the result in the Inspect tab and focus the player."""
        self.tabs.setCurrentWidget(self.inspect_split)
        self.player.setFocus(Qt.FocusReason.OtherFocusReason)
