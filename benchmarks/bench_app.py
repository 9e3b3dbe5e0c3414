"""App benchmarks: p99 event-loop stall while indexing and while searching (target ≤ 50 ms), cold
start to a usable window with a 10k-video library (target ≤ 3 s), player seek on a 720p clip
(target ≤ 50 ms), the timeline showing a 200-track video (target ≤ 100 ms to show it, every
track drawn).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_app.py [--work DIR] [--videos N]
        [--library DIR] [--tracks N] [--only timeline|search|index] [--json PATH]

``--json PATH`` also writes the figures (keys: seek {cold, after_scan}, seek_clip, cold_start
{videos, wall_s, rc, ready}, search_stall and index_stall {ticks, p50_ms, p99_ms, max_ms, wall_s, ...},
timeline {tracks, drawn, explain_s, show_first_ms, show_ms, select_other_ms, toggle_others_ms,
hover_ms, click_pick_ms}); a cold start whose process failed has wall_s null and its error.
``--only timeline`` runs the timeline part alone (seconds, no 10k library); ``--only search`` the
search stall and the cancel latency; ``--only index`` the indexing stall. ``--library DIR`` searches
a copy of an existing library (e.g. the scale benchmark's 10k one; the original is never written)
instead of the bench's own synthetic one; its cached rule features are dropped from the copy, so
the search computes them as a first search after indexing does.

Cancel latency (key ``cancel``): a re-rank with a rule whose window was never computed (the rule
source computes window features over every candidate track), cancelled by a real click on the
Cancel button after a delay; the time from the click until the engine's job has stopped
(``stop_ms``, target < 500 ms), and until the window is idle again (``ui_ms``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "app"))
BENCH = ROOT.parent / "shared" / "data" / "bench-dev"


def synthetic_library(folder: Path, n: int) -> Path:
    """n videos of records only (2 tracks × 100 samples each), built once and reused."""
    import numpy as np

    from strived.records import Track, VideoInfo, VideoRecords
    from strived.store.library import Library

    if (folder / "library.sqlite").exists():
        return folder
    lib = Library.open(folder, create=True)
    rng = np.random.default_rng(0)
    t = np.arange(100) / 10.0
    recs = []
    for i in range(n):
        tracks = [Track(k, "car", np.arange(100, dtype=np.int32),
                        {f: rng.normal(10, 3, 100).astype(np.float32) for f in
                         ("distance", "loc_x", "loc_z", "lane_rel", "bbox_area", "score")})
                  for k in range(2)]
        recs.append(VideoRecords(VideoInfo(f"v{i:05d}", None, 10.0, 100), np.arange(100), t,
                                 {"speed": np.full(100, 10.0), "yaw_rate": np.zeros(100),
                                  "accel": np.zeros(100)}, tracks))
        if len(recs) == 1000:
            lib.add_videos(recs)
            recs = []
    if recs:
        lib.add_videos(recs)
    lib.close()
    return folder


class StallMeter:
    """Ticks a 5 ms timer on the UI thread; a stall is how late a tick fires."""

    def __init__(self):
        from PySide6.QtCore import QElapsedTimer, Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(5)
        self.clock = QElapsedTimer()
        self.gaps: list[float] = []
        self.at: list[float] = []       # when each tick fired (s since start)
        self.timer.timeout.connect(self._on_timeout)

    def start(self):
        self.gaps.clear()
        self.at.clear()
        self.t0 = time.perf_counter()
        self.clock.start()
        self.timer.start()

    def _on_timeout(self):
        self.gaps.append(max(0.0, self.clock.restart() - 5.0))
        self.at.append(time.perf_counter() - self.t0)

    def stop(self) -> dict:
        self.timer.stop()
        import numpy as np

        g = np.array(self.gaps or [0.0])
        k = int(g.argmax())
        return {"ticks": len(g), "p50_ms": float(np.percentile(g, 50)),
                "p99_ms": float(np.percentile(g, 99)), "max_ms": float(g.max()),
                # when the longest stall ended (s after the measurement began): where to look
                "max_at_s": round(self.at[k], 2) if self.at else None,
                "over_100ms_at_s": [round(a, 2) for a, x in zip(self.at, self.gaps) if x > 100]}


def library_copy(src: Path, work: Path) -> Path:
    """A copy of the library ``src`` under ``work`` (made once: copying 10k videos takes ~10 s),
    without the rule features a search computes, so every run measures the same cold search."""
    import shutil

    dst = work / f"copy-{src.name}"
    stamp = json.dumps({"src": str(src), "mtime": (src / "library.sqlite").stat().st_mtime})
    if not (dst / "COPIED.json").exists() or (dst / "COPIED.json").read_text() != stamp:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        (dst / "COPIED.json").write_text(stamp)
    for f in (dst / "cache").glob("feat-*.npy"):
        f.unlink()
    return dst


#: when the Cancel click comes, as a fraction of the same search's uncancelled time
CANCEL_AT = (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95)


def bench_cancel(app, win, fractions=CANCEL_AT) -> dict:
    """Cancel a search by a real click on the Cancel button part-way through it: a re-rank with
    the cut-in rule at a window no search used before (its window features are computed over the
    candidate tracks: the longest step of a search), first run once to the end to time it.
    Returns the time from the click until the job stopped (``stop_ms``) and until the window was
    idle (``ui_ms``)."""
    import copy

    import numpy as np
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from conftest import CUTIN_RULE

    trials, full = [], None
    for k, frac in enumerate((None,) + tuple(fractions)):
        rule = copy.deepcopy(CUTIN_RULE)
        rule["soft_scores"][0]["window_seconds"] = round(2.0 + 0.173 * k, 3)   # never computed
        t0 = time.perf_counter()
        win.search(rule=rule)
        w = win._search_worker
        if frac is None:                           # the same kind of search, not cancelled
            run_until(app, lambda: w.is_done, 300)
            full = round((time.perf_counter() - t0) * 1000, 1)
            continue
        delay = round(frac * full / 1000, 3)
        run_until(app, lambda: w.is_done or time.perf_counter() - t0 >= delay, 300)
        if w.is_done:
            trials.append({"delay_s": delay, "finished_first": True})
            continue
        step = getattr(w, "step_text", "rule source")
        t_click = time.perf_counter()
        QTest.mouseClick(win.search_cancel, Qt.MouseButton.LeftButton)
        ui_ms = (time.perf_counter() - t_click) * 1000
        idle = not win.search_cancel.isVisible() and win.search_button.isEnabled()
        run_until(app, lambda: w.is_done, 300)
        trials.append({"delay_s": delay, "step": step, "ui_ms": round(ui_ms, 1), "ui_idle": idle,
                       "stop_ms": round((time.perf_counter() - t_click) * 1000, 1),
                       "cancelled": w.result is None and w.error is None})
    stops = np.array([t["stop_ms"] for t in trials if "stop_ms" in t])
    none = "no trial was cancelled before it finished" if not stops.size else None
    return {"uncancelled_ms": full, "trials": trials,
            "stop_p50_ms": None if none else float(np.median(stops)),
            "stop_max_ms": None if none else float(stops.max()),
            "ui_max_ms": None if none else max(t["ui_ms"] for t in trials if "ui_ms" in t),
            **({"note": none} if none else {})}


def run_until(app, cond, timeout_s):
    t0 = time.perf_counter()
    while not cond() and time.perf_counter() - t0 < timeout_s:
        app.processEvents()
        time.sleep(0.001)


def bench_seek(app, clip: str) -> dict:
    import numpy as np

    from app.player import PlayerWidget

    p = PlayerWidget()
    p.resize(960, 560)
    p.show()
    shown = []
    p.frame_shown.connect(lambda f, t: shown.append(f))
    p.load(clip)
    run_until(app, lambda: shown, 5)
    rng = np.random.default_rng(0)
    out = {}
    for label, wait_scan in (("cold", False), ("after_scan", True)):
        if wait_scan:
            p.wait_idle(30000, scan=True)
        ts = []
        for f in rng.integers(0, p.n_frames, 40):
            p.decoder._next = 10**9 if not wait_scan else p.decoder._next
            shown.clear()
            t0 = time.perf_counter()
            p.seek(int(f))
            run_until(app, lambda f=f: shown and shown[-1] == int(f), 5)
            ts.append((time.perf_counter() - t0) * 1000)
        a = np.array(ts)
        out[label] = {"median_ms": float(np.median(a)), "p95_ms": float(np.percentile(a, 95)),
                      "max_ms": float(a.max())}
    p.shutdown()
    return out


def bench_timeline(app, n_tracks: int = 200, reps: int = 10) -> dict:
    """Show the rule's explanation of a video with ``n_tracks`` tracks in the timeline: the time
    from ``set_explanation`` to painted (median of ``reps``, and the first), selecting a track
    that was drawn thin (it gets its own curve), hiding/showing the others, a hover readout and
    a real mouse click on a curve (pick + seek)."""
    import numpy as np
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    from app.timeline import TimelineWidget
    from conftest import CUTIN_RULE, many_tracks_records
    from strived.rules import parse_rule
    from strived.rules.explain import explain_video

    rec = many_tracks_records(n_tracks=n_tracks)
    t0 = time.perf_counter()
    exp = explain_video(rec, parse_rule(CUTIN_RULE))       # the inspect worker's part
    explain_s = time.perf_counter() - t0
    tl = TimelineWidget()
    tl.resize(1000, 420)
    tl.show()
    app.processEvents()

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        tl.repaint()                      # painted, not only scheduled
        app.processEvents()
        return (time.perf_counter() - t) * 1000

    first = timed(lambda: tl.set_explanation(exp, "bench"))
    shows = [timed(lambda: tl.set_explanation(exp, "bench")) for _ in range(reps)]
    others = [t for t in tl._order if t >= 0 and t not in tl._focus] or \
        [t for t in tl._order if t >= 0]
    sel = [timed(lambda k=k: tl.highlight_track(others[k % len(others)])) for k in range(reps)]
    tog = [timed(lambda: tl.set_show_others(not tl.show_others)) for _ in range(reps)]
    if not tl.show_others:
        tl.set_show_others(True)
    row = tl.rows[tl.row_names.index("loc_x")]
    vb = row.plot.getViewBox()
    hov, clicks = [], []
    tr = tl._traces[others[0]]
    for k in range(reps):
        i = (k * 7) % len(tr.t)
        scene = vb.mapViewToScene(QPointF(float(tr.t[i]), float(tr.values["loc_x"][i])))
        hov.append(timed(lambda s=scene: tl._on_scene_mouse_moved(s)))
        pos = tl.view.mapFromScene(scene)
        QTest.qWait(QApplication_double_click_ms())    # never a double click
        clicks.append(timed(lambda p=pos: QTest.mouseClick(tl.view.viewport(),
                                                           Qt.MouseButton.LeftButton, pos=p)))
    med = lambda a: round(float(np.median(a)), 1)  # noqa: E731
    out = {"tracks": tl.track_count(), "drawn": len(tl.drawn_tracks()),
           "explain_s": round(explain_s, 3), "show_first_ms": round(first, 1),
           "show_ms": med(shows), "show_max_ms": round(max(shows), 1),
           "select_other_ms": med(sel), "toggle_others_ms": med(tog), "hover_ms": med(hov),
           "click_pick_ms": med(clicks), "click_selected": tl.highlighted}
    tl.close()
    return out


def QApplication_double_click_ms() -> int:  # noqa: N802
    from PySide6.QtWidgets import QApplication

    return QApplication.styleHints().mouseDoubleClickInterval() + 20


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "strived-bench-app"))
    ap.add_argument("--videos", type=int, default=10000)
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--tracks", type=int, default=200, help="tracks of the timeline's video")
    ap.add_argument("--only", choices=["timeline", "search", "index"], default=None,
                    help="run only this part")
    ap.add_argument("--library", default=None,
                    help="search a copy of this library (e.g. /tmp/scale/cache/lib-10000)")
    args = ap.parse_args()
    fig: dict = {}
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.settings import AppSettings
    from conftest import make_clip

    app = QApplication.instance() or QApplication([])
    if args.only in (None, "timeline"):
        fig["timeline"] = bench_timeline(app, args.tracks)
        print(f"timeline, {args.tracks}-track video:", fig["timeline"], flush=True)
    if args.only == "timeline":
        return _write(args, fig)
    ini = work / "settings.ini"
    settings = AppSettings(QSettings(str(ini), QSettings.Format.IniFormat))
    if args.only == "index":
        return _index_part(app, args, fig, work, settings, MainWindow, make_clip)
    if args.only is None:
        clip720 = BENCH / "videos" / "kr_blackbox_test_video.mp4"
        if not clip720.exists():
            clip720 = work / "gen720.mp4"
            make_clip(clip720, n_frames=300, fps=30.0, size=(1280, 720))
        fig["seek_clip"] = clip720.name
        fig["seek"] = bench_seek(app, str(clip720))
        print("seek 720p", clip720.name, fig["seek"], flush=True)

    if args.library:
        big = library_copy(Path(args.library).expanduser().resolve(), work)
        from strived.store.library import Library

        with Library.open(big) as lib:
            args.videos = len(lib)
        print(f"library: a copy of {args.library} ({args.videos} videos, rule features dropped)",
              flush=True)
    else:
        big = synthetic_library(work / f"lib{args.videos}", args.videos)
    if args.only is None:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "app", str(big), "--ready-and-quit", "--settings",
                              str(ini)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        wall = time.perf_counter() - t0
        print(f"cold start {args.videos} videos: process wall {wall:.2f} s; {out.stdout.strip()}",
              flush=True)
        fig["cold_start"] = {"videos": args.videos, "wall_s": round(wall, 3) if out.returncode == 0 else None,
                             "rc": out.returncode, "ready": out.stdout.strip()[-500:]}
        if out.returncode != 0:
            fig["cold_start"]["error"] = f"exit {out.returncode}: {out.stderr.strip()[-500:]}"

    win = MainWindow(settings)
    win.show()
    win.open_library(str(big))
    meter = StallMeter()
    got = []
    win.search_finished.connect(got.append)
    from strived.retrieval.sources import ensure_text_index  # noqa: F401 (import cost off the clock)

    win.query.setCurrentText("a car cuts in from the right")
    meter.start()
    t0 = time.perf_counter()
    win.search()
    run_until(app, lambda: got or (win._search_worker and win._search_worker.is_done and
                                   win._search_worker.error), 300)
    wall, stall = time.perf_counter() - t0, meter.stop()
    print(f"searching {args.videos} videos ({wall:.2f} s):", stall,
          "error" if win._search_worker.error else "", win._search_worker.error or "", flush=True)
    fig["search_stall"] = {"videos": args.videos, "wall_s": round(wall, 3), **stall}
    if win._search_worker.error:
        fig["search_stall"]["error"] = str(win._search_worker.error)
    if args.library:
        fig["search_stall"]["library"] = str(args.library)
    run_until(app, lambda: False, 2.0)       # the first result's inspect and timeline settle
    meter.start()
    fig["cancel"] = {"videos": args.videos, **bench_cancel(app, win)}
    fig["cancel"]["stall"] = meter.stop()
    print(f"cancel a re-rank over {args.videos} videos (uncancelled "
          f"{fig['cancel']['uncancelled_ms']} ms):", flush=True)
    for t in fig["cancel"]["trials"]:
        print("   ", t, flush=True)
    c = fig["cancel"]
    print(f"  stop p50 {c['stop_p50_ms']} ms, max {c['stop_max_ms']} ms; UI idle after the click "
          f"within {c['ui_max_ms']} ms; stall while cancelling:", c["stall"], c.get("note", ""),
          flush=True)
    win.close()
    if args.only == "search":
        return _write(args, fig)
    return _index_part(app, args, fig, work, settings, MainWindow, make_clip)


def _write(args, fig) -> int:
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def _index_part(app, args, fig, work, settings, MainWindow, make_clip) -> int:  # noqa: N803
    if args.only not in (None, "index"):
        return _write(args, fig)
    meter = StallMeter()
    vids = work / "index_videos"
    if not vids.exists():
        vids.mkdir()
        for k in range(3):
            make_clip(vids / f"v{k}.mp4", n_frames=40, fps=10.0, size=(640, 360), seed=k)
    import shutil

    lib2 = work / "lib_index"
    shutil.rmtree(lib2, ignore_errors=True)
    win = MainWindow(settings)
    win.show()
    win.open_library(str(lib2), create=True)
    meter.start()
    t0 = time.perf_counter()
    win.start_indexing(str(vids))
    run_until(app, lambda: win.index_worker.is_done, 600)
    wall, stall = time.perf_counter() - t0, meter.stop()
    print(f"indexing 3 clips ({wall:.1f} s):", stall, flush=True)
    fig["index_stall"] = {"clips": 3, "wall_s": round(wall, 3), **stall}
    win.close()
    return _write(args, fig)


if __name__ == "__main__":
    sys.exit(main())
