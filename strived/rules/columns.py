"""Columnar view of every track and ego series of a corpus (`TrackColumns`), plus the per-unit
window features the fast scorer reads, cached in memory and, for a library, on disk.

The columns come from in-memory records or a library (`rows`; a library's through its column
cache, `colcache`); the features are computed by the kernels (`kernels`) over chunks of whole
units (`chunks`), and the road-relative offset by `road`.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np

from ..availability import MIN_SPEED_CONF
from ..records import VideoRecords
from . import kernels, rows
from .chunks import AbsColumn, RoadColumn, per_unit_chunks
from .colcache import load_cache, reuse_older, save_feature, try_load, write_cache
from .kernels import T_EPS, ColumnParts, Series, compare
from .road import ROAD_FIELDS, match_frames

#: Ego fields a rule can read (raw ego series plus the derived heading).
_EGO_RULE_FIELDS = ("speed", "yaw_rate", "accel", "heading", "jolt")

#: how many "for >= x of the clip" gate answers a corpus remembers (one bool per track each: ~1.5 MB
#: at 100k videos of 15 tracks; a library's rules use a handful of distinct such gates)
FRACTION_MEMO = 32


class TrackColumns:
    """All tracks and ego series of a corpus in columns; window features cached per key."""

    def __init__(self, video_ids: list[str], tracks: Series, ego: Series, track_cls: np.ndarray,
                 cls_names: list[str], track_ids: np.ndarray, cache_dir: Path | None = None,
                 cache_tag: str | None = None):
        self.video_ids = video_ids
        self.vindex = {v: i for i, v in enumerate(video_ids)}
        self.tracks = tracks
        self.ego = ego
        self.track_cls = track_cls  # int16 [T] code into cls_names
        self.cls_names = cls_names
        self.track_ids = track_ids  # int64 [T]
        self.cache_dir = cache_dir
        self.cache_tag = cache_tag
        #: videos whose stored rows are damaged (`rowcheck`): {video_id: reason}; they have no
        #: tracks and an empty ego series here, and the rule source reports them as not judged
        self.broken: dict[str, str] = {}
        # stable identities of each unit's content (video id + write revision [+ track id]): let
        # features cached for an older content version be reused for unchanged videos
        self.ego_ident: np.ndarray | None = None
        self.track_ident: np.ndarray | None = None

    @property
    def n_videos(self) -> int:
        return len(self.video_ids)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_records(cls, recs: list[VideoRecords]) -> "TrackColumns":
        return cls._from_parts(rows.from_records(recs))

    @classmethod
    def from_library(cls, lib) -> "TrackColumns":
        """Columns of a library: from the on-disk column cache (memory-mapped .npy files, valid
        for the library's current content version) or by one scan of the database, which then
        writes that cache."""
        tag = hashlib.sha1(f"{lib.meta_get('created_at')}-{lib.content_version}-conf{MIN_SPEED_CONF}"
                           .encode()).hexdigest()[:12]
        cdir = lib.cache_dir / f"cols-{tag}"
        if (cdir / "meta.json").exists():
            try:
                return cls._from_parts(load_cache(cdir), lib.cache_dir, tag)
            except (OSError, ValueError, KeyError):
                pass
        try:
            rows.stream_to_cache(lib, cdir)
            return cls._from_parts(load_cache(cdir), lib.cache_dir, tag)
        except (OSError, ValueError):
            pass  # no writable cache folder (full disk...) or inconsistent rows: scanned in memory
        cols = cls._from_parts(rows.scan_library(lib), lib.cache_dir, tag)
        write_cache(cols, cdir)
        return cols

    @classmethod
    def _from_parts(cls, p: ColumnParts, cache_dir: Path | None = None,
                    cache_tag: str | None = None) -> "TrackColumns":
        out = cls(p.video_ids, p.tracks, p.ego, p.track_cls, p.cls_names, p.track_ids, cache_dir=cache_dir,
                  cache_tag=cache_tag)
        out.ego_ident, out.track_ident, out.broken = p.ego_ident, p.track_ident, p.broken
        return out

    # ------------------------------------------------------------------ fields
    def series_for(self, field_name: str) -> tuple[Series, np.ndarray]:
        """(series, values) for a rule field, with derived fields (abs_loc_x, heading, loc_x_road,
        abs_loc_x_road) computed."""
        if field_name in _EGO_RULE_FIELDS:
            s = self.ego
            if field_name == "heading" and "heading" not in s.values:
                s.values["heading"] = kernels.integrate(s, s.values["yaw_rate"])
            return s, s.values[field_name]
        s = self.tracks
        if field_name == "abs_loc_x" and "abs_loc_x" not in s.values:
            s.values["abs_loc_x"] = np.abs(s.values["loc_x"])
        if field_name in ROAD_FIELDS and field_name not in s.values:
            road = s.values.get("loc_x_road")
            if road is None:
                road = self._road_values()
            s.values[field_name] = road if field_name == "loc_x_road" else np.abs(road)
        return s, s.values[field_name]

    def _road_values(self) -> np.ndarray:
        """``loc_x_road`` of every track sample (float32 [N]), read chunk by chunk of whole tracks
        (`per_unit_chunks`), so the work space is a chunk's, not the library's."""
        return per_unit_chunks(self.tracks, RoadColumn(self), None, lambda ss, vv: vv)

    def _source(self, field_name: str):
        """(series, values) for computing a feature in chunks: the values as a range reader of
        the column cache's file where there is one (`FileColumn`), |loc_x| taken chunk by chunk
        (never a whole-library array), else the in-memory array."""
        if field_name == "abs_loc_x" and "abs_loc_x" not in self.tracks.values:
            s = self.tracks
            base = s.files.get("loc_x")
            return s, AbsColumn(base if base is not None else s.values["loc_x"])
        if field_name in ROAD_FIELDS and field_name not in self.tracks.values:
            road = RoadColumn(self)
            return self.tracks, (road if field_name == "loc_x_road" else AbsColumn(road))
        s, v = self.series_for(field_name)
        f = s.files.get(field_name)
        return s, (f if f is not None else v)

    # ------------------------------------------------------------------ cached features
    def _role(self, field_name: str) -> str:
        return "ego" if field_name in _EGO_RULE_FIELDS else "tr"

    def _cached(self, key: tuple, compute, units=None, partial: bool = False):
        """Feature ``key`` per unit. ``compute(idx)`` computes it for the units ``idx`` (None = all).

        Order of lookup: memory; the disk file of this content version; the newest disk file of an
        older content version, reused for units whose content is unchanged (same identity), with
        only new or changed units computed; else everything is computed.

        ``partial`` (features that are never NaN: window changes, trend runs): only the units
        ``units`` (sorted indices; None = all) are computed; the others may hold NaN (not computed
        yet) in memory and in the cache file, and are computed when a later call needs them."""
        role = self._role(key[1])
        s = self.ego if role == "ego" else self.tracks
        arr = s._feat.get(key)
        complete = s._feat.setdefault(("complete",), set())
        if arr is not None and (not partial or key in complete):
            return arr
        ident = self.ego_ident if role == "ego" else self.track_ident
        disk = self.cache_dir is not None and bool(self.cache_tag) and ident is not None
        name = "-".join(str(k) for k in key).replace("/", "_")
        path = self.cache_dir / f"feat-{self.cache_tag}-{name}.npy" if disk else None
        changed = False
        if arr is None and disk:
            arr = try_load(path, rows=len(ident))
            if arr is None:
                arr = reuse_older(self.cache_dir, self.cache_tag, name, role, ident, compute,
                                  fill_missing=not partial)
                changed = arr is not None
        if arr is None:
            arr = np.full(s.n, np.nan) if partial else compute(None)
            changed = True
        if partial:
            need = np.arange(s.n) if units is None else np.asarray(units, np.int64)
            miss = need[np.isnan(arr[need])]
            if miss.size:
                if not arr.flags.writeable:
                    arr = arr.copy()
                arr[miss] = compute(None if miss.size == s.n else miss)
                changed = True
            if units is None or (miss.size and not np.isnan(arr).any()):
                complete.add(key)
        if changed and disk:
            save_feature(self.cache_dir, self.cache_tag, path, name, role, ident, arr)
        s._feat[key] = arr
        return arr

    def window_change(self, field_name: str, window_s: float, direction: str | None,
                      units=None) -> np.ndarray:
        """Per-track max change within window (float64 [T]); direction None = unsigned.
        ``units`` (sorted unit indices): only those are needed, the others may be NaN (not
        computed yet); None = every unit."""
        if direction is None:
            return np.maximum(self.window_change(field_name, window_s, "positive", units),
                              self.window_change(field_name, window_s, "negative", units))
        w = round(float(window_s), 6)
        key = ("wc", field_name, w, direction)
        s = self.ego if field_name in _EGO_RULE_FIELDS else self.tracks
        both = {}

        def compute(d, idx):
            k = (d, None if idx is None else idx.tobytes())
            if k not in both:
                pos, neg = per_unit_chunks(*self._source(field_name), idx,
                                           lambda ss, vv: kernels.window_change(ss, vv, window_s))
                both[("positive", k[1])], both[("negative", k[1])] = pos, neg
            return both[k]
        for d in ("positive", "negative"):
            self._cached(("wc", field_name, w, d), lambda idx, d=d: compute(d, idx), units=units, partial=True)
        return s._feat[key]

    #: per-sample traces (N-sized) kept in memory at most, least recently used dropped first
    SAMPLE_CACHE_MAX = 6

    def _sample_cached(self, s: Series, key: tuple, compute):
        lru = s._feat.setdefault(("lru",), [])
        if key in s._feat:
            lru.remove(key)
        else:
            s._feat[key] = compute()
            while len(lru) >= self.SAMPLE_CACHE_MAX:
                s._feat.pop(lru.pop(0), None)
        lru.append(key)
        return s._feat[key]

    def end_change(self, field_name: str, window_s: float, direction: str | None) -> np.ndarray:
        """Per sample (of the field's series): the best change over pairs ending at that sample
        within the window (float64 [N]; 0 where none); direction None = unsigned. In memory only
        (the last `SAMPLE_CACHE_MAX` traces)."""
        s = self.ego if field_name in _EGO_RULE_FIELDS else self.tracks
        key = ("ec", field_name, round(float(window_s), 6), direction)
        return self._sample_cached(s, key, lambda: kernels.end_change(*self.series_for(field_name), window_s,
                                                                      direction))

    def end_trend(self, field_name: str, direction: str) -> np.ndarray:
        """Per sample: the duration of the steady run ending there (float64 [N]). In memory only."""
        s = self.ego if field_name in _EGO_RULE_FIELDS else self.tracks
        key = ("et", field_name, direction)
        return self._sample_cached(s, key, lambda: kernels.end_trend(*self.series_for(field_name), direction))

    def track_frame(self) -> np.ndarray:
        """The ego-series sample (the video's frame) of every track sample (int64 [N]): track
        samples are a subset of their video's frames, matched by time (to the microsecond)."""
        key = ("frame",)
        T = self.tracks
        if key not in T._feat:
            T._feat[key] = match_frames(self.ego, T.owner[T.sample_track()].astype(np.int64),
                                        np.asarray(T.t, np.float64))
        return T._feat[key]

    def trend_run(self, field_name: str, direction: str, units=None) -> np.ndarray:
        """Per-track longest steady run in seconds (float64 [T]); ``units`` as in `window_change`."""
        key = ("tr", field_name, direction)
        return self._cached(key, lambda idx: per_unit_chunks(*self._source(field_name), idx,
                                                             lambda ss, vv: kernels.trend_run(ss, vv, direction)),
                            units=units, partial=True)

    def minmax(self, field_name: str) -> tuple[np.ndarray, np.ndarray]:
        mm = self._minmax_stacked(field_name)
        return mm[:, 0], mm[:, 1]

    def _minmax_stacked(self, field_name: str) -> np.ndarray:
        key = ("mm", field_name)
        return self._cached(key, lambda idx: _cat2(per_unit_chunks(*self._source(field_name), idx, kernels.minmax)))

    #: fields whose samples have a value exactly where another field's do (per-unit known-ness
    #: is counted on that one: one pass and one cache file for both); ``heading`` is the integral
    #: of ``yaw_rate`` (a NaN yaw rate adds nothing, so heading itself is never NaN): it is known
    #: over a video exactly where some yaw rate is
    KNOWN_FROM = {"abs_loc_x": "loc_x", "abs_loc_x_road": "loc_x_road", "heading": "yaw_rate"}

    def valid_count(self, field_name: str) -> np.ndarray:
        """Per unit (track, or video for ego fields): the number of samples with a value of the
        field (int64 [units]; for ``heading``, of ``yaw_rate``: `KNOWN_FROM`). Cached like the
        other per-unit features (memory, then the column cache's feature files)."""
        src = self.KNOWN_FROM.get(field_name, field_name)
        key = ("nv", src)
        return self._cached(key, lambda idx: per_unit_chunks(*self._source(src), idx, kernels.valid_count))

    def known(self, field_name: str) -> np.ndarray:
        """Per unit: whether the field has any value over it (bool [units]). A soft score on a
        field a unit has no value for is unknown there and takes the term's expected value
        (the scorer, "Unknown is not 0" in docs/rules.md)."""
        return self.valid_count(field_name) > 0

    def mean(self, field_name: str) -> np.ndarray:
        key = ("mean", field_name)
        return self._cached(key, lambda idx: per_unit_chunks(*self._source(field_name), idx, kernels.mean))

    def fraction_holds(self, field_name: str, op: str, value: float, min_fraction: float) -> np.ndarray:
        """Per-unit truth of "op(field, value) on >= ``min_fraction`` of the unit's samples"
        (a gate with ``min_time_fraction``). Remembered for this corpus (the columns of one content
        version never change), the last FRACTION_MEMO answers only: a bool per unit each."""
        return self._memo((field_name, op, float(value), float(min_fraction)), lambda: (
            self.fraction_satisfying(field_name, op, value) >= float(min_fraction) - 1e-12))

    def _memo(self, key, compute) -> np.ndarray:
        """``compute()`` remembered under ``key`` (read-only), the last FRACTION_MEMO answers."""
        memo = self.__dict__.get("_frac_memo")
        if memo is None:
            memo = self.__dict__.setdefault("_frac_memo", ({}, threading.Lock()))
        answers, lock = memo
        with lock:
            hit = answers.pop(key, None)
            if hit is not None:
                answers[key] = hit          # most recently used last
                return hit
        out = compute()
        out.setflags(write=False)
        with lock:
            answers[key] = out
            while len(answers) > FRACTION_MEMO:
                answers.pop(next(iter(answers)))
        return out

    def held_run(self, field_name: str, op: str, value: float) -> np.ndarray:
        """Per-unit longest unbroken run (s) of samples where op(field, value) holds: the time of
        the run's last sample minus its first's (float64 [units]; 0 for a single sample or none).
        A sample without a value holds nothing and breaks the run; a run never spans two units.
        For gates with ``min_seconds`` (`held_for`). Remembered for this corpus like
        `fraction_holds` (the last FRACTION_MEMO answers): the optimizer's grid over
        ``min_seconds`` reuses one computation."""
        return self._memo(("run", field_name, op, float(value)), lambda: per_unit_chunks(
            *self._source(field_name), None, lambda ss, vv: kernels.held_run(ss, vv, op, float(value))))

    def held_for(self, field_name: str, op: str, value: float, min_seconds: float) -> np.ndarray:
        """Per-unit truth of "op(field, value) over an unbroken run of >= ``min_seconds``" (a gate
        with ``min_seconds``), inclusive to within `T_EPS`."""
        return self.held_run(field_name, op, value) >= float(min_seconds) - T_EPS

    def fraction_satisfying(self, field_name: str, op: str, value: float) -> np.ndarray:
        """Per-unit fraction of the unit's samples where op(field, value) holds (not cached). A
        sample without a value does not hold: "for 80 % of the clip" is not met by the 26 % of it
        that has an estimate (`availability.unjudgeable` says when the rest could decide it)."""
        s, v = self.series_for(field_name)
        valid = ~np.isnan(v)
        ok = compare(v, op, value) & valid
        st = s.sample_track()
        n_ok = np.bincount(st, weights=ok, minlength=s.n)
        n_all = np.bincount(st, minlength=s.n).astype(np.float64)
        return np.where(n_all > 0, n_ok / np.maximum(n_all, 1), 0.0)


def _cat2(mm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.stack(mm, axis=1)
