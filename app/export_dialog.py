"""Export the curated list: choose folder, formats, clip cutting and a lead-in/lead-out around
each event; runs in a worker with progress and cancel; errors (read-only folder, full disk) are
shown in the dialog itself."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDoubleSpinBox, QFileDialog,
                               QFormLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar,
                               QPushButton, QVBoxLayout, QWidget)

from strived.api import export_results, fast_copy_available, pad_rows

from .errors import user_message
from .workers import Worker

__all__ = ["ExportDialog", "pad_rows"]

MAX_LEAD_S = 60.0


class ExportDialog(QDialog):
    """Runs ``strived.export.export_results`` on the rows given; emits ``exported`` when done."""

    exported = Signal(object)     # ExportReport

    def __init__(self, rows: list[dict], context: dict, folder: str = "",
                 parent: QWidget | None = None, extents: dict[str, tuple] | None = None,
                 title: str = "Export results", lead_s: tuple[float, float] = (0.0, 0.0)):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.rows, self.context = rows, context
        self.extents = dict(extents or {})
        self.exported_rows: list[dict] = []       # the rows as exported (lead-in/out applied)
        self.worker: Worker | None = None
        self.report = None
        self.folder = QLineEdit(folder, self, placeholderText="choose an export folder")
        browse = QPushButton("…", self)
        browse.setFixedWidth(28)
        browse.clicked.connect(self._on_browse_clicked)
        self.csv = QCheckBox("CSV clip list", self, checked=True)
        self.json = QCheckBox("JSON clip list (with rule, weights, versions)", self, checked=True)
        self.fiftyone = QCheckBox("FiftyOne temporal detections", self, checked=False)
        self.openlabel = QCheckBox("ASAM OpenLABEL (actions with frame intervals)", self, checked=False)
        self.clips = QComboBox(self)
        self.clips.addItem("Don't cut clips", None)
        self.clips.addItem("Cut clips: frame-accurate re-encode", "reencode")
        self.clips.addItem("Cut clips: fast keyframe copy", "copy")
        if fast_copy_available() is None:
            model = self.clips.model()
            model.item(2).setEnabled(False)
            self.clips.setItemText(2, "Cut clips: fast keyframe copy (unavailable: needs ffmpeg)")
        self.lead_in = QDoubleSpinBox(self, objectName="leadIn", minimum=0.0, maximum=MAX_LEAD_S,
                                      decimals=1, singleStep=0.5, suffix=" s")
        self.lead_out = QDoubleSpinBox(self, objectName="leadOut", minimum=0.0,
                                       maximum=MAX_LEAD_S, decimals=1, singleStep=0.5, suffix=" s")
        self.lead_in.setValue(lead_s[0])
        self.lead_out.setValue(lead_s[1])
        for b in (self.lead_in, self.lead_out):
            b.setToolTip("Seconds of context before the event starts / after it ends, for the cut "
                         "clips and the clip lists (kept inside the video)")
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.message = QLabel(f"{len(rows)} clip(s) to export.", self)
        self.message.setWordWrap(True)
        self.export_button = QPushButton("Export", self)
        self.export_button.setDefault(True)
        self.cancel_button = QPushButton("Close", self)
        self.export_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        form = QFormLayout()
        form.addRow("Folder", row)
        fmt = QVBoxLayout()
        for w in (self.csv, self.json, self.fiftyone, self.openlabel):
            fmt.addWidget(w)
        form.addRow("Formats", fmt)
        form.addRow("Clips", self.clips)
        lead = QHBoxLayout()
        lead.addWidget(QLabel("lead-in", self))
        lead.addWidget(self.lead_in)
        lead.addSpacing(12)
        lead.addWidget(QLabel("lead-out", self))
        lead.addWidget(self.lead_out)
        lead.addStretch(1)
        form.addRow("Around the event", lead)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.export_button)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.progress)
        lay.addWidget(self.message)
        lay.addLayout(buttons)
        self.resize(560, 300)

    def formats(self) -> list[str]:
        return [n for n, b in (("csv", self.csv), ("json", self.json), ("fiftyone", self.fiftyone),
                               ("openlabel", self.openlabel)) if b.isChecked()]

    def _on_browse_clicked(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Export folder", self.folder.text())
        if d:
            self.folder.setText(d)

    def start(self) -> None:
        folder = self.folder.text().strip()
        if not folder:
            self._error("Choose an export folder first.")
            return
        if not self.formats() and self.clips.currentData() is None:
            self._error("Choose at least one format or cut the clips.")
            return
        self.export_button.setEnabled(False)
        self.cancel_button.setText("Cancel")
        self.message.setText("Exporting…")
        self.progress.setValue(0)
        lead_in, lead_out = self.lead_in.value(), self.lead_out.value()
        self.exported_rows = pad_rows(self.rows, lead_in, lead_out, self.extents)
        ctx = dict(self.context, lead_in_s=lead_in, lead_out_s=lead_out)
        self.worker = Worker(export_results, self.exported_rows, folder, formats=self.formats(),
                             clips=self.clips.currentData(), context=ctx)
        s = self.worker.signals
        s.progressed.connect(self._on_progressed)
        s.finished.connect(self._on_finished)
        s.errored.connect(self._on_errored)
        s.cancelled.connect(self._on_cancelled)
        self.worker.start()

    @property
    def running(self) -> bool:
        return self.worker is not None and not self.worker.is_done

    def _on_progressed(self, ev) -> None:
        self.progress.setValue(int(1000 * ev.fraction))
        self.message.setText(f"{ev.stage}: {ev.done}/{ev.total}  {ev.item or ''}")

    def _on_finished(self, report) -> None:
        self.report = report
        self.progress.setValue(1000)
        skipped = f"; skipped {len(report.skipped)}: " + "; ".join(
            f"{v} ({why})" for v, why in report.skipped[:3]) if report.skipped else ""
        self.message.setText(f"<span style='color:#7bd88f'>✓ wrote {len(report.files)} file(s) "
                             f"and {len(report.clips)} clip(s) to {self.folder.text()}</span>{skipped}")
        self._idle()
        self.exported.emit(report)

    def _on_errored(self, exc, _tb) -> None:
        self._error(user_message(exc))
        self._idle()

    def _on_cancelled(self) -> None:
        self.message.setText("Export cancelled: no partial file was left.")
        self._idle()

    def _error(self, text: str) -> None:
        self.message.setText(f"<span style='color:#ff6b6b'>✗ {text}</span>")

    def _idle(self) -> None:
        self.export_button.setEnabled(True)
        self.cancel_button.setText("Close")

    def _on_cancel_clicked(self) -> None:
        if self.running:
            self.worker.cancel()
        else:
            self.close()
