"""The main window's review side: relevance marks with undo/redo, revealing a result's file, the
results' context menu (compare: app/window_compare.py; export: app/window_export.py)."""

from __future__ import annotations

import os

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QApplication,
    QMenu,
    QPlainTextEdit,
)

from . import library_ops as ops


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

    # ------------------------------------------------------------------ marks
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
