"""Chunked computation of per-unit features: `per_unit_chunks` runs a kernel over chunks of whole
units (tracks, or videos' ego series) in a thread pool, each chunk reading only its range of the
columns, from an in-memory array or a range reader (`colcache.FileColumn`, `AbsColumn`,
`RoadColumn`), so the memory a feature costs is a chunk's, not the library's."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from ..jobs import check_cancel, current_cancel
from . import kernels
from .colcache import FileColumn
from .kernels import Series
from .road import match_frames, road_lateral

if TYPE_CHECKING:
    from .columns import TrackColumns


class AbsColumn:
    """|values| of a column, taken range by range."""

    def __init__(self, base):
        self.base = base

    def read(self, a: int, b: int) -> np.ndarray:
        return np.abs(read_range(self.base, a, b))


class RoadColumn:
    """``loc_x_road`` of the track samples, taken range by range (ranges of whole tracks, as
    `_subset` reads them): see `road_lateral`."""

    def __init__(self, cols: "TrackColumns"):
        self.cols = cols

    def read(self, a: int, b: int) -> np.ndarray:
        cols = self.cols
        s, e = cols.tracks, cols.ego
        if b <= a:
            return np.zeros(0, np.float32)

        def col(name):
            f = s.files.get(name)
            return np.asarray(read_range(f if f is not None else s.values[name], a, b))
        tf = s.files.get("t")
        t = np.asarray(read_range(tf if tf is not None else s.t, a, b), np.float64)
        # the track of each sample: the last track starting at or before it (an empty track
        # shares its start with the next one, which owns the sample)
        track = np.searchsorted(s.start, np.arange(a, b), side="right") - 1
        heading = cols.series_for("heading")[1]
        frames = match_frames(e, s.owner[track].astype(np.int64), t)
        return road_lateral(track, col("loc_x"), col("loc_z"), col("distance"),
                            np.asarray(heading[frames], np.float64))


def read_range(col, a: int, b: int) -> np.ndarray:
    """Samples [a, b) of a column: a range reader (`FileColumn`, `AbsColumn`, `RoadColumn`) or
    an array."""
    if isinstance(col, (FileColumn, AbsColumn, RoadColumn)):
        return col.read(a, b)
    return col[a:b]


def _subset(s: Series, v, idx: np.ndarray | None) -> tuple[Series, np.ndarray]:
    """The units ``idx`` (sorted; None = all) of a series as a series of their own, with their
    values (``v``: an array or a range reader). Reads the samples from the first to the last of
    these units as one range and keeps theirs."""
    units = np.arange(s.n) if idx is None else np.asarray(idx, np.int64)
    length = s.length[units]
    start = np.zeros(len(units), np.int64)
    if len(units):
        start[1:] = np.cumsum(length)[:-1]
    total = int(length.sum())
    if total == 0:
        t, vals = np.zeros(0, np.float64), np.zeros(0, np.float32)
    else:
        lo = int(s.start[units[0]])
        hi = int(s.start[units[-1]] + length[-1])
        tf = s.files.get("t")
        t = np.asarray(read_range(tf if tf is not None else s.t, lo, hi))
        vals = np.asarray(read_range(v, lo, hi))
        if hi - lo != total:                       # other units between these: keep theirs only
            samples = np.repeat(s.start[units] - lo - start, length) + np.arange(total)
            t, vals = t[samples], vals[samples]
    return Series(owner=s.owner[units], start=start, length=length, t=t, values={}), vals


def per_unit_chunks(s: Series, v, idx: np.ndarray | None, fn):
    """``fn(series, values) -> tuple of per-unit arrays`` for the units ``idx`` (sorted; None =
    all), computed over chunks of whole units whose samples, from the chunk's first unit to its
    last, span at most `kernels.CHUNK_SAMPLES` (a unit longer than that is a chunk of its own), in a
    thread pool (numpy releases the GIL in the kernels), and concatenated in unit order. Each
    chunk reads its range of the columns (``v``: an array or a range reader), so the memory a
    feature costs is proportional to the chunk, not to the library."""
    units = np.arange(s.n) if idx is None else np.asarray(idx, np.int64)
    if units.size > 1 and np.any(np.diff(units) <= 0):
        raise ValueError("units must be sorted and distinct")
    if units.size == 0:
        return fn(*_subset(s, v, units))
    starts = s.start[units]
    ends = starts + s.length[units]
    cuts = [0]
    while cuts[-1] < units.size:
        a = cuts[-1]
        nxt = int(np.searchsorted(ends, starts[a] + kernels.CHUNK_SAMPLES, side="right"))
        cuts.append(max(nxt, a + 1))
    chunks = [units[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    cancel = current_cancel()   # the running job's cancel (strived.jobs.cancel_scope): per chunk
    check_cancel(cancel)
    if len(chunks) == 1:
        return fn(*_subset(s, v, chunks[0]))

    def run(ch):
        check_cancel(cancel)
        return fn(*_subset(s, v, ch))
    workers = max(1, min(len(chunks), os.cpu_count() or 1, 8))
    if workers == 1:
        parts = [run(ch) for ch in chunks]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="strived-features") as ex:
            parts = list(ex.map(run, chunks))
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))
    return np.concatenate(parts)
