"""The main window: menu bar, query bar, ranked results, player + WHY timeline, compare, rule
editor, indexing panel and status bar. Every action calls the engine (``strived.engine``) in a
worker; the UI thread and the library worker each use their own SQLite connection
(``app/connections.py``)."""

from __future__ import annotations

import os
import re
import time

from PySide6.QtCore import QByteArray, QStringListModel, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QComboBox, QCompleter, QDialog,
                               QDialogButtonBox, QDockWidget, QFileDialog, QHBoxLayout,
                               QHeaderView, QInputDialog, QLabel, QListWidget, QListWidgetItem,
                               QMainWindow, QMenu, QMessageBox,
                               QPlainTextEdit, QProgressBar, QPushButton, QSplitter, QTableView,
                               QTabWidget, QToolBar, QVBoxLayout, QWidget)

from . import library_ops as ops
from .compare import CompareView
from .connections import LibraryConnections, library_job
from .errors import ErrorPresenter
from .index_panel import IndexPanel
from .library_view import LibraryView
from .player import PlayerWidget
from .results import ResultsModel
from .rule_editor import RuleEditor
from .settings import AppSettings, SettingsDialog, load_rule_library
from .timeline import TimelineWidget, absent_text, sequence_parts, step_text
from .welcome import WelcomeDialog, default_library_for, show_welcome_at_start
from .workers import JobQueue, Worker

#: how long closing waits for jobs that cannot stop at once (a model load): the window goes at once,
#: the job's own connection closes when it ends, and ``python -m app`` exits without waiting
CLOSE_WAIT_INDEX_MS = 1500
CLOSE_WAIT_JOBS_MS = 150


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
            from strived.indexing.text_process import build_text_index_in_process

            # BM25, dense, rule features: in a process of its own (loading the embedder in this
            # one held the interpreter lock long enough to freeze the window for ~300 ms)
            build_text_index_in_process(library_folder, embedder_dir=embedder_dir or None,
                                        progress=progress, cancel=cancel)
        return rep
    finally:
        lib.close()


def search_job(library, query: str, *, progress=None, cancel=None, **kwargs):
    """``engine.search`` on the library worker's own connection."""
    from strived import engine

    return engine.search(library, query, progress=progress, cancel=cancel, **kwargs)


def inspect_job(library, video_id: str, rule: dict | None):
    """Records (for box overlays), the rule's explanation (for the timeline) of one video, and
    each hard gate's witness: the track (or the ego, track -1) that met it and when."""
    from strived import engine
    from strived.rules import parse_rule
    from strived.rules.explain import gate_witnesses

    rec = library.get_video(video_id)
    if not rule:
        return rec, None, []
    r = parse_rule(rule)
    exp = engine.explain(library, video_id, r)
    return rec, exp, gate_witnesses(exp, r) if r.hard_gates else []


def gate_witness_text(g: dict) -> str:
    """One hard gate's witness in words: which track met it, when, and whether it is the track
    the score (and the span) come from."""
    if not g.get("met"):
        return f"{g['gate']}: not met by any track"
    tid = int(g["track"])
    who = "the ego vehicle" if tid < 0 else f"{g.get('cls') or 'track'} #{tid}"
    when = (f", {g['first_s']:.1f}–{g['last_s']:.1f} s" if g.get("first_s") is not None else "")
    frac = g.get("fraction")
    share = f" ({frac:.0%} of its samples)" if frac is not None else ""
    if g.get("held_s") is not None:           # a gate held for a duration: its longest run
        share = f" (held {g['held_s']:.1f} s unbroken)"
    if tid < 0:
        whose = ""
    elif g.get("is_peak_track"):
        whose = " · the scoring track"
    else:
        whose = " · not the scoring track"
    return f"{g['gate']}: met by {who}{when}{share}{whose}"


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


def missing_job(library) -> list:
    """Videos of the library whose file is gone (``strived.maintenance.footage``)."""
    from strived.maintenance.footage import missing_videos

    return missing_videos(library)


def find_moved_job(library, folder: str):
    from strived.maintenance.footage import find_moved

    return find_moved(library, folder)


