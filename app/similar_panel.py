"""More like this (issue 36) in the app: from a result's span (its context menu: the span and
track the rule matched) or a span selected on the timeline (Shift+drag, then its "More like this"
button: that span and the selected track), the most similar moments across the library
(`strived.similar.more_like_this`). Found on the library worker (progress, Cancel, Esc), then
listed in the results table like a search: each row's span is the moment's span (Inspect and
Compare go there, the player shows the moment's track), the Signals column gives the signal
distance and the Dense column the text cosine; the line above the table says what was compared."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QProgressBar, QPushButton, QWidget

from strived import api

from .connections import library_job
from .workers import Worker

TOP_K = 20


def example_text(ex: dict) -> str:
    """``v000 5.0–8.0 s, car #99`` (or ``…, the ego``) of a SimilarResponse's example."""
    who = f"{ex.get('cls') or 'track'} #{ex['track_id']}" if ex.get("track_id") is not None else "the ego"
    return f"{ex['video_id']} {float(ex['t0']):.1f}–{float(ex['t1']):.1f} s, {who}"


def used_text(sim) -> str:
    """What the search compared, in words: the signals (and the unknown ones), the dense text."""
    used = sim.used
    if "signals" in used.get("sources", []):
        group = f" of {', '.join(used['class_group'])} tracks" if used.get("class_group") else \
            " of every video's ego"
        sig = (f"signals: {', '.join(used['signals'])} ({used.get('windows_compared', 0):,} windows"
               f"{group} compared)")
        if used.get("unknown_signals"):
            sig += f"; unknown over the span: {', '.join(used['unknown_signals'])}"
    else:
        sig = "signals: not used"
    dense = used.get("dense") or {}
    if "dense" in used.get("sources", []):
        dn = f"dense: used (the span's text against {dense.get('videos', 0)} videos' text)"
    else:
        dn = f"dense: not available ({dense.get('reason')})" if dense.get("reason") else "dense: not used"
    return f"{sig} · {dn}"


def moments_response(library, sim):
    """A SearchResponse listing the moments of ``sim`` (a SimilarResponse): each hit's span and
    track are the moment's; ``match["similar"]`` holds the example (the model's Signals column)."""
    dense = sim.used.get("dense") or {}
    n_dense = dense.get("videos") or None
    notices = [n for n in sim.notices if n != dense.get("reason")]    # the header says it
    hits = []
    for m in sim.moments:
        ps: dict[str, dict] = {}
        if "signals" in m.per_source:
            ps["signals"] = {"rank": m.per_source["signals"], "distance": m.distance, "weight": 1.0,
                             "known_points": m.known_points, "track": m.track_id, "cls": m.cls}
        if "dense" in m.per_source:
            ps["dense"] = {"rank": m.per_source["dense"], "of": n_dense, "score": m.dense_cosine,
                           "weight": 1.0, "span_s": list(m.dense_span) if m.dense_span else None}
        hits.append(api.SearchHit(rank=m.rank, video_id=m.video_id, path=library.video_path(m.video_id),
                                  score=m.score, span_s=(m.t0, m.t1), per_source=ps, peak_track=m.track_id))
    return api.SearchResponse(query=f"like {example_text(sim.example)}", hits=hits, rule=None,
                              match={"similar": dict(sim.example)}, weights={}, notices=notices,
                              timings_ms=dict(sim.timings_ms), sources_used=list(sim.used.get("sources", [])))


def similar_job(library, video_id: str, t0: float, t1: float, track_id: int | None, *,
                top_k: int = TOP_K, progress=None, cancel=None):
    """``more_like_this`` on the library worker's connection: (SimilarResponse, SearchResponse)."""
    sim = api.more_like_this(library, video_id, t0, t1, track_id, top_k=top_k, progress=progress,
                             cancel=cancel)
    return sim, moments_response(library, sim)


