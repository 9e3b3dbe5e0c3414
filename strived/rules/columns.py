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
#: Derived object fields: the lateral offset with the ego's own rotation taken out (`_road_lateral`),
#: signed and absolute.
ROAD_FIELDS = ("loc_x_road", "abs_loc_x_road")
#: The road-relative offset is defined while the ego points within this angle (rad, 20 deg) of its
#: heading at the track's reference sample; through a larger turn the other road users turn with
#: the road, so a fixed heading no longer follows it and the field is unknown (NaN) there. A lane
#: change or a motorway bend turns the ego by well under 0.2 rad in a few seconds, a junction ~1.6.
ROAD_MAX_TURN_RAD = 0.35


@dataclass
class Series:
    """Concatenated per-frame values of many tracks (or ego series)."""

    owner: np.ndarray  # int32 [T] video index of each track
    start: np.ndarray  # int64 [T]
    length: np.ndarray  # int64 [T]
    t: np.ndarray  # float64 [N] time of each sample
    values: dict[str, np.ndarray]  # field -> float32 [N]
    _feat: dict = field(default_factory=dict)
    #: "t" / field -> `_FileColumn` of the memory-mapped arrays of a column cache: features read
    #: those by ranges (pread), so the samples they read do not stay mapped in this process
    files: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.start.shape[0])

    def sample_track(self) -> np.ndarray:
        """Track index of every sample (int32 [N])."""
        key = ("sample_track",)
        if key not in self._feat:
            self._feat[key] = np.repeat(np.arange(self.n, dtype=np.int32), self.length)
        return self._feat[key]


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
        try:
            return cls._stream_to_cache(lib, cdir, tag)
        except (OSError, ValueError):
            pass  # no writable cache folder (full disk...) or inconsistent rows: scanned in memory
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
            _commit_cache_dir(tmp, cdir)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # a cache that cannot be written is only slower

    @classmethod
    def _stream_to_cache(cls, lib, cdir: Path, tag: str) -> "TrackColumns":
        """Write the column cache of ``lib`` by streaming its track rows into the .npy files (in
        slices of about `CHUNK_SAMPLES` samples), then open it memory-mapped: the memory this
        costs is bounded by the ego series and the per-track arrays, not by the samples (at
        100,000 videos the samples alone are ~10 GB). Raises OSError when the cache cannot be
        written, ValueError when the rows disagree with their sample counts."""
        import json
        import os
        import shutil
        import threading
        from array import array

        tmp = cdir.with_name(f"{cdir.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            ego = cls._scan_ego(lib)
            ids, revs = ego.pop("ids"), ego.pop("revs")
            for a in cls._ARRAYS:
                np.save(tmp / f"ego_{a}.npy", ego[a])
            for f in RAW_EGO_FIELDS:
                np.save(tmp / f"ego_v_{f}.npy", ego["values"][f])
            ego_ident = video_identity(ids, revs)
            np.save(tmp / "ego_ident.npy", ego_ident)
            vindex = {v: i for i, v in enumerate(ids)}
            t_all, v_start = ego["t"], ego["start"]
            del ego
            total = int(lib.conn.execute("SELECT COALESCE(SUM(n), 0) FROM tracks").fetchone()[0])
            names = ["tr_t"] + [f"tr_v_{f}" for f in RAW_OBJECT_FIELDS]
            dtypes = [np.dtype("<f8")] + [np.dtype("<f4")] * len(RAW_OBJECT_FIELDS)
            outs = [open(tmp / f"{n}.npy", "wb") for n in names]
            owner, tids, tlen, tcls = array("i"), array("q"), array("q"), array("h")
            cls_names: list[str] = []
            code: dict[str, int] = {}
            written = 0
            pos_parts: list[bytes] = []
            own_parts: list[int] = []
            f_parts: dict[str, list[bytes]] = {f: [] for f in RAW_OBJECT_FIELDS}

            from ..jobs import check_cancel, current_cancel

            cancel = current_cancel()      # the running search's cancel: checked per slice

            def flush() -> None:
                nonlocal written
                check_cancel(cancel)
                if not pos_parts:
                    return
                lens = np.fromiter((len(b) // 4 for b in pos_parts), np.int64, len(pos_parts))
                pos = np.frombuffer(b"".join(pos_parts), "<i4").astype(np.int64)
                so = np.repeat(np.asarray(own_parts, np.int64), lens)
                outs[0].write(np.ascontiguousarray(t_all[v_start[so] + pos], "<f8").tobytes())
                for fh, f in zip(outs[1:], RAW_OBJECT_FIELDS):
                    vals = np.frombuffer(b"".join(f_parts[f]), "<f4")
                    if vals.size != pos.size:
                        raise ValueError(f"track field {f} has {vals.size} samples, pos {pos.size}")
                    fh.write(vals.tobytes())
                    f_parts[f].clear()
                written += int(pos.size)
                pos_parts.clear()
                own_parts.clear()

            try:
                for fh, dt in zip(outs, dtypes):
                    np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(dt),
                                                              "fortran_order": False, "shape": (total,)})
                pending = 0
                for vid, track, c, pos_b, fb in lib.iter_track_rows():
                    vi = vindex[vid]
                    owner.append(vi)
                    tids.append(track)
                    k = code.get(c)
                    if k is None:
                        k = code[c] = len(cls_names)
                        cls_names.append(c)
                    tcls.append(k)
                    pos_parts.append(pos_b or b"")
                    own_parts.append(vi)
                    n = len(pos_b or b"") // 4
                    tlen.append(n)
                    for f in RAW_OBJECT_FIELDS:
                        f_parts[f].append(fb[f] or b"")
                    pending += n
                    if pending >= CHUNK_SAMPLES:
                        flush()
                        pending = 0
                flush()
            finally:
                for fh in outs:
                    fh.close()
            if written != total:
                raise ValueError(f"the tracks hold {written} samples, their counts say {total}")
            owner_a = np.array(owner, np.int32)
            tlen_a = np.array(tlen, np.int64)
            tids_a = np.array(tids, np.int64)
            start = np.zeros(len(tlen_a), np.int64)
            if len(tlen_a):
                start[1:] = np.cumsum(tlen_a)[:-1]
            np.save(tmp / "tr_owner.npy", owner_a)
            np.save(tmp / "tr_start.npy", start)
            np.save(tmp / "tr_length.npy", tlen_a)
            np.save(tmp / "track_cls.npy", np.array(tcls, np.int16))
            np.save(tmp / "track_ids.npy", tids_a)
            np.save(tmp / "track_ident.npy", track_identity(ego_ident[owner_a], tids_a))
            (tmp / "meta.json").write_text(json.dumps({"video_ids": ids, "cls_names": cls_names}))
            _commit_cache_dir(tmp, cdir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls._load_cache(cdir, lib.cache_dir, tag)

    @staticmethod
    def _scan_ego(lib) -> dict:
        """The ego series of every video (ordered by id), in memory: ids, revs, owner, start,
        length, t (float64) and values (float32 per raw ego field)."""
        ids: list[str] = []
        t_parts: list[bytes] = []
        e_parts: dict[str, list[bytes]] = {f: [] for f in RAW_EGO_FIELDS}
        revs: list[int] = []
        for vid, rev, tb, eb in lib.iter_video_series():
            ids.append(vid)
            revs.append(rev)
            t_parts.append(tb or b"")
            for f in RAW_EGO_FIELDS:
                e_parts[f].append(eb[f] or b"")
        e_len = np.fromiter((len(b) // 8 for b in t_parts), np.int64, len(t_parts))
        t_all = np.frombuffer(b"".join(t_parts), "<f8").astype(np.float64)
        del t_parts
        v_start = np.zeros(len(ids), np.int64)
        if len(ids):
            v_start[1:] = np.cumsum(e_len)[:-1]
        vals = {}
        for f in RAW_EGO_FIELDS:
            vals[f] = np.frombuffer(b"".join(e_parts[f]), "<f8").astype(np.float32)
            e_parts[f] = []
        return {"ids": ids, "revs": revs, "owner": np.arange(len(ids), dtype=np.int32), "start": v_start,
                "length": e_len, "t": t_all, "values": vals}

    @classmethod
    def _load_cache(cls, cdir: Path, cache_dir: Path, tag: str) -> "TrackColumns":
        import json

        meta = json.loads((cdir / "meta.json").read_text())

        def series(prefix, fields):
            arrs = {a: np.load(cdir / f"{prefix}_{a}.npy", mmap_mode="r") for a in cls._ARRAYS}
            vals = {f: np.load(cdir / f"{prefix}_v_{f}.npy", mmap_mode="r") for f in fields}
            files = {"t": _FileColumn(cdir / f"{prefix}_t.npy", arrs["t"])}
            files.update({f: _FileColumn(cdir / f"{prefix}_v_{f}.npy", vals[f]) for f in fields})
            return Series(owner=np.asarray(arrs["owner"]), start=np.asarray(arrs["start"]),
                          length=np.asarray(arrs["length"]), t=arrs["t"], values=vals, files=files)
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
        """(series, values) for a rule field, with derived fields (abs_loc_x, heading, loc_x_road,
        abs_loc_x_road) computed."""
        if field_name in _EGO_RULE_FIELDS:
            s = self.ego
            if field_name == "heading" and "heading" not in s.values:
                s.values["heading"] = _integrate(s, s.values["yaw_rate"])
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
        (`_per_unit_chunks`), so the work space is a chunk's, not the library's."""
        return _per_unit_chunks(self.tracks, _RoadColumn(self), None, lambda ss, vv: vv)

    def _source(self, field_name: str):
        """(series, values) for computing a feature in chunks: the values as a range reader of
        the column cache's file where there is one (`_FileColumn`), |loc_x| taken chunk by chunk
        (never a whole-library array), else the in-memory array."""
        if field_name == "abs_loc_x" and "abs_loc_x" not in self.tracks.values:
            s = self.tracks
            base = s.files.get("loc_x")
            return s, _AbsColumn(base if base is not None else s.values["loc_x"])
        if field_name in ROAD_FIELDS and field_name not in self.tracks.values:
            road = _RoadColumn(self)
            return self.tracks, (road if field_name == "loc_x_road" else _AbsColumn(road))
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
            arr = _try_load(path, rows=len(ident))
            if arr is None:
                arr = self._reuse_older(name, role, ident, compute, fill_missing=not partial)
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
            self._save_feature(path, name, role, ident, arr)
        s._feat[key] = arr
        return arr

    def _reuse_older(self, name: str, role: str, ident: np.ndarray, compute, fill_missing: bool = True):
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
                arr[missing] = compute(missing) if fill_missing else np.nan
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
                pos, neg = _per_unit_chunks(*self._source(field_name), idx,
                                            lambda ss, vv: _window_change(ss, vv, window_s))
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
        T = self.tracks
        if key not in T._feat:
            T._feat[key] = _match_frames(self.ego, T.owner[T.sample_track()].astype(np.int64),
                                         np.asarray(T.t, np.float64))
        return T._feat[key]

    def trend_run(self, field_name: str, direction: str, units=None) -> np.ndarray:
        """Per-track longest steady run in seconds (float64 [T]); ``units`` as in `window_change`."""
        key = ("tr", field_name, direction)
        return self._cached(key, lambda idx: _per_unit_chunks(*self._source(field_name), idx,
                                                              lambda ss, vv: _trend_run(ss, vv, direction)),
                            units=units, partial=True)

    def minmax(self, field_name: str) -> tuple[np.ndarray, np.ndarray]:
        mm = self._minmax_stacked(field_name)
        return mm[:, 0], mm[:, 1]

    def _minmax_stacked(self, field_name: str) -> np.ndarray:
        key = ("mm", field_name)
        return self._cached(key, lambda idx: _cat2(_per_unit_chunks(*self._source(field_name), idx, _minmax)))

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
        return self._cached(key, lambda idx: _per_unit_chunks(*self._source(src), idx, _valid_count))

    def known(self, field_name: str) -> np.ndarray:
        """Per unit: whether the field has any value over it (bool [units]). A soft score on a
        field a unit has no value for is unknown there and takes the term's expected value
        (the scorer, "Unknown is not 0" in docs/rules.md)."""
        return self.valid_count(field_name) > 0

    def mean(self, field_name: str) -> np.ndarray:
        key = ("mean", field_name)
        return self._cached(key, lambda idx: _per_unit_chunks(*self._source(field_name), idx, _mean))

    def fraction_holds(self, field_name: str, op: str, value: float, min_fraction: float) -> np.ndarray:
        """Per-unit truth of "op(field, value) on >= ``min_fraction`` of the unit's samples"
        (a gate with ``min_time_fraction``). Remembered for this corpus (the columns of one content
        version never change), the last FRACTION_MEMO answers only: a bool per unit each."""
        return self._memo((field_name, op, float(value), float(min_fraction)), lambda: (
            self.fraction_satisfying(field_name, op, value) >= float(min_fraction) - 1e-12))

    def _memo(self, key, compute) -> np.ndarray:
        """``compute()`` remembered under ``key`` (read-only), the last FRACTION_MEMO answers."""
        import threading

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
        return self._memo(("run", field_name, op, float(value)), lambda: _per_unit_chunks(
            *self._source(field_name), None, lambda ss, vv: _held_run(ss, vv, op, float(value))))

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


def _commit_cache_dir(tmp: Path, cdir: Path) -> None:
    """Rename a fully written column cache folder into place (unless another process finished
    the same cache first), then remove the caches of older content versions (another process's
    unfinished folder is left alone unless it is an hour old: that process died)."""
    import shutil
    import time

    if (cdir / "meta.json").exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return
    shutil.rmtree(cdir, ignore_errors=True)  # an incomplete one (no meta.json)
    tmp.rename(cdir)
    for old in cdir.parent.iterdir():
        if old.name == cdir.name or not old.name.startswith("cols-"):
            continue
        try:
            if ".tmp-" in old.name and time.time() - old.stat().st_mtime < 3600:
                continue
        except OSError:
            continue
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)


def _cat2(mm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.stack(mm, axis=1)


class ColumnCacheError(OSError):
    """A column cache file changed under a reader (cut short by another process)."""


class _FileColumn:
    """Ranges of a 1-D .npy array of a column cache, read with ``pread`` into fresh arrays: the
    samples a feature reads pass through the OS's page cache but are not mapped into this
    process (a memory-mapped column read whole counts every page in the process's resident
    memory). The file stays open, so a cache folder removed by another process meanwhile stays
    readable (POSIX)."""

    def __init__(self, path: Path, mm: np.ndarray):
        import os
        import threading
        import weakref

        self.path = Path(path)
        self.dtype = np.dtype(mm.dtype)
        self.size = int(mm.shape[0])
        self.offset = int(getattr(mm, "offset", 0))      # np.load's memmap: the header's length
        self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self._lock = threading.Lock()
        weakref.finalize(self, os.close, self._fd)

    def read(self, a: int, b: int) -> np.ndarray:
        import os

        out = np.empty(max(0, b - a), self.dtype)
        buf = memoryview(out).cast("B")
        pos = self.offset + a * self.dtype.itemsize
        got = 0
        while got < len(buf):
            if hasattr(os, "preadv"):
                k = os.preadv(self._fd, [buf[got:]], pos + got)
            else:                                # Windows: no pread; one reader at a time
                with self._lock:
                    os.lseek(self._fd, pos + got, os.SEEK_SET)
                    k = os.readv(self._fd, [buf[got:]])
            if k <= 0:
                raise ColumnCacheError(f"{self.path} was cut short while it was read (changed by "
                                       "another process?); search again")
            got += k
        return out


class _AbsColumn:
    """|values| of a column, taken range by range."""

    def __init__(self, base):
        self.base = base

    def read(self, a: int, b: int) -> np.ndarray:
        return np.abs(_read(self.base, a, b))


class _RoadColumn:
    """``loc_x_road`` of the track samples, taken range by range (ranges of whole tracks, as
    `_subset` reads them): see `_road_lateral`."""

    def __init__(self, cols: "TrackColumns"):
        self.cols = cols

    def read(self, a: int, b: int) -> np.ndarray:
        cols = self.cols
        s, e = cols.tracks, cols.ego
        if b <= a:
            return np.zeros(0, np.float32)

        def col(name):
            f = s.files.get(name)
            return np.asarray(_read(f if f is not None else s.values[name], a, b))
        tf = s.files.get("t")
        t = np.asarray(_read(tf if tf is not None else s.t, a, b), np.float64)
        # the track of each sample: the last track starting at or before it (an empty track
        # shares its start with the next one, which owns the sample)
        track = np.searchsorted(s.start, np.arange(a, b), side="right") - 1
        heading = cols.series_for("heading")[1]
        frames = _match_frames(e, s.owner[track].astype(np.int64), t)
        return _road_lateral(track, col("loc_x"), col("loc_z"), col("distance"),
                             np.asarray(heading[frames], np.float64))


def _match_frames(e: Series, vids: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The ego-series sample of each (video, time) pair: track samples are a subset of their
    video's frames, matched by time (to the microsecond). Reads the ego times of these videos only."""
    if t.shape[0] == 0:
        return np.zeros(0, np.int64)
    u, inv = np.unique(vids, return_inverse=True)
    lens = e.length[u].astype(np.int64)
    first = np.cumsum(lens) - lens
    eidx = np.repeat(e.start[u].astype(np.int64), lens) + (np.arange(int(lens.sum())) - np.repeat(first, lens))
    if eidx.size == 0:
        return np.zeros(t.shape[0], np.int64)
    e_us = np.round(np.asarray(e.t[eidx], np.float64) * _US).astype(np.int64)
    t_us = np.round(t * _US).astype(np.int64)
    lo = min(int(e_us.min()), int(t_us.min()))
    span = max(int(e_us.max()), int(t_us.max())) - lo + 1
    e_key = np.repeat(np.arange(len(u), dtype=np.int64), lens) * span + (e_us - lo)
    t_key = inv.astype(np.int64) * span + (t_us - lo)
    order = np.argsort(e_key, kind="stable")
    pos = np.minimum(np.searchsorted(e_key[order], t_key, side="left"), len(order) - 1)
    return eidx[order[pos]]


def _road_lateral(track: np.ndarray, loc_x: np.ndarray, loc_z: np.ndarray, distance: np.ndarray,
                  heading: np.ndarray) -> np.ndarray:
    """Lateral offset relative to the road (float32 per sample): ``loc_x`` with the sideways sweep
    the ego's own rotation gives every object taken out. When the ego turns left by dθ, an object
    at depth z moves z·dθ to the right in the camera's frame (``loc_x`` + = right, heading + =
    left), so ``loc_x_road(t) = loc_x(t) + Σ z̄·Δheading`` over the track's later samples: the offset
    as seen from where the ego points at the track's last sample (equal to ``loc_x`` there).

    ``track``: the track of each sample (samples of a track contiguous, in time order);
    ``heading``: the ego heading (rad, `_integrate`) at each sample's frame; z̄: the mean depth of
    the two samples (``loc_z``, else ``distance``; one side when the other is unknown; no depth,
    no correction). Where the ego's yaw rate was not estimated the heading holds, so nothing is
    taken out there. NaN ``loc_x`` stays NaN, and so does every sample taken while the ego pointed
    more than `ROAD_MAX_TURN_RAD` away from its heading at the track's last sample (a turn)."""
    z = np.where(np.isfinite(loc_z), loc_z, distance).astype(np.float64)
    n = z.shape[0]
    if n == 0:
        return np.zeros(0, np.float32)
    z0, z1 = z[:-1], z[1:]
    with np.errstate(invalid="ignore"):
        zbar = np.where(np.isnan(z0), z1, np.where(np.isnan(z1), z0, 0.5 * (z0 + z1)))
    step = np.zeros(n)                    # step[i]: the correction from sample i to i + 1 (same track)
    same = track[1:] == track[:-1]
    step[:-1] = np.where(same, np.nan_to_num(zbar, nan=0.0) * np.diff(heading), 0.0)
    # each sample's sum over its track's later steps, added from the track's end backwards: the same
    # additions in the same order whatever range of tracks is read (chunking changes no value)
    last = np.flatnonzero(np.r_[~same, True])                       # each track's last sample
    own_last = np.repeat(last, np.diff(np.r_[-1, last]))            # ... for every sample
    rem = own_last - np.arange(n)                                   # samples after this one
    later = np.zeros(n)
    by_rem = np.argsort(rem, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(rem))]
    for r in range(1, len(bounds) - 1):
        i = by_rem[bounds[r]:bounds[r + 1]]
        later[i] = later[i + 1] + step[i]
    out = loc_x.astype(np.float64) + later
    out[np.abs(heading - heading[own_last]) > ROAD_MAX_TURN_RAD] = np.nan   # through a turn: unknown
    return out.astype(np.float32)


def _read(col, a: int, b: int) -> np.ndarray:
    """Samples [a, b) of a column: a range reader (`_FileColumn`, `_AbsColumn`, `_RoadColumn`) or
    an array."""
    if isinstance(col, (_FileColumn, _AbsColumn, _RoadColumn)):
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
        t = np.asarray(_read(tf if tf is not None else s.t, lo, hi))
        vals = np.asarray(_read(v, lo, hi))
        if hi - lo != total:                       # other units between these: keep theirs only
            samples = np.repeat(s.start[units] - lo - start, length) + np.arange(total)
            t, vals = t[samples], vals[samples]
    return Series(owner=s.owner[units], start=start, length=length, t=t, values={}), vals


#: samples per chunk of whole units when a feature is computed over a large corpus: bounds the
#: temporary arrays (a few float64 copies of a chunk) whatever the library size
CHUNK_SAMPLES = 2_000_000


def _per_unit_chunks(s: Series, v, idx: np.ndarray | None, fn):
    """``fn(series, values) -> tuple of per-unit arrays`` for the units ``idx`` (sorted; None =
    all), computed over chunks of whole units whose samples, from the chunk's first unit to its
    last, span at most `CHUNK_SAMPLES` (a unit longer than that is a chunk of its own), in a
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
        nxt = int(np.searchsorted(ends, starts[a] + CHUNK_SAMPLES, side="right"))
        cuts.append(max(nxt, a + 1))
    chunks = [units[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    from ..jobs import check_cancel, current_cancel

    cancel = current_cancel()   # the running job's cancel (strived.jobs.cancel_scope): per chunk
    check_cancel(cancel)
    if len(chunks) == 1:
        return fn(*_subset(s, v, chunks[0]))

    def run(ch):
        check_cancel(cancel)
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


def _regular_steps(tt: np.ndarray, tr: np.ndarray, window_s: float):
    """When every track's samples are evenly spaced (the same step, in whole microseconds, in
    every track: a fixed frame rate without gaps), (window in steps, first index of each
    sample's track, last index of it); else None. Then a sample's window is plain index
    arithmetic, the same as `_track_keys`' search gives (both use microsecond times)."""
    if tt.size < 2:
        return None
    t_us = np.round(tt * _US).astype(np.int64)
    same = tr[1:] == tr[:-1]
    d = np.diff(t_us)[same]
    if d.size == 0 or d[0] <= 0 or not np.all(d == d[0]):
        return None
    step = int(d[0])
    change = np.flatnonzero(np.r_[True, ~same])
    lens = np.diff(np.r_[change, tt.size])
    first = np.repeat(change, lens)
    last = first + np.repeat(lens, lens) - 1
    rel_max = int((lens.max() - 1) * step)
    return _window_us(window_s, np.array([rel_max])) // step, first, last


def _window_end(tt: np.ndarray, tr: np.ndarray, window_s: float) -> np.ndarray:
    """For each sample i, the last index j of the same track with t_j - t_i <= window (+T_EPS)."""
    if tt.size == 0:
        return np.zeros(0, np.int64)
    reg = _regular_steps(tt, tr, window_s)
    if reg is not None:
        k, _, last = reg
        return np.minimum(np.arange(tt.size) + k, last)
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
    reg = _regular_steps(tt, tr, window_s)
    if reg is not None:
        k, first, _ = reg
        return np.maximum(np.arange(tt.size) - k, first)
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
    fns = {None: (np.minimum, np.maximum), "positive": (np.minimum,), "negative": (np.maximum,)}[direction]
    for fn, ext in zip(fns, _range_extremes(v32, lo, hi, fns)):
        if fn is np.minimum:
            out = np.maximum(out, base - ext.astype(np.float64))
        else:
            out = np.maximum(out, ext.astype(np.float64) - base)
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
    """fn (np.maximum or np.minimum) over vv[lo:hi+1] for every query (lo <= hi)."""
    return _range_extremes(vv, lo, hi, (fn,))[0]


def _level_probes(lo: np.ndarray, hi: np.ndarray, top: int | None = None):
    """Range queries vv[lo:hi+1] grouped by sparse-table level (floor(log2(length)), exact):
    (top level, per level None or (query indices or None for all, first entry, second entry))."""
    q = lo.shape[0]
    level = np.frexp((hi - lo + 1).astype(np.float64))[1] - 1 if q else np.zeros(0, np.int64)
    if top is None:
        top = int(level.max()) if q else 0
    counts = np.bincount(level, minlength=top + 1)
    probes = []
    for k in range(top + 1):
        if counts[k] == 0:
            probes.append(None)
        elif counts[k] == q:
            probes.append((None, lo, hi - (1 << k) + 1))
        else:
            sel = np.flatnonzero(level == k)
            probes.append((sel, lo[sel], hi[sel] - (1 << k) + 1))
    return top, probes


def _sparse_levels(vv: np.ndarray, fn, top: int):
    """(k, level k) for k = 0..top: level k holds fn over 2^k consecutive values, built from
    level k-1 (one level in memory at a time, each shorter by 2^(k-1))."""
    cur = vv
    for k in range(top + 1):
        yield k, cur
        if k < top:
            cur = fn(cur[:-(1 << k)], cur[(1 << k):])


def _range_extremes(vv: np.ndarray, lo: np.ndarray, hi: np.ndarray, fns) -> list[np.ndarray]:
    """For each fn of ``fns`` (np.maximum / np.minimum): fn over vv[lo:hi+1] for every query
    (lo <= hi). Sparse table (`_sparse_levels`); a query of length n reads two entries of level
    floor(log2 n). The queries are grouped by level once for all fns."""
    q = lo.shape[0]
    outs = [np.empty(q, vv.dtype) for _ in fns]
    if q == 0:
        return outs
    top, probes = _level_probes(lo, hi)
    for fn, out in zip(fns, outs):
        for k, cur in _sparse_levels(vv, fn, top):
            if probes[k] is not None:
                sel, a, b = probes[k]
                if sel is None:
                    out[:] = fn(cur[a], cur[b])
                else:
                    out[sel] = fn(cur[a], cur[b])
    return outs


def _window_change(s: Series, v: np.ndarray, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(positive, negative) per-track max change within the window."""
    pos_res = np.zeros(s.n, np.float64)
    neg_res = np.zeros(s.n, np.float64)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    if vv.size < 2:
        return pos_res, neg_res
    v32 = vv.astype(np.float32)  # the values are float32: extremes are exact in float32
    n = vv.size
    idx = np.arange(n)
    reg = _regular_steps(tt, tr, window_s)
    if reg is not None:                      # evenly spaced: most windows are k samples long
        k, _, last = reg
        end = np.minimum(idx + k, last)
        has = end > idx
        mx, mn = _regular_window_extremes(v32, k, end, has, (np.maximum, np.minimum))
    else:
        end = _window_end(tt, tr, window_s)
        has = end > idx                      # a later sample of the same track in the window
        # every sample is a query (no compressions): one without a later sample in its window
        # reads any valid range and is masked out below
        lo = np.minimum(idx + 1, n - 1)
        hi = np.maximum(end, lo)
        mx, mn = _range_extremes(v32, lo, hi, (np.maximum, np.minimum))
    best = mx.astype(np.float64)
    best -= vv
    best = np.where(has, best, 0.0)
    np.maximum(best, 0.0, out=best)
    _group_max(pos_res, tr, best)
    best = mn.astype(np.float64)
    np.subtract(vv, best, out=best)
    best = np.where(has, best, 0.0)
    np.maximum(best, 0.0, out=best)
    _group_max(neg_res, tr, best)
    return pos_res, neg_res


def _regular_window_extremes(vv: np.ndarray, k: int, end: np.ndarray, has: np.ndarray, fns) -> list[np.ndarray]:
    """For each fn: fn over vv[i+1 : end_i+1] for every sample i with ``has`` (its window holds a
    later sample; the others get a meaningless value), where ``end_i = min(i + k, last of its
    track)``: `_range_extremes`' sparse table, but a window of the full k samples (most of them)
    reads its two entries of level floor(log2 k) as two shifted slices of that level for all
    such windows at once, and only the windows cut short by their track's end are looked up one
    by one. The same entries are combined, so the values are those of `_range_extremes`."""
    n = vv.size
    outs = [np.empty(n, vv.dtype) for _ in fns]
    if n == 0:
        return outs
    idx = np.arange(n)
    w = 1 << (int(k).bit_length() - 1)        # 2^floor(log2 k)
    m = max(n - k, 0)                         # samples that can have k later samples
    full = (end[:m] == idx[:m] + k)
    cut = np.flatnonzero(has & (np.r_[~full, np.ones(n - m, bool)]))
    top, probes = _level_probes(cut + 1, end[cut], top=w.bit_length() - 1)
    for fn, out in zip(fns, outs):
        for lev, cur in _sparse_levels(vv, fn, top):
            if probes[lev] is not None:
                sel, a, b = probes[lev]
                out[cut if sel is None else cut[sel]] = fn(cur[a], cur[b])
            if lev == top and m:
                np.copyto(out[:m], fn(cur[1:m + 1], cur[k - w + 1:m + k - w + 1]), where=full)
    return outs


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


def _held_run(s: Series, v: np.ndarray, op: str, x: float) -> np.ndarray:
    """Per unit: the longest run (s) of consecutive samples where op(v, x) holds; a NaN sample
    holds nothing, so it breaks a run (unlike `_valid_view` kernels, which skip NaNs)."""
    res = np.zeros(s.n, np.float64)
    ok = _compare(np.asarray(v, np.float64), op, x)   # as the reference compares; NaN: False
    if not ok.any():
        return res
    st = s.sample_track()
    t = np.asarray(s.t, np.float64)
    same_prev = np.r_[False, st[1:] == st[:-1]]
    same_next = np.r_[st[:-1] == st[1:], False]
    prev_ok = np.r_[False, ok[:-1]] & same_prev
    next_ok = np.r_[ok[1:], False] & same_next
    first = np.flatnonzero(ok & ~prev_ok)        # run starts, in order
    last = np.flatnonzero(ok & ~next_ok)         # run ends, paired with the starts
    _group_max(res, st[first], t[last] - t[first])
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


def _valid_count(s: Series, v: np.ndarray) -> np.ndarray:
    """Per unit: the number of its samples with a value (not NaN)."""
    return np.bincount(s.sample_track()[~np.isnan(v)], minlength=s.n).astype(np.int64)


def _mean(s: Series, v: np.ndarray):
    out = np.full(s.n, np.nan)
    vv, tt, tr, cnt, vstart = _valid_view(s, v)
    nz = np.flatnonzero(cnt > 0)
    if nz.size:
        out[nz] = np.add.reduceat(vv, vstart[nz]) / cnt[nz]
    return out


def _integrate(s: Series, yaw_rate: np.ndarray) -> np.ndarray:
    """Heading (rad) per ego sample: trapezoidal integral of yaw_rate from the series start;
    NaN yaw_rate contributes nothing (heading holds). One running sum over all series (a series
    start adds a 0 step) from which each series' value at its start is subtracted, worked out in
    chunks of whole series with the sum carried across (the same additions in the same order as
    one pass, so the same values), so its float64 work space is a chunk's, not the library's."""
    n = yaw_rate.shape[0]
    out = np.zeros(n, np.float32)
    if n < 2:
        return out
    nz = s.length > 0
    starts, lens = s.start[nz], s.length[nz]
    carry = 0.0                               # the running sum at the chunk's first sample
    i = 0
    while i < starts.size:
        j = max(i + 1, int(np.searchsorted(starts, starts[i] + CHUNK_SAMPLES, side="left")))
        j = min(j, starts.size)
        a, b = int(starts[i]), int(starts[j - 1] + lens[j - 1])
        y = np.nan_to_num(yaw_rate[a:b].astype(np.float64), nan=0.0)
        inc = 0.5 * (y[1:] + y[:-1]) * np.diff(s.t[a:b])
        inc[starts[i + 1:j] - a - 1] = 0.0    # the step into a series start adds nothing
        cum = np.cumsum(np.r_[carry, inc])
        out[a:b] = cum - np.repeat(cum[starts[i:j] - a], lens[i:j])
        carry = float(cum[-1])                # + the 0 step into the next series
        i = j
    return out
