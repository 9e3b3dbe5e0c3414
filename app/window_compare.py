"""The main window's compare side: the selected results played side by side, aligned at their
events, each with its rule's plot (app/compare.py draws them)."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt

from strived import api

from .compare import CompareView
from .connections import library_job
from .workers import Worker


def compare_job(library, items: list[dict]) -> list[dict]:
    """Records and the rule's explanation of each compared video (the plots under the players)."""
    out = []
    for it in items:
        it = dict(it)
        it["records"] = library.get_video(it["video_id"])
        try:
            it["explanation"] = api.explain(library, it["video_id"], it["rule"]) \
                if it.get("rule") else None
        except Exception as exc:  # noqa: BLE001 - a clip without a plot is still compared
            it["explanation"], it["explain_error"] = None, str(exc)
        out.append(it)
    return out


class CompareControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

    def _build_compare(self) -> None:
        """The Compare tab: synced players."""
        self.compare = CompareView(self)

    def compare_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) < 2:
            rows = list(range(min(2, len(self.model.hits))))
        items = []
        for r in rows:
            h = self.model.hit(r)
            if h is not None and h.path and os.path.exists(h.path):
                items.append({"path": h.path, "span_s": h.span_s, "video_id": h.video_id,
                              "title": f"#{h.rank} {os.path.basename(h.path)}",
                              "rule": self.response.rule_for(h.video_id) if self.response else None,
                              "peak_track": h.peak_track})
        if len(items) < 2:
            self.presenter.notice("Compare needs two results with video files.")
            return
        self.player.pause()
        self.compare.show_loading(len(items))
        self.tabs.setCurrentWidget(self.compare)
        w = Worker(library_job, self.conns, compare_job, items, pass_progress=False,
                   pass_cancel=False, name="compare")
        w.signals.finished.connect(lambda res, w=w: self._on_compare_loaded(w, res))
        w.signals.errored.connect(lambda exc, tb, w=w: self.presenter.present(
            "Cannot compare", exc, tb) if w is self._compare_worker else None)
        self._compare_worker = self.jobs.submit(w)

    def _on_compare_loaded(self, worker, items) -> None:
        if worker is not self._compare_worker:
            return
        self.compare.set_items(items)
        self.compare.setFocus(Qt.FocusReason.OtherFocusReason)
        self.compare_ready.emit()
