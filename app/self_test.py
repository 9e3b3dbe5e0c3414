"""``strived-app --self-test``: an installation check, end to end and offline (generated clips,
the real perception, the engine, then the same search through the main window).

Its own module: it drives the main window, which opens the welcome screen, so it cannot live in
``app/welcome.py`` without an import cycle."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from strived import api
from strived.api import (CAMERA_JSON, Library, StrivedError, ensure_text_index, index_folder, render_clip,
                         sample_scenarios)

from .main_window import MainWindow
from .settings import AppSettings
from .welcome import capabilities


def _bundle_info() -> dict:
    base = Path(getattr(sys, "_MEIPASS", "")).parent if getattr(sys, "frozen", False) else None
    if base and (base / "BUNDLE.json").exists():
        d = json.loads((base / "BUNDLE.json").read_text())
        return {"bundle": str(base), "variant": d.get("variant"), "git": d.get("git")}
    return {"bundle": None}


def run_self_test(out=print, keep: bool = False) -> int:
    """Check an installation end to end, offline: render two generated clips (a left turn, a car
    cutting in on a straight road), index them with the real perception into a temporary library, search
    "we turn left at a junction" through the engine and through the main window (results + a
    decoded frame in the player). Returns 0 when every check passes, 1 otherwise."""
    if not os.environ.get("QT_QPA_PLATFORM") and not (os.environ.get("DISPLAY")
                                                      or os.environ.get("WAYLAND_DISPLAY")):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    for k in [k for k in os.environ if k.startswith("STRIVED_LLM_")]:
        del os.environ[k]                                   # the self-test is the offline path
    t_all = time.perf_counter()
    failures: list[str] = []

    def check(ok: bool, what: str) -> bool:
        out(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            failures.append(what)
        return ok

    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    out(f"STRIVE-D self-test (strived {api.__version__}, Python "
        f"{sys.version.split()[0]}, Qt platform {app.platformName()}, {_bundle_info()})")
    for name, ok, how in capabilities():
        out(f"  offline: {'yes' if ok else 'no '} {name} ({how})")
    tmp = Path(tempfile.mkdtemp(prefix="strived-selftest-"))
    try:
        clips = tmp / "clips"
        _render_clips(clips, out)
        lib_dir = tmp / "library"
        q = "we turn left at a junction"
        _check_engine(clips, lib_dir, q, out, check)
        # the same search through the main window, as a user would see it
        _check_window(tmp / "settings.ini", lib_dir, q, check)
    except Exception as exc:  # noqa: BLE001 - a self-test reports, it does not crash
        import traceback

        out(traceback.format_exc())
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        if not keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    dt = time.perf_counter() - t_all
    if failures:
        out(f"SELF-TEST FAILED in {dt:.1f} s: {len(failures)} problem(s): {failures}")
        return 1
    out(f"SELF-TEST PASSED in {dt:.1f} s")
    return 0


def _render_clips(clips: Path, out) -> None:
    """Two generated 10 s clips (a left turn, a cut-in from the right) and the camera.json into ``clips``."""
    clips.mkdir()
    (clips / "camera.json").write_text(json.dumps(CAMERA_JSON))
    recs = {r.info.id: r for r in sample_scenarios()}
    t0 = time.perf_counter()
    render_clip(recs["sample_left_turn"], clips / "left_turn.mp4", t_range_s=(5.0, 15.0))
    render_clip(recs["sample_cut_in_right"], clips / "cut_in.mp4", t_range_s=(3.0, 13.0), seed=4)
    out(f"  rendered 2 generated clips (10 s each, 1280x720 mp4v) in {time.perf_counter() - t0:.1f} s")


def _check_engine(clips: Path, lib_dir: Path, q: str, out, check) -> None:
    """Index ``clips`` with the real perception into a new library at ``lib_dir``, check what
    perception found (the left turn's yaw, the cut-in's car), build the text index and check that
    ``q`` ranks the left turn first by the rule source."""
    import numpy as np

    with Library.open(lib_dir, create=True) as lib:
        t0 = time.perf_counter()
        rep = index_folder(clips, lib, sample_fps=5.0, device="cpu")
        out(f"  indexed with the real perception in {time.perf_counter() - t0:.1f} s: {rep.summary()}")
        check(len(rep.indexed) == 2 and not rep.failed, f"2 clips indexed, failures {rep.failed}")
        ids = [v["id"] for v in lib.list_videos()]
        if check(set(ids) == {"left_turn", "cut_in"}, f"library holds {ids}"):
            lt, ci = lib.get_video("left_turn"), lib.get_video("cut_in")
            yaw = np.asarray(lt.ego["yaw_rate"], float)
            peak = float(np.nanmax(np.abs(yaw))) if np.isfinite(yaw).any() else float("nan")
            sign = float(np.nanmedian(yaw[np.abs(yaw) > 0.1])) if (np.abs(np.nan_to_num(yaw)) > 0.1).any() else 0.0
            check(sign > 0.1, f"ego yaw from optical flow: left turn peak {peak:.2f} rad/s "
                              f"(drawn: 0.28, + = left)")
            cars = [t for t in ci.tracks if t.cls == "car"]
            check(len(cars) >= 1, f"detector + tracker: {len(ci.tracks)} track(s) on the cut-in "
                                  f"clip, {len(cars)} car(s)")
        try:
            ensure_text_index(lib)
            out("  text index: BM25 + dense")
        except StrivedError as e:
            ensure_text_index(lib, dense=False)
            out(f"  text index: BM25 only (dense unavailable: {e})")
        resp = api.search(lib, q, top_k=5)
        out(f"  engine.search({q!r}): rule {resp.match.get('event')} ({resp.match.get('mode')}), "
            f"sources {resp.sources_used}, {resp.timings_ms.get('total', 0):.0f} ms; "
            f"notices {resp.notices}")
        check(bool(resp.hits) and resp.hits[0].video_id == "left_turn"
              and resp.hits[0].per_source.get("rule", {}).get("rank") == 1,
              f"left_turn ranked first by the rule source: "
              f"{[(h.video_id, round(h.score, 4)) for h in resp.hits]}")


def _check_window(settings_file: Path, lib_dir: Path, q: str, check) -> None:
    """Search ``q`` in the main window over the library: results in the table and a frame decoded
    and drawn by the player."""
    from PySide6.QtCore import QEventLoop, QSettings, QTimer

    settings = AppSettings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    win = MainWindow(settings)
    win.show()
    shown: list = []
    loop = QEventLoop()
    win.search_finished.connect(lambda r: (shown.append(r), QTimer.singleShot(0, loop.quit)))
    win.player.frame_shown.connect(lambda *a: (shown.append(("frame", a)), loop.quit()))
    check(win.open_library(str(lib_dir)), "main window opens the library")
    win.query.setCurrentText(q)
    win.search()
    QTimer.singleShot(60000, loop.quit)
    loop.exec()
    check(win.model.rowCount() >= 1, f"main window shows {win.model.rowCount()} result(s)")
    if not any(isinstance(s, tuple) for s in shown):
        loop2 = QEventLoop()
        win.player.frame_shown.connect(lambda *a: (shown.append(("frame", a)), loop2.quit()))
        if win.table.model().rowCount():
            win.table.selectRow(0)
        QTimer.singleShot(20000, loop2.quit)
        loop2.exec()
    check(any(isinstance(s, tuple) for s in shown), "the player decoded and drew a frame")
    win.close()
