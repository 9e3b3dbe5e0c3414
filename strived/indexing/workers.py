"""Several videos in flight on one machine: a pool of perception worker processes.

Each worker process loads the detector once and perceives whole videos with ``threads`` CPU
threads of its own (OpenCV, onnxruntime, torch); this process receives the finished records and
writes them (SQLite is written from one process only). On 2 cores, two single-threaded workers
index the bench-dev videos x2.42 real time against x1.75 for one process using both cores
(docs/report/throughput/), because ego motion, tracking and decoding are largely serial; on a GPU
workstation every worker sends its frames to the same GPU (one CUDA context each: GPU memory grows
with the number of workers; not measured here) while the CPU-side stages run on all cores.

A worker that dies (out of memory, a crash in a native library) fails the video it held and only
that one: the pool is rebuilt and the remaining videos go on, one at a time, so a video that kills
its worker again is named and not retried in a loop.
"""

from __future__ import annotations

import os
import queue as _queue
import sys
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Iterator

from ..errors import Cancelled, StrivedError
from ..jobs import CancelFn, ProgressEvent, ProgressFn, report

POLL_S = 0.2
#: the most worker processes ``auto`` starts (each holds a detector and, on a GPU, a CUDA context)
MAX_AUTO_WORKERS = 8

_state: dict = {}


def plan_workers(n_videos: int, requested: int | None, cpus: int | None = None) -> tuple[int, int]:
    """(worker processes, CPU threads each) for ``n_videos`` videos. ``requested`` None or 0:
    automatic, one single-threaded worker per core up to ``MAX_AUTO_WORKERS`` and never more than
    the videos; a number: that many workers, the cores shared among them."""
    cpus = max(1, cpus or os.cpu_count() or 1)
    if requested and requested > 0:
        n = int(requested)
    else:
        n = min(cpus, MAX_AUTO_WORKERS)
    n = max(1, min(n, max(1, n_videos)))
    return n, max(1, cpus // n)


def limit_threads(threads: int):
    """Give every threaded library of this process ``threads`` threads: onnxruntime (through
    ``STRIVED_THREADS``), OpenCV, BLAS and OpenMP (loaded or not yet). Without this, each of 16
    workers on a 16-core machine ran BLAS with 16 threads (256 in all) and its ego-motion stage
    took 1.7x as long per frame. Returns the threadpoolctl limiter (keep it alive)."""
    for var in ("STRIVED_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)   # libraries loaded from here on read these
    import cv2
    from threadpoolctl import threadpool_limits

    cv2.setNumThreads(threads)
    return threadpool_limits(limits=threads)   # the BLAS / OpenMP pools already loaded


def _die_with_parent() -> None:
    """A worker never outlives the indexing process: killed with it (``kill -9``, a crash), it
    would go on perceiving a video nobody will write, holding the terminal's pipes open. Linux:
    the kernel sends SIGKILL when the parent dies; elsewhere a thread polls the parent's pid."""
    import threading

    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)     # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:     # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:
        import time

        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="strived-parent-watch", daemon=True).start()


def _init_worker(cfg_dict: dict, threads: int, progress_q) -> None:
    _die_with_parent()
    _state.update(cfg=cfg_dict, progress=progress_q, detector=None, limits=limit_threads(threads))


