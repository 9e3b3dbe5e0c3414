"""The main window's menus: its actions with their shortcuts, the menu bar and tool bar, the
Help dialogs (welcome, keyboard shortcuts, about) and full screen."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QToolBar,
    QVBoxLayout,
)

from strived import api

from .about import about_html
from .cameras_dialog import CamerasDialog
from .welcome import WelcomeDialog, show_welcome_at_start


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


class MenuControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

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


    def _build_actions(self) -> None:
        """Every action of the window (menus, tool bar, keys), as ``self.act_*``."""
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
        self.act_cameras = A("Cameras…", self.show_cameras, None,
                             "The cameras the library's videos came from: evidence, estimated "
                             "values; name, confirm, split or merge them, give values you know")
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

    def _build_menus(self) -> None:
        """The menu bar (``self.menus``) and the tool bar."""
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
        for a in (self.act_cameras, None, self.act_find_missing, self.act_relink, None,
                  self.act_remove_videos):
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

    def toggle_full_screen(self, on: bool | None = None) -> None:
        on = (not self.isFullScreen()) if on is None or not isinstance(on, bool) else on
        self.showFullScreen() if on else self.showNormal()
        self.act_fullscreen.setChecked(on)

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

    def show_cameras(self) -> CamerasDialog | None:
        """Library → Cameras…: the library's camera groups (non-modal; one at a time)."""
        if self.library is None or self.conns is None:
            return None
        old = getattr(self, "cameras_dialog", None)
        if old is not None:
            old.close()
        why_ro = (self.library.readonly_reason or "opened read-only") if self.library.readonly else ""
        self.cameras_dialog = CamerasDialog(self.conns, self.jobs, self.presenter, why_ro, self)
        self.cameras_dialog.show()
        return self.cameras_dialog

    def show_about(self) -> None:
        QMessageBox.about(self, "About STRIVE-D", about_html(api.__version__))
