"""Learn from marks (issue 36), under the marks: refit the searched event's numbers for this
library from the relevance marks, in a worker with progress and Cancel; the result dialog
(app/learn_dialog.py) keeps or discards them; "Undo learned numbers" goes back a version.
Keeping and undoing search again, so the list re-ranks with the numbers now in use."""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMessageBox, QProgressBar, QPushButton, QWidget

from strived import api
from strived.api import EVENT_KEYS, StrivedError

from .connections import library_job
from .learn_dialog import LearnDialog
from .workers import JobQueue, Worker


def learn_job(library, event: str, *, progress=None, cancel=None):
    """``strived.learning.learn`` on the learning worker's own connection."""
    return api.learn_from_marks(library, event, progress=progress, cancel=cancel)


def _library_event(match: dict | None) -> str | None:
    """The library event a search resolved to (None: no event, or a rule of the user's own)."""
    ev = (match or {}).get("event")
    return ev if ev in EVENT_KEYS else None


def counts_tip(event: str, c: dict) -> str:
    """The Learn button's tooltip: the event's marked videos against the minimum needed."""
    tip = (f"Refit the numbers of {event} for this library from your marks of searches for it: "
           f"{c['relevant']} relevant and {c['not_relevant']} not relevant marked video(s) "
           f"({c['profile']} profile); at least {c['min_relevant']} relevant and "
           f"{c['min_not_relevant']} not relevant are needed.")
    if c["both"]:
        tip += f" {c['both']} video(s) are marked both ways: clear one mark of each first."
    return "\n".join([tip] + [f"Not used: {n}" for n in c["unused"]])


