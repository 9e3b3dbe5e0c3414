"""``index_folder``: the indexing job (incremental, resumable, one failure never stops the rest)."""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..errors import Cancelled, LibraryError, StrivedError
from ..jobs import CancelFn, ProgressEvent, ProgressFn, check_cancel, report
from ..perception import detect
from ..perception.pipeline import PerceptionConfig, detector_options, perceive_video
from ..perception.video import find_videos
from ..store import files as file_store
from . import long_files, state
from .known_camera import KnownCameras
from .ray_backend import perceive_with_ray
from .workers import perceive_in_workers, plan_workers


@dataclass
class IndexItem:
    """One video file the job will perceive."""

    path: Path
    video_id: str
    fp: state.Fingerprint
    file_hash: str | None
    camera_config: dict | None = None
    config_key: str | None = None   # its files row's config: the settings, and any camera group values used
    segment: object = None          # long_file.Segment: this task perceives one segment of a long file
    long: object = None             # long_files.LongFile the segment belongs to

    @property
    def task_key(self) -> str:
        return self.video_id if self.segment is None else f"{self.video_id}#{self.segment.index}"

    @property
    def weight(self) -> float:
        """This task's share of its file."""
        return 1.0 if self.long is None else 1.0 / len(self.long.segments)


@dataclass
class IndexReport:
    """What an indexing run did. ``failed``: (path, error message) per file."""

    folder: str
    found: int = 0
    indexed: list[str] = field(default_factory=list)
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped_failed: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)   # sub-folders: (path, reason)
    relinked: list[tuple[str, str]] = field(default_factory=list)     # moved files: (old, new path)
    missing_elsewhere: int = 0  # library videos outside this folder whose file is gone
    cancelled: bool = False
    elapsed_s: float = 0.0
    video_s: float = 0.0
    timings_s: dict = field(default_factory=dict)
    workers: int = 1   # perception processes used (0: a Ray cluster)
    device: str | None = None   # where the detector ran ("cpu", "cuda"), as the records say
    warnings: list[str] = field(default_factory=list)   # e.g. a camera group's stored values ignored

    @property
    def ok(self) -> bool:
        return not self.failed and not self.cancelled

    def summary(self) -> str:
        parts = [f"{self.found} videos found", f"{len(self.indexed)} indexed", f"{self.unchanged} unchanged"]
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        if self.skipped_failed:
            parts.append(f"{len(self.skipped_failed)} failed before and unchanged (not retried)")
        if self.relinked:
            parts.append(f"{len(self.relinked)} moved or renamed (recognised by content, not redone)")
        if self.missing:
            parts.append(f"{len(self.missing)} indexed before but now missing")
        if self.unreadable:
            parts.append(f"{len(self.unreadable)} sub-folder{'s' if len(self.unreadable) > 1 else ''} "
                         "could not be read")
        if self.video_s > 0 and self.elapsed_s > 0:
            parts.append(f"{self.video_s:.0f} s of video in {self.elapsed_s:.0f} s "
                         f"({self.video_s / self.elapsed_s:.2f}x real time)")
        parts += [f"warning: {w}" for w in self.warnings]
        if self.cancelled:
            parts.append("CANCELLED (run again to resume)")
        return ", ".join(parts)


def plan(folder: Path, lib, config_key: str, *, retry_failed: bool = False,
         report_: IndexReport | None = None) -> list[IndexItem]:
    """Decide which videos under ``folder`` need perception; fills ``report_`` with the others."""
    rep = report_ or IndexReport(str(folder))
    videos = find_videos(folder, errors=rep.unreadable)
    rep.found = len(videos)
    taken = file_store.video_paths(lib)
    for vid in lib.video_ids():  # imported records own their id too
        taken.setdefault(vid, None)
    # Moved or renamed footage: a file new to the library whose content matches an indexed file
    # that is gone is that video at its new place: relinked, never duplicated nor redone.
    gone: dict[tuple[int, str], str] = {}
    for path_, size_, hash_ in file_store.done_with_hash(lib):
        if not os.path.exists(path_):
            gone.setdefault((int(size_), hash_), path_)
    gone_sizes = {k[0] for k in gone}
    cams = KnownCameras.read(lib)   # the values users gave camera groups (`strived camera set`)
    rep.warnings.extend(cams.warnings)
    todo: list[IndexItem] = []
    for p in videos:
        key_fp = _readable(p, rep)
        if key_fp is None:
            continue
        item = _plan_file(p, *key_fp, folder, lib, (config_key, cams), retry_failed, rep, (gone, gone_sizes),
                          taken)
        if item is not None:
            todo.append(item)
    known = file_store.done_paths(lib)
    root = str(folder.resolve())
    rep.missing = sorted(k for k in known if k.startswith(root + os.sep) and not os.path.exists(k))
    rep.missing_elsewhere = sum(1 for k in known if not k.startswith(root + os.sep) and not os.path.exists(k))
    return todo


