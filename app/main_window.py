"""The main window: menu bar, query bar, ranked results, player + WHY timeline, compare, rule
editor, indexing panel and status bar. Every action calls the engine (``strived.engine``) in a
worker; the UI thread and the library worker each use their own SQLite connection
(``app/connections.py``)."""

from __future__ import annotations

import os
import re
import time

from PySide6.QtCore import QByteArray, QStringListModel, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QCompleter,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QListWidget,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from . import library_ops as ops
from .compare import CompareView
from .connections import LibraryConnections, library_job
from .errors import ErrorPresenter
from .index_panel import IndexPanel
from .learn_panel import LearnPanel
from .library_view import LibraryView
from .player import PlayerWidget
from .results import ResultsModel
from .rule_editor import RuleEditor
from .settings import AppSettings, SettingsDialog, load_rule_library
from .similar_panel import SimilarPanel
from .timeline import TimelineWidget
from .welcome import WelcomeDialog, show_welcome_at_start
from .window_inspect import InspectControl, gate_witness_text  # noqa: F401  (tests import it here)
from .window_library import LibraryControl, index_job  # noqa: F401
from .window_review import ReviewControl
from .workers import JobQueue, Worker

#: how long closing waits for jobs that cannot stop at once (a model load): the window goes at once,
#: the job's own connection closes when it ends, and ``python -m app`` exits without waiting
CLOSE_WAIT_INDEX_MS = 1500
CLOSE_WAIT_JOBS_MS = 150




def search_job(library, query: str, *, progress=None, cancel=None, **kwargs):
    """``engine.search`` on the library worker's own connection."""
    from strived import engine

    return engine.search(library, query, progress=progress, cancel=cancel, **kwargs)




















_NOT_READY = {"bm25": "keyword search", "dense": "description search"}


def gui_notices(notices, indexing: bool = False) -> tuple[list[str], bool]:
    """Engine notices in words for a GUI user (no CLI commands or Python calls). Returns the
    notices and whether some source was skipped because the search index is not built yet."""
    out: list[str] = []
    missing: list[str] = []
    for n in notices or []:
        if not n:
            continue
        low = n.lower()
        m = re.match(r"(bm25|dense) source skipped: (.*)", n, re.S)
        if m and any(k in low for k in ("ensure_text_index", "summaries", " is empty",
                                         "not built", "when indexing")):
            missing.append(_NOT_READY[m.group(1)])
            continue
        n = re.sub(r"\s*\((?:[^()]*?)`[^`]*`[^()]*\)", "", n)        # "(`strived check --repair`)"
        n = re.sub(r"run `?ensure_text_index\([^)]*\)`?", "index a folder", n)
        n = re.sub(r"`strived (index|import)[^`]*`", "File → Index folder…", n)
        n = re.sub(r"`strived check[^`]*`", "re-indexing", n)
        out.append(n)
    if missing:
        what = " and ".join(missing)
        when = ("indexing is running; they become available when it finishes" if indexing else
                "they are built when a folder is indexed (File → Index folder…)")
        out.insert(0, f"{what[0].upper()}{what[1:]} not ready yet: {when}. "
                      "These results come from the other sources.")
    return out, bool(missing)