class LearnPanel(QWidget):
    """The "Learn from marks" / "Undo learned numbers" buttons of the main window ``window``
    (its library, response, model, search and presenter), also in its Search menu."""

    finished = Signal(object)       # the LearnResult shown in the dialog
    refused = Signal(str)           # too few or contradictory marks: nothing changed
    stopped = Signal()              # the refit was cancelled
    changed = Signal(str)           # numbers kept or undone (what the status bar says)

    def __init__(self, window):
        super().__init__(window)
        self.w = window
        self.setObjectName("learnPanel")
        self.learn_button = QPushButton("Learn from marks", self, objectName="learnButton")
        self.undo_button = QPushButton("Undo learned numbers", self, objectName="learnUndoButton")
        self.progress = QProgressBar(self, objectName="learnProgress")
        self.progress.setMaximumWidth(220)
        self.progress.hide()
        self.cancel_button = QPushButton("Cancel", self, objectName="learnCancel",
                                         toolTip="Stop learning: nothing is changed")
        self.cancel_button.hide()
        self.status = QLabel("", self, objectName="dim", wordWrap=True)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        for wdg in (self.learn_button, self.undo_button, self.progress, self.cancel_button):
            lay.addWidget(wdg)
        lay.addWidget(self.status, 1)
        self.learn_button.clicked.connect(self.start)
        self.undo_button.clicked.connect(self.undo)
        self.cancel_button.clicked.connect(self.cancel)
        self.act_learn = QAction("Learn from marks…", self)
        self.act_learn.triggered.connect(self.start)
        self.act_undo = QAction("Undo learned numbers", self)
        self.act_undo.triggered.connect(self.undo)
        menu = window.menus["Search"]
        menu.addSeparator()
        menu.addAction(self.act_learn)
        menu.addAction(self.act_undo)
        self.jobs = JobQueue(1, self)       # its own thread and connection: searches are not held up
        self.worker: Worker | None = None
        self.dialog: LearnDialog | None = None
        self.message_box: QMessageBox | None = None
        self.event: str | None = None
        self.counts: dict | None = None
        self.active: dict[str, int] = {}
        self._timer = QTimer(self, singleShot=True, interval=50)    # a batch of marks: one count
        self._timer.timeout.connect(self.refresh)
        m = window.model
        m.modelReset.connect(self._timer.start)
        m.dataChanged.connect(lambda tl, br, *_: self._timer.start()
                              if tl.column() <= m.C_MARK <= br.column() else None)
        self.refresh()

    @property
    def running(self) -> bool:
        return self.worker is not None and not self.worker.is_done

    # ------------------------------------------------------------------ state
    def refresh(self) -> None:
        """Enable the buttons for the event the shown search resolved to, with its mark counts."""
        w = self.w
        if self.running and (w.library is None or self.worker.library_path != w.library_path):
            self.cancel()                   # the library it learns from was closed
        if self.dialog is not None and self.dialog.isVisible() and \
                self.dialog.library_path != w.library_path:
            self.dialog.reject()            # ... or the library its result is for
        self.event = _library_event(w.response.match) if w.library is not None and \
            w.response is not None else None
        self.counts, self.active, why_no_undo = None, {}, ""
        if self.event is None:
            tip = ("Search for an event of the library first (e.g. “the car in front of us brakes "
                   "hard”), mark its results relevant (R) or not (N), then learn its numbers from "
                   "your marks.")
            self._set_enabled(False, False, tip, "Nothing learned to undo for this search.")
            return
        try:
            self.counts = api.mark_counts(w.library, self.event)
            self.active = api.active_versions(w.library, self.event)
        except StrivedError as exc:          # a damaged learned-numbers file: named, not undone
            why_no_undo = str(exc)
        tip = counts_tip(self.event, self.counts) if self.counts else why_no_undo
        if self.active:
            undo_tip = "; ".join(f"{self.event} ({p} profile) uses learned version {v}: go back to "
                                 "the numbers used before it (every version is kept)"
                                 for p, v in self.active.items())
        else:
            undo_tip = why_no_undo or f"{self.event} uses the shipped numbers in this library."
        self._set_enabled(self.counts is not None, bool(self.active), tip, undo_tip)

    def _set_enabled(self, learn: bool, undo: bool, tip: str, undo_tip: str) -> None:
        busy = self.running
        for b, a, on, t in ((self.learn_button, self.act_learn, learn, tip),
                            (self.undo_button, self.act_undo, undo, undo_tip)):
            b.setEnabled(on and not busy)
            a.setEnabled(on and not busy)
            b.setToolTip(t)
            a.setToolTip(t)
            a.setStatusTip(t)

    # ------------------------------------------------------------------ learning
    def start(self) -> None:
        """Refit the event's numbers from its marks in a worker (progress and Cancel shown)."""
        w = self.w
        if self.running or self.event is None or w.conns is None:
            return
        job = Worker(library_job, w.conns, learn_job, self.event, name="learn")
        job.library_path, job.event = w.library_path, self.event
        job.signals.progressed.connect(lambda ev, j=job: self._on_progress(j, ev))
        # the outcome is shown when the job is done (its last signal): the buttons are free again
        job.signals.finished.connect(lambda res, j=job: setattr(j, "outcome", ("finished", res)))
        job.signals.errored.connect(lambda exc, tb, j=job: setattr(j, "outcome", ("errored", (exc, tb))))
        job.signals.cancelled.connect(lambda j=job: setattr(j, "outcome", ("cancelled", None)))
        job.signals.done.connect(lambda j=job: self._on_done(j))
        self.worker = self.jobs.submit(job)
        self.progress.setRange(0, 0)        # busy until the first step is reported
        self.progress.setFormat(f"{self.event}: starting")
        self.progress.show()
        self.cancel_button.show()
        self.cancel_button.setEnabled(True)
        self.status.setText(f"Learning {self.event} from your marks…")
        self._set_enabled(False, False, self.learn_button.toolTip(), self.undo_button.toolTip())

    def cancel(self) -> None:
        if self.running:
            self.worker.cancel()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling…")

    def shutdown(self) -> None:
        """The window closes: stop learning (nothing is written by a refit)."""
        self.jobs.cancel_all()

    def _current(self, job) -> bool:
        return job is self.worker and job.library_path == self.w.library_path

    def _on_progress(self, job, ev) -> None:
        if not self._current(job) or not str(getattr(ev, "stage", "")).startswith("learn:"):
            return
        self.progress.setRange(0, max(1, ev.total))
        self.progress.setValue(ev.done)
        self.progress.setFormat(f"{ev.message or ''} (%v/%m)".strip())

    def _on_done(self, job) -> None:
        if job is not self.worker:
            return
        self.progress.hide()
        self.cancel_button.hide()
        self.refresh()
        kind, payload = getattr(job, "outcome", ("cancelled", None))
        if kind == "cancelled":
            self.status.setText("Learning cancelled: nothing changed.")
            self.stopped.emit()
        elif self._current(job) and kind == "finished":
            self._on_finished(payload)
        elif self._current(job):
            self._on_errored(*payload)

    def _on_finished(self, res) -> None:
        self.status.setText(("Better numbers found" if res.accepted else "No better numbers")
                            + f" for {res.event} ({res.elapsed_s:.1f} s).")
        d = LearnDialog(res, self.w)
        d.library_path = self.w.library_path
        d.accepted.connect(lambda r=res: self.keep(r))
        d.rejected.connect(lambda: self.status.setText("Discarded: nothing changed."))
        self.dialog = d
        d.open()
        self.finished.emit(res)

    def _on_errored(self, exc, tb) -> None:
        if isinstance(exc, api.LearnRefused):
            self.status.setText("Nothing learned: see the message.")
            box = QMessageBox(QMessageBox.Icon.Information, "Nothing learned", str(exc)[:1].upper()
                              + str(exc)[1:] + ".", QMessageBox.StandardButton.Ok, self.w)
            box.setObjectName("learnRefusedBox")
            self.message_box = box
            box.open()
            self.refused.emit(str(exc))
            return
        self.status.setText("Learning failed: nothing changed.")
        self.w.presenter.present("Learning from marks failed", exc, tb)

    # ------------------------------------------------------------------ keep, undo
    def keep(self, res) -> None:
        """Keep the refitted numbers (as `strived learn --yes`) and search again with them."""
        w = self.w
        if w.library is None or self.dialog is None or self.dialog.library_path != w.library_path:
            return
        try:
            version, path = api.keep_learned(w.library, res)
        except StrivedError as exc:
            w.presenter.present("Cannot keep the learned numbers", exc)
            return
        msg = (f"{res.event}: learned version {version} in use in this library (kept in "
               f"{path.name}; “Undo learned numbers” goes back).")
        self._after_change(msg)

    def undo(self) -> None:
        """Go back to the numbers used before the learned version in use, and search again."""
        w = self.w
        if w.library is None or self.event is None or self.running:
            return
        prof = (self.counts or {}).get("profile")
        try:
            prof, was, now, path = api.undo_learned(w.library, self.event,
                                                 prof if prof in self.active else None)
        except StrivedError as exc:
            w.presenter.present("Cannot undo the learned numbers", exc)
            return
        now_txt = f"learned version {now}" if now else "the shipped numbers"
        self._after_change(f"{self.event} ({prof} profile): learned version {was} undone; searches "
                           f"use {now_txt} (every version stays in {path.name}).")

    def _after_change(self, msg: str) -> None:
        w = self.w
        if w.settings.rule_library_path:
            msg += (" Searches use the rule library chosen in Settings, which learned numbers do "
                    "not change, until the shipped rules are chosen again.")
        self.status.setText(msg)
        w.statusBar().showMessage(msg, 10000)
        self.refresh()
        self.changed.emit(msg)
        if w.response is not None:          # the same query, searched with the numbers now in use
            w.query.setCurrentText(w.response.query)
            w.search()