def _readable(p: Path, rep: IndexReport) -> tuple[str, state.Fingerprint] | None:
    """(resolved path, fingerprint) of the video file ``p``; None, with the reason in ``rep.failed``,
    when it cannot be indexed (a name that is not UTF-8, a broken link, not a regular file)."""
    try:  # a name in another encoding (bytes that are not UTF-8) cannot be stored or shown
        str(p).encode("utf-8")
    except UnicodeEncodeError:
        rep.failed.append((os.fsencode(p).decode("utf-8", "backslashreplace"),
                           "its file name is not valid UTF-8: rename the file to index it"))
        return None
    try:  # a symlink loop or a dangling link named *.mp4 fails here: that file only
        key = str(p.resolve(strict=True))
        if not os.path.isfile(key):
            raise IsADirectoryError(errno.EISDIR, "not a regular file")
        return key, state.fingerprint(p)
    except (OSError, RuntimeError) as e:
        why = "symlink loop" if isinstance(e, RuntimeError) or getattr(e, "errno", None) == errno.ELOOP \
            else (getattr(e, "strerror", None) or str(e))
        rep.failed.append((str(p), f"cannot read file: {why}"))
        return None


def _plan_file(p: Path, key: str, fp: state.Fingerprint, folder: Path, lib, settings: tuple[str, KnownCameras],
               retry_failed: bool, rep: IndexReport, moved: tuple[dict, set], taken: dict) -> IndexItem | None:
    """The task for video file ``p`` (resolved path ``key``), or None when it needs none (counted
    in ``rep``): unchanged, failed before, moved (relinked: ``moved`` is (size, hash) -> path of the
    indexed files that are gone, and their sizes), or unreadable. ``settings``: the perception
    settings' key and the camera groups' known values; the file's own key adds the group values
    it is perceived with, so changing them redoes it."""
    gone, gone_sizes = moved
    row = file_store.get_row(lib, key)
    if row is None and fp.size in gone_sizes:
        try:
            old = gone.pop((fp.size, state.content_hash(p)), None)
        except OSError as e:
            rep.failed.append((key, f"cannot read file: {e.strerror or e}"))
            return None
        if old is not None:
            vid = state.relink_file(lib, old, key)
            rep.relinked.append((old, key))
            taken[vid] = key
            row = file_store.get_row(lib, key)
    camera_config, config_key = settings[1].resolve(p, folder, row["video_id"] if row else None, settings[0])
    same_cfg = row is not None and row["config"] == config_key
    if row and same_cfg and row["size"] == fp.size and row["mtime"] == fp.mtime:
        if row["status"] == "done":
            rep.unchanged += 1
            return None
        if row["status"] == "failed" and not retry_failed:
            rep.skipped_failed.append((key, row["error"] or "failed"))
            return None
    file_hash = None
    if row and same_cfg and row["status"] == "done" and row["size"] == fp.size:
        try:
            file_hash = state.content_hash(p)
        except OSError as e:
            rep.failed.append((key, f"cannot read file: {e.strerror or e}"))
            return None
        if file_hash == row["hash"]:
            state.touch_file(lib, key, fp)  # copied or touched, same content
            rep.unchanged += 1
            return None
    if row:
        vid = row["video_id"]
    else:
        vid = base = state.video_id_for(p, folder)
        k = 2
        while vid in taken and taken[vid] != key:
            vid, k = f"{base}_{k}", k + 1
        taken[vid] = key
    return IndexItem(p, vid, fp, file_hash, camera_config, config_key)


def _perceive_local(items: list[IndexItem], cfg, detector, folder: Path, progress: ProgressFn,
                    cancel: CancelFn, n_done0: int, n_total: int) -> Iterator[tuple[IndexItem, object]]:
    """Perceive items one by one in this process; yields (item, PerceptionResult | Exception)."""
    videos_done = float(n_done0)
    for item in items:
        def inner(ev: ProgressEvent, item=item, base=videos_done) -> None:
            done, total = ev.done, ev.total
            if item.long is not None:   # a segment: the file's frames
                done, total = item.long.frames_progress(item.segment.index, done, total)
            report(progress, "frames", done, total, item=str(item.path), videos_done=int(base),
                   videos_total=n_total, videos_progress=round(base + item.weight * ev.fraction, 4))
        try:
            res = perceive_video(item.path, video_id=item.video_id, config=cfg, detector=detector,
                                 camera_config=item.camera_config, root=folder, progress=inner, cancel=cancel,
                                 time_range=None if item.segment is None else item.segment.time_range)
        except (Cancelled, KeyboardInterrupt):
            raise
        except Exception as e:  # one video's failure must never stop the rest
            res = e
        videos_done += item.weight
        yield item, res


