"""App benchmarks: p99 event-loop stall while indexing and while searching (target ≤ 50 ms), cold
start to a usable window with a 10k-video library (target ≤ 3 s), player seek on a 720p clip
(target ≤ 50 ms), the timeline showing a 200-track video (target ≤ 100 ms to show it, every
track drawn).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_app.py [--work DIR] [--videos N]
        [--tracks N] [--only timeline] [--json PATH]

``--json PATH`` also writes the figures (keys: seek {cold, after_scan}, seek_clip, cold_start
{videos, wall_s, rc, ready}, search_stall and index_stall {ticks, p50_ms, p99_ms, max_ms, wall_s, ...},
timeline {tracks, drawn, explain_s, show_first_ms, show_ms, select_other_ms, toggle_others_ms,
hover_ms, click_pick_ms}); a cold start whose process failed has wall_s null and its error.
``--only timeline`` runs the timeline part alone (seconds, no 10k library).
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
        self.timer.timeout.connect(self._on_timeout)

    def start(self):
        self.gaps.clear()
        self.clock.start()
        self.timer.start()

    def _on_timeout(self):
        self.gaps.append(max(0.0, self.clock.restart() - 5.0))

    def stop(self) -> dict:
        self.timer.stop()
        import numpy as np

        g = np.array(self.gaps or [0.0])
        return {"ticks": len(g), "p50_ms": float(np.percentile(g, 50)),
                "p99_ms": float(np.percentile(g, 99)), "max_ms": float(g.max())}


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
    ap.add_argument("--only", choices=["timeline"], default=None, help="run only this part")
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
    fig["timeline"] = bench_timeline(app, args.tracks)
    print(f"timeline, {args.tracks}-track video:", fig["timeline"], flush=True)
    if args.only == "timeline":
        if args.json:
            Path(args.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
            print(f"wrote {args.json}")
        return 0
    clip720 = BENCH / "videos" / "kr_blackbox_test_video.mp4"
    if not clip720.exists():
        clip720 = work / "gen720.mp4"
        make_clip(clip720, n_frames=300, fps=30.0, size=(1280, 720))
    fig["seek_clip"] = clip720.name
    fig["seek"] = bench_seek(app, str(clip720))
    print("seek 720p", clip720.name, fig["seek"], flush=True)

    big = synthetic_library(work / f"lib{args.videos}", args.videos)
    ini = work / "settings.ini"
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

    settings = AppSettings(QSettings(str(ini), QSettings.Format.IniFormat))
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
    win.close()

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
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