def _perceive_in_worker(path: str, video_id: str, camera_config, root: str, key: str | None = None,
                        time_range: tuple[float, float] | None = None):
    """Runs in a worker: one video's ``PerceptionResult``, or the exception it raised.
    ``time_range``: one segment of a long file; ``key`` names its progress messages."""
    # imported in the worker after limit_threads (_init_worker): BLAS reads its thread limits when it loads
    from ..perception.detect import make_detector  # lazy: loads numpy
    from ..perception.pipeline import PerceptionConfig, detector_options, perceive_video  # lazy: loads numpy

    fields = {k: v for k, v in _state["cfg"].items() if k in PerceptionConfig.__dataclass_fields__}
    cfg = PerceptionConfig(**fields)
    q = _state["progress"]

    def progress(ev: ProgressEvent) -> None:
        try:
            q.put_nowait((key or video_id, ev.done, ev.total))
        except Exception:  # a full or closed queue never stops the work
            pass

    try:
        if _state["detector"] is None:
            _state["detector"] = make_detector(cfg.detector, cfg.device, **detector_options(cfg))
            if "torch" in __import__("sys").modules:   # the CUDA runtime's CPU-side ops
                import torch

                torch.set_num_threads(int(os.environ["STRIVED_THREADS"]))
        return perceive_video(path, video_id=video_id, config=cfg, detector=_state["detector"],
                              camera_config=camera_config, root=root, progress=progress,
                              time_range=time_range)
    except Exception as e:  # returned, not raised: the driver records it per file
        # as text: an exception class with its own constructor arguments cannot always be
        # unpickled in the driver, and a failed unpickling breaks the whole pool
        msg = str(e) if isinstance(e, StrivedError) else f"internal error: {type(e).__name__}: {e}"
        return ("error", msg)


def _pool(n: int, cfg_dict: dict, threads: int, progress_q):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the parent may hold threads (Qt, torch) that a forked child would inherit
    # in an unknown state
    return ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"),
                               initializer=_init_worker, initargs=(cfg_dict, threads, progress_q))


def _wait_started(proc, timeout_s: float = 10.0) -> None:
    """Until ``proc`` has a process behind it (its ``pid``), at most ``timeout_s``."""
    import time

    end = time.monotonic() + timeout_s
    while getattr(proc, "_popen", None) is None and time.monotonic() < end:
        time.sleep(0.01)


def _reap(proc, timeout_s: float = 5.0) -> None:
    """Join a killed worker until its exit status is known. The executor's manager thread may be
    joining it at the same moment: then this join sees no child to wait for and returns early,
    before the other has recorded the status, and the process would still be listed as alive."""
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            proc.join(timeout=0.05)
        except Exception:
            return
        if proc.exitcode is not None:
            proc.join(timeout=0)          # now it is known: forget it as a child
            return


def _kill(pool) -> None:
    """Stop every worker process of ``pool`` now and wait for each to be gone. The executor's
    manager thread can still start a worker after shutdown was asked (it spawns on demand), so
    the pool's processes are looked at again until no new one appears."""
    live = getattr(pool, "_processes", None) or {}    # the dict itself: shutdown drops the pool's reference
    before = list(live.values())      # and its manager thread may drop a worker from it before it is gone
    pool.shutdown(wait=False, cancel_futures=True)
    done: set[int] = set()
    for _ in range(5):
        procs = [p for p in before + list(live.values()) if id(p) not in done]
        if not procs:
            break
        for p in procs:
            _wait_started(p)        # one still being started (by the manager thread) cannot be killed yet
            try:
                p.kill()
            except Exception:
                pass
        for p in procs:
            _reap(p)
            done.add(id(p))


def _size(item) -> int:
    try:
        return Path(item.path).stat().st_size
    except OSError:
        return 0


def _key(item) -> str:
    return getattr(item, "task_key", None) or item.video_id


def _weight(item) -> float:
    return float(getattr(item, "weight", 1.0)) if item is not None else 1.0


def _segment_args(item) -> tuple:
    """The extra arguments of a segment task (none for a whole video)."""
    seg = getattr(item, "segment", None)
    return () if seg is None else (_key(item), seg.time_range)


def _report_frames(progress: ProgressFn, fresh: list[str], frames: dict, tasks: dict, n_done: float,
                   total: int) -> None:
    """One event per video that moved, as one process reports it (a list of videos shows each in
    flight); ``videos_progress``: finished videos plus the in-flight ones' fractions (a segment of
    a long file counts for its share of the file, and reports the file's frames)."""
    overall = n_done + sum(_weight(tasks.get(k)) * d / t for k, (d, t) in frames.items() if t)
    for k in fresh:
        done, tot = frames[k]
        it = tasks.get(k)
        if it is not None and getattr(it, "long", None) is not None:
            done, tot = it.long.frames_progress(it.segment.index, done, tot)
        report(progress, "frames", done, max(tot, done), item=str(it.path) if it is not None else k,
               videos_done=int(n_done), videos_total=total, videos_progress=round(overall, 4))