class SimilarPanel(QWidget):
    """Progress and Cancel of a "More like this" run of the main window ``window`` (shown while
    it runs); shows its moments in the window's results table."""

    finished = Signal(object)       # the SimilarResponse shown
    stopped = Signal()              # cancelled
    failed = Signal(str)

    def __init__(self, window):
        super().__init__(window)
        self.w = window
        self.setObjectName("similarPanel")
        self.label = QLabel("", self, objectName="dim", wordWrap=True)
        self.progress = QProgressBar(self, objectName="similarProgress")
        self.progress.setMaximumWidth(180)
        self.cancel_button = QPushButton("Cancel", self, objectName="similarCancel",
                                         toolTip="Stop looking for similar moments (Esc)")
        self.cancel_button.clicked.connect(self.cancel)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.progress)
        lay.addWidget(self.cancel_button)
        self.hide()
        self.worker: Worker | None = None
        window.act_cancel_search.triggered.connect(self.cancel)          # Esc
        window.library_opened.connect(lambda _path: self.cancel())
        window.timeline.selector.requested.connect(self.from_timeline)

    @property
    def running(self) -> bool:
        return self.worker is not None and not self.worker.is_done

    # ------------------------------------------------------------------ entry points
    def add_menu_entry(self, menu: QMenu, row: int):
        """The results' context menu entry for ``row``: its span and matched track."""
        h = self.w.model.hit(row)
        if h is None:
            return None
        if h.span_s:
            who = f", track #{h.peak_track}" if h.peak_track is not None and h.peak_track >= 0 else ""
            a = menu.addAction(f"More like this ({h.span_s[0]:.1f}–{h.span_s[1]:.1f} s{who})",
                               lambda: self.from_hit(h))
            a.setToolTip("Find the moments across the library most like this result's span")
        else:
            a = menu.addAction("More like this (no span: Shift+drag one on the timeline)")
            a.setEnabled(False)
        a.setObjectName("moreLikeThis")
        return a

    def from_hit(self, h) -> None:
        """A result's matched span and track (the rule's peak track; none: the ego)."""
        if not h.span_s:
            return
        tid = h.peak_track if h.peak_track is not None and h.peak_track >= 0 else None
        self.start(h.video_id, float(h.span_s[0]), float(h.span_s[1]), tid)

    def from_timeline(self, t0: float, t1: float, track_id) -> None:
        exp = self.w.timeline.explanation          # the video the timeline shows
        if exp is not None:
            self.start(exp.video_id, t0, t1, track_id)

    # ------------------------------------------------------------------ the run
    def start(self, video_id: str, t0: float, t1: float, track_id: int | None) -> None:
        w = self.w
        if w.library is None or w.conns is None:
            w.presenter.notice("Open a library first (File → Open library…).")
            return
        self.cancel()
        who = f"track #{track_id}" if track_id is not None else "the ego"
        job = Worker(library_job, w.conns, similar_job, video_id, t0, t1, track_id, top_k=TOP_K,
                     name="similar")
        job.library_path = w.library_path
        job.what = f"{video_id} {t0:.1f}–{t1:.1f} s, {who}"
        job.signals.progressed.connect(lambda ev, j=job: self._on_progress(j, ev))
        job.signals.finished.connect(lambda res, j=job: self._on_finished(j, res))
        job.signals.errored.connect(lambda exc, tb, j=job: self._on_errored(j, exc, tb))
        job.signals.cancelled.connect(lambda j=job: self._on_stopped(j))
        self.label.setText(f"Looking for moments like {job.what}…")
        self.progress.setRange(0, 0)
        self.show()
        self.worker = w.jobs.submit(job)
        w._refresh_actions()                 # Esc cancels

    def _idle(self) -> None:
        self.worker = None
        self.hide()
        self.w._refresh_actions()

    def cancel(self) -> None:
        """Stop the run now: the list shown stays, nothing of the run is shown later."""
        j = self.worker
        if j is None or j.is_done:
            return
        j.cancel()
        self._idle()
        self.w.statusBar().showMessage(f"More like this ({j.what}) cancelled.", 6000)
        self.stopped.emit()

    def _on_progress(self, job, ev) -> None:
        if job is not self.worker:
            return
        total = int(getattr(ev, "total", 0) or 0)
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(int(getattr(ev, "done", 0) or 0))
        stage = str(getattr(ev, "stage", "") or "").replace("similar: ", "")
        self.label.setText(f"Looking for moments like {job.what}… {stage}")

    def _on_finished(self, job, result) -> None:
        if job is not self.worker:
            return
        self._idle()
        w = self.w
        if w.library is None or job.library_path != w.library_path:
            return
        sim, resp = result
        w.show_response(resp, origin="similar")
        w.results_label.setText(f"{len(resp.hits)} moment(s) like {example_text(sim.example)} · "
                                f"{used_text(sim)} · Signals column: distance, 0 = the same values")
        if w.tabs.currentWidget() is not w.inspect_split:
            w.tabs.setCurrentWidget(w.inspect_split)
        w.player.setFocus(Qt.FocusReason.OtherFocusReason)
        self.finished.emit(sim)

    def _on_errored(self, job, exc, tb) -> None:
        if job is not self.worker:
            return
        self._idle()
        self.w.presenter.present("More like this failed", exc, tb)
        self.failed.emit(str(exc))

    def _on_stopped(self, job) -> None:
        if job is self.worker:
            self._idle()
            self.stopped.emit()