def relink_job(library, old: str, new: str):
    from strived.maintenance.footage import relink

    return relink(library, old, new)


def remove_job(library, video_ids: list[str]) -> list[str]:
    from strived.maintenance.footage import remove_videos

    return remove_videos(library, video_ids)


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


def _text_editor(fw):
    """The text editor behind a focused widget (a line edit, a spin box's or an editable combo
    box's line edit, a plain-text editor), whose own undo Ctrl+Z should reach; None otherwise."""
    from PySide6.QtWidgets import QAbstractSpinBox, QLineEdit

    if isinstance(fw, (QPlainTextEdit, QLineEdit)):
        return fw
    if isinstance(fw, QAbstractSpinBox):
        return fw.findChild(QLineEdit)
    if isinstance(fw, QComboBox) and fw.isEditable():
        return fw.lineEdit()
    return None


def _overview(library) -> tuple[list[dict], int]:
    """The Library tab's rows and the library's size (runs in a worker)."""
    return library.overview(), len(library)


def _unknown_reason(hit) -> str | None:
    """Why the rule could not judge ``hit``'s video ("speed not estimated for it"), or None."""
    ps = (getattr(hit, "per_source", None) or {}).get("rule") or {}
    if ps.get("status") != "cannot evaluate":
        return None
    fields = ", ".join(ps.get("missing_fields") or []) or "some fields"
    return f"{fields} not estimated for it: unknown, not a non-match"


