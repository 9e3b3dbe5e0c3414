"""Long files in the indexing job: one task per unfinished segment, each stored when it finishes,
the file's records joined and written when the last one is in.

A file longer than the long-file threshold (`strived.perception.long_file`) becomes one task per
segment it has not finished before (table ``perceived_segments``, `strived.store.segments`). Each
finished segment is stored at once, so a kill loses at most the segments in flight (one per
worker). Progress inside the file: the segments' frame counts add up to the file's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import StrivedError
from ..perception import long_file
from ..perception.stitch import join_segments
from ..store import segments as seg_store
from . import state


@dataclass
class LongFile:
    """One long file's segments: the plan, which are stored, and the frames of those in flight."""

    path: str                       # the files row's key (resolved path)
    item: object                    # its IndexItem
    segments: list                  # long_file.Segment, in order
    key: str                        # segment rows' key: fingerprint, settings, segmentation
    frames_total: int
    overlap_s: float
    done: set = field(default_factory=set)
    in_flight: dict = field(default_factory=dict)   # segment -> fraction of its frames done
    failed: str | None = None
    reported: bool = False          # its result (records or failure) was written

    @property
    def complete(self) -> bool:
        return len(self.done) == len(self.segments)

    def frames_progress(self, seg: int, done: int, total: int) -> tuple[int, int]:
        """(frames done, frames) of the whole file, given segment ``seg``'s progress."""
        self.in_flight[seg] = min(1.0, done / total) if total > 0 else 0.0
        frac = (len(self.done) + sum(f for s, f in self.in_flight.items() if s not in self.done)) / len(self.segments)
        return int(round(frac * self.frames_total)), self.frames_total


def expand(todo: list, lib, cfg_key: str, sample_fps: float, segment_s: float | None = None,
           long_file_s: float | None = None) -> tuple[list, list[LongFile]]:
    """(tasks, long files): ``todo`` with every long file replaced by its unfinished segments.
    A long file whose segments are all stored (killed before its records were written) has no
    task: the caller finishes it (`finish`)."""
    seg_s, long_s = long_file.segment_settings(segment_s, long_file_s)
    tasks, longs = [], []
    for item in todo:
        duration = long_file.probe_duration(item.path)
        if duration is None or not duration > long_s:
            tasks.append(item)
            continue
        path = str(item.path.resolve())
        plan = long_file.plan_segments(duration, seg_s)
        key = state.config_key({"size": item.fp.size, "mtime": item.fp.mtime, "config": cfg_key,
                                "segment_s": seg_s, "overlap_s": long_file.OVERLAP_S})
        frames = max(1, int(math.ceil(duration * sample_fps)))
        lf = LongFile(path, item, plan, key, frames, long_file.OVERLAP_S)
        lf.done = seg_store.prune(lib, path, key) & {s.index for s in plan}
        longs.append(lf)
        tasks.extend(replace(item, segment=s, long=lf) for s in plan if s.index not in lf.done)
    return tasks, longs


def store_segment(lib, lf: LongFile, seg, res) -> None:
    """Store a finished segment's records (or remember why it failed)."""
    if isinstance(res, BaseException):
        msg = str(res) if isinstance(res, StrivedError) else f"internal error: {type(res).__name__}: {res}"
        end = "end" if math.isinf(seg.t1) else f"{seg.t1:.0f} s"
        lf.failed = lf.failed or f"segment {seg.index + 1} of {len(lf.segments)} ({seg.t0:.0f} s to {end}): {msg}"
        return
    thumb = (res.thumbnail_jpeg, res.thumbnail_size) if res.thumbnail_jpeg else None
    seg_store.put(lib, lf.path, lf.key, seg.index, seg.t0, seg.t1, res.records, thumb, res.n_sampled,
                  res.timings_s)
    lf.done.add(seg.index)


@dataclass
class JoinedResult:
    """A long file's joined records, as the job reports a perceived video."""

    records: object
    duration_s: float
    timings_s: dict
    n_sampled: int


def finish(lib, lf: LongFile, cfg_key: str, sample_fps: float, file_hash: str | None) -> JoinedResult:
    """Join the stored segments into the file's records and write them, its files row ('done')
    and thumbnail, and delete the segment rows, in one transaction. Raises ``LibraryError``."""
    rows = seg_store.load(lib, lf.path, lf.key)
    by_seg = {r["seg"]: r for r in rows}
    parts = [by_seg[s.index]["records"] for s in lf.segments]
    seg_s = lf.segments[0].t1 - lf.segments[0].t0 if len(lf.segments) > 1 else None
    rec = join_segments(parts, lf.segments, sample_fps,
                        extra_attrs={"segments": {"n": len(lf.segments), "segment_s": seg_s,
                                                  "overlap_s": lf.overlap_s}})
    thumb_t = 0.3 * float(rec.t[-1]) if len(rec.t) else 0.0
    thumb = next((by_seg[s.index]["thumbnail"] for s in lf.segments if s.t0 <= thumb_t < s.t1), None)
    thumb = thumb or next((r["thumbnail"] for r in rows if r["thumbnail"]), None)
    timings: dict = {}
    for r in rows:
        for k, v in r["timings"].items():
            timings[k] = timings.get(k, 0.0) + float(v)
    it = lf.item
    with lib.transaction():
        state.write_result(lib, lf.path, fp=it.fp, file_hash=file_hash, config=cfg_key, rec=rec,
                           thumbnail_jpeg=thumb[0] if thumb else None,
                           thumbnail_size=tuple(thumb[1]) if thumb else None)
        seg_store.clear(lib, lf.path)
    return JoinedResult(rec, rec.duration_s, timings, sum(r["n_sampled"] for r in rows))
