"""Indexing progress: an overall bar with ETA, one row per video (state, progress, error), cancel."""

from __future__ import annotations

import os
import time

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QProgressBar, QPushButton, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

OVERALL_STAGES = ("videos", "index", "indexing", "files")


def format_eta(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "ETA –"
    s = int(round(seconds))
    return f"ETA {s // 60}:{s % 60:02d}" if s >= 60 else f"ETA {s} s"


class IndexPanel(QWidget):
    """Shows a running index job's ProgressEvents; ``cancel_requested`` when the user cancels."""

    cancel_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.title = QLabel("No indexing running.", self)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(True)
        self.eta = QLabel("ETA –", self)
        self.eta.setObjectName("mono")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Video", "State", "Progress", "Message"])
        self.tree.setRootIsDecorated(False)
        self.tree.setColumnWidth(0, 260)
        self.tree.setColumnWidth(1, 80)
        self.tree.setColumnWidth(2, 90)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.eta)
        top.addWidget(self.cancel_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.addLayout(top)
        lay.addWidget(self.bar)
        lay.addWidget(self.tree, 1)
        self._items: dict[str, QTreeWidgetItem] = {}
        self._t0 = 0.0
        self._current: str | None = None
        self.running = False

    def start(self, folder: str, resumed: bool = False) -> None:
        self.tree.clear()
        self._items.clear()
        self._t0 = time.monotonic()
        self._current = None
        self.running = True
        self.bar.setValue(0)
        self.bar.setFormat("%p%")
        self.title.setText(f"{'Resuming' if resumed else 'Indexing'} {folder}")
        self.eta.setText("ETA –")
        self.cancel_button.setEnabled(True)
        self.cancel_button.setText("Cancel")

    def _item(self, key: str) -> QTreeWidgetItem:
        it = self._items.get(key)
        if it is None:
            it = QTreeWidgetItem([os.path.basename(key) or key, "queued", "", ""])
            it.setToolTip(0, key)
            self.tree.addTopLevelItem(it)
            self._items[key] = it
        return it

    def on_progress(self, ev) -> None:
        """One ``strived.jobs.ProgressEvent`` of ``index_folder`` (+ ``build_text_index``).

        ``videos`` events (done/total videos, item = the finished file, message indexed/failed) set
        the rows; ``frames`` events carry ``videos_done``/``videos_total`` (the engine's names), so
        the overall bar and the ETA move while a video is being perceived."""
        stage = getattr(ev, "stage", "")
        item = getattr(ev, "item", None)
        extra = getattr(ev, "extra", {}) or {}
        frac = getattr(ev, "fraction", 0.0)
        if stage in OVERALL_STAGES:
            self._set_overall(ev.done, ev.total, frac)
            if item:
                status = extra.get("status") or {"indexed": "done", "failed": "failed"}.get(
                    ev.message or "")
                it = self._item(item)
                if status:
                    self._set_state(it, status, extra.get("error") or
                                    ("" if status == "done" else ev.message or ""))
                    if self._current == item:
                        self._current = None
                elif self._current != item:
                    self._set_state(it, "indexing", ev.message or "")
                    self._current = item
        elif item and stage == "frames":
            it = self._item(item)
            if self._current != item:
                self._set_state(it, "indexing", "")
                self._current = item
            it.setText(2, f"{100 * frac:3.0f}%")
            n = int(extra.get("videos_total", extra.get("total_videos", 0)) or 0)
            if n > 0:
                k = int(extra.get("videos_done", extra.get("done_videos", 0)) or 0)
                # several videos in flight (index workers): their fractions together
                prog = float(extra.get("videos_progress", k + frac))
                self._set_overall(k, n, min(1.0, prog / n))
        elif stage in ("texts", "dense", "features"):
            what = {"texts": "scene descriptions", "dense": "description embeddings",
                    "features": "rule features"}[stage]
            self.title.setText(f"Updating the search index ({what}): {ev.done}/{ev.total}")

    def _set_overall(self, done: int, total: int, frac: float) -> None:
        self.bar.setValue(int(1000 * frac))
        self.bar.setFormat(f"{done} / {total} videos  (%p%)")
        el = time.monotonic() - self._t0
        self.eta.setText(format_eta(el / frac * (1 - frac) if frac > 0.001 else None))

    def _set_state(self, it: QTreeWidgetItem, state: str, message: str = "") -> None:
        it.setText(1, state)
        if message:
            it.setText(3, message)
            it.setToolTip(3, message)
        color = {"failed": "#ff6b6b", "done": "#7bd88f", "skipped": "#8a9099"}.get(state)
        if color:
            from PySide6.QtGui import QColor

            for c in range(4):
                it.setForeground(c, QColor(color))
        if state in ("done", "skipped"):
            it.setText(2, "100%")

    def finish(self, report=None, cancelled: bool = False, error: str | None = None) -> None:
        self.running = False
        self.cancel_button.setEnabled(False)
        self.cancel_button.setText("Cancel")
        if report is not None and getattr(report, "cancelled", False):
            cancelled, report = True, None
        if report is not None:
            for path, err in getattr(report, "failed", []) or []:
                self._set_state(self._item(str(path)), "failed", str(err))
            for path, err in getattr(report, "skipped_failed", []) or []:
                self._set_state(self._item(str(path)), "failed",
                                f"failed before and unchanged since: {err}")
            n_done = len(getattr(report, "indexed", []) or [])
            n_skip = int(getattr(report, "unchanged", 0) or 0)
            n_fail = len(getattr(report, "failed", []) or []) + len(
                getattr(report, "skipped_failed", []) or [])
            self.bar.setValue(1000)
            self.title.setText(f"Indexed {n_done} video(s), {n_skip} already up to date, "
                               f"{n_fail} failed" + (" — see the list below" if n_fail else ""))
            self.eta.setText(f"{time.monotonic() - self._t0:.1f} s")
        elif cancelled:
            self.title.setText("Indexing cancelled: finished videos are kept; it resumes where "
                               "it stopped next time.")
            self.eta.setText("")
        elif error:
            self.title.setText(f"Indexing stopped: {error}")
        for it in self._items.values():       # a row whose last event never came
            if it.text(1) == "indexing":
                self._set_state(it, "cancelled" if cancelled else ("failed" if error else "done"))
        self._current = None

    @property
    def failed_items(self) -> list[str]:
        return [k for k, it in self._items.items() if it.text(1) == "failed"]

    def _on_cancel_clicked(self) -> None:
        self.cancel_button.setEnabled(False)
        self.cancel_button.setText("Cancelling…")
        self.cancel_requested.emit()
