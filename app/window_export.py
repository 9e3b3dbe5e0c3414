"""The main window's export side: the selected or the marked results into the export dialog
(app/export_dialog.py), and what was exported remembered in the library (the "Exp." column)."""

from __future__ import annotations

from strived.api import StrivedError, clip_rows, library_versions

from . import library_ops as ops


class ExportControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

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
        from .export_dialog import ExportDialog  # lazy: loads PySide6

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
        try:
            self.model.set_exports(ops.record_exports(self.library, entries))
        except StrivedError as exc:          # a read-only or busy library: the files are written
            self.statusBar().showMessage(f"Exported {len(entries)} result(s) to {folder}; not "
                                         f"marked as exported in the library ({exc}).", 12000)
            return
        self.statusBar().showMessage(f"Exported {len(entries)} result(s) to {folder}.", 8000)
