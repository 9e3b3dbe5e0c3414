"""The main window: query bar, ranked results, player + WHY timeline, compare, rule editor,
indexing panel and status bar. Every action calls the engine (``strived.engine``) in a worker."""

from __future__ import annotations

import os

from PySide6.QtCore import QStringListModel, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (QAbstractItemView, QCompleter, QComboBox, QDockWidget, QFileDialog,
                               QHBoxLayout, QHeaderView, QInputDialog, QLabel, QMainWindow, QMenu,
                               QPushButton, QSplitter, QTableView, QTabWidget, QToolBar, QVBoxLayout,
                               QWidget)

from . import library_ops as ops
from .compare import CompareView
from .errors import ErrorPresenter
from .index_panel import IndexPanel
from .player import PlayerWidget
from .results import ResultsModel
from .rule_editor import RuleEditor
from .settings import AppSettings, SettingsDialog
from .timeline import TimelineWidget
from .workers import JobQueue, Worker


def index_job(folder: str, library_folder: str, *, sample_fps: float, device: str,
              detector_path: str = "", embedder_dir: str = "", progress=None, cancel=None):
    """Indexing on its own library connection (the UI keeps reading on its own)."""
    from strived.indexing.job import index_folder
    from strived.perception.detect import detector_spec_for_path
    from strived.store.library import Library

    lib = Library.open(library_folder)
    try:
        rep = index_folder(folder, lib, sample_fps=sample_fps, device=device,
                           detector=detector_spec_for_path(detector_path), progress=progress,
                           cancel=cancel)
        if not rep.cancelled and len(lib):
            from strived.engine import build_text_index
            from strived.retrieval.sources import set_library_embedder

            set_library_embedder(lib, embedder_dir or None)  # a changed choice rebuilds the dense index
            build_text_index(lib, progress=progress, cancel=cancel)  # BM25, dense, rule features
        return rep
    finally:
        lib.close()


def inspect_job(library, video_id: str, rule: dict | None):
    """Records (for box overlays) and the rule's explanation (for the timeline) of one video."""
    from strived import engine

    rec = library.get_video(video_id)
    exp = engine.explain(library, video_id, rule) if rule else None
    return rec, exp


