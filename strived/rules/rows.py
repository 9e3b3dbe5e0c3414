"""The track and ego rows of a corpus read into columns (`ColumnParts`): from in-memory records,
by one scan of a library's database, or streamed from the database straight into the column cache
(`colcache`) in slices, so the memory a large library costs is bounded. Every video's rows pass
`rowcheck`: a video whose rows are damaged is left out and listed in ``broken``."""

from __future__ import annotations

import json
import os
import shutil
import threading
from array import array
from pathlib import Path

import numpy as np

from ..availability import confident_ego
from ..jobs import check_cancel, current_cancel
from ..records import EGO_FIELDS as RAW_EGO_FIELDS, OBJECT_FIELDS as RAW_OBJECT_FIELDS, VideoRecords
from . import kernels
from .colcache import ARRAYS, commit_cache_dir, npy_header, track_identity, video_identity
from .kernels import ColumnParts, Series, build_series
from .rowcheck import checked_track_rows, video_problem


def from_records(recs: list[VideoRecords]) -> ColumnParts:
    """The columns of in-memory records (ordered by video id)."""
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
        for f in RAW_EGO_FIELDS:   # speed: its confident samples only (availability.MIN_SPEED_CONF)
            e_vals[f].append(confident_ego(r.ego, f).astype(np.float32))
    tracks = build_series(np.asarray(owner, np.int32), np.asarray(tlen, np.int64), tt, vals)
    ego = build_series(np.arange(len(recs), dtype=np.int32), np.asarray(e_len, np.int64), e_t, e_vals)
    return ColumnParts(ids, tracks, ego, np.asarray(tcls, np.int16), cls_names, np.asarray(tids, np.int64))


