"""The main window's library side: open or create a library, browse it (the Library tab), index
folders (with the confirmation; the Indexing dock), and the footage maintenance (missing, moved,
removed videos)."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QMessageBox,
)

from strived import api

from . import library_ops as ops
from .connections import LibraryConnections, library_job
from .frames import BoxOverlay
from .index_panel import IndexPanel
from .library_view import LibraryView
from .welcome import default_library_for
from .workers import Worker


def index_job(folder: str, library_folder: str, *, sample_fps: float, device: str,
              detector_path: str = "", embedder_dir: str = "", progress=None, cancel=None):
    """Indexing on its own library connection (the UI keeps reading on its own)."""
    lib = api.Library.open(library_folder)
    try:
        rep = api.index_folder(folder, lib, sample_fps=sample_fps, device=device,
                               detector=api.detector_spec_for_path(detector_path), progress=progress,
                               cancel=cancel)
        if not rep.cancelled and len(lib):
            # BM25, dense, rule features: in a process of its own (loading the embedder in this
            # one held the interpreter lock long enough to freeze the window for ~300 ms)
            api.build_text_index_in_process(library_folder, embedder_dir=embedder_dir or None,
                                            progress=progress, cancel=cancel)
        return rep
    finally:
        lib.close()


def missing_job(library) -> list:
    """Videos of the library whose file is gone (``strived.maintenance.footage``)."""
    return api.missing_videos(library)


def find_moved_job(library, folder: str):
    return api.find_moved(library, folder)


def relink_job(library, old: str, new: str):
    return api.relink(library, old, new)


def remove_job(library, video_ids: list[str]) -> list[str]:
    return api.remove_videos(library, video_ids)


def relink_summary(rep, what: str) -> tuple[str, str]:
    """(one line, details) of a RelinkReport for a message box."""
    lines = [f"relinked {vid}: {old} → {new}" for vid, old, new in rep.relinked]
    lines += [f"not relinked {vid or '–'}: {old} ({why})" for vid, old, why in rep.not_relinked]
    return f"{what}: {rep.summary()}.", "\n".join(lines)


def missing_folders(missing) -> list[str]:
    """The folders the missing videos were in, the most frequent first (relink's old folder)."""
    count: dict[str, int] = {}
    for m in missing:
        d = os.path.dirname(m.path)
        count[d] = count.get(d, 0) + 1
    return sorted(count, key=lambda d: (-count[d], d))


def _overview(library) -> tuple[list[dict], int]:
    """The Library tab's rows and the library's size (runs in a worker)."""
    return library.overview(), len(library)


class LibraryControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

    def _build_library_tab(self) -> None:
        """The Library tab: every video of the library (double-click plays it in Inspect)."""
        self.library_view = LibraryView(self)
        self.library_view.open_requested.connect(self.browse_video)

    def _build_index_dock(self) -> None:
        """The indexing panel, docked at the bottom (hidden until indexing starts)."""
        self.index_panel = IndexPanel(self)
        self.index_dock = QDockWidget("Indexing", self)
        self.index_dock.setWidget(self.index_panel)
        self.index_dock.setObjectName("indexDock")
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.index_dock)
        self.index_dock.hide()
        act_dock = self.index_dock.toggleViewAction()
        act_dock.setText("Indexing panel")
        self.m_view.insertAction(self.menus["Playback"].menuAction(), act_dock)
        self.index_panel.cancel_requested.connect(self.cancel_indexing)

    # ------------------------------------------------------------------ library
    def open_library(self, folder: str, create: bool = False, ask: bool = True) -> bool:
        """Open the library in ``folder``. A folder without a library: a video folder is offered
        for indexing (its library is kept apart), an empty one for a new library."""
        if not create and ask and os.path.isdir(folder) and \
                not os.path.exists(os.path.join(folder, api.DB_NAME)):
            return self._offer_library_for(folder)
        try:
            lib = api.Library.open(folder, create=create)
        except Exception as exc:  # noqa: BLE001
            self.presenter.present("Cannot open the library", exc)
            return False
        self.close_library()
        self.library, self.library_path = lib, str(lib.folder)
        self.conns = LibraryConnections(self.library_path, first=lib)
        self.rule_editor.set_library(self.conns, self.jobs)     # the form's field statistics
        self.settings.last_library = self.library_path
        self.model.set_thumbnail_loader(lambda vid: ops.thumbnail(self.library, vid))
        self.model.set_exports(ops.exports(lib))
        self._completions.setStringList(list(dict.fromkeys(self.settings.history()
                                                           + ops.event_names())))
        self.setWindowTitle(f"STRIVE-D — {self.library_path}")
        self.refresh_stats()
        self._refresh_actions()
        self.library_opened.emit(self.library_path)
        self.library_view.set_thumbnail_loader(
            lambda vid: ops.thumbnail(self.library, vid) if self.library is not None else None)
        self.refresh_library_view()
        if self.response is None and len(lib):
            self.tabs.setCurrentWidget(self.library_view)   # before any search: what the library holds
        pending = self.settings.pending_index(self.library_path)
        if pending and os.path.isdir(pending):
            self.start_indexing(pending, resumed=True)
        return True

    def _offer_library_for(self, folder: str) -> bool:
        """``folder`` holds no library: index its videos (a library of their own), or create one."""
        try:
            # bounded: a home folder can hold millions of files (the count is then a lower bound)
            sv = api.survey_videos(folder, time_budget_s=0.5)
        except Exception:  # noqa: BLE001 - unreadable: offer an empty library
            sv = {"videos": 0, "complete": True, "folders": 0}
        n = sv["videos"]
        box = QMessageBox(self)
        box.setObjectName("noLibraryBox")
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("No library in this folder")
        if n:
            box.setText(f"<b>{folder}</b> holds {'at least ' if not sv['complete'] else ''}{n} video(s) "
                        f"in {sv['folders']} folder(s) but no STRIVE-D library.")
            box.setInformativeText("Index these videos now? Their library is kept apart from the "
                                   "footage (nothing is written into the video folder); you can "
                                   "search while indexing runs.")
            go = box.addButton("Index the videos", QMessageBox.ButtonRole.AcceptRole)
        else:
            box.setText(f"There is no STRIVE-D library in <b>{folder}</b> and no video in it.")
            box.setInformativeText("Create a new, empty library in this folder? You can then add "
                                   "videos with File → Index folder…")
            go = box.addButton("Create a library here", QMessageBox.ButtonRole.AcceptRole)
        cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        # a large or uncounted tree is not indexed by a reflexive Enter
        box.setDefaultButton(go if sv["complete"] and n <= 200 else cancel)
        box.exec()
        if box.clickedButton() is not go:
            return False
        return self.open_video_folder(folder) if n else self.open_library(folder, create=True)

    def open_video_folder(self, folder: str) -> bool:
        """Create (or reopen) the library of a dashcam folder and index it."""
        if not self.open_library(str(default_library_for(folder)), create=True):
            return False
        self.start_indexing(folder)
        return True

    def refresh_library_view(self) -> None:
        """Reload the Library tab's list in a worker (a large library's listing is not read on
        the UI thread)."""
        if self.conns is None:
            self.library_view.set_rows([])
            return
        w = Worker(library_job, self.conns, _overview, pass_progress=False, pass_cancel=False,
                   name="overview")
        lib_path = self.library_path
        w.signals.finished.connect(
            lambda res, p=lib_path: self.library_view.set_rows(*res)
            if self.library is not None and p == self.library_path else None)
        self.jobs.submit(w)

    def browse_video(self, video_id: str) -> None:
        """Play a library video in Inspect with its tracked boxes (no search: nothing to explain)."""
        if self.library is None:
            return
        path = ops.video_path(self.library, video_id)
        self.tabs.setCurrentIndex(0)
        self.table.clearSelection()
        if path and os.path.exists(path):
            self.player.load(path)
            self.player.set_intervals([])
        else:
            self.player.clear("Records only: this item has no video file." if not path else
                              f"The video file is missing:\n{path}")
        self.timeline.clear(f"{video_id}: no search yet. Search to see why a video matches, "
                            "with each rule signal per track here.")
        self.set_gate_witnesses([])
        self.set_sequence_steps([], [])
        w = Worker(library_job, self.conns, lambda lib, v: lib.get_video(v), video_id,
                   pass_progress=False, pass_cancel=False, name="browse")
        w.signals.finished.connect(lambda rec: self._show_boxes(rec))
        self.jobs.submit(w)

    def _show_boxes(self, rec) -> None:
        self.player.overlay_data = BoxOverlay(rec)
        self.player.seek(self.player.frame_idx)
        self.browsed.emit(rec.info.id)

    def close_library(self) -> None:
        """Close the library without waiting for running jobs: each one holds its own connection
        (closed when it ends) and its result is ignored."""
        self.cancel_indexing()
        self.jobs.cancel_all()
        self._set_searching(False)
        self.index_worker = self._search_worker = self._inspect_worker = None
        self._compare_worker = self._maint_worker = None
        if self.conns is not None:
            self.conns.close_all()
        self.conns = None
        self.rule_editor.set_library(None, None)
        self.library = None
        self.response = self._base_response = None
        self.model.clear()
        self.model.set_exports({})
        self.player.clear()
        self.timeline.clear()
        self.set_gate_witnesses([])
        self.set_sequence_steps([], [])
        self.library_view.set_rows([])
        self.library_view.title.setText("No library open.")

    def refresh_stats(self) -> None:
        if self.library is None:
            self.stats_label.setText("No library open.")
            return
        s = ops.quick_stats(self.library)
        fail = f" · {s['failed']} failed" if s["failed"] else ""
        self.stats_label.setText(f"{os.path.basename(self.library_path)} · {s['videos']} videos · "
                                 f"{s['tracks']} tracks · {s['marks']} marks{fail} · "
                                 f"index v{s['index_version']}")

    def _refresh_actions(self) -> None:
        has_lib = self.library is not None
        has_hits = bool(self.model.hits)
        searching = self._search_worker is not None and not self._search_worker.is_done
        self.act_index.setEnabled(has_lib)
        busy = self._maint_worker is not None and not self._maint_worker.is_done
        self.act_find_missing.setEnabled(has_lib and not busy)
        self.act_relink.setEnabled(has_lib and not busy)
        self.act_cameras.setEnabled(has_lib)
        self.act_remove_videos.setEnabled(has_hits and not busy)
        for a in (self.act_export, self.act_export_marked, self.act_save, self.act_compare,
                  self.act_mark_yes,
                  self.act_mark_no, self.act_mark_clear, self.act_marks_clear_all,
                  self.act_next_result, self.act_prev_result):
            a.setEnabled(has_hits)
        for b in (self.mark_yes, self.mark_no, self.mark_clear):
            b.setEnabled(has_hits)
        self.act_search.setEnabled(has_lib)
        self.act_cancel_search.setEnabled(searching or self.similar.running)   # Esc stops either
        self.search_button.setEnabled(has_lib)

    def show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    # ------------------------------------------------------------------ indexing
    @property
    def indexing(self) -> bool:
        return self.index_worker is not None and not self.index_worker.is_done

    def start_indexing(self, folder: str, resumed: bool = False) -> None:
        if self.library is None or self.indexing:
            return
        self._index_folder = folder
        self.settings.set_pending_index(self.library_path, folder)
        self.settings.sync()
        self.index_dock.show()
        self.index_panel.start(folder, resumed)
        w = Worker(index_job, folder, self.library_path, sample_fps=self.settings.sample_fps,
                   device=self.settings.device, detector_path=self.settings.detector_dir,
                   embedder_dir=self.settings.embedder_dir, min_interval_s=0.1, name="index")
        lib_path = self.library_path
        w.signals.progressed.connect(self.index_panel.on_progress)
        w.signals.progressed.connect(self._on_index_progressed)
        w.signals.finished.connect(lambda rep, w=w: self._on_index_finished(w, rep, lib_path))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_index_errored(w, exc, tb, lib_path))
        w.signals.cancelled.connect(lambda w=w: self._on_index_cancelled(w))
        self.index_worker = self.index_jobs.submit(w)

    def cancel_indexing(self) -> None:
        if self.indexing:
            self.index_worker.cancel()

    def _on_index_progressed(self, ev) -> None:
        if ev.stage == "videos" and ev.message in ("indexed", "failed"):
            self.refresh_stats()

    def _on_index_finished(self, worker, report, lib_path: str) -> None:
        if report.cancelled:
            self._on_index_cancelled(worker)
            return
        self.settings.set_pending_index(lib_path, None)
        if worker is not self.index_worker:
            return                                  # another library is open now
        self.index_panel.finish(report)
        self.refresh_library_view()
        if report.found == 0:
            self.presenter.notice(f"No videos found in {self._index_folder}: nothing to index.")
        elif self._results_stale and self.response is not None:
            self.show_notice("Indexing finished: press Enter in the query bar to search again with "
                             "every video and every source.")
        self.refresh_stats()

    def _on_index_errored(self, worker, exc, tb, lib_path: str) -> None:
        self.settings.set_pending_index(lib_path, None)
        if worker is not self.index_worker:
            return
        self.index_panel.finish(error=str(exc))
        self.presenter.present("Indexing stopped", exc, tb)

    def _on_index_cancelled(self, worker=None) -> None:
        if worker is not None and worker is not self.index_worker:
            return
        self.index_panel.finish(cancelled=True)
        self.refresh_stats()

    # ------------------------------------------------------------------ footage maintenance
    def _maintain(self, what: str, fn, *args, done=None) -> Worker | None:
        """Run a ``strived.maintenance.footage`` call on the library worker (never on the UI
        thread); ``done(result)`` gets its result on the UI thread."""
        if self.library is None or self.conns is None:
            return None
        w = Worker(library_job, self.conns, fn, *args, pass_progress=False, pass_cancel=False,
                   name="maintenance")
        self.statusBar().showMessage(f"{what}…")

        def finished(res, w=w):
            if w is self._maint_worker:
                self.statusBar().clearMessage()
                self._maint_worker = None
                self._refresh_actions()
                if done is not None:
                    done(res)

        def errored(exc, tb, w=w):
            if w is self._maint_worker:
                self._maint_worker = None
                self._refresh_actions()
                self.presenter.present(f"{what} failed", exc, tb)

        w.signals.finished.connect(finished)
        w.signals.errored.connect(errored)
        self._maint_worker = self.jobs.submit(w)
        self._refresh_actions()
        return w

    def _report(self, title: str, text: str, details: str = "", name: str = "maintenanceBox",
                buttons=()) -> str | None:
        """A summary box; ``buttons``: extra choices; returns the one clicked (None: Close)."""
        box = QMessageBox(QMessageBox.Icon.Information, title, text, parent=self)
        box.setObjectName(name)
        if details:
            box.setDetailedText(details)
        extra = {box.addButton(b, QMessageBox.ButtonRole.ActionRole): b for b in buttons}
        close = box.addButton(QMessageBox.StandardButton.Close)
        box.setDefaultButton(close)
        box.exec()
        self.last_report = text
        return extra.get(box.clickedButton())

    def find_missing_videos(self) -> None:
        """Library → Find missing videos: list them, then look for them in a folder (by content)
        or relink the folder they were in."""
        self._maintain("Looking for missing video files", missing_job, done=self._on_missing)

    def _on_missing(self, missing) -> None:
        self.missing = list(missing)
        if not missing:
            self._report("No missing video", "Every video of this library is where it was "
                         "indexed.")
            return
        n = len(missing)
        folders = missing_folders(missing)
        text = (f"{n} video{'s' if n != 1 else ''} of this library {'have' if n != 1 else 'has'} "
                f"no file where {'they were' if n != 1 else 'it was'} indexed (moved, renamed or "
                f"deleted), in {len(folders)} folder{'s' if len(folders) != 1 else ''}. Their "
                "records are kept: search still finds them.")
        choice = self._report("Missing videos", text,
                              "\n".join(f"{m.video_id}: {m.path}" for m in missing),
                              buttons=("Look for them in a folder…", "Relink a moved folder…"))
        if choice == "Look for them in a folder…":
            d = QFileDialog.getExistingDirectory(self, "Folder to look in for the missing videos")
            if d:
                self._maintain("Looking for the missing videos", find_moved_job, d,
                               done=lambda rep: self._on_relinked(rep, f"Looked in {d}"))
        elif choice == "Relink a moved folder…":
            self.relink_folder(folders)

    def relink_folder(self, folders: list[str] | None = None) -> None:
        """Library → Relink a moved folder: the old folder (as the library knows it; the folders
        of missing videos are offered), then where it is now."""
        if self.library is None:
            return
        if folders is None:
            self._maintain("Looking for missing video files", missing_job,
                           done=lambda miss: self.relink_folder(missing_folders(miss) or [""]))
            return
        old, ok = QInputDialog.getItem(self, "Relink a moved folder",
                                       "The folder as the library knows it (where the videos "
                                       "were indexed):", folders, 0, True)
        old = old.strip()
        if not ok or not old:
            return
        new = QFileDialog.getExistingDirectory(self, f"Where is {old} now?")
        if new:
            self._maintain("Relinking", relink_job, old, new,
                           done=lambda rep: self._on_relinked(rep, f"{old} → {new}"))

    def _on_relinked(self, rep, what: str) -> None:
        text, details = relink_summary(rep, what)
        if rep.relinked:
            vids = {vid: new for vid, _old, new in rep.relinked}
            for h in self.model.hits:
                if h.video_id in vids:
                    h.path = vids[h.video_id]
            if self.model.hits:
                self.model.dataChanged.emit(self.model.index(0, 0), self.model.index(
                    self.model.rowCount() - 1, self.model.columnCount() - 1))
        self.refresh_stats()
        self._report("Relink", text, details)

    def remove_selected_videos(self) -> None:
        """Library → Remove selected videos: asks first; the files themselves are not touched."""
        hits = [self.model.hit(r) for r in self._target_rows()]
        ids = [h.video_id for h in hits if h is not None]
        if not ids or self.library is None:
            return
        n = len(ids)
        box = QMessageBox(QMessageBox.Icon.Warning, "Remove from the library?",
                          f"Remove {n} video{'s' if n != 1 else ''} from this library?",
                          parent=self)
        box.setObjectName("removeVideosBox")
        box.setInformativeText("Their records, tracks, descriptions and thumbnails are removed "
                               "from the library; the video files stay on disk (index them "
                               "again to bring them back).")
        box.setDetailedText("\n".join(ids))
        remove = box.addButton(f"Remove {n}", QMessageBox.ButtonRole.DestructiveRole)
        keep = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(keep)
        box.exec()
        if box.clickedButton() is not remove:
            return
        self._maintain("Removing videos", remove_job, ids, done=self._on_removed)

    def _on_removed(self, removed: list[str]) -> None:
        gone = set(removed)
        self.model.remove_videos(gone)
        self.player.clear("Removed from the library." if gone else "")
        self.timeline.clear()
        self.set_gate_witnesses([])
        self.set_sequence_steps([], [])
        self.refresh_stats()
        self._refresh_actions()
        n = len(removed)
        self._report("Removed", f"{n} video{'s' if n != 1 else ''} removed from the library "
                     "(the files were not touched).", "\n".join(removed))

    def _on_open_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Open library (or a video folder)",
                                             self.library_path)
        if d:
            self.open_library(d)

    def _on_open_videos_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Dashcam folder to index")
        if d:
            self.confirm_index(d, self.open_video_folder)

    def _on_new_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "New library folder")
        if d:
            self.open_library(d, create=True)

    def _on_index_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Dashcam folder to index")
        if d:
            self.confirm_index(d, self.start_indexing)

    def confirm_index(self, folder: str, then) -> None:
        """Count the videos under ``folder`` in a worker, then ask before ``then(folder)`` starts:
        Enter in a folder dialog accepts the folder it opened in (a home folder, say), and a whole
        tree must not start indexing without the user seeing what it holds."""
        w = Worker(api.survey_videos, folder, pass_progress=False, pass_cancel=False, name="survey")
        w.signals.finished.connect(lambda res, f=folder: self._ask_index(f, res, then))
        w.signals.errored.connect(lambda exc, tb: self.presenter.present("Cannot read the folder", exc, tb))
        self.jobs.submit(w)

    def _ask_index(self, folder: str, survey: dict, then) -> None:
        n, more = survey["videos"], "" if survey["complete"] else " at least"
        box = QMessageBox(self)
        box.setWindowTitle("Index videos")
        if n == 0 and survey["complete"]:
            box.setIcon(QMessageBox.Icon.Information)
            box.setText(f"No videos (mp4, mov, mkv, avi, ts) under\n{folder}\nNothing to index.")
            box.setStandardButtons(QMessageBox.StandardButton.Ok)
        else:
            gb = survey["bytes"] / 1e9
            box.setIcon(QMessageBox.Icon.Question)
            box.setText(f"Index{more} {n} video{'s' if n != 1 else ''} ({gb:.1f} GB) in "
                        f"{survey['folders']} folder{'s' if survey['folders'] != 1 else ''} under\n{folder}?")
            box.setInformativeText("Sub-folders are included. Indexing runs in the background and "
                                   "can be cancelled; what is done is kept.")
            box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel)
            box.button(QMessageBox.StandardButton.Yes).setText("Index")
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)   # Enter again does not start it
            yes = box.button(QMessageBox.StandardButton.Yes)
            box.buttonClicked.connect(lambda b: then(folder) if b is yes else None)
        self.index_confirm = box
        box.open()