def index_folder(folder: str | os.PathLike, library, *, sample_fps: float = 10.0, detector=None,
                 device: str = "auto", config=None, progress: ProgressFn = None, cancel: CancelFn = None,
                 retry_failed: bool = False, ray_address: str | None = None,
                 ray_cpus: float = 1.0, ray_gpus: float = 0.0, workers: int | None = None,
                 segment_s: float | None = None, long_file_s: float | None = None) -> IndexReport:
    """Index every video under ``folder`` into ``library`` (a ``strived.store.library.Library``).

    Incremental: files already indexed with the same size+mtime (or the same content hash) and the
    same perception config are skipped. Resumable: each video is written with its records, files
    row and thumbnail in one transaction, so a killed run redoes only unfinished videos. A video
    that fails is recorded (status 'failed' and the error) and reported; the others go on. Files
    that failed before and have not changed are not retried unless ``retry_failed``.

    ``detector``: a Detector instance, or a spec string (``nanodet-g``, ``yolov3-tiny``, ``onnx:PATH``, ``hf:DIR``).
    ``ray_address``: run per-video perception as Ray tasks on that cluster ('local' starts one).
    ``workers``: perception processes on this machine (None or 0: one per core, at most
    ``workers.MAX_AUTO_WORKERS``; 1: in this process). A caller's own detector instance runs in
    this process.
    ``segment_s``, ``long_file_s``: a file longer than ``long_file_s`` is perceived in segments of
    ``segment_s`` seconds, each stored when finished (`long_files.py`; defaults: ``STRIVED_SEGMENT_S``
    and ``STRIVED_LONG_FILE_S``, else 60 s and 300 s).
    Returns an IndexReport; ``report.cancelled`` is True when ``cancel()`` stopped it.
    Raises FileNotFoundError for a missing folder, LibraryError when the library cannot be written.
    """
    t_start = time.perf_counter()
    folder = Path(folder)
    cfg = config or PerceptionConfig(sample_fps=sample_fps, device=device)
    if isinstance(detector, str):
        cfg.detector = detector
        detector = None
    rep = IndexReport(str(folder))
    report(progress, "scan", 0, 0, item=str(folder), message="looking for videos")
    cfg_key = _settings_key(cfg, None if ray_address is not None else detector)
    todo = plan(folder, library, cfg_key, retry_failed=retry_failed, report_=rep)
    total = len(todo)
    report(progress, "videos", 0, total, message=f"{rep.found} found, {total} to index")

    longs = []
    if ray_address is None:   # long files in segments (a Ray task perceives a whole file)
        todo, longs = _expand_long(todo, library, cfg_key, cfg.sample_fps, segment_s, long_file_s)
    n_workers, threads = plan_workers(len(todo), workers)
    in_pool = ray_address is None and n_workers > 1 and detector is None
    if todo and ray_address is None and detector is None:
        # a wrong spec or a missing model file is said once, before anything is marked; a pool's
        # workers load their own copy (this one is only the check, on the CPU)
        detector = detect.make_detector(cfg.detector, "cpu" if in_pool else cfg.device, **detector_options(cfg))
    rep.workers = 0 if ray_address is not None else (n_workers if in_pool else 1)

    _mark_running(library, todo, cfg_key)
    if ray_address is not None:
        results = perceive_with_ray(todo, cfg, ray_address, folder, cancel=cancel,
                                    cpus_per_task=ray_cpus, gpus_per_task=ray_gpus)
    elif in_pool:
        detector = None
        results = perceive_in_workers(todo, cfg, folder, workers=n_workers, threads=threads,
                                      progress=progress, cancel=cancel, videos_total=total)
    else:
        results = _perceive_local(todo, cfg, detector, folder, progress, cancel, 0, total)

    try:
        _write_results(library, rep, results, longs, cfg_key, cfg.sample_fps, progress, cancel, total)
    except (Cancelled, KeyboardInterrupt) as e:
        rep.cancelled = True
        close = getattr(results, "close", None)
        if close:
            close()
        if isinstance(e, KeyboardInterrupt):
            rep.elapsed_s = time.perf_counter() - t_start
            raise
    rep.elapsed_s = time.perf_counter() - t_start
    return rep


