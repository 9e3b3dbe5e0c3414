"""A user's journey in the real app on a real X server with a window manager (run as a child
process by tests/app/test_x11_journey.py; QT_QPA_PLATFORM=xcb, DISPLAY set): the window becomes
active, Ctrl+L puts the focus in the query bar, typed text and Enter search, a click on a result
plays it, Space toggles playback. Prints one line `RESULT {json}` with what it saw."""

from __future__ import annotations

import json
import sys
import time


def main(library: str, settings_ini: str) -> int:
    from PySide6.QtCore import QPoint, QSettings, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    app = QApplication(["strived-x11-journey"])
    from app.main_window import MainWindow
    from app.settings import AppSettings
    from app.theme import apply_theme

    apply_theme(app)
    out: dict = {"platform": app.platformName()}
    w = MainWindow(AppSettings(QSettings(settings_ini, QSettings.Format.IniFormat)))
    w.resize(1280, 800)
    w.show()
    out["active"] = bool(QTest.qWaitForWindowActive(w, 10000))   # the window manager gave it focus
    out["opened"] = bool(w.open_library(library))

    def wait(cond, timeout_s: float) -> bool:
        t0 = time.monotonic()
        while not cond():
            if time.monotonic() - t0 > timeout_s:
                return False
            QTest.qWait(20)
        return True

    QTest.keyClick(w, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    fw = QApplication.focusWidget()
    out["query_focused"] = fw in (w.query, w.query.lineEdit())
    out["focus"] = type(fw).__name__ if fw is not None else None
    got = []
    w.search_finished.connect(got.append)
    QTest.keyClicks(fw, "a car cuts in from the right")
    QTest.keyClick(fw, Qt.Key.Key_Return)
    out["searched"] = wait(lambda: bool(got), 60)
    out["n_hits"] = len(got[0].hits) if got else 0
    out["typed"] = w.query.currentText()
    if got:
        row = w.model.row_of("gen_cutin_a")
        inspected = []
        w.inspect_finished.connect(inspected.append)
        w.tabs.setCurrentIndex(0)
        w.table.scrollTo(w.model.index(row, 1))
        rect = w.table.visualRect(w.model.index(row, 1))
        QTest.mouseClick(w.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         QPoint(rect.center()))
        out["inspected"] = wait(lambda: bool(inspected), 30) and inspected[-1] == "gen_cutin_a"
        out["frame_shown"] = wait(lambda: w.player.canvas.image is not None, 10)
        w.player.setFocus()
        QTest.qWait(50)
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Space)
        out["playing"] = wait(lambda: w.player.is_playing, 3)
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Space)
        out["paused"] = wait(lambda: not w.player.is_playing, 3)
        out["query_unchanged"] = w.query.currentText() == "a car cuts in from the right"
    w.close()
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