def stream_to_cache(lib, cdir: Path) -> None:
    """Write the column cache of ``lib`` as the folder ``cdir`` by streaming its track rows into the
    .npy files (`_TrackWriter`): the memory this costs is bounded by the ego series and the
    per-track arrays, not by the samples (at 100,000 videos the samples alone are ~10 GB). Raises
    OSError when the cache cannot be written. A video whose rows are damaged is left out
    (`rowcheck`; listed in ``broken``)."""
    tmp = cdir.with_name(f"{cdir.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        ego = scan_ego(lib)
        ids, revs, broken = ego.pop("ids"), ego.pop("revs"), ego.pop("broken")
        for a in ARRAYS:
            np.save(tmp / f"ego_{a}.npy", ego[a])
        for f in RAW_EGO_FIELDS:
            np.save(tmp / f"ego_v_{f}.npy", ego["values"][f])
        ego_ident = video_identity(ids, revs)
        np.save(tmp / "ego_ident.npy", ego_ident)
        vindex = {v: i for i, v in enumerate(ids)}
        n_frames = dict(zip(ids, ego["length"].tolist()))
        writer = _TrackWriter(tmp, ego["t"], ego["start"])
        del ego
        try:
            for vid, track, c, pos_b, fb in checked_track_rows(lib.iter_track_rows(), n_frames, broken):
                writer.add(vindex[vid], track, c, pos_b, fb)
            writer.finish()
        finally:
            writer.close()
        writer.save_tracks(tmp, ego_ident)
        (tmp / "meta.json").write_text(json.dumps({"video_ids": ids, "cls_names": writer.cls_names,
                                                   "broken": broken}))
        commit_cache_dir(tmp, cdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class _TrackWriter:
    """Track rows streamed into a column cache folder's sample files (``tr_t.npy`` and one
    ``tr_v_<field>.npy`` per raw object field), in slices of about `kernels.CHUNK_SAMPLES`
    samples; the per-track arrays are kept in memory until `save_tracks`. The running search's
    cancel is checked per slice."""

    def __init__(self, tmp: Path, t_all: np.ndarray, v_start: np.ndarray):
        self.t_all, self.v_start = t_all, v_start       # the ego times: each track sample's time
        names = ["tr_t"] + [f"tr_v_{f}" for f in RAW_OBJECT_FIELDS]
        self.dtypes = [np.dtype("<f8")] + [np.dtype("<f4")] * len(RAW_OBJECT_FIELDS)
        self.outs = [open(tmp / f"{n}.npy", "wb") for n in names]
        self.owner, self.tids, self.tlen, self.tcls = array("i"), array("q"), array("q"), array("h")
        self.cls_names: list[str] = []
        self.code: dict[str, int] = {}
        self.written = 0
        self.pending = 0
        self.pos_parts: list[bytes] = []
        self.own_parts: list[int] = []
        self.f_parts: dict[str, list[bytes]] = {f: [] for f in RAW_OBJECT_FIELDS}
        self.cancel = current_cancel()
        self._headers(0)                    # rewritten with the count at the end

    def _headers(self, n: int) -> None:
        for fh, dt in zip(self.outs, self.dtypes):
            fh.seek(0)
            fh.write(npy_header(dt, n))

    def add(self, vi: int, track: int, c: str, pos_b: bytes | None, fb: dict) -> None:
        """One track row (of video index ``vi``), checked by `rowcheck`."""
        self.owner.append(vi)
        self.tids.append(track)
        k = self.code.get(c)
        if k is None:
            k = self.code[c] = len(self.cls_names)
            self.cls_names.append(c)
        self.tcls.append(k)
        self.pos_parts.append(pos_b or b"")
        self.own_parts.append(vi)
        n = len(pos_b or b"") // 4
        self.tlen.append(n)
        for f in RAW_OBJECT_FIELDS:
            self.f_parts[f].append(fb[f] or b"")
        self.pending += n
        if self.pending >= kernels.CHUNK_SAMPLES:
            self.flush()
            self.pending = 0

    def flush(self) -> None:
        """Append the rows gathered since the last slice to the sample files."""
        check_cancel(self.cancel)
        if not self.pos_parts:
            return
        lens = np.fromiter((len(b) // 4 for b in self.pos_parts), np.int64, len(self.pos_parts))
        pos = np.frombuffer(b"".join(self.pos_parts), "<i4").astype(np.int64)
        so = np.repeat(np.asarray(self.own_parts, np.int64), lens)
        self.outs[0].write(np.ascontiguousarray(self.t_all[self.v_start[so] + pos], "<f8").tobytes())
        for fh, f in zip(self.outs[1:], RAW_OBJECT_FIELDS):   # lengths checked by rowcheck
            fh.write(b"".join(self.f_parts[f]))
            self.f_parts[f].clear()
        self.written += int(pos.size)
        self.pos_parts.clear()
        self.own_parts.clear()

    def finish(self) -> None:
        """The last slice, then the headers with the sample count."""
        self.flush()
        self._headers(self.written)

    def close(self) -> None:
        for fh in self.outs:
            fh.close()

    def save_tracks(self, tmp: Path, ego_ident: np.ndarray) -> None:
        """The per-track arrays: owner, start, length, class code, track id, identity."""
        owner_a = np.array(self.owner, np.int32)
        tlen_a = np.array(self.tlen, np.int64)
        tids_a = np.array(self.tids, np.int64)
        start = np.zeros(len(tlen_a), np.int64)
        if len(tlen_a):
            start[1:] = np.cumsum(tlen_a)[:-1]
        np.save(tmp / "tr_owner.npy", owner_a)
        np.save(tmp / "tr_start.npy", start)
        np.save(tmp / "tr_length.npy", tlen_a)
        np.save(tmp / "track_cls.npy", np.array(self.tcls, np.int16))
        np.save(tmp / "track_ids.npy", tids_a)
        np.save(tmp / "track_ident.npy", track_identity(ego_ident[owner_a], tids_a))



def scan_ego(lib) -> dict:
    """The ego series of every video (ordered by id), in memory: ids, revs, owner, start,
    length, t (float64), values (float32 per raw ego field) and broken ({video_id: reason}
    of the videos whose rows are damaged: their series are empty)."""
    ids: list[str] = []
    t_parts: list[bytes] = []
    e_parts: dict[str, list[bytes]] = {f: [] for f in RAW_EGO_FIELDS}
    revs: list[int] = []
    broken: dict[str, str] = {}
    for vid, rev, tb, eb in lib.iter_video_series():
        ids.append(vid)
        revs.append(rev if isinstance(rev, int) else 0)
        why = video_problem(tb, eb)
        if why:
            broken[vid] = why
            tb, eb = b"", {}
        t_parts.append(tb or b"")
        for f in RAW_EGO_FIELDS:
            e_parts[f].append(eb.get(f) or b"")
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
    vals["speed"] = confident_ego(vals, "speed")   # its confident samples only
    return {"ids": ids, "revs": revs, "owner": np.arange(len(ids), dtype=np.int32), "start": v_start,
            "length": e_len, "t": t_all, "values": vals, "broken": broken}


def scan_library(lib) -> ColumnParts:
    """The columns of ``lib`` in memory (when no cache folder can be written)."""
    e = scan_ego(lib)
    ids, revs, broken = e["ids"], e["revs"], e["broken"]
    vindex = {v: i for i, v in enumerate(ids)}
    t_all, v_start = e["t"], e["start"]
    ego = Series(owner=e["owner"], start=v_start, length=e["length"], t=t_all, values=e["values"])
    n_frames = dict(zip(ids, e["length"].tolist()))

    cls_names: list[str] = []
    code: dict[str, int] = {}
    owner, tids, tcls = [], [], []
    pos_parts, f_parts = [], {f: [] for f in RAW_OBJECT_FIELDS}
    for vid, track, c, pos_b, fb in checked_track_rows(lib.iter_track_rows(), n_frames, broken):
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
    track_ids = np.asarray(tids, np.int64)
    ego_ident = video_identity(ids, revs)
    return ColumnParts(ids, tracks, ego, np.asarray(tcls, np.int16), cls_names, track_ids, ego_ident=ego_ident,
                       track_ident=track_identity(ego_ident[owner_a], track_ids), broken=broken)
