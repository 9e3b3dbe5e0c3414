"""Entry point: ``python -m app [LIBRARY]`` or ``strived-app [LIBRARY]``."""

from __future__ import annotations

import argparse
import sys
import time

import strived  # noqa: F401  (sets the dependencies' telemetry opt-outs before any of them loads)


def main(argv: list[str] | None = None) -> int:
    import multiprocessing

    multiprocessing.freeze_support()   # a frozen bundle's indexing worker processes start here
    t0 = time.perf_counter()
    p = argparse.ArgumentParser(prog="strived-app", description="STRIVE-D desktop app")
    p.add_argument("library", nargs="?", help="library folder to open")
    p.add_argument("--settings", help="INI file for settings (default: the user's QSettings)")
    p.add_argument("--ready-and-quit", action="store_true",
                   help="benchmark: print the time to a usable window and exit")
    p.add_argument("--self-test", action="store_true",
                   help="check this installation offline (index a generated clip, search it) and exit")
    args = p.parse_args(argv)
    if args.self_test:
        from .self_test import run_self_test  # lazy: loads PySide6

        return run_self_test()

    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow  # lazy: loads PySide6
    from .settings import AppSettings  # lazy: loads PySide6
    from .theme import apply_theme  # lazy: loads PySide6

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("STRIVE-D")
    apply_theme(app)
    qs = QSettings(args.settings, QSettings.Format.IniFormat) if args.settings else None
    settings = AppSettings(qs)
    lib = args.library or (settings.last_library or None)
    win = MainWindow(settings)
    win.show()
    if lib:
        win.open_library(lib)
    elif not args.ready_and_quit:
        win.show_welcome(only_if_wanted=True)     # first run: folder, library or the sample
    if args.ready_and_quit:
        def ready():
            print(f"ready_s {time.perf_counter() - t0:.3f} videos {win.stats_label.text()}",
                  flush=True)
            win.close()
            app.quit()
        QTimer.singleShot(0, ready)
    rc = app.exec()
    if win.busy_jobs:
        # the window is closed and every job cancelled; one stuck in a model load or a long read
        # would hold the process for seconds: the library is crash-safe, so leave without it
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
