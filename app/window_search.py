"""The main window's search side: the query bar, the ranked results table and its mark buttons,
running a search (progress, cancel), showing its response, the rule editor's apply / reset /
save, and saved searches."""

from __future__ import annotations

import re
import time

from PySide6.QtCore import QStringListModel, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QCompleter,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from strived import api

from . import library_ops as ops
from .connections import library_job
from .learn_panel import LearnPanel
from .results import ResultsModel
from .workers import Worker


def search_job(library, query: str, *, progress=None, cancel=None, **kwargs):
    """``engine.search`` on the library worker's own connection."""
    return api.search(library, query, progress=progress, cancel=cancel, **kwargs)


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


class SearchControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

    def _build_search_bar(self) -> None:
        """The query bar (history, completions), Search, the progress bar and Cancel, the notice."""
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

    def _build_results(self) -> QWidget:
        """The results table with its label and mark buttons, and the Learn panel: the left side."""
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
        return left

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
                llm = api.LLMClient(cfg)
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
