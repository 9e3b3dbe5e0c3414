"""The main window: menu bar, query bar, ranked results, player + WHY timeline, compare, rule
editor, indexing panel and status bar, each area built and driven by a mixin of its own
(``app/window_*.py``). Every action calls the engine (``strived.api``) in a worker; the UI thread and the library worker each use their own SQLite connection
(``app/connections.py``)."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from .connections import LibraryConnections
from .errors import ErrorPresenter
from .rule_editor import RuleEditor
from .settings import AppSettings
from .similar_panel import SimilarPanel
from .window_compare import CompareControl
from .window_export import ExportControl
from .window_inspect import InspectControl
from .window_library import LibraryControl
from .window_menus import MenuControl
from .window_review import ReviewControl
from .window_search import SearchControl
from .window_settings import SettingsControl
from .workers import JobQueue, Worker

#: how long closing waits for jobs that cannot stop at once (a model load): the window goes at once,
#: the job's own connection closes when it ends, and ``python -m app`` exits without waiting
CLOSE_WAIT_INDEX_MS = 1500
CLOSE_WAIT_JOBS_MS = 150


class MainWindow(MenuControl, SearchControl, LibraryControl, InspectControl, ReviewControl,
                 CompareControl, ExportControl, SettingsControl, QMainWindow):
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
    def _build(self) -> None:
        """Each area builds its own widgets (app/window_*.py), in this order."""
        self._build_actions()
        self._build_menus()
        self._build_search_bar()
        left = self._build_results()
        self._build_inspect()
        self._build_tabs(left)
        self._build_central()
        self._build_index_dock()
        self._build_status_bar()
        self._connect_inspect()
        self.rule_editor.rule_applied.connect(self._on_rule_applied)
        self.rule_editor.rule_saved.connect(self._on_rule_saved)
        self.rule_editor.reset_requested.connect(self._on_rule_reset)
        self.presenter.noticed.connect(self.show_notice)
        self.similar = SimilarPanel(self)            # More like this: progress, Cancel (above the table)
        left.layout().insertWidget(1, self.similar)
        self._refresh_actions()

    def _build_tabs(self, left: QWidget) -> None:
        """Inspect, Compare, Rule and Library tabs beside the results (``self.main_split``)."""
        self._build_compare()
        self.rule_editor = RuleEditor(self)
        self._build_library_tab()
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

    def _build_central(self) -> None:
        """The query row above the results and tabs."""
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
