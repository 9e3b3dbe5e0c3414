"""The main window's settings side: the Settings dialog, the rule library searches use (and
its status bar label), the status bar, and the window's saved geometry and layout."""

from __future__ import annotations

import os

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QLabel

from .settings import SettingsDialog, load_rule_library


class SettingsControl:
    """Mixed into ``MainWindow`` (app/main_window.py): its attributes are the window's."""

    def _build_status_bar(self) -> None:
        """The library's size and the rule library in use, at the right of the status bar."""
        self.stats_label = QLabel("No library open.", self)
        self.statusBar().addPermanentWidget(self.stats_label)
        self.rules_label = QLabel("", self, objectName="ruleLibraryStatus")
        self.statusBar().addPermanentWidget(self.rules_label)
        self._rule_lib_cache: tuple | None = None     # (path, mtime, RuleLibrary)
        self.refresh_rule_library_label()

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
