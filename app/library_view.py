"""The Library tab: every video of the open library, browsable before any search — thumbnail,
file, duration, what perception found (tracks per class), whether the ego speed is known (and
from which source, or why not), day or night. Double-click or Enter opens a video in Inspect."""

from __future__ import annotations

import os

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QLineEdit, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

COLUMNS = ("", "File", "Length (s)", "Found", "Ego speed", "Light")
THUMB = QSize(96, 54)


def speed_text(row: dict) -> tuple[str, str]:
    """(cell, tooltip) of a video's ego speed: known from a source, partly, or unknown and why."""
    st, src, why = row.get("speed_status"), row.get("speed_source"), row.get("speed_reason")
    cov = row.get("speed_coverage")
    if st is None:
        return "–", "Not recorded for this video (indexed before availability was stored)"
    if st == "estimated":
        return f"known ({src})", f"Ego speed estimated on {100 * float(cov or 1):.0f}% of the frames, source: {src}"
    if st == "partial":
        return f"partly ({100 * float(cov or 0):.0f}%)", f"Ego speed on {100 * float(cov or 0):.0f}% of the " \
            f"frames ({src})" + (f": {why}" if why else "")
    return "unknown", "Ego speed not estimated" + (f": {why}" if why else "") + \
        " — rules that read speed cannot judge this video (shown as n/a, not as a non-match)"


def found_text(classes: dict[str, int]) -> str:
    if not classes:
        return "nothing tracked"
    return " · ".join(f"{n} {c}" for c, n in list(classes.items())[:4]) + (" …" if len(classes) > 4 else "")


class LibraryView(QWidget):
    """A table of the library's videos with a filter box; ``open_requested(video_id)`` on
    double-click or Enter."""

    open_requested = Signal(str)

    def __init__(self, parent=None, thumbnail_loader=None):
        super().__init__(parent)
        self._thumb = thumbnail_loader
        self.rows: list[dict] = []
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 4)
        self.title = QLabel("No library open.", self, objectName="dim", wordWrap=True)
        self.filter = QLineEdit(self, placeholderText="Filter by file name or what was found (e.g. truck, night)")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("libraryTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(THUMB.height() + 4)
        self.table.setIconSize(THUMB)
        self.table.setSortingEnabled(True)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)      # every column stays in view
        hh.setSectionResizeMode(3, QHeaderView.ResizeMode.Interactive)  # long lists elide (tooltip: all)
        hh.resizeSection(3, 200)
        self.table.cellDoubleClicked.connect(lambda r, _c: self._open_row(r))
        v.addWidget(self.title)
        v.addWidget(self.filter)
        v.addWidget(self.table, 1)

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.table.currentRow() >= 0:
            self._open_row(self.table.currentRow())
            return
        super().keyPressEvent(event)

    def set_thumbnail_loader(self, loader) -> None:
        self._thumb = loader

    def set_rows(self, rows: list[dict], total: int | None = None) -> None:
        self.rows = list(rows)
        t = self.table
        t.setSortingEnabled(False)
        t.setRowCount(len(rows))
        for r, row in enumerate(rows):
            icon = QTableWidgetItem()
            if row.get("thumbnail") and self._thumb is not None:
                data = self._thumb(row["id"])
                if data:
                    pm = QPixmap()
                    if pm.loadFromData(data):
                        icon.setData(Qt.ItemDataRole.DecorationRole,
                                     pm.scaled(THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                                               Qt.TransformationMode.SmoothTransformation))
            icon.setData(Qt.ItemDataRole.UserRole, row["id"])
            t.setItem(r, 0, icon)
            name = QTableWidgetItem(os.path.basename(row["path"]) if row.get("path") else row["id"])
            name.setToolTip(row.get("path") or f"{row['id']} (records only, no video file)")
            name.setData(Qt.ItemDataRole.UserRole, row["id"])
            t.setItem(r, 1, name)
            dur = QTableWidgetItem()
            dur.setData(Qt.ItemDataRole.DisplayRole, round(float(row.get("duration_s") or 0.0), 1))
            dur.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            t.setItem(r, 2, dur)
            found = QTableWidgetItem(found_text(row.get("classes") or {}))
            found.setToolTip(f"{row.get('n_tracks') or 0} tracks: " +
                             ", ".join(f"{n} {c}" for c, n in (row.get("classes") or {}).items()))
            t.setItem(r, 3, found)
            cell, tip = speed_text(row)
            sp = QTableWidgetItem(cell)
            sp.setToolTip(tip)
            t.setItem(r, 4, sp)
            t.setItem(r, 5, QTableWidgetItem(row.get("daynight") or "–"))
        t.setSortingEnabled(True)
        n = len(rows)
        more = f" (the first {n} of {total})" if total is not None and total > n else ""
        self.title.setText(f"{n} video{'s' if n != 1 else ''} in this library{more}. Double-click one "
                           "to play it in Inspect; search to rank them.")
        self._apply_filter(self.filter.text())

    def _apply_filter(self, text: str) -> None:
        words = text.lower().split()
        for r in range(self.table.rowCount()):
            hay = " ".join((self.table.item(r, c).text() if self.table.item(r, c) else "")
                           for c in range(1, len(COLUMNS))).lower()
            self.table.setRowHidden(r, bool(words) and not all(w in hay for w in words))

    def video_at(self, row: int) -> str | None:
        it = self.table.item(row, 1)
        return it.data(Qt.ItemDataRole.UserRole) if it is not None else None

    def _open_row(self, row: int) -> None:
        vid = self.video_at(row)
        if vid:
            self.open_requested.emit(vid)
