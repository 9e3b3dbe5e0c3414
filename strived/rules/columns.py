"""Columnar, in-memory view of every track of a corpus, plus the per-track window features the
fast scorer reads.

Object-frames of all tracks are concatenated (track-major, time-ordered inside a track); ``start``
and ``length`` index each track's slice. The ego series of each video is one more "track" in a
separate table, so the same kernels serve both roles.

Features (per track, computed once per (field, window, direction) and cached, in memory and on
disk for a library) implement the paper's soft-score kernel (appendix, Eq. "dsl_soft"):
``max_{0 < t2 - t1 <= window} phi(t2) - phi(t1)`` (positive direction) and the mirrored negative
one; the unsigned change is the larger of the two. NaN samples take no part.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..records import EGO_FIELDS as RAW_EGO_FIELDS, OBJECT_FIELDS as RAW_OBJECT_FIELDS, VideoRecords

#: Windows are inclusive to within this many seconds, so that frame times with rounding noise
#: (4.3 - 0.3 = 3.9999999999999996 or 4.000000000000001) count the same on every path.
T_EPS = 1e-3
#: Two consecutive samples further apart than this break a monotonic run (a dropped track stretch).
TREND_MAX_GAP_S = 1.0
_US = 1_000_000  # time quantum for exact window search: microseconds
#: Ego fields a rule can read (raw ego series plus the derived heading).
_EGO_RULE_FIELDS = ("speed", "yaw_rate", "accel", "heading", "jolt")


@dataclass
class Series:
    """Concatenated per-frame values of many tracks (or ego series)."""

    owner: np.ndarray  # int32 [T] video index of each track
    start: np.ndarray  # int64 [T]
    length: np.ndarray  # int64 [T]
    t: np.ndarray  # float64 [N] time of each sample
    values: dict[str, np.ndarray]  # field -> float32 [N]
    _feat: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.start.shape[0])

    def sample_track(self) -> np.ndarray:
        """Track index of every sample (int32 [N])."""
        key = ("sample_track",)
        if key not in self._feat:
            self._feat[key] = np.repeat(np.arange(self.n, dtype=np.int32), self.length)
        return self._feat[key]


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
        recs = sorted(recs, key=lambda r: r.info.id)
        ids = [r.info.id for r in recs]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate video ids in corpus")
        cls_names: list[str] = []
        code: dict[str, int] = {}
        owner, tids, tcls, tlen, tt = [], [], [], [], []
        vals = {f: [] for f in RAW_OBJECT_FIELDS}
        e_len, e_t = [], []
        e_vals = {f: [] for f in RAW_EGO_FIELDS}
        for vi, r in enumerate(recs):
            for tr in r.tracks:
                owner.append(vi)
                tids.append(tr.track_id)
                if tr.cls not in code:
                    code[tr.cls] = len(cls_names)
                    cls_names.append(tr.cls)
                tcls.append(code[tr.cls])
                tlen.append(len(tr))
                tt.append(r.t[tr.pos])
                for f in RAW_OBJECT_FIELDS:
                    vals[f].append(tr.fields[f].astype(np.float32))
            e_len.append(len(r.t))
            e_t.append(r.t)
            for f in RAW_EGO_FIELDS:
                e_vals[f].append(r.ego[f].astype(np.float32))
        tracks = _series(np.asarray(owner, np.int32), np.asarray(tlen, np.int64), tt, vals)
        ego = _series(np.arange(len(recs), dtype=np.int32), np.asarray(e_len, np.int64), e_t, e_vals)
        return cls(ids, tracks, ego, np.asarray(tcls, np.int16), cls_names, np.asarray(tids, np.int64))

    @classmethod
    def from_library(cls, lib) -> "TrackColumns":
        """Columns of a library: from the on-disk column cache (memory-mapped .npy files, valid
        for the library's current content version) or by one scan of the database, which then
        writes that cache."""
        tag = hashlib.sha1(f"{lib.meta_get('created_at')}-{lib.content_version}".encode()).hexdigest()[:12]
        cdir = lib.cache_dir / f"cols-{tag}"
        if (cdir / "meta.json").exists():
            try:
                return cls._load_cache(cdir, lib.cache_dir, tag)
            except (OSError, ValueError, KeyError):
                pass
        cols = cls._scan_library(lib)
        cols.cache_dir, cols.cache_tag = lib.cache_dir, tag
        cols._write_cache(cdir)
        return cols

    _ARRAYS = ("owner", "start", "length", "t")

    def _write_cache(self, cdir: Path) -> None:
        import json
        import shutil

        import os
        import threading
        import time

        # a folder of this process and thread, renamed into place whole: two processes writing
        # the cache of the same library at once never mix their files
        tmp = cdir.with_name(f"{cdir.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for prefix, s in (("tr", self.tracks), ("ego", self.ego)):
                for a in self._ARRAYS:
                    np.save(tmp / f"{prefix}_{a}.npy", getattr(s, a))
                for f, v in s.values.items():
                    if f in RAW_OBJECT_FIELDS or f in RAW_EGO_FIELDS:
                        np.save(tmp / f"{prefix}_v_{f}.npy", v)
            np.save(tmp / "ego_ident.npy", self.ego_ident)
            np.save(tmp / "track_ident.npy", self.track_ident)
            np.save(tmp / "track_cls.npy", self.track_cls)
            np.save(tmp / "track_ids.npy", self.track_ids)
            (tmp / "meta.json").write_text(json.dumps({"video_ids": self.video_ids, "cls_names": self.cls_names}))
            if (cdir / "meta.json").exists():       # another process finished the same cache first
                shutil.rmtree(tmp, ignore_errors=True)
                return
            shutil.rmtree(cdir, ignore_errors=True)  # an incomplete one (no meta.json)
            tmp.rename(cdir)
            # stale caches of older content versions go (another process's unfinished folder is
            # left alone unless it is an hour old: that process died)
            for old in cdir.parent.iterdir():
                if old.name == cdir.name or not old.name.startswith("cols-"):
                    continue
                try:
                    if ".tmp-" in old.name and time.time() - old.stat().st_mtime < 3600:
                        continue
                except OSError:
                    continue
                shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # a cache that cannot be written is only slower

    @classmethod
    def _load_cache(cls, cdir: Path, cache_dir: Path, tag: str) -> "TrackColumns":
        import json

        meta = json.loads((cdir / "meta.json").read_text())

        def series(prefix, fields):
            arrs = {a: np.load(cdir / f"{prefix}_{a}.npy", mmap_mode="r") for a in cls._ARRAYS}
            vals = {f: np.load(cdir / f"{prefix}_v_{f}.npy", mmap_mode="r") for f in fields}
            return Series(owner=np.asarray(arrs["owner"]), start=np.asarray(arrs["start"]),
                          length=np.asarray(arrs["length"]), t=arrs["t"], values=vals)
        out = cls(meta["video_ids"], series("tr", RAW_OBJECT_FIELDS), series("ego", RAW_EGO_FIELDS),
                  np.load(cdir / "track_cls.npy"), meta["cls_names"], np.load(cdir / "track_ids.npy"),
                  cache_dir=cache_dir, cache_tag=tag)
        out.ego_ident = np.load(cdir / "ego_ident.npy")
        out.track_ident = np.load(cdir / "track_ident.npy")
        return out

    @classmethod
    def _scan_library(cls, lib) -> "TrackColumns":
        ids: list[str] = []
        t_parts, e_parts = [], {f: [] for f in RAW_EGO_FIELDS}
        revs: list[int] = []
        for vid, rev, tb, eb in lib.iter_video_series():
            ids.append(vid)
            revs.append(rev)
            t_parts.append(tb or b"")
            for f in RAW_EGO_FIELDS:
                e_parts[f].append(eb[f] or b"")
        vindex = {v: i for i, v in enumerate(ids)}
        e_len = np.fromiter((len(b) // 8 for b in t_parts), np.int64, len(t_parts))
        t_all = np.frombuffer(b"".join(t_parts), "<f8").astype(np.float64)
        v_start = np.zeros(len(ids), np.int64)
        if len(ids):
            v_start[1:] = np.cumsum(e_len)[:-1]
        e_vals = {f: np.frombuffer(b"".join(e_parts[f]), "<f8").astype(np.float32) for f in RAW_EGO_FIELDS}
        ego = Series(owner=np.arange(len(ids), dtype=np.int32), start=v_start, length=e_len, t=t_all,
                     values=e_vals)

        cls_names: list[str] = []
        code: dict[str, int] = {}
        owner, tids, tcls = [], [], []
        pos_parts, f_parts = [], {f: [] for f in RAW_OBJECT_FIELDS}
        for vid, track, c, pos_b, fb in lib.iter_track_rows():
            owner.append(vindex[vid])
            tids.append(track)
            k = code.get(c)
            if k is None:
                k = code[c] = len(cls_names)
                cls_names.append(c)
            tcls.append(k)
            pos_parts.append(pos_b or b"")
            for f in RAW_OBJECT_FIELDS:
                f_parts[f].append(fb[f] or b"")
        owner_a = np.asarray(owner, np.int32)
        tlen = np.fromiter((len(b) // 4 for b in pos_parts), np.int64, len(pos_parts))
        pos = np.frombuffer(b"".join(pos_parts), "<i4").astype(np.int64)
        start = np.zeros(len(tlen), np.int64)
        if len(tlen):
            start[1:] = np.cumsum(tlen)[:-1]
        sample_owner = np.repeat(owner_a, tlen)
        t = t_all[v_start[sample_owner] + pos] if pos.size else np.zeros(0)
        vals = {f: np.frombuffer(b"".join(f_parts[f]), "<f4").astype(np.float32) for f in RAW_OBJECT_FIELDS}
        tracks = Series(owner=owner_a, start=start, length=tlen, t=t, values=vals)
        out = cls(ids, tracks, ego, np.asarray(tcls, np.int16), cls_names, np.asarray(tids, np.int64))
        out.ego_ident = video_identity(ids, revs)
        out.track_ident = track_identity(out.ego_ident[owner_a], out.track_ids)
        return out

    # ------------------------------------------------------------------ fields
    def series_for(self, field_name: str) -> tuple[Series, np.ndarray]:
        """(series, values) for a rule field, with derived fields (abs_loc_x, heading) computed."""
        if field_name in _EGO_RULE_FIELDS:
            s = self.ego
            if field_name == "heading" and "heading" not in s.values:
                s.values["heading"] = _integrate(s, s.values["yaw_rate"])
            return s, s.values[field_name]
        s = self.tracks
        if field_name == "abs_loc_x" and "abs_loc_x" not in s.values:
            s.values["abs_loc_x"] = np.abs(s.values["loc_x"])
        return s, s.values[field_name]

    # ------------------------------------------------------------------ cached features
    def _role(self, field_name: str) -> str:
        return "ego" if field_name in _EGO_RULE_FIELDS else "tr"

    def _cached(self, key: tuple, compute):
        """Feature ``key`` per unit. ``compute(idx)`` computes it for the units ``idx`` (None = all).

        Order of lookup: memory; the disk file of this content version; the newest disk file of an
        older content version, reused for units whose content is unchanged (same identity), with
        only new or changed units computed; else everything is computed."""
        role = self._role(key[1])
        s = self.ego if role == "ego" else self.tracks
        if key in s._feat:
            return s._feat[key]
        ident = self.ego_ident if role == "ego" else self.track_ident
        if self.cache_dir is None or not self.cache_tag or ident is None:
            s._feat[key] = arr = compute(None)
            return arr
        name = "-".join(str(k) for k in key).replace("/", "_")
        path = self.cache_dir / f"feat-{self.cache_tag}-{name}.npy"
        arr = _try_load(path, rows=len(ident))
        if arr is None:
            arr = self._reuse_older(name, role, ident, compute)
            if arr is None:
                arr = compute(None)
            self._save_feature(path, name, role, ident, arr)
        s._feat[key] = arr
        return arr

    def _reuse_older(self, name: str, role: str, ident: np.ndarray, compute):
        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except OSError:          # removed meanwhile by another process
                return -1.0
        olds = sorted((p for p in self.cache_dir.glob(f"feat-*-{name}.npy")
                       if not p.name.startswith(f"feat-{self.cache_tag}-") and ".tmp" not in p.name),
                      key=mtime, reverse=True)
        for old in olds:
            old_tag = old.name[len("feat-"):].split("-", 1)[0]
            vals = _try_load(old)
            old_ident = _try_load(self.cache_dir / f"ident-{old_tag}-{role}.npy")
            if vals is None or old_ident is None or len(vals) != len(old_ident):
                continue
            order = np.argsort(old_ident, kind="stable")
            pos = np.searchsorted(old_ident[order], ident)
            pos = np.minimum(pos, len(order) - 1) if len(order) else pos
            found = (old_ident[order][pos] == ident) if len(order) else np.zeros(len(ident), bool)
            arr = np.empty((len(ident),) + vals.shape[1:], vals.dtype)
            arr[found] = vals[order[pos[found]]]
            missing = np.flatnonzero(~found)
            if missing.size:
                arr[missing] = compute(missing)
            return arr
        return None

    def _save_feature(self, path: Path, name: str, role: str, ident: np.ndarray, arr: np.ndarray) -> None:
        try:
            idp = self.cache_dir / f"ident-{self.cache_tag}-{role}.npy"
            if not idp.exists():
                _atomic_save(idp, ident)
            _atomic_save(path, arr)
            for old in self.cache_dir.glob(f"feat-*-{name}.npy"):  # older versions of this feature
                if old != path:
                    old.unlink(missing_ok=True)
            live = {p.name.split("-", 2)[1] for p in self.cache_dir.glob("feat-*.npy")}
            for idf in self.cache_dir.glob("ident-*.npy"):
                if idf.name.split("-", 2)[1] not in live and idf != idp:
                    idf.unlink(missing_ok=True)
        except OSError:
            pass  # a cache that cannot be written is only slower

    def window_change(self, field_name: str, window_s: float, direction: str | None) -> np.ndarray:
        """Per-track max change within window (float64 [T]); direction None = unsigned."""
        if direction is None:
            return np.maximum(self.window_change(field_name, window_s, "positive"),
                              self.window_change(field_name, window_s, "negative"))
        w = round(float(window_s), 6)
        key = ("wc", field_name, w, direction)
        s = self.ego if field_name in _EGO_RULE_FIELDS else self.tracks
        if key not in s._feat:
            both = {}

            def compute(d, idx):
                k = (d, None if idx is None else idx.tobytes())
                if k not in both:
                    pos, neg = _per_unit_chunks(*self.series_for(field_name), idx,
                                                lambda ss, vv: _window_change(ss, vv, window_s))
                    both[("positive", k[1])], both[("negative", k[1])] = pos, neg
                return both[k]
            for d in ("positive", "negative"):
                self._cached(("wc", field_name, w, d), lambda idx, d=d: compute(d, idx))
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
        return self._sample_cached(s, key, lambda: _end_change(*self.series_for(field_name), window_s,
                                                               direction))

    def end_trend(self, field_name: str, direction: str) -> np.ndarray:
        """Per sample: the duration of the steady run ending there (float64 [N]). In memory only."""
        s = self.ego if field_name in _EGO_RULE_FIELDS else self.tracks
        key = ("et", field_name, direction)
        return self._sample_cached(s, key, lambda: _end_trend(*self.series_for(field_name), direction))

    def track_frame(self) -> np.ndarray:
        """The ego-series sample (the video's frame) of every track sample (int64 [N]): track
        samples are a subset of their video's frames, matched by time (to the microsecond)."""
        key = ("frame",)
        T, E = self.tracks, self.ego
        if key not in T._feat:
            if T.t.shape[0] == 0:
                T._feat[key] = np.zeros(0, np.int64)
                return T._feat[key]
            e_vid = E.sample_track().astype(np.int64)
            t_vid = T.owner[T.sample_track()].astype(np.int64)
            e_us = np.round(np.asarray(E.t) * _US).astype(np.int64)
            t_us = np.round(np.asarray(T.t) * _US).astype(np.int64)
            lo = min(int(e_us.min()) if e_us.size else 0, int(t_us.min()))
            span = max(int(e_us.max()) if e_us.size else 0, int(t_us.max())) - lo + 1
            e_key = e_vid * span + (e_us - lo)
            t_key = t_vid * span + (t_us - lo)
            order = np.argsort(e_key, kind="stable")
            pos = np.searchsorted(e_key[order], t_key, side="left")
            pos = np.minimum(pos, max(len(order) - 1, 0))
            T._feat[key] = order[pos].astype(np.int64)
        return T._feat[key]

    def trend_run(self, field_name: str, direction: str) -> np.ndarray:
        """Per-track longest steady run in seconds (float64 [T])."""
        key = ("tr", field_name, direction)
        return self._cached(key, lambda idx: _per_unit_chunks(*self.series_for(field_name), idx,
                                                              lambda ss, vv: _trend_run(ss, vv, direction)))

    def minmax(self, field_name: str) -> tuple[np.ndarray, np.ndarray]:
        mm = self._minmax_stacked(field_name)
        return mm[:, 0], mm[:, 1]

    def _minmax_stacked(self, field_name: str) -> np.ndarray:
        key = ("mm", field_name)
        return self._cached(key, lambda idx: _cat2(_per_unit_chunks(*self.series_for(field_name), idx, _minmax)))

    def mean(self, field_name: str) -> np.ndarray:
        key = ("mean", field_name)
        return self._cached(key, lambda idx: _per_unit_chunks(*self.series_for(field_name), idx, _mean))

    def fraction_satisfying(self, field_name: str, op: str, value: float) -> np.ndarray:
        """Per-unit fraction of the unit's samples where op(field, value) holds (not cached). A
        sample without a value does not hold: "for 80 % of the clip" is not met by the 26 % of it
        that has an estimate (`availability.unjudgeable` says when the rest could decide it)."""
        s, v = self.series_for(field_name)
        valid = ~np.isnan(v)
        ok = _compare(v, op, value) & valid
        st = s.sample_track()
        n_ok = np.bincount(st, weights=ok, minlength=s.n)
        n_all = np.bincount(st, minlength=s.n).astype(np.float64)
        return np.where(n_all > 0, n_ok / np.maximum(n_all, 1), 0.0)


# ---------------------------------------------------------------------- identities and cache files
def video_identity(ids: list[str], revs: list[int]) -> np.ndarray:
    """int64 per video from (id, write revision): changes whenever the video is rewritten."""
    out = np.empty(len(ids), np.int64)
    for k, (v, r) in enumerate(zip(ids, revs)):
        out[k] = int.from_bytes(hashlib.blake2b(f"{v}\0{r}".encode(), digest_size=8).digest(), "little",
                                signed=True)
    return out


def track_identity(video_ident: np.ndarray, track_ids: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (video_ident.astype(np.int64) * np.int64(1_000_003)) ^ track_ids.astype(np.int64)


def _try_load(path: Path, rows: int | None = None):
    """A cached array, or None when it is missing, unreadable (truncated, deleted meanwhile) or of
    the wrong length for this corpus: the caller then recomputes it, never scores with it."""
    try:
        arr = np.load(path) if path.exists() else None
    except (OSError, ValueError, EOFError):
        return None
    if arr is not None and rows is not None and (arr.ndim == 0 or arr.shape[0] != rows):
        return None
    return arr


def _atomic_save(path: Path, arr: np.ndarray) -> None:
    """Write ``path`` whole or not at all: a temporary file of this process and thread, then one
    rename (two processes caching the same feature never write into one file)."""
    import os
    import threading

    tmp = path.with_name(f"{path.name[:-4]}.{os.getpid()}-{threading.get_ident()}.tmp.npy")
    try:
        np.save(tmp, arr)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _cat2(mm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.stack(mm, axis=1)


def _subset(s: Series, v: np.ndarray, idx: np.ndarray | None) -> tuple[Series, np.ndarray]:
    """The units ``idx`` of a series as a series of their own (None = all)."""
    if idx is None:
        return s, v
    length = s.length[idx]
    start = np.zeros(len(idx), np.int64)
    if len(idx):
        start[1:] = np.cumsum(length)[:-1]
    total = int(length.sum())
    samples = np.repeat(s.start[idx] - start, length) + np.arange(total)
    return Series(owner=s.owner[idx], start=start, length=length, t=np.asarray(s.t)[samples], values={}), \
        np.asarray(v)[samples]


#: samples per chunk of whole units when a feature is computed over a large corpus: bounds the
#: temporary arrays (a few float64 copies of a chunk) whatever the library size
CHUNK_SAMPLES = 2_000_000


def _per_unit_chunks(s: Series, v: np.ndarray, idx: np.ndarray | None, fn):
    """``fn(series, values) -> tuple of per-unit arrays`` for the units ``idx`` (None = all),
    computed over chunks of whole units of at most `CHUNK_SAMPLES` samples (a unit longer than
    that is a chunk of its own), in a thread pool (numpy releases the GIL in the kernels), and
    concatenated in unit order. Reading a memory-mapped series chunk by chunk keeps the memory a
    feature costs proportional to the chunk, not to the library."""
    units = np.arange(s.n) if idx is None else np.asarray(idx)
    if units.size == 0 or int(s.length[units].sum()) <= CHUNK_SAMPLES:
        return fn(*_subset(s, v, idx))
    cum = np.cumsum(s.length[units])
    cuts = [0]
    while cuts[-1] < units.size:
        base = cum[cuts[-1] - 1] if cuts[-1] else 0
        nxt = int(np.searchsorted(cum, base + CHUNK_SAMPLES, side="right"))
        cuts.append(max(nxt, cuts[-1] + 1))
    chunks = [units[a:b] for a, b in zip(cuts[:-1], cuts[1:])]

    def run(ch):
        return fn(*_subset(s, v, ch))
    import os
    from concurrent.futures import ThreadPoolExecutor

    workers = max(1, min(len(chunks), os.cpu_count() or 1, 8))
    if workers == 1:
        parts = [run(ch) for ch in chunks]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="strived-features") as ex:
            parts = list(ex.map(run, chunks))
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))
    return np.concatenate(parts)


# ---------------------------------------------------------------------- kernels
def _series(owner, length, t_list, vals) -> Series:
    start = np.zeros(len(length), np.int64)
    if len(length):
        start[1:] = np.cumsum(length)[:-1]
    t = np.concatenate(t_list).astype(np.float64) if t_list else np.zeros(0)
    values = {f: (np.concatenate(v).astype(np.float32) if v else np.zeros(0, np.float32))
              for f, v in vals.items()}
    return Series(owner=owner, start=start, length=length, t=t, values=values)


def _compare(v: np.ndarray, op: str, x: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        if op == "lt":
            return v < x
        if op == "le":
            return v <= x
        if op == "gt":
            return v > x
        return v >= x


def _valid_view(s: Series, v: np.ndarray):
    """Compress to valid (non-NaN) samples: values, times, track index, per-track count/start."""
    valid = ~np.isnan(v)
    st = s.sample_track()
    if valid.all():
        vv, tt, tr = v.astype(np.float64), s.t, st
        cnt = s.length
    else:
        vv, tt, tr = v[valid].astype(np.float64), s.t[valid], st[valid]
        cnt = np.bincount(tr, minlength=s.n).astype(np.int64)
    vstart = np.zeros(s.n, np.int64)
    if s.n:
        vstart[1:] = np.cumsum(cnt)[:-1]
    return vv, tt, tr, cnt, vstart


def _track_keys(tt: np.ndarray, tr: np.ndarray, window_s: float) -> tuple[np.ndarray, int]:
    """(sorted integer key of every sample, window in the same units): track-major, microsecond
    time relative to the track's first sample (tracks are contiguous and ordered), so one
    searchsorted finds every sample's window inside its own track."""
    t_us = np.round(tt * _US).astype(np.int64)
    first = np.zeros(int(tr.max()) + 1, np.int64)
    change = np.flatnonzero(np.r_[True, tr[1:] != tr[:-1]])
    first[tr[change]] = t_us[change]
    rel = t_us - first[tr]
    w_us = _window_us(window_s, rel)
    span = int(rel.max()) + w_us + 1
    return tr.astype(np.int64) * span + rel, w_us


def _window_end(tt: np.ndarray, tr: np.ndarray, window_s: float) -> np.ndarray:
    """For each sample i, the last index j of the same track with t_j - t_i <= window (+T_EPS)."""
    if tt.size == 0:
        return np.zeros(0, np.int64)
    key, w_us = _track_keys(tt, tr, window_s)
    return np.searchsorted(key, key + w_us, side="right") - 1


def _window_us(window_s: float, rel: np.ndarray) -> int:
    """The window (+T_EPS) in microseconds, capped just above the longest track: a window longer
    than every track gives the same result, and the integer keys cannot overflow."""
    cap = (int(rel.max()) if rel.size else 0) + 1
    w = float(window_s) + T_EPS
    if not np.isfinite(w) or w * _US >= cap:
        return cap
    return int(round(w * _US))


def _window_start(tt: np.ndarray, tr: np.ndarray, window_s: float) -> np.ndarray:
    """For each sample j, the first index i of the same track with t_j - t_i <= window (+T_EPS)."""
    if tt.size == 0:
        return np.zeros(0, np.int64)
    key, w_us = _track_keys(tt, tr, window_s)
    return np.searchsorted(key, key - w_us, side="left")


def _end_change(s: Series, v: np.ndarray, window_s: float, direction: str | None) -> np.ndarray:
    """Per sample j, over the earlier valid samples i of the same track with t_j - t_i <= window:
    the best rise ``max(0, v_j - min v_i)`` (positive), fall ``max(0, max v_i - v_j)`` (negative)
    or the larger of the two (None); 0 at NaN samples and where no earlier sample is in the
    window. float64 [N]."""
    n = v.shape[0]
    res = np.zeros(n, np.float64)
    valid = ~np.isnan(v)
    vidx = np.flatnonzero(valid)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return res
    v32 = vv.astype(np.float32)
    start = _window_start(tt, tr, window_s)
    j = np.arange(vv.size)
    has = start < j
    lo, hi = start[has], j[has] - 1
    base = vv[has]
    del start, j
    out = np.zeros(lo.shape[0], np.float64)
    if direction in (None, "positive"):
        out = np.maximum(out, base - _range_extreme(v32, lo, hi, np.minimum).astype(np.float64))
    if direction in (None, "negative"):
        out = np.maximum(out, _range_extreme(v32, lo, hi, np.maximum).astype(np.float64) - base)
    res[vidx[has]] = out
    return res


def _end_trend(s: Series, v: np.ndarray, direction: str) -> np.ndarray:
    """Per sample j: the duration (s) of the steady run ending at j (as `_trend_run` defines runs);
    0 where no run ends there. float64 [N]."""
    n = v.shape[0]
    res = np.zeros(n, np.float64)
    vidx = np.flatnonzero(~np.isnan(v))
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return res
    sm = smooth3(vv, tr)
    sign = 1.0 if direction == "increasing" else -1.0
    step_ok = ((tr[1:] == tr[:-1]) & ((tt[1:] - tt[:-1]) <= TREND_MAX_GAP_S)
               & (sign * (sm[1:] - sm[:-1]) > 0))
    reset = np.r_[True, ~step_ok]             # sample j starts a new run unless step j-1 -> j is ok
    run_start = np.maximum.accumulate(np.where(reset, np.arange(vv.size), 0))
    dur = tt - tt[run_start]
    res[vidx] = np.where(reset, 0.0, dur)
    return res


def _range_extreme(vv: np.ndarray, lo: np.ndarray, hi: np.ndarray, fn) -> np.ndarray:
    """fn (np.maximum or np.minimum) over vv[lo:hi+1] for every query (lo <= hi), sparse-table
    style, keeping only one level in memory at a time."""
    out = np.empty(lo.shape[0], vv.dtype)
    length = hi - lo + 1
    level = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    cur = vv
    width = 1
    for k in range(int(level.max()) + 1 if level.size else 0):
        sel = np.flatnonzero(level == k)
        if sel.size:
            a = cur[lo[sel]]
            b = cur[hi[sel] - width + 1]
            out[sel] = fn(a, b)
        nxt = fn(cur[:-width], cur[width:]) if cur.shape[0] > width else cur[:0]
        cur = np.concatenate([nxt, cur[-width:]]) if cur.shape[0] > width else cur
        width *= 2
    return out


def _window_change(s: Series, v: np.ndarray, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(positive, negative) per-track max change within the window."""
    pos_res = np.zeros(s.n, np.float64)
    neg_res = np.zeros(s.n, np.float64)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return pos_res, neg_res
    v32 = vv.astype(np.float32)  # the values are float32: extremes are exact in float32
    end = _window_end(tt, tr, window_s)
    idx = np.arange(vv.size)
    has = end > idx
    lo, hi = idx[has] + 1, end[has]
    groups = tr[has]
    base = vv[has]
    best = _range_extreme(v32, lo, hi, np.maximum).astype(np.float64) - base
    _group_max(pos_res, groups, np.maximum(best, 0.0))
    best = base - _range_extreme(v32, lo, hi, np.minimum).astype(np.float64)
    _group_max(neg_res, groups, np.maximum(best, 0.0))
    return pos_res, neg_res


def _group_max(res: np.ndarray, groups: np.ndarray, vals: np.ndarray) -> None:
    """res[g] = max(res[g], max of vals in group g); groups are sorted."""
    if vals.size == 0:
        return
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    m = np.maximum.reduceat(vals, starts)
    g = groups[starts]
    res[g] = np.maximum(res[g], m)


def smooth3(vv: np.ndarray, tr: np.ndarray) -> np.ndarray:
    """Centred 3-sample moving average inside each track (ends use the samples that exist)."""
    n = vv.size
    if n == 0:
        return vv.copy()
    same_prev = np.r_[False, tr[1:] == tr[:-1]]
    same_next = np.r_[tr[:-1] == tr[1:], False]
    prev = np.where(same_prev, np.r_[0.0, vv[:-1]], 0.0)
    nxt = np.where(same_next, np.r_[vv[1:], 0.0], 0.0)
    return (vv + prev + nxt) / (1.0 + same_prev + same_next)


def _trend_run(s: Series, v: np.ndarray, direction: str) -> np.ndarray:
    """Longest run (s) of consecutive valid samples along which the 3-sample-smoothed field moves
    strictly in ``direction``; a gap over TREND_MAX_GAP_S breaks a run."""
    res = np.zeros(s.n, np.float64)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return res
    sm = smooth3(vv, tr)
    sign = 1.0 if direction == "increasing" else -1.0
    step_ok = ((tr[1:] == tr[:-1]) & ((tt[1:] - tt[:-1]) <= TREND_MAX_GAP_S)
               & (sign * (sm[1:] - sm[:-1]) > 0))
    if not step_ok.any():
        return res
    # runs of consecutive ok steps: step k joins sample k and k+1
    ok = step_ok.astype(np.int8)
    d = np.diff(np.r_[0, ok, 0])
    run_start = np.flatnonzero(d == 1)  # first step index
    run_end = np.flatnonzero(d == -1)  # one past last step index
    dur = tt[run_end] - tt[run_start]  # sample run_end is the last sample of the run
    _group_max(res, tr[run_start], dur)
    return res


def _minmax(s: Series, v: np.ndarray):
    mn = np.full(s.n, np.nan)
    mx = np.full(s.n, np.nan)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    nz = np.flatnonzero(cnt > 0)
    if nz.size:
        mn[nz] = np.minimum.reduceat(vv, vstart[nz])
        mx[nz] = np.maximum.reduceat(vv, vstart[nz])
    return mn, mx


def _mean(s: Series, v: np.ndarray):
    out = np.full(s.n, np.nan)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    nz = np.flatnonzero(cnt > 0)
    if nz.size:
        out[nz] = np.add.reduceat(vv, vstart[nz]) / cnt[nz]
    return out


def _integrate(s: Series, yaw_rate: np.ndarray) -> np.ndarray:
    """Heading (rad) per ego sample: trapezoidal integral of yaw_rate from the series start;
    NaN yaw_rate contributes nothing (heading holds)."""
    y = np.nan_to_num(yaw_rate.astype(np.float64), nan=0.0)
    out = np.zeros(y.size, np.float64)
    if y.size < 2:
        return out.astype(np.float32)
    st = s.sample_track()
    dt = np.diff(s.t)
    inc = 0.5 * (y[1:] + y[:-1]) * dt
    inc[st[1:] != st[:-1]] = 0.0
    cum = np.r_[0.0, np.cumsum(inc)]
    # restart at each series start
    base = cum[s.start[s.length > 0]]
    offs = np.repeat(base, s.length[s.length > 0])
    out = cum - offs
    return out.astype(np.float32)