def _drain(progress_q, frames: dict) -> list[str]:
    """Move the workers' progress messages into ``frames`` (video id -> (done, total)); returns
    the ids that moved."""
    fresh: list[str] = []
    while True:
        try:
            vid, done, tot = progress_q.get_nowait()
        except (_queue.Empty, OSError, ValueError):
            return fresh
        frames[vid] = (done, tot)
        if vid not in fresh:
            fresh.append(vid)


_REDO = object()


def _outcome(fut: Future, n_workers: int):
    """A finished video's result (PerceptionResult or StrivedError); ``_REDO`` when the pool broke
    while ``n_workers`` > 1 ran (the video is redone)."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        res = fut.result()
        if isinstance(res, tuple) and res[:1] == ("error",):
            res = StrivedError(res[1])
    except BrokenProcessPool:
        if n_workers > 1:
            return _REDO
        res = StrivedError("the perception worker process died on this video (out of "
                           "memory, or a crash in a native library)")
    except Exception as e:  # e.g. a result that could not be sent back
        res = StrivedError(f"internal error: {type(e).__name__}: {e}")
    return res


def perceive_in_workers(items: list, cfg, root: Path, *, workers: int, threads: int,
                        progress: ProgressFn = None, cancel: CancelFn = None,
                        videos_total: int | None = None, work=None) -> Iterator[tuple[object, object]]:
    """Perceive ``items`` (``IndexItem``) in ``workers`` processes; yield (item, PerceptionResult |
    Exception) as videos finish. Frame progress: one "frames" event per video that
    moved (item = its path). ``cancel()`` is polled every ``POLL_S``: the workers are stopped at once (the next run
    redoes their videos) and ``Cancelled`` is raised. ``work``: what a worker runs per video (a
    module-level function like ``_perceive_in_worker``; tests pass one that crashes)."""
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool

    if not items:
        return
    progress_q = mp.get_context("spawn").Queue(maxsize=1000)
    cfg_dict = cfg.to_dict()
    total = videos_total if videos_total is not None else len(items)

    todo = sorted(items, key=_size, reverse=True)  # longest first: no worker left alone with a long one at the end
    n_done = 0
    frames: dict[str, tuple[int, int]] = {}
    one_at_a_time = False

    tasks = {_key(it): it for it in items}

    def drain() -> None:
        _report_frames(progress, _drain(progress_q, frames), frames, tasks, n_done, total)

    try:
        while todo:
            n = 1 if one_at_a_time else workers
            pool = _pool(n, cfg_dict, threads, progress_q)
            running: dict[Future, object] = {}
            broken = clean = False
            try:
                while todo or running:
                    # one queued per worker (no idle gap), except one at a time: then the video in
                    # flight when the worker dies is the one that killed it
                    while todo and len(running) < (2 * n if n > 1 else 1) and not broken:
                        it = todo.pop(0)
                        try:
                            fut = pool.submit(work or _perceive_in_worker, str(Path(it.path)), it.video_id,
                                              it.camera_config, str(root), *_segment_args(it))
                        except BrokenProcessPool:   # a worker died since the last result
                            todo.insert(0, it)
                            broken = True
                            break
                        running[fut] = it
                    finished, _ = wait(list(running), timeout=POLL_S, return_when=FIRST_COMPLETED)
                    drain()
                    if cancel is not None and cancel():
                        raise Cancelled()
                    for fut in finished:
                        it = running.pop(fut)
                        res = _outcome(fut, n)
                        if res is _REDO:   # which video killed it is not known: redo them one at a time
                            todo.insert(0, it)
                            broken = True
                            continue
                        frames.pop(_key(it), None)
                        n_done += _weight(it)
                        yield it, res
                    if broken and (n > 1 or not running):
                        for it in running.values():
                            todo.insert(0, it)
                        running.clear()
                        one_at_a_time = True
                        break
                clean = not broken
            finally:
                if clean:      # every video answered: let the idle workers exit on their own
                    pool.shutdown(wait=True)
                else:          # cancelled, stopped or broken: at once
                    _kill(pool)
    finally:
        progress_q.close()
        progress_q.join_thread()