def _expand_long(todo: list[IndexItem], library, cfg_key: str, sample_fps: float, segment_s,
                 long_file_s) -> tuple[list, list]:
    """`long_files.expand` over ``todo``, each file with its own config key (its segments' key)."""
    by_key: dict[str, list[IndexItem]] = {}
    for item in todo:
        by_key.setdefault(item.config_key or cfg_key, []).append(item)
    tasks, longs = [], []
    for key, items in by_key.items():
        t, lf = long_files.expand(items, library, key, sample_fps, segment_s, long_file_s)
        tasks += t
        longs += lf
    return tasks, longs


def _settings_key(cfg, detector) -> str:
    """The files rows' ``config``: every perception setting and the detector (a caller's own
    ``detector`` instance, when given, by its name), not the device (it does not change the records)."""
    det_name = cfg.detector
    if detector is not None:
        det_name = (getattr(detector, "config", None) or {}).get("detector") or getattr(detector, "name", "custom")
    return state.config_key({**cfg.to_dict(), "device": None, "detector": det_name})


def _mark_running(library, todo: list[IndexItem], cfg_key: str) -> None:
    """Mark every task's file as running first: a killed run leaves 'running' rows to redo."""
    for item in todo:
        state.mark_file(library, str(item.path.resolve()), video_id=item.video_id, fp=item.fp,
                        file_hash=item.file_hash, status="running", config=item.config_key or cfg_key)


def _finish_long(library, lf, cfg_key: str, sample_fps: float):
    """A long file whose segments are all stored: its records written (or the error)."""
    file_hash = lf.item.file_hash
    if file_hash is None:
        try:
            file_hash = state.content_hash(lf.item.path)
        except OSError:
            file_hash = None
    try:
        return long_files.finish(library, lf, cfg_key, sample_fps, file_hash)
    except LibraryError:
        raise
    except Exception as e:  # noqa: BLE001 - a join that fails fails this file only
        return StrivedError(f"internal error: joining its segments failed: {type(e).__name__}: {e}")


def _record(library, rep: IndexReport, item: IndexItem, res, cfg_key: str) -> None:
    """Write one video's result (records, or its failure) and count it in ``rep``."""
    key = str(item.path.resolve())
    cfg_key = item.config_key or cfg_key
    if isinstance(res, BaseException):
        msg = str(res) if isinstance(res, StrivedError) else f"{type(res).__name__}: {res}"
        if not isinstance(res, (StrivedError, OSError)):
            msg = f"internal error: {msg}"
        rep.failed.append((key, msg))
        state.mark_file(library, key, video_id=item.video_id, fp=item.fp, file_hash=item.file_hash,
                        status="failed", config=cfg_key, error=msg)
        return
    if not isinstance(res, long_files.JoinedResult):   # a long file's is written by finish()
        file_hash = item.file_hash
        if file_hash is None:
            try:
                file_hash = state.content_hash(item.path)
            except OSError:
                file_hash = None
        state.write_result(library, key, fp=item.fp, file_hash=file_hash, config=cfg_key,
                           rec=res.records, thumbnail_jpeg=res.thumbnail_jpeg,
                           thumbnail_size=res.thumbnail_size)
    rep.indexed.append(item.video_id)
    rep.video_s += res.duration_s
    det_cfg = ((res.records.info.attrs or {}).get("perception") or {}).get("detector_config") or {}
    rep.device = rep.device or det_cfg.get("device")
    for k, v in res.timings_s.items():
        rep.timings_s[k] = rep.timings_s.get(k, 0.0) + v


def _write_results(library, rep: IndexReport, results, longs: list, cfg_key: str, sample_fps: float,
                   progress: ProgressFn, cancel: CancelFn, total: int) -> None:
    """Write each result as it comes (a long file's segments as they finish, its records once the
    last is in); one "videos" event per file."""
    done = 0
    for lf in longs:   # every segment stored by a run killed before it wrote the file
        if lf.complete:
            lf.reported = True
            _record(library, rep, lf.item, _finish_long(library, lf, lf.item.config_key or cfg_key, sample_fps),
                    cfg_key)
            done += 1
            report(progress, "videos", done, total, item=lf.path, message="indexed")
    for item, res in results:
        if item.long is not None:
            lf = item.long
            long_files.store_segment(library, lf, item.segment, res)
            if lf.reported or (lf.failed is None and not lf.complete):
                continue      # the file's other segments are still coming, or it was said
            lf.reported = True
            res = StrivedError(lf.failed) if lf.failed else _finish_long(library, lf, item.config_key or cfg_key,
                                                                          sample_fps)
        _record(library, rep, item, res, cfg_key)
        done += 1
        report(progress, "videos", done, total, item=str(item.path.resolve()),
               message="failed" if isinstance(res, BaseException) else "indexed")
        check_cancel(cancel)