class MainWindow(QMainWindow):
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

    # ------------------------------------------------------------------ library
    def open_library(self, folder: str, create: bool = False, ask: bool = True) -> bool:
        """Open the library in ``folder``. A folder without a library: a video folder is offered
        for indexing (its library is kept apart), an empty one for a new library."""
        from strived.store.library import DB_NAME, Library

        if not create and ask and os.path.isdir(folder) and \
                not os.path.exists(os.path.join(folder, DB_NAME)):
            return self._offer_library_for(folder)
        try:
            lib = Library.open(folder, create=create)
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
            from strived.perception.video import survey_videos

            # bounded: a home folder can hold millions of files (the count is then a lower bound)
            sv = survey_videos(folder, time_budget_s=0.5)
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
        from .frames import BoxOverlay

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
        self.act_remove_videos.setEnabled(has_hits and not busy)
        for a in (self.act_export, self.act_export_marked, self.act_save, self.act_compare,
                  self.act_mark_yes,
                  self.act_mark_no, self.act_mark_clear, self.act_marks_clear_all,
                  self.act_next_result, self.act_prev_result):
            a.setEnabled(has_hits)
        for b in (self.mark_yes, self.mark_no, self.mark_clear):
            b.setEnabled(has_hits)
        self.act_search.setEnabled(has_lib)
        self.act_cancel_search.setEnabled(searching)
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

    # ------------------------------------------------------------------ inspect
    def _on_current_row_changed(self, current, _previous) -> None:
        h = self.model.hit(current.row())
        if h is None or self.library is None:
            return
        spans = [h.span_s] if h.span_s else []
        if h.path and os.path.exists(h.path):
            self.player.load(h.path, span_s=h.span_s)
            self.player.set_intervals(spans)
        elif h.path:
            self.player.clear(f"The video file is missing:\n{h.path}\n(moved or deleted; the "
                              "records are still in the library)")
        else:
            self.player.clear("Records only: this item has no video file.")
        self.timeline.clear("Explaining…")
        self.set_gate_witnesses([])
        self.set_sequence_steps([], [])
        if self._inspect_worker is not None:
            self._inspect_worker.cancel()
        rule = self.response.rule_for(h.video_id) if self.response else None
        w = Worker(library_job, self.conns, inspect_job, h.video_id, rule,
                   pass_progress=False, pass_cancel=False, name="inspect")
        w.signals.finished.connect(lambda res, w=w, h=h: self._on_inspect_finished(w, h, res))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_inspect_errored(w, exc, tb))
        self._inspect_worker = self.jobs.submit(w)

    def _on_inspect_finished(self, worker, hit, result) -> None:
        if worker is not self._inspect_worker:
            return
        rec, exp, witnesses = result
        from .frames import BoxOverlay

        self.player.overlay_data = BoxOverlay(rec)
        self.player.seek(self.player.frame_idx)
        if exp is not None:
            if getattr(exp, "ego", None) is not None and exp.ego not in exp.traces:
                exp.traces = list(exp.traces) + [exp.ego]
            unknown = _unknown_reason(hit)
            self.timeline.set_explanation(exp, title=os.path.basename(hit.path or hit.video_id),
                                          cuts=(rec.info.attrs or {}).get("shot_cuts_s") or (), unknown=unknown)
            if exp.peak_track is not None:
                self.timeline.highlight_track(exp.peak_track)
                self.player.highlight_track(exp.peak_track)
            intervals = self.timeline.event_intervals()
            if intervals:
                self.player.set_intervals(intervals)
            self.set_gate_witnesses(witnesses)
            steps, absent = sequence_parts(exp)
            self.set_sequence_steps(steps, absent, self._is_sequence(hit), unknown)
        else:
            self.timeline.clear("No rule for this search (dense/BM25 only): nothing to explain.")
        self.inspect_finished.emit(hit.video_id)

    def _on_inspect_errored(self, worker, exc, tb) -> None:
        if worker is self._inspect_worker:
            self.timeline.clear(f"Cannot explain this video: {exc}")

    def set_gate_witnesses(self, witnesses: list[dict]) -> None:
        """The hard gates' witnesses under the player (hidden when the rule has no hard gate)."""
        self.gate_witnesses = list(witnesses)
        self.gates_list.clear()
        for g in witnesses:
            it = QListWidgetItem(gate_witness_text(g))
            if g.get("met"):
                it.setData(Qt.ItemDataRole.UserRole, (int(g["track"]), g.get("first_s")))
                it.setToolTip("Click to select this track in the timeline and the player, and "
                              "go to where it first meets the gate")
            else:
                it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsSelectable)
                it.setToolTip("No track of this video meets this gate")
            self.gates_list.addItem(it)
        if witnesses:                   # as tall as its rows (up to 4; it scrolls beyond)
            rows = min(4, len(witnesses))
            self.gates_list.setFixedHeight(rows * max(16, self.gates_list.sizeHintForRow(0))
                                           + 2 * self.gates_list.frameWidth() + 2)
        self.gates_list.setVisible(bool(witnesses))

    def _is_sequence(self, hit) -> bool:
        rule = self.response.rule_for(hit.video_id) if self.response is not None else None
        return bool(isinstance(rule, dict) and rule.get("sequence"))

    def set_sequence_steps(self, steps: list[dict], absent: list[dict],
                           is_sequence: bool = False, unknown: str | None = None) -> None:
        """A sequence rule's realised steps and negations beside the gates list (hidden for a
        single-pattern rule); a click on one selects its track and goes to its span."""
        self.sequence_steps, self.sequence_absent = list(steps), list(absent)
        sl = self.steps_list
        sl.clear()
        for k, st in enumerate(steps):
            it = QListWidgetItem(step_text(st, steps[k - 1] if k else None))
            it.setData(Qt.ItemDataRole.UserRole, k)
            it.setToolTip(f"anchor {float(st['anchor_s']):.1f} s · the step's own score "
                          f"{float(st['score']):.2f}. Click: select this "
                          f"{'track' if int(st['track']) >= 0 else 'ego series'} and go to the "
                          "step's start")
            sl.addItem(it)
        for k, ab in enumerate(absent):
            it = QListWidgetItem(absent_text(ab))
            it.setData(Qt.ItemDataRole.UserRole, len(steps) + k)
            it.setToolTip("A negation: the score is multiplied by this factor (1.00: nothing "
                          "there). Click: go to its window" +
                          (" and select the offender" if ab.get("track") is not None else ""))
            sl.addItem(it)
        if is_sequence and not steps:
            it = QListWidgetItem(f"the rule cannot judge this video: {unknown}" if unknown else
                                 "no assignment of the steps holds in this video (rule score 0)")
            it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsSelectable)
            sl.addItem(it)
        n = sl.count()
        if n:
            sl.setFixedHeight(min(5, n) * max(16, sl.sizeHintForRow(0)) + 2 * sl.frameWidth() + 2)
        sl.setVisible(bool(n))

    def select_step(self, lane: int) -> None:
        """Select step ``lane`` (then the negations, in the steps list's order): its row in the
        list, its band in the timeline, its track in the timeline and the player; pause and go to
        the start of its span (a negation: its offender's time, else its window's start)."""
        n_steps = len(self.sequence_steps)
        if not 0 <= lane < n_steps + len(self.sequence_absent):
            return
        self.steps_list.setCurrentRow(lane)
        self.timeline.select_lane(lane)
        if lane < n_steps:
            st = self.sequence_steps[lane]
            tid, t = int(st["track"]), float(st["span_s"][0])
        else:
            ab = self.sequence_absent[lane - n_steps]
            tid = None if ab.get("track") is None else int(ab["track"])
            t = float(ab["time_s"] if ab.get("time_s") is not None else ab["window_s"][0])
        self.player.highlight_track(tid if tid is not None and tid >= 0 else None)
        self.player.pause()
        self.timeline.set_time(t)
        self.player.seek_time(t)
        self.statusBar().showMessage(self.steps_list.item(lane).text(), 6000)

    def _on_step_item_clicked(self, item) -> None:
        lane = item.data(Qt.ItemDataRole.UserRole)
        if lane is not None:
            self.select_step(int(lane))

    def _on_gate_clicked(self, item) -> None:
        data = item.data(Qt.ItemDataRole.UserRole)
        if not data:
            return
        tid, first_s = data
        self.timeline.highlight_track(tid)
        self.player.highlight_track(tid)
        if first_s is not None:
            self.player.pause()
            self.player.seek_time(float(first_s))

    def _on_player_frame_shown(self, _frame: int, t_s: float) -> None:
        self.timeline.set_time(t_s)

    def _on_space(self) -> None:
        (self.compare.toggle_play if self.tabs.currentWidget() is self.compare
         else self.player.toggle_play)()

    def _on_arrow(self, n: int) -> None:
        (self.compare.step if self.tabs.currentWidget() is self.compare else self.player.step)(n)

    def go_to_event_start(self) -> None:
        if self.tabs.currentWidget() is self.compare:
            self.compare.seek(0.0)
        elif self.player.span_frames:
            self.player.pause()
            self.player.seek(self.player.span_frames[0])

    def open_current_result(self) -> None:
        """Context menu / double click: show the result in the Inspect tab and focus the player."""
        self.tabs.setCurrentWidget(self.inspect_split)
        self.player.setFocus(Qt.FocusReason.OtherFocusReason)

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
        ed = _text_editor(QApplication.focusWidget())
        if ed is not None:        # a focused text field (the query, a form box, the JSON): its own
            ed.undo()
        elif self._mark_undo:
            batch = self._mark_undo.pop()
            for vid, before, _after in batch:
                self._set_mark(vid, before)
            self._mark_redo.append(batch)
            self.refresh_stats()
        elif self.rule_editor.text.document().isUndoAvailable():
            self.tabs.setCurrentWidget(self.rule_editor)
            self.rule_editor.text.undo()

    def redo(self) -> None:
        ed = _text_editor(QApplication.focusWidget())
        if ed is not None:
            ed.redo()
        elif self._mark_redo:
            batch = self._mark_redo.pop()
            for vid, _before, after in batch:
                self._set_mark(vid, after)
            self._mark_undo.append(batch)
            self.refresh_stats()
        elif self.rule_editor.text.document().isRedoAvailable():
            self.tabs.setCurrentWidget(self.rule_editor)
            self.rule_editor.text.redo()

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
        from strived.perception.video import survey_videos

        w = Worker(survey_videos, folder, pass_progress=False, pass_cancel=False, name="survey")
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