class MainWindow(QMainWindow):
    """STRIVE-D's main window; ``library`` is a strived Library or None until one is opened."""

    library_opened = Signal(str)
    search_finished = Signal(object)
    inspect_finished = Signal(str)

    def __init__(self, settings: AppSettings | None = None, library_path: str | None = None):
        super().__init__()
        self.setWindowTitle("STRIVE-D")
        self.settings = settings or AppSettings()
        self.library = None
        self.library_path = ""
        self.response = None
        self.presenter = ErrorPresenter(self)
        self.jobs = JobQueue(1, self)           # library work: searches, explanations
        self.index_jobs = JobQueue(1, self)     # indexing has its own pool: search stays usable
        self._search_worker: Worker | None = None
        self._inspect_worker: Worker | None = None
        self.index_worker: Worker | None = None
        self._index_folder = ""
        self._build()
        self.resize(1440, 900)
        if library_path:
            QTimer.singleShot(0, lambda: self.open_library(library_path))

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        tb = QToolBar("Main", self)
        tb.setMovable(False)
        self.addToolBar(tb)
        self.act_open = QAction("Open library…", self, triggered=self._on_open_triggered)
        self.act_new = QAction("New library…", self, triggered=self._on_new_triggered)
        self.act_index = QAction("Index folder…", self, triggered=self._on_index_triggered)
        self.act_export = QAction("Export…", self, shortcut=QKeySequence("Ctrl+E"),
                                  triggered=self.export_results)
        self.act_compare = QAction("Compare", self, shortcut=QKeySequence("Ctrl+K"),
                                   triggered=self.compare_selected)
        self.act_save = QAction("Save search…", self, shortcut=QKeySequence("Ctrl+S"),
                                triggered=self._on_save_search_triggered)
        self.saved_menu = QMenu("Saved searches", self)
        self.saved_menu.aboutToShow.connect(self._on_saved_menu_about_to_show)
        self.act_settings = QAction("Settings…", self, triggered=self._on_settings_triggered)
        self.act_welcome = QAction("Welcome", self, triggered=lambda: self.show_welcome())
        for a in (self.act_open, self.act_new, self.act_index):
            tb.addAction(a)
        tb.addSeparator()
        for a in (self.act_compare, self.act_export, self.act_save):
            tb.addAction(a)
        tb.addAction(self.saved_menu.menuAction())
        tb.addSeparator()
        tb.addAction(self.act_settings)
        tb.addAction(self.act_welcome)

        self.query = QComboBox(self, editable=True, objectName="queryBar")
        self.query.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.query.lineEdit().setPlaceholderText("Describe what you are looking for, e.g. "
                                                 "“a car cuts in from the right”, and press Enter")
        self.query.addItems(self.settings.history())
        self.query.setCurrentText("")
        self._completions = QStringListModel(self)
        comp = QCompleter(self._completions, self)
        comp.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        comp.setFilterMode(Qt.MatchFlag.MatchContains)
        self.query.setCompleter(comp)
        self.query.lineEdit().returnPressed.connect(self.search)
        self.search_button = QPushButton("Search", self)
        self.search_button.clicked.connect(self.search)
        self.notice = QLabel("", self, objectName="notice")
        self.notice.setWordWrap(True)
        self.notice.hide()

        self.model = ResultsModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(58)
        self.table.verticalHeader().setVisible(False)
        self.table.setIconSize(ResultsModel.THUMB_SIZE)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(ResultsModel.C_FILE, QHeaderView.ResizeMode.Interactive)
        hh.resizeSection(ResultsModel.C_FILE, 170)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.mark_yes = QPushButton("Relevant (R)", self)
        self.mark_no = QPushButton("Not relevant (N)", self)
        self.mark_yes.clicked.connect(lambda: self.mark_current(True))
        self.mark_no.clicked.connect(lambda: self.mark_current(False))
        self.results_label = QLabel("No search yet.", self, objectName="dim")
        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.results_label)
        ll.addWidget(self.table, 1)
        mk = QHBoxLayout()
        mk.addWidget(self.mark_yes)
        mk.addWidget(self.mark_no)
        mk.addStretch(1)
        ll.addLayout(mk)

        self.player = PlayerWidget(self)
        self.timeline = TimelineWidget(self)
        inspect = QSplitter(Qt.Orientation.Vertical, self)
        inspect.addWidget(self.player)
        inspect.addWidget(self.timeline)
        inspect.setSizes([470, 330])
        self.compare = CompareView(self)
        self.rule_editor = RuleEditor(self)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(inspect, "Inspect")
        self.tabs.addTab(self.compare, "Compare")
        self.tabs.addTab(self.rule_editor, "Rule")
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(self.tabs)
        split.setSizes([640, 800])

        central = QWidget(self)
        cl = QVBoxLayout(central)
        cl.setContentsMargins(6, 6, 6, 2)
        qrow = QHBoxLayout()
        qrow.addWidget(self.query, 1)
        qrow.addWidget(self.search_button)
        cl.addLayout(qrow)
        cl.addWidget(self.notice)
        cl.addWidget(split, 1)
        self.setCentralWidget(central)

        self.index_panel = IndexPanel(self)
        self.index_dock = QDockWidget("Indexing", self)
        self.index_dock.setWidget(self.index_panel)
        self.index_dock.setObjectName("indexDock")
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.index_dock)
        self.index_dock.hide()
        self.index_panel.cancel_requested.connect(self.cancel_indexing)
        self.stats_label = QLabel("No library open.", self)
        self.statusBar().addPermanentWidget(self.stats_label)

        self.player.frame_shown.connect(self._on_player_frame_shown)
        self.player.failed.connect(lambda m: self.statusBar().showMessage(m, 8000))
        self.timeline.seek_requested.connect(self.player.seek_time)
        self.timeline.track_selected.connect(self.player.highlight_track)
        self.rule_editor.rule_applied.connect(self._on_rule_applied)
        self.rule_editor.rule_saved.connect(self._on_rule_saved)
        self.presenter.noticed.connect(self.show_notice)
        for key, fn in (("Space", self._on_space), ("Left", lambda: self._on_arrow(-1)),
                        ("Right", lambda: self._on_arrow(1)), ("R", lambda: self.mark_current(True)),
                        ("N", lambda: self.mark_current(False)),
                        ("Ctrl+L", lambda: self.query.setFocus())):
            sc = QShortcut(QKeySequence(key), self, fn)
            sc.setContext(Qt.ShortcutContext.WindowShortcut)
        self._refresh_actions()

    # ------------------------------------------------------------------ library
    def open_library(self, folder: str, create: bool = False) -> bool:
        from strived.store.library import Library

        try:
            lib = Library.open(folder, create=create)
        except Exception as exc:  # noqa: BLE001
            self.presenter.present("Cannot open the library", exc)
            return False
        self.close_library()
        self.library, self.library_path = lib, str(lib.folder)
        self.settings.last_library = self.library_path
        self.model.set_thumbnail_loader(lambda vid: ops.thumbnail(self.library, vid))
        self._completions.setStringList(list(dict.fromkeys(self.settings.history()
                                                           + ops.event_names())))
        self.setWindowTitle(f"STRIVE-D — {self.library_path}")
        self.refresh_stats()
        self._refresh_actions()
        self.library_opened.emit(self.library_path)
        pending = self.settings.pending_index(self.library_path)
        if pending and os.path.isdir(pending):
            self.start_indexing(pending, resumed=True)
        return True

    def close_library(self) -> None:
        self.cancel_indexing()
        self.index_jobs.shutdown(10000)
        self.jobs.shutdown(10000)
        if self.library is not None:
            self.library.close()
        self.library = None
        self.response = None
        self.model.clear()
        self.player.clear()
        self.timeline.clear()

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
        for a in (self.act_index,):
            a.setEnabled(has_lib)
        self.act_export.setEnabled(has_hits)
        self.act_save.setEnabled(has_hits)
        self.act_compare.setEnabled(has_hits)
        self.search_button.setEnabled(has_lib)

    def show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    # ------------------------------------------------------------------ indexing
    def start_indexing(self, folder: str, resumed: bool = False) -> None:
        if self.library is None or (self.index_worker and not self.index_worker.is_done):
            return
        self._index_folder = folder
        self.settings.set_pending_index(self.library_path, folder)
        self.settings.sync()
        self.index_dock.show()
        self.index_panel.start(folder, resumed)
        w = Worker(index_job, folder, self.library_path, sample_fps=self.settings.sample_fps,
                   device=self.settings.device, detector_path=self.settings.detector_dir,
                   embedder_dir=self.settings.embedder_dir, min_interval_s=0.1, name="index")
        w.signals.progressed.connect(self.index_panel.on_progress)
        w.signals.progressed.connect(self._on_index_progressed)
        w.signals.finished.connect(self._on_index_finished)
        w.signals.errored.connect(self._on_index_errored)
        w.signals.cancelled.connect(self._on_index_cancelled)
        self.index_worker = self.index_jobs.submit(w)

    def cancel_indexing(self) -> None:
        if self.index_worker is not None and not self.index_worker.is_done:
            self.index_worker.cancel()

    def _on_index_progressed(self, ev) -> None:
        if ev.stage == "videos" and ev.message == "indexed":
            self.refresh_stats()

    def _on_index_finished(self, report) -> None:
        if report.cancelled:
            self._on_index_cancelled()
            return
        self.settings.set_pending_index(self.library_path, None)
        self.index_panel.finish(report)
        if report.found == 0:
            self.presenter.notice(f"No videos found in {self._index_folder}: nothing to index.")
        self.refresh_stats()

    def _on_index_errored(self, exc, tb) -> None:
        self.index_panel.finish(error=str(exc))
        self.settings.set_pending_index(self.library_path, None)
        self.presenter.present("Indexing stopped", exc, tb)

    def _on_index_cancelled(self) -> None:
        self.index_panel.finish(cancelled=True)
        self.refresh_stats()

    # ------------------------------------------------------------------ search
    def search(self, rule: dict | None = None) -> None:
        from strived import engine

        q = self.query.currentText().strip()
        if self.library is None:
            self.presenter.notice("Open or create a library first (toolbar: Open library…).")
            return
        if not q and rule is None:
            return
        if self._search_worker is not None and not self._search_worker.is_done:
            self._search_worker.cancel()
        self._add_history(q)
        kwargs = {"top_k": 100}
        if rule is not None:
            kwargs["rule"] = rule
        llm = None
        try:
            cfg = self.settings.llm_config()
            if cfg.usable:
                from strived.llm.client import LLMClient

                llm = LLMClient(cfg)
        except Exception as exc:  # noqa: BLE001 - a bad LLM config falls back to offline
            self.presenter.notice(f"LLM settings ignored ({exc}); searching offline.")
        self.results_label.setText(f"Searching “{q}”…")
        w = Worker(engine.search, self.library, q, llm=llm, name="search", **kwargs)
        w.signals.finished.connect(lambda resp, w=w: self._on_search_finished(w, resp))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_search_errored(w, exc, tb))
        self._search_worker = self.jobs.submit(w)

    def _add_history(self, q: str) -> None:
        if not q:
            return
        hist = self.settings.add_history(q)
        self.query.blockSignals(True)
        self.query.clear()
        self.query.addItems(hist)
        self.query.setCurrentText(q)
        self.query.blockSignals(False)
        self._completions.setStringList(list(dict.fromkeys(hist + ops.event_names())))

    def _on_search_finished(self, worker, resp) -> None:
        if worker is not self._search_worker:
            return                              # a newer search superseded this one
        self.show_response(resp)
        self.search_finished.emit(resp)

    def _on_search_errored(self, worker, exc, tb) -> None:
        if worker is not self._search_worker:
            return
        self.results_label.setText("Search failed.")
        self.presenter.present("Search failed", exc, tb)

    def show_response(self, resp, notice: str | None = None) -> None:
        self.response = resp
        marks = ops.marks_for(self.library, resp.query) if self.library is not None else {}
        self.model.set_response(resp, marks)
        ms = (getattr(resp, "timings_ms", {}) or {}).get("total")
        took = f" in {ms:.0f} ms" if ms is not None else ""
        m = resp.match or {}
        how = f" · rule: {m.get('event')} ({m.get('mode')})" if m.get("event") else ""
        self.results_label.setText(f"{len(resp.hits)} result(s) for “{resp.query}”{took}{how}")
        notes = [n for n in ([notice] if notice else []) + list(resp.notices or []) if n]
        self.show_notice(" · ".join(notes))
        self.rule_editor.set_rule(resp.rule)
        self._refresh_actions()
        if resp.hits:
            self.table.selectRow(0)
        else:
            self.player.clear("No video matched this query.")
            self.timeline.clear("No video matched: try other words or edit the rule (Rule tab).")

    # ------------------------------------------------------------------ inspect
    def _on_current_row_changed(self, current, _previous) -> None:
        h = self.model.hit(current.row())
        if h is None or self.library is None:
            return
        if h.path and os.path.exists(h.path):
            self.player.load(h.path, span_s=h.span_s)
        elif h.path:
            self.player.clear(f"The video file is missing:\n{h.path}\n(moved or deleted; the "
                              "records are still in the library)")
        else:
            self.player.clear("Records only: this item has no video file.")
        self.timeline.clear("Explaining…")
        if self._inspect_worker is not None:
            self._inspect_worker.cancel()
        w = Worker(inspect_job, self.library, h.video_id, (self.response.rule_for(h.video_id) if self.response else None),
                   pass_progress=False, pass_cancel=False, name="inspect")
        w.signals.finished.connect(lambda res, w=w, h=h: self._on_inspect_finished(w, h, res))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_inspect_errored(w, exc, tb))
        self._inspect_worker = self.jobs.submit(w)

    def _on_inspect_finished(self, worker, hit, result) -> None:
        if worker is not self._inspect_worker:
            return
        rec, exp = result
        from .frames import BoxOverlay

        self.player.overlay_data = BoxOverlay(rec)
        self.player.seek(self.player.frame_idx)
        if exp is not None:
            if getattr(exp, "ego", None) is not None and exp.ego not in exp.traces:
                exp.traces = list(exp.traces) + [exp.ego]
            self.timeline.set_explanation(exp, title=os.path.basename(hit.path or hit.video_id))
            if exp.peak_track is not None:
                self.timeline.highlight_track(exp.peak_track)
                self.player.highlight_track(exp.peak_track)
        else:
            self.timeline.clear("No rule for this search (dense/BM25 only): nothing to explain.")
        self.inspect_finished.emit(hit.video_id)

    def _on_inspect_errored(self, worker, exc, tb) -> None:
        if worker is self._inspect_worker:
            self.timeline.clear(f"Cannot explain this video: {exc}")

    def _on_player_frame_shown(self, _frame: int, t_s: float) -> None:
        self.timeline.set_time(t_s)

    def _on_space(self) -> None:
        (self.compare.toggle_play if self.tabs.currentWidget() is self.compare
         else self.player.toggle_play)()

    def _on_arrow(self, n: int) -> None:
        (self.compare.step if self.tabs.currentWidget() is self.compare else self.player.step)(n)

    # ------------------------------------------------------------------ marks, compare, export
    def selected_rows(self) -> list[int]:
        return sorted({ix.row() for ix in self.table.selectionModel().selectedRows()})

    def mark_current(self, relevant: bool) -> None:
        if self.library is None or self.response is None:
            return
        for row in self.selected_rows() or [self.table.currentIndex().row()]:
            h = self.model.hit(row)
            if h is None:
                continue
            ops.set_mark(self.library, self.response.query, h.video_id, relevant,
                         (self.response.match or {}).get("event"))
            self.model.set_mark(row, relevant)
        self.refresh_stats()

    def compare_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) < 2:
            rows = list(range(min(2, len(self.model.hits))))
        items = []
        for r in rows:
            h = self.model.hit(r)
            if h is not None and h.path and os.path.exists(h.path):
                items.append({"path": h.path, "span_s": h.span_s,
                              "title": f"#{h.rank} {os.path.basename(h.path)}",
                              "records": self.library.get_video(h.video_id)})
        if len(items) < 2:
            self.presenter.notice("Compare needs two results with video files.")
            return
        self.player.pause()
        self.compare.set_items(items)
        self.tabs.setCurrentWidget(self.compare)

    def export_results(self) -> None:
        from strived.export import clip_rows, library_versions

        from .export_dialog import ExportDialog

        if self.response is None:
            return
        rows_sel = self.selected_rows()
        ids = [self.model.hit(r).video_id for r in rows_sel] if len(rows_sel) > 1 else None
        rows = clip_rows(self.response, self.library, video_ids=ids, marks=self.model.marks)
        ctx = {"query": self.response.query, "rule": self.response.rule,
               "weights": self.response.weights, "match": self.response.match,
               "library": self.library_path, **library_versions(self.library)}
        self.export_dialog = ExportDialog(rows, ctx, parent=self)
        self.export_dialog.show()

    # ------------------------------------------------------------------ rule, saved searches
    def _on_rule_applied(self, rule: dict) -> None:
        self.search(rule=rule)

    def _on_rule_saved(self, name: str, rule: dict) -> None:
        if self.library is not None:
            ops.save_user_rule(self.library, name, rule)
            self.statusBar().showMessage(f"Rule “{name}” saved to the library.", 5000)

    def save_search(self, name: str) -> None:
        if self.library is not None and self.response is not None:
            ops.save_search(self.library, name, self.response)
            self.statusBar().showMessage(f"Search “{name}” saved.", 5000)

    def open_saved(self, name: str) -> None:
        try:
            resp, _spec, notice = ops.load_saved(self.library, name)
        except KeyError:
            self.presenter.notice(f"No saved search named “{name}”.")
            return
        self.query.setCurrentText(resp.query)
        self.show_response(resp, notice)

    def _on_save_search_triggered(self) -> None:
        if self.response is None:
            return
        name, ok = QInputDialog.getText(self, "Save search", "Name:", text=self.response.query[:60])
        if ok and name.strip():
            self.save_search(name.strip())

    def _on_saved_menu_about_to_show(self) -> None:
        self.saved_menu.clear()
        if self.library is None:
            return
        for name, query, created in ops.list_saved(self.library):
            a = self.saved_menu.addAction(f"{name}  —  {query}")
            a.setToolTip(created)
            a.triggered.connect(lambda _=False, n=name: self.open_saved(n))

    # ------------------------------------------------------------------ dialogs
    def _on_open_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Open library", self.library_path)
        if d:
            self.open_library(d)

    def _on_new_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "New library folder")
        if d:
            self.open_library(d, create=True)

    def _on_index_triggered(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Dashcam folder to index")
        if d:
            self.start_indexing(d)

    def show_welcome(self, only_if_wanted: bool = False):
        """The first-run screen (app/welcome.py); ``only_if_wanted`` honours its "show" checkbox."""
        from .welcome import WelcomeDialog, show_welcome_at_start

        if only_if_wanted and not show_welcome_at_start(self.settings):
            return None
        self.welcome = WelcomeDialog(self)
        self.welcome.show()
        return self.welcome

    def _on_settings_triggered(self) -> None:
        self.settings_dialog = SettingsDialog(self.settings, self._index_folder, self)
        self.settings_dialog.show()

    def closeEvent(self, event) -> None:
        self.cancel_indexing()          # pending_index stays set: reopening resumes
        self.index_jobs.shutdown(15000)
        self.jobs.shutdown(10000)
        self.player.shutdown()
        self.compare.shutdown()
        self.settings.sync()
        if self.library is not None:
            self.library.close()
            self.library = None
        super().closeEvent(event)
