"""The main window's review side: relevance marks with undo/redo, compare, export, the results'
context menu."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QApplication,
    QMenu,
    QPlainTextEdit,
)

from . import library_ops as ops
from .connections import library_job
from .workers import Worker


def compare_job(library, items: list[dict]) -> list[dict]:
    """Records and the rule's explanation of each compared video (the plots under the players)."""
    from strived import engine

    out = []
    for it in items:
        it = dict(it)
        it["records"] = library.get_video(it["video_id"])
        try:
            it["explanation"] = engine.explain(library, it["video_id"], it["rule"]) \
                if it.get("rule") else None
        except Exception as exc:  # noqa: BLE001 - a clip without a plot is still compared
            it["explanation"], it["explain_error"] = None, str(exc)
        out.append(it)
    return out


def _text_editor(fw):
    """The text editor behind a focused widget (a line edit, a spin box's line edit, a plain-text
    editor), whose own undo Ctrl+Z should reach; None otherwise (then Undo undoes the marks)."""
    from PySide6.QtWidgets import QAbstractSpinBox, QLineEdit

    if isinstance(fw, (QPlainTextEdit, QLineEdit)):
        return fw
    if isinstance(fw, QAbstractSpinBox):
        return fw.findChild(QLineEdit)
    return None


class ReviewControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

    # ------------------------------------------------------------------ marks, compare, export
    def selected_rows(self) -> list[int]:
        return sorted({ix.row() for ix in self.table.selectionModel().selectedRows()})

    def _target_rows(self) -> list[int]:
        rows = self.selected_rows()
        if not rows and self.table.currentIndex().isValid():
            rows = [self.table.currentIndex().row()]
        return rows

    def mark_current(self, relevant: bool | None) -> None:
        """Mark the selected results relevant (True), not relevant (False) or clear (None)."""
        if self.library is None or self.response is None:
            return
        batch = []
        for row in self._target_rows():
            h = self.model.hit(row)
            if h is None:
                continue
            before = self.model.marks.get(h.video_id)
            if before == relevant:
                continue
            self._set_mark(h.video_id, relevant)
            batch.append((h.video_id, before, relevant))
        if batch:
            self._mark_undo.append(batch)
            self._mark_redo.clear()
        self.refresh_stats()

    def _set_mark(self, video_id: str, relevant: bool | None) -> None:
        ops.set_mark(self.library, self.response.query, video_id, relevant,
                     (self.response.match or {}).get("event"))
        row = self.model.row_of(video_id)
        if row >= 0:
            self.model.set_mark(row, relevant)

    def clear_all_marks(self) -> None:
        if self.library is None or self.response is None:
            return
        batch = [(vid, was, None) for vid, was in self.model.marks.items()]
        for vid, _was, _ in batch:
            self._set_mark(vid, None)
        if batch:
            self._mark_undo.append(batch)
            self._mark_redo.clear()
            self.statusBar().showMessage(f"Cleared {len(batch)} mark(s) of this search "
                                         "(Edit → Undo brings them back).", 6000)
        self.refresh_stats()

    def undo(self) -> None:
        """Edit → Undo: the focused text field's undo, else the last marks, else the rule edit."""
        self._undo_redo(redo=False)

    def redo(self) -> None:
        self._undo_redo(redo=True)

    def _undo_redo(self, redo: bool) -> None:
        ed = _text_editor(QApplication.focusWidget())
        src, dst = (self._mark_redo, self._mark_undo) if redo else (self._mark_undo, self._mark_redo)
        doc = self.rule_editor.text.document()
        if ed is not None:        # a focused text field (the query, a form box, the JSON): its own
            ed.redo() if redo else ed.undo()
        elif src:
            batch = src.pop()
            for vid, before, after in batch:
                self._set_mark(vid, after if redo else before)
            dst.append(batch)
            self.refresh_stats()
        elif doc.isRedoAvailable() if redo else doc.isUndoAvailable():
            self.tabs.setCurrentWidget(self.rule_editor)
            self.rule_editor.text.redo() if redo else self.rule_editor.text.undo()

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

    def export_results(self) -> None:
        """Export the selected results (all of them when one or none is selected)."""
        if self.response is None:
            return
        rows_sel = self.selected_rows()
        ids = [self.model.hit(r).video_id for r in rows_sel] if len(rows_sel) > 1 else None
        self._open_export(ids, "Export results")

    def export_marked_results(self) -> None:
        """File → Export marked results: every result of this search marked relevant (R)."""
        if self.response is None:
            return
        ids = [h.video_id for h in self.model.hits if self.model.marks.get(h.video_id) is True]
        if not ids:
            self.statusBar().showMessage("No result of this search is marked relevant (R): "
                                         "nothing to export.", 8000)
            return
        self._open_export(ids, f"Export the {len(ids)} marked result{'s' if len(ids) != 1 else ''}")

    def _open_export(self, ids: list[str] | None, title: str):
        from strived.export import clip_rows, library_versions

        from .export_dialog import ExportDialog

        rows = clip_rows(self.response, self.library, video_ids=ids, marks=self.model.marks)
        ctx = {"query": self.response.query, "rule": self.response.rule,
               "weights": self.response.weights, "match": self.response.match,
               "library": self.library_path, **library_versions(self.library)}
        lead = (self.settings._get("export/lead_in_s", 0.0, float),
                self.settings._get("export/lead_out_s", 0.0, float))
        d = ExportDialog(rows, ctx, self.settings._get("export/folder", ""), parent=self,
                         extents=ops.video_extents(self.library, [r["video_id"] for r in rows]),
                         title=title, lead_s=lead)
        d.exported.connect(lambda rep, d=d: self._on_exported(d, rep))
        self.export_dialog = d
        d.show()
        return d

    def _on_exported(self, dialog, report) -> None:
        """Remember what was exported (the "Exp." column) and the dialog's choices."""
        import datetime

        q = self.settings.q
        folder = dialog.folder.text().strip()
        q.setValue("export/folder", folder)
        q.setValue("export/lead_in_s", dialog.lead_in.value())
        q.setValue("export/lead_out_s", dialog.lead_out.value())
        if self.library is None:
            return
        skipped = {vid for vid, _why in report.skipped}
        done = [r for r in dialog.exported_rows if r["video_id"] not in skipped]
        clips = list(report.clips) if len(report.clips) == len(done) else [None] * len(done)
        at = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        entries = [{"video_id": r["video_id"], "at": at, "folder": folder, "clip": c,
                    "start_s": r["start_s"], "end_s": r["end_s"], "query": r.get("query")}
                   for r, c in zip(done, clips)]
        if not report.files and not report.clips:
            return
        from strived.errors import StrivedError

        try:
            self.model.set_exports(ops.record_exports(self.library, entries))
        except StrivedError as exc:          # a read-only or busy library: the files are written
            self.statusBar().showMessage(f"Exported {len(entries)} result(s) to {folder}; not "
                                         f"marked as exported in the library ({exc}).", 12000)
            return
        self.statusBar().showMessage(f"Exported {len(entries)} result(s) to {folder}.", 8000)

    def reveal_current_file(self) -> bool:
        """Show the selected result's file in the system's file manager (its folder)."""
        h = self.model.hit(self.table.currentIndex().row())
        if h is None or not h.path:
            self.statusBar().showMessage("This result has no video file.", 5000)
            return False
        folder = os.path.dirname(h.path)
        if not os.path.isdir(folder):
            self.statusBar().showMessage(f"The folder is gone: {folder}", 8000)
            return False
        QApplication.clipboard().setText(h.path)
        ok = QDesktopServices.openUrl(QUrl.fromLocalFile(folder))
        self.statusBar().showMessage(f"{h.path} (path copied)" + ("" if ok else
                                     ": no file manager answered"), 8000)
        return bool(ok)

    def _on_results_context_menu(self, pos) -> None:
        ix = self.table.indexAt(pos)
        if not ix.isValid():
            return
        if ix.row() not in self.selected_rows():
            self._select_only(ix.row())
        n = len(self.selected_rows())
        menu = QMenu(self.table)
        menu.setObjectName("resultsMenu")
        menu.addAction("Open in the player", self.open_current_result)
        self.similar.add_menu_entry(menu, ix.row())
        menu.addSeparator()
        for a in (self.act_mark_yes, self.act_mark_no, self.act_mark_clear):
            menu.addAction(a)
        menu.addSeparator()
        exp = menu.addAction(f"Export {n} result(s)…" if n > 1 else "Export…", self.export_results)
        exp.setObjectName("export")
        menu.addAction(self.act_export_marked)
        if n > 1:
            menu.addAction(self.act_compare)
        menu.addAction("Reveal the file in its folder", self.reveal_current_file)
        menu.addAction("Copy the file path", lambda: QApplication.clipboard().setText(
            (self.model.hit(ix.row()).path or "") if self.model.hit(ix.row()) else ""))
        self.results_menu = menu
        menu.popup(self.table.viewport().mapToGlobal(pos))
