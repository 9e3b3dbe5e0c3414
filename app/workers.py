"""One generic worker that runs an engine job (a plain function) off the UI thread.

The engine's long jobs take ``progress`` and ``cancel`` callables (``strived/jobs.py``); a
``Worker`` passes its own: progress is forwarded as a Qt signal (queued to the UI thread), cancel
reads a flag the UI sets. Signals live on a separate QObject because QRunnable is not a QObject.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from strived.api import Cancelled

class WorkerSignals(QObject):
    """Signals of one Worker (started, progressed, errored, finished, cancelled)."""

    started = Signal()
    progressed = Signal(object)     # strived.jobs.ProgressEvent (or any object the job reports)
    errored = Signal(object, str)   # exception, formatted traceback
    finished = Signal(object)       # the job's return value
    cancelled = Signal()
    done = Signal()                 # always last, whatever the outcome


class Worker(QRunnable):
    """Runs ``fn(*args, progress=..., cancel=..., **kwargs)`` in a QThreadPool thread.

    ``pass_progress``/``pass_cancel`` say whether the job accepts those keywords. Progress events are
    coalesced, never lost: a run of events of one (stage, item) is forwarded at most once per
    ``min_interval_s``, the newest one held back meanwhile; it is forwarded before any event of
    another stage or item, when its stage completes, and when the job ends. So milestones ("video
    3 indexed") always arrive, in order, and a chatty job cannot flood the UI.
    """

    def __init__(self, fn: Callable[..., Any], *args, pass_progress: bool = True,
                 pass_cancel: bool = True, min_interval_s: float = 0.05, name: str = "", **kwargs):
        super().__init__()
        self.setAutoDelete(False)   # the owner keeps a reference and reads .result afterwards
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.pass_progress, self.pass_cancel = pass_progress, pass_cancel
        self.min_interval_s = min_interval_s
        self.name = name or getattr(fn, "__name__", "job")
        self.signals = WorkerSignals()
        self.result: Any = None
        self.error: BaseException | None = None
        self._cancel = False
        self._last_emit = 0.0
        self._last_key: tuple | None = None
        self._held: Any = None            # the newest event not forwarded yet (same key as the last)
        self.is_done = False

    # -- called from the UI thread
    def cancel(self) -> None:
        self._cancel = True

    @property
    def cancel_requested(self) -> bool:
        return self._cancel

    def start(self, pool: QThreadPool | None = None) -> "Worker":
        (pool or QThreadPool.globalInstance()).start(self)
        return self

    # -- called from the worker thread
    def _progress(self, event: Any) -> None:
        now = time.monotonic()
        key = (getattr(event, "stage", None), getattr(event, "item", None))
        total = getattr(event, "total", 0)
        complete = bool(total) and getattr(event, "done", 0) >= total
        if key != self._last_key:
            self._flush()                  # what another stage/item left held goes first
        elif not complete and now - self._last_emit < self.min_interval_s:
            self._held = event             # superseded by the next event of this key, or flushed
            return
        self._held = None
        self._last_key, self._last_emit = key, now
        self.signals.progressed.emit(event)

    def _flush(self) -> None:
        if self._held is not None:
            ev, self._held = self._held, None
            self.signals.progressed.emit(ev)

    def run(self) -> None:  # noqa: D401 - QRunnable API
        self.signals.started.emit()
        kwargs = dict(self.kwargs)
        if self.pass_progress:
            kwargs["progress"] = self._progress
        if self.pass_cancel:
            kwargs["cancel"] = lambda: self._cancel
        outcome, tb = "finished", ""
        try:
            if self._cancel:               # cancelled while queued: never started
                raise Cancelled()
            self.result = self.fn(*self.args, **kwargs)
        except Cancelled:
            outcome = "cancelled"
        except BaseException as exc:  # noqa: BLE001 - every failure goes to the presenter
            self.error, outcome = exc, "errored"
            tb = "".join(traceback.format_exception(exc))
        if outcome == "finished" and self._cancel:
            outcome = "cancelled"
        try:
            self._flush()                  # the last progress arrives before the outcome
            if outcome == "finished":
                self.signals.finished.emit(self.result)
            elif outcome == "cancelled":
                self.signals.cancelled.emit()
            else:
                self.signals.errored.emit(self.error, tb)
        finally:
            self.is_done = True
            self.signals.done.emit()


class JobQueue(QObject):
    """One thread pool per resource (the library, the decoder), so jobs of one kind never race.

    Keeps references to running workers (so they are not garbage collected) and can cancel and wait
    for all of them when the window closes.
    """

    def __init__(self, max_threads: int = 1, parent: QObject | None = None,
                 keep_threads: bool = False):
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        if keep_threads:    # the same thread(s) for the queue's life: per-thread resources persist
            self.pool.setExpiryTimeout(-1)
        self._workers: list[Worker] = []

    def submit(self, worker: Worker) -> Worker:
        self._workers = [w for w in self._workers if not w.is_done]
        self._workers.append(worker)
        worker.start(self.pool)
        return worker

    @property
    def active(self) -> list[Worker]:
        return [w for w in self._workers if not w.is_done]

    def cancel_all(self) -> None:
        for w in self._workers:
            w.cancel()

    def shutdown(self, timeout_ms: int = 5000) -> bool:
        self.cancel_all()
        ok = self.pool.waitForDone(timeout_ms)
        self._workers = [w for w in self._workers if not w.is_done]
        return ok