class ShortcutsDialog(QDialog):
    """Help → Keyboard shortcuts: every menu action with its keys."""

    def __init__(self, rows: list[tuple[str, str, str]], parent=None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        text = QPlainTextEdit(self)
        text.setReadOnly(True)
        width = max((len(f"{m} › {a}") for m, a, _k in rows), default=10) + 2
        text.setPlainText("\n".join(f"{f'{m} › {a}':<{width}}{k}" for m, a, k in rows))
        text.setObjectName("shortcuts")
        f = text.font()
        f.setFamily("DejaVu Sans Mono")
        text.setFont(f)
        self.text = text
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        bb.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(text, 1)
        lay.addWidget(bb)
        self.resize(560, 520)








class MainWindow(LibraryControl, InspectControl, ReviewControl, QMainWindow):
    """STRIVE-D's main window; ``library`` is the UI thread's Library (None until one is open)."""

    library_opened = Signal(str)
    search_finished = Signal(object)
    search_cancelled = Signal()
    inspect_finished = Signal(str)
    browsed = Signal(str)                  # a library video opened from the Library tab (boxes shown)
    compare_ready = Signal()

    def __init__(self, settings: AppSettings | None = None, library_path: str | None = None):
        super().__init__()
        self.setWindowTitle("STRIVE-D")
        self.setObjectName("mainWindow")
        self.settings = settings or AppSettings()
        self.library = None
        self.conns: LibraryConnections | None = None
        self.library_path = ""
        self.response = None
        self.presenter = ErrorPresenter(self)
        # library work (searches, explanations) on one long-lived thread with its own connection
        self.jobs = JobQueue(1, self, keep_threads=True)
        self.index_jobs = JobQueue(1, self)     # indexing has its own pool: search stays usable
        self._search_worker: Worker | None = None
        self._search_t0 = 0.0
        self._inspect_worker: Worker | None = None
        self._compare_worker: Worker | None = None
        self._maint_worker: Worker | None = None      # footage maintenance (Library menu)
        self.index_worker: Worker | None = None
        self._index_folder = ""
        self._results_stale = False             # shown while the search index was incomplete
        self._base_response = None              # the last search (not re-rank): Reset's target
        self._mark_undo: list[list[tuple]] = []
        self._mark_redo: list[list[tuple]] = []
        self.gate_witnesses: list[dict] = []    # the inspected result's hard-gate witnesses
        self.sequence_steps: list[dict] = []    # ... and a sequence rule's steps and negations
        self.sequence_absent: list[dict] = []
        self.close_s: float | None = None
        self._build()
        self.resize(1440, 900)
        self.restore_window_state()
        if library_path:
            QTimer.singleShot(0, lambda: self.open_library(library_path))

    # ------------------------------------------------------------------ layout
    def _action(self, text: str, slot, shortcut=None, tip: str = "", checkable: bool = False
                ) -> QAction:
        a = QAction(text, self)
        if isinstance(shortcut, QKeySequence.StandardKey):
            a.setShortcuts(shortcut)             # every binding of the platform (Redo: two)
        elif shortcut is not None:
            keys = shortcut if isinstance(shortcut, (list, tuple)) else [shortcut]
            a.setShortcuts([k if isinstance(k, QKeySequence) else QKeySequence(k) for k in keys])
        if tip:
            a.setStatusTip(tip)
            a.setToolTip(tip)
        a.setCheckable(checkable)
        a.triggered.connect(slot)
        self.addAction(a)                         # shortcuts work while the menu bar is hidden too
        return a

    def _build(self) -> None:
        SK = QKeySequence.StandardKey
        A = self._action
        self.act_open = A("Open library…", self._on_open_triggered, SK.Open,
                          "Open a STRIVE-D library, or a video folder to index")
        self.act_open_videos = A("Open video folder…", self._on_open_videos_triggered,
                                 "Ctrl+Shift+O", "Index a dashcam folder into its own library")
        self.act_new = A("New library…", self._on_new_triggered, SK.New)
        self.act_index = A("Index folder…", self._on_index_triggered, "Ctrl+I",
                           "Add a folder's videos to this library")
        self.act_export = A("Export…", self.export_results, "Ctrl+E",
                            "Export the selected results (all when one is selected)")
        self.act_export_marked = A("Export marked results…", self.export_marked_results,
                                   "Ctrl+Shift+E", "Export every result of this search you "
                                   "marked relevant (R), in one go")
        self.act_compare = A("Compare", self.compare_selected, "Ctrl+K",
                             "Play the selected results side by side, aligned at their events")
        self.act_save = A("Save search…", self._on_save_search_triggered, SK.Save)
        self.act_settings = A("Settings…", self._on_settings_triggered, "Ctrl+,")
        self.act_quit = A("Quit", self.close, "Ctrl+Q")
        self.act_welcome = A("Welcome", lambda: self.show_welcome())
        self.act_shortcuts = A("Keyboard shortcuts", self.show_shortcuts, SK.HelpContents)
        self.act_about = A("About STRIVE-D", self.show_about)
        self.act_undo = A("Undo", self.undo, SK.Undo)
        self.act_redo = A("Redo", self.redo, SK.Redo)
        self.act_find = A("Find…", self.focus_query, [QKeySequence(SK.Find), QKeySequence("Ctrl+L")],
                          "Type a new query")
        self.act_mark_yes = A("Mark relevant", lambda: self.mark_current(True), "R")
        self.act_mark_no = A("Mark not relevant", lambda: self.mark_current(False), "N")
        self.act_mark_clear = A("Clear mark", lambda: self.mark_current(None), "Delete")
        self.act_marks_clear_all = A("Clear all marks of this search", self.clear_all_marks)
        self.act_fullscreen = A("Full screen", self.toggle_full_screen, SK.FullScreen,
                                checkable=True)
        self.act_tab_inspect = A("Inspect", lambda: self.tabs.setCurrentIndex(0), "Ctrl+1")
        self.act_tab_compare = A("Compare view", lambda: self.tabs.setCurrentIndex(1), "Ctrl+2")
        self.act_tab_rule = A("Rule", lambda: self.tabs.setCurrentIndex(2), "Ctrl+3")
        self.act_boxes = A("Boxes and track ids", lambda on: self.player.set_overlay(on), "B",
                           checkable=True)
        self.act_boxes.setChecked(True)
        self.act_play = A("Play / pause", self._on_space, "Space")
        self.act_next_frame = A("Next frame", lambda: self._on_arrow(1), "Right")
        self.act_prev_frame = A("Previous frame", lambda: self._on_arrow(-1), "Left")
        self.act_next_10 = A("Forward 10 frames", lambda: self._on_arrow(10), "Shift+Right")
        self.act_prev_10 = A("Back 10 frames", lambda: self._on_arrow(-10), "Shift+Left")
        self.act_event_start = A("Go to the event start", self.go_to_event_start, "Home")
        self.act_search = A("Search", lambda: self.search(), None,
                            "Search the library for the query")
        self.act_cancel_search = A("Cancel search", self.cancel_search, "Esc")
        self.act_next_result = A("Next result", lambda: self.select_result(1),
                                 ["Ctrl+Down", "Ctrl+J"])
        self.act_prev_result = A("Previous result", lambda: self.select_result(-1),
                                 ["Ctrl+Up", "Ctrl+Shift+J"])
        self.act_edit_rule = A("Edit the rule", lambda: self.tabs.setCurrentWidget(
            self.rule_editor), "Ctrl+R")
        self.act_find_missing = A("Find missing videos…", self.find_missing_videos, None,
                                  "List the videos whose file is no longer where it was "
                                  "indexed, and look for them in a folder")
        self.act_relink = A("Relink a moved folder…", lambda: self.relink_folder(), None,
                            "The footage moved: point the library's videos from the old folder "
                            "to the new one (checked by content)")
        self.act_remove_videos = A("Remove selected videos from the library…",
                                   self.remove_selected_videos, None,
                                   "Remove the selected results' videos from the library (their "
                                   "files are not deleted)")
        self.saved_menu = QMenu("Saved searches", self)
        self.saved_menu.aboutToShow.connect(self._on_saved_menu_about_to_show)

        mb = self.menuBar()
        m_file = mb.addMenu("&File")
        for a in (self.act_open, self.act_open_videos, self.act_new, None, self.act_index, None,
                  self.act_save):
            m_file.addSeparator() if a is None else m_file.addAction(a)
        m_file.addMenu(self.saved_menu)
        for a in (self.act_export, self.act_export_marked, None, self.act_settings, None,
                  self.act_quit):
            m_file.addSeparator() if a is None else m_file.addAction(a)
        m_lib = mb.addMenu("&Library")
        for a in (self.act_find_missing, self.act_relink, None, self.act_remove_videos):
            m_lib.addSeparator() if a is None else m_lib.addAction(a)
        m_edit = mb.addMenu("&Edit")
        for a in (self.act_undo, self.act_redo, None, self.act_find, None, self.act_mark_yes,
                  self.act_mark_no, self.act_mark_clear, self.act_marks_clear_all):
            m_edit.addSeparator() if a is None else m_edit.addAction(a)
        m_view = mb.addMenu("&View")
        for a in (self.act_fullscreen, None, self.act_tab_inspect, self.act_tab_compare,
                  self.act_tab_rule):
            m_view.addSeparator() if a is None else m_view.addAction(a)
        self.m_view = m_view
        m_view.addSeparator()
        m_play = m_view.addMenu("Playback")
        for a in (self.act_play, self.act_next_frame, self.act_prev_frame, self.act_next_10,
                  self.act_prev_10, self.act_event_start, None, self.act_boxes):
            m_play.addSeparator() if a is None else m_play.addAction(a)
        m_search = mb.addMenu("&Search")
        for a in (self.act_search, self.act_cancel_search, None, self.act_next_result,
                  self.act_prev_result, None, self.act_compare, self.act_edit_rule):
            m_search.addSeparator() if a is None else m_search.addAction(a)
        m_help = mb.addMenu("&Help")
        for a in (self.act_welcome, self.act_shortcuts, None, self.act_about):
            m_help.addSeparator() if a is None else m_help.addAction(a)
        self.menus = {"File": m_file, "Library": m_lib, "Edit": m_edit, "View": m_view, "Search": m_search,
                      "Help": m_help, "Playback": m_play}

        tb = QToolBar("Main", self)
        tb.setObjectName("mainToolBar")
        tb.setMovable(False)
        self.addToolBar(tb)
        for a in (self.act_open, self.act_new, self.act_index):
            tb.addAction(a)
        tb.addSeparator()
        for a in (self.act_compare, self.act_export, self.act_save):
            tb.addAction(a)
        tb.addAction(self.saved_menu.menuAction())
        tb.addSeparator()
        tb.addAction(self.act_settings)
        tb.addAction(self.act_welcome)
        self.toolbar = tb

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
        self.search_button.clicked.connect(lambda: self.search())
        self.search_progress = QProgressBar(self)
        self.search_progress.setMaximumWidth(200)
        self.search_progress.setTextVisible(True)
        self.search_progress.hide()
        self.search_cancel = QPushButton("Cancel", self, toolTip="Stop this search (Esc)")
        self.search_cancel.clicked.connect(self.cancel_search)
        self.search_cancel.hide()
        self._search_clock = QTimer(self, interval=200)
        self._search_clock.timeout.connect(self._update_search_progress_text)
        self.notice = QLabel("", self, objectName="notice")
        self.notice.setWordWrap(True)
        self.notice.hide()

        self.model = ResultsModel(self)
        self.table = QTableView(self)
        self.table.setObjectName("results")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(58)
        self.table.verticalHeader().setVisible(False)
        self.table.setIconSize(ResultsModel.THUMB_SIZE)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_results_context_menu)
        self.table.doubleClicked.connect(lambda _ix: self.open_current_result())
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setResizeContentsPrecision(25)        # size columns from the first rows, not all 100
        hh.setSectionResizeMode(ResultsModel.C_FILE, QHeaderView.ResizeMode.Interactive)
        hh.resizeSection(ResultsModel.C_FILE, 170)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.setSortingEnabled(True)     # a header click sorts; "#" returns to the fused order
        self.table.sortByColumn(ResultsModel.C_THUMB, Qt.SortOrder.AscendingOrder)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.mark_yes = QPushButton("Relevant (R)", self)
        self.mark_no = QPushButton("Not relevant (N)", self)
        self.mark_clear = QPushButton("Clear mark (Del)", self)
        self.mark_yes.clicked.connect(lambda: self.mark_current(True))
        self.mark_no.clicked.connect(lambda: self.mark_current(False))
        self.mark_clear.clicked.connect(lambda: self.mark_current(None))
        self.results_label = QLabel("No search yet.", self, objectName="dim")
        self.results_label.setWordWrap(True)
        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.results_label)
        ll.addWidget(self.table, 1)
        mk = QHBoxLayout()
        mk.addWidget(self.mark_yes)
        mk.addWidget(self.mark_no)
        mk.addWidget(self.mark_clear)
        mk.addStretch(1)
        ll.addLayout(mk)
        self.learn_panel = LearnPanel(self)       # Learn from marks / Undo learned numbers
        ll.addWidget(self.learn_panel)

        self.player = PlayerWidget(self)
        self.timeline = TimelineWidget(self)
        self.gates_list = QListWidget(self)
        self.gates_list.setObjectName("gateWitnesses")
        self.gates_list.setToolTip("Each hard gate of the rule: the track that met it and when. "
                                   "Click one to select that track in the timeline and the player.")
        self.gates_list.itemClicked.connect(self._on_gate_clicked)
        self.gates_list.hide()
        self.steps_list = QListWidget(self)
        self.steps_list.setObjectName("sequenceSteps")
        self.steps_list.setToolTip("A sequence rule's steps: the track (or the ego) that realised "
                                   "each one and when, then each negation. Click one to select "
                                   "its track and go to its span.")
        self.steps_list.itemClicked.connect(self._on_step_item_clicked)
        self.steps_list.hide()
        why = QWidget(self)
        wl = QVBoxLayout(why)
        wl.setContentsMargins(0, 0, 0, 0)
        wl.setSpacing(2)
        lists = QHBoxLayout()
        lists.setSpacing(4)
        lists.addWidget(self.gates_list, 1)
        lists.addWidget(self.steps_list, 1)
        wl.addLayout(lists)
        wl.addWidget(self.timeline, 1)
        self.inspect_split = QSplitter(Qt.Orientation.Vertical, self)
        self.inspect_split.setObjectName("inspectSplit")
        self.inspect_split.addWidget(self.player)
        self.inspect_split.addWidget(why)
        self.inspect_split.setSizes([430, 370])      # the timeline's rows need height to be read
        self.compare = CompareView(self)
        self.rule_editor = RuleEditor(self)
        self.library_view = LibraryView(self)
        self.library_view.open_requested.connect(self.browse_video)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.inspect_split, "Inspect")
        self.tabs.addTab(self.compare, "Compare")
        self.tabs.addTab(self.rule_editor, "Rule")
        self.tabs.addTab(self.library_view, "Library")
        self.main_split = QSplitter(Qt.Orientation.Horizontal, self)
        self.main_split.setObjectName("mainSplit")
        self.main_split.addWidget(left)
        self.main_split.addWidget(self.tabs)
        self.main_split.setSizes([640, 800])

        central = QWidget(self)
        cl = QVBoxLayout(central)
        cl.setContentsMargins(6, 6, 6, 2)
        qrow = QHBoxLayout()
        qrow.addWidget(self.query, 1)
        qrow.addWidget(self.search_progress)
        qrow.addWidget(self.search_cancel)
        qrow.addWidget(self.search_button)
        cl.addLayout(qrow)
        cl.addWidget(self.notice)
        cl.addWidget(self.main_split, 1)
        self.setCentralWidget(central)

        self.index_panel = IndexPanel(self)
        self.index_dock = QDockWidget("Indexing", self)
        self.index_dock.setWidget(self.index_panel)
        self.index_dock.setObjectName("indexDock")
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.index_dock)
        self.index_dock.hide()
        act_dock = self.index_dock.toggleViewAction()
        act_dock.setText("Indexing panel")
        m_view.insertAction(m_play.menuAction(), act_dock)
        self.index_panel.cancel_requested.connect(self.cancel_indexing)
        self.stats_label = QLabel("No library open.", self)
        self.statusBar().addPermanentWidget(self.stats_label)
        self.rules_label = QLabel("", self, objectName="ruleLibraryStatus")
        self.statusBar().addPermanentWidget(self.rules_label)
        self._rule_lib_cache: tuple | None = None     # (path, mtime, RuleLibrary)
        self.refresh_rule_library_label()

        self.player.frame_shown.connect(self._on_player_frame_shown)
        self.player.failed.connect(lambda m: self.statusBar().showMessage(m, 8000))
        self.player.overlay_box.toggled.connect(self.act_boxes.setChecked)
        self.timeline.seek_requested.connect(self.player.seek_time)
        self.timeline.track_selected.connect(self.player.highlight_track)
        self.timeline.step_selected.connect(self.select_step)
        self.rule_editor.rule_applied.connect(self._on_rule_applied)
        self.rule_editor.rule_saved.connect(self._on_rule_saved)
        self.rule_editor.reset_requested.connect(self._on_rule_reset)
        self.presenter.noticed.connect(self.show_notice)
        self.similar = SimilarPanel(self)            # More like this: progress, Cancel (above the table)
        ll.insertWidget(1, self.similar)
        self._refresh_actions()

    # ------------------------------------------------------------------ window state
    def save_window_state(self) -> None:
        q = self.settings.q
        q.setValue("window/geometry", self.saveGeometry())
        q.setValue("window/state", self.saveState())
        q.setValue("window/main_split", self.main_split.saveState())
        q.setValue("window/inspect_split", self.inspect_split.saveState())
        q.setValue("window/tab", self.tabs.currentIndex())
        q.setValue("window/boxes", self.player.canvas.overlay)

    def restore_window_state(self) -> bool:
        q = self.settings.q
        geo = q.value("window/geometry")
        if not isinstance(geo, QByteArray) or geo.isEmpty():
            return False
        self.restoreGeometry(geo)
        for key, fn in (("window/state", self.restoreState),
                        ("window/main_split", self.main_split.restoreState),
                        ("window/inspect_split", self.inspect_split.restoreState)):
            v = q.value(key)
            if isinstance(v, QByteArray) and not v.isEmpty():
                fn(v)
        self.index_dock.hide()                     # shown again when indexing starts
        try:
            self.tabs.setCurrentIndex(int(q.value("window/tab", 0)))
        except (TypeError, ValueError):
            pass
        self.player.set_overlay(self.settings._get("window/boxes", True, bool))
        return True

    def toggle_full_screen(self, on: bool | None = None) -> None:
        on = (not self.isFullScreen()) if on is None or not isinstance(on, bool) else on
        self.showFullScreen() if on else self.showNormal()
        self.act_fullscreen.setChecked(on)

    # ------------------------------------------------------------------ search
    def search(self, rule: dict | None = None, origin: str | None = None) -> None:
        """Search the query bar's text (``rule``: re-rank with this rule)."""
        q = self.query.currentText().strip()
        if self.library is None:
            self.presenter.notice("Open or create a library first (File → Open library…).")
            return
        if not q and rule is None:
            return
        if self._search_worker is not None and not self._search_worker.is_done:
            self._search_worker.cancel()
        self.similar.cancel()                        # a pending More like this is superseded
        self._add_history(q)
        kwargs = {"top_k": 100}
        rules_notice = None
        if rule is not None:
            kwargs["rule"] = rule
        elif self.settings.rule_library_path:
            lib, err = self.chosen_rule_library()
            if lib is not None:
                kwargs["rule_library"] = lib
            else:
                rules_notice = (f"The chosen rule library cannot be used ({err}); this search "
                                "uses the shipped rules (Settings → Search).")
            self.refresh_rule_library_label()
        llm = None
        try:
            cfg = self.settings.llm_config()
            if cfg.usable:
                from strived.llm.client import LLMClient

                llm = LLMClient(cfg)
        except Exception as exc:  # noqa: BLE001 - a bad LLM config falls back to offline
            self.presenter.notice(f"LLM settings ignored ({exc}); searching offline.")
        w = Worker(library_job, self.conns, search_job, q, llm=llm, name="search", **kwargs)
        w.origin = origin or ("rerank" if rule is not None else "search")
        w.rules_notice = rules_notice
        w.query = q
        w.during_indexing = self.indexing
        w.signals.progressed.connect(lambda ev, w=w: self._on_search_progressed(w, ev))
        w.signals.finished.connect(lambda resp, w=w: self._on_search_finished(w, resp))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_search_errored(w, exc, tb))
        w.signals.cancelled.connect(lambda w=w: self._on_search_stopped(w))
        self._search_worker = self.jobs.submit(w)
        self._search_t0 = time.monotonic()
        self._set_searching(True)

    def _set_searching(self, on: bool) -> None:
        self.search_progress.setVisible(on)
        self.search_cancel.setVisible(on)
        self.search_cancel.setEnabled(on)
        if on:
            self.search_progress.setRange(0, 0)          # busy until the first step is done
            self._search_clock.start()
            self._update_search_progress_text()
        else:
            self._search_clock.stop()
        self._refresh_actions()

    def _update_search_progress_text(self) -> None:
        w = self._search_worker
        if w is None:
            return
        el = time.monotonic() - self._search_t0
        step = getattr(w, "step_text", "resolving the rule")
        extra = " · indexing is running, searching what is indexed so far" \
            if w.during_indexing else ""
        self.results_label.setText(f"Searching “{w.query}”… {step} ({el:.1f} s){extra} — "
                                   "Esc cancels")
        self.search_progress.setFormat(f"{el:.1f} s")

    def _on_search_progressed(self, worker, ev) -> None:
        if worker is not self._search_worker or getattr(ev, "stage", "") != "search":
            return
        self.search_progress.setRange(0, max(1, ev.total))
        self.search_progress.setValue(ev.done)
        nxt = {"rule": "dense", "dense": "BM25", "bm25": "fusing"}.get(ev.message or "", "")
        worker.step_text = f"{ev.done}/{ev.total} sources done" + (f", {nxt}" if nxt else "")
        self._update_search_progress_text()

    def cancel_search(self) -> None:
        """Stop the running search now: the UI is free at once, the engine stops at its next step."""
        w = self._search_worker
        if w is None or w.is_done:
            return
        w.cancel()
        self._search_worker = None
        self._set_searching(False)
        self.results_label.setText(f"Search for “{w.query}” cancelled."
                                   + (f" Showing the results of “{self.response.query}”."
                                      if self.response is not None else ""))
        self.search_cancelled.emit()

    def _on_search_stopped(self, worker) -> None:
        if worker is self._search_worker:
            self._search_worker = None
            self._set_searching(False)
            self.results_label.setText("Search cancelled.")

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
            return                              # a newer search (or a cancel) superseded this one
        self._set_searching(False)
        self._results_stale = worker.during_indexing
        self.show_response(resp, getattr(worker, "rules_notice", None), origin=worker.origin)
        if worker.origin == "search":
            if self.tabs.currentWidget() is not self.inspect_split:
                self.tabs.setCurrentWidget(self.inspect_split)
            self.player.setFocus(Qt.FocusReason.OtherFocusReason)   # Space/arrows drive the player
        self.search_finished.emit(resp)

    def _on_search_errored(self, worker, exc, tb) -> None:
        if worker is not self._search_worker:
            return
        self._set_searching(False)
        self.results_label.setText("Search failed.")
        self.presenter.present("Search failed", exc, tb)

    def show_response(self, resp, notice: str | None = None, origin: str = "search") -> None:
        self.response = resp
        if origin != "rerank":
            self._base_response = resp          # what the rule editor's Reset returns to
        marks = ops.marks_for(self.library, resp.query) if self.library is not None else {}
        self.model.set_response(resp, marks)
        self.table.sortByColumn(ResultsModel.C_THUMB, Qt.SortOrder.AscendingOrder)   # a new search: its own order
        self._mark_undo.clear()
        self._mark_redo.clear()
        ms = (getattr(resp, "timings_ms", {}) or {}).get("total")
        took = f" in {ms:.0f} ms" if ms is not None else ""
        m = resp.match or {}
        how = f" · rule: {m.get('event')} ({m.get('mode')})" if m.get("event") else ""
        self.results_label.setText(f"{len(resp.hits)} result(s) for “{resp.query}”{took}{how}")
        notes, not_ready = gui_notices(list(resp.notices or []), self.indexing)
        self._results_stale = self._results_stale or not_ready
        self.show_notice(" · ".join(([notice] if notice else []) + notes))
        self.notice.setToolTip("\n".join(resp.notices or []))      # the engine's own words
        if origin == "rerank":
            self.rule_editor.rule_reranked(resp.rule)
        else:
            self.rule_editor.set_rule(resp.rule)
        self._refresh_actions()
        if resp.hits:
            self._select_only(0)
        else:
            self.player.clear("No video matched this query.")
            self.timeline.clear("No video matched: try other words or edit the rule (Rule tab).")
            self.set_gate_witnesses([])
            self.set_sequence_steps([], [])

    def select_result(self, step: int) -> None:
        n = self.model.rowCount()
        if not n:
            return
        row = self.table.currentIndex().row()
        row = 0 if row < 0 else max(0, min(n - 1, row + step))
        self._select_only(row)

    def _select_only(self, row: int) -> None:
        """Make ``row`` the current and only selected result (selectRow() would honour the
        modifiers held for the shortcut: Ctrl+Down toggled rows into the selection)."""
        from PySide6.QtCore import QItemSelectionModel

        ix = self.model.index(row, ResultsModel.C_FILE)
        flags = (QItemSelectionModel.SelectionFlag.ClearAndSelect
                 | QItemSelectionModel.SelectionFlag.Rows)
        self.table.selectionModel().setCurrentIndex(ix, flags)
        self.table.scrollTo(ix)

    def focus_query(self) -> None:
        self.query.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.query.lineEdit().selectAll()

    # ------------------------------------------------------------------ rule, saved searches
    def _on_rule_applied(self, rule: dict) -> None:
        self.search(rule=rule)

    def _on_rule_reset(self) -> None:
        """Reset after a re-rank: the search's own ranking comes back with its rule (kept, not
        searched again)."""
        base = self._base_response
        if base is not None and self.response is not base:
            if self._search_worker is not None and not self._search_worker.is_done:
                self.cancel_search()
            self.query.setCurrentText(base.query)
            self.show_response(base, origin="reset")
            self.statusBar().showMessage("Back to the search's own rule and ranking "
                                         "(Ctrl+Z in the rule editor brings the edit back).", 6000)

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
        self._results_stale = False
        self.show_response(resp, notice)

    def _on_save_search_triggered(self) -> None:
        if self.response is None or self.library is None:
            return
        name, ok = QInputDialog.getText(self, "Save search", "Name:", text=self.response.query[:60])
        name = name.strip()
        if not ok or not name:
            return
        old = ops.saved_search_info(self.library, name)
        if old is not None:
            box = QMessageBox(QMessageBox.Icon.Question, "Replace the saved search?",
                              f"A saved search named “{name}” already exists (query “{old[0]}”, "
                              f"saved {old[1]}).", parent=self)
            box.setObjectName("replaceSavedBox")
            box.setInformativeText("Replace it with this search?")
            replace = box.addButton("Replace", QMessageBox.ButtonRole.DestructiveRole)
            keep = box.addButton("Keep the old one", QMessageBox.ButtonRole.RejectRole)
            box.setDefaultButton(keep)
            box.exec()
            if box.clickedButton() is not replace:
                self.statusBar().showMessage(f"Not saved: “{name}” is kept as it was.", 6000)
                return
        self.save_search(name)

    def _on_saved_menu_about_to_show(self) -> None:
        self.saved_menu.clear()
        if self.library is None:
            self.saved_menu.addAction("(no library open)").setEnabled(False)
            return
        saved = ops.list_saved(self.library)
        if not saved:
            self.saved_menu.addAction("(none yet: File → Save search…)").setEnabled(False)
        for name, query, created in saved:
            a = self.saved_menu.addAction(f"{name}  —  {query}")
            a.setToolTip(created)
            a.triggered.connect(lambda _=False, n=name: self.open_saved(n))

    # ------------------------------------------------------------------ dialogs
    def show_welcome(self, only_if_wanted: bool = False):
        """The first-run screen (app/welcome.py); ``only_if_wanted`` honours its "show" checkbox."""
        if only_if_wanted and not show_welcome_at_start(self.settings):
            return None
        self.welcome = WelcomeDialog(self)
        self.welcome.show()
        return self.welcome

    def shortcut_rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for title, menu in self.menus.items():
            for a in menu.actions():
                if a.isSeparator() or a.menu() is not None:
                    continue
                keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText)
                                 for k in a.shortcuts())
                if keys:
                    rows.append((title, a.text().replace("&", ""), keys))
        return rows

    def show_shortcuts(self) -> ShortcutsDialog:
        self.shortcuts_dialog = ShortcutsDialog(self.shortcut_rows(), self)
        self.shortcuts_dialog.show()
        return self.shortcuts_dialog

    def show_about(self) -> None:
        import strived

        from .about import about_html

        QMessageBox.about(self, "About STRIVE-D", about_html(getattr(strived, "__version__", "")))

    def _on_settings_triggered(self) -> None:
        self.settings_dialog = SettingsDialog(self.settings, self._index_folder, self)
        self.settings_dialog.applied.connect(self.refresh_rule_library_label)
        self.settings_dialog.show()

    # ------------------------------------------------------------------ rule library
    def chosen_rule_library(self):
        """(the RuleLibrary chosen in Settings, None) — (None, None) for the shipped ones, (None,
        why) when the chosen file cannot be used now. Loaded once per file version."""
        path = self.settings.rule_library_path
        if not path:
            return None, None
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            mtime = None
        c = self._rule_lib_cache
        if c is not None and c[0] == path and c[1] == mtime and mtime is not None:
            return c[2], None
        try:
            lib = load_rule_library(path)
        except Exception as exc:  # noqa: BLE001 - RuleLibraryError and the like, in words
            self._rule_lib_cache = None
            return None, str(exc)
        self._rule_lib_cache = (path, mtime, lib)
        return lib, None

    def refresh_rule_library_label(self) -> None:
        """The status bar says which rules searches use."""
        path = self.settings.rule_library_path
        if not path:
            self.rules_label.setText("rules: shipped")
            self.rules_label.setToolTip("Searches use the shipped, calibrated rule libraries "
                                        "(Settings → Search → Rule library to choose another)")
            return
        lib, err = self.chosen_rule_library()
        name = os.path.basename(path)
        if lib is None:
            self.rules_label.setText(f"rules: {name} (unusable: shipped rules used)")
            self.rules_label.setToolTip(f"{path}\n{err}")
        else:
            self.rules_label.setText(f"rules: {name} ({lib.version})")
            self.rules_label.setToolTip(f"{path}\n{len(lib.entries)} events; every search "
                                        "uses this library (Settings → Search)")

    @property
    def busy_jobs(self) -> list[str]:
        """Names of jobs still running (after close: the process may exit without them)."""
        return [w.name for q in (self.jobs, self.index_jobs) for w in q.active]

    def closeEvent(self, event) -> None:
        """Close at once: cancel every job, wait only briefly (an indexing job stops at its next
        frame; a search stuck in a model load is left to finish on its own connection)."""
        t0 = time.perf_counter()
        self.save_window_state()
        self.cancel_indexing()          # pending_index stays set: reopening resumes
        self.jobs.cancel_all()
        self.learn_panel.shutdown()
        self._set_searching(False)
        self.player.shutdown()
        self.compare.shutdown()
        self.settings.sync()
        self.index_jobs.shutdown(CLOSE_WAIT_INDEX_MS)
        self.jobs.shutdown(CLOSE_WAIT_JOBS_MS)
        if self.conns is not None:
            self.conns.close_all()      # busy worker connections close when their job ends
        self.conns = None
        self.library = None
        self.close_s = time.perf_counter() - t0
        super().closeEvent(event)
