"""The on-disk column cache of a library: the folder of .npy column files of one content version
(written in a folder of this process and thread, renamed into place whole; older versions and
dead writers' folders removed), its per-unit feature files (reused for unchanged videos across
content versions), and the range reader of its column files (`FileColumn`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import threading
import time
import weakref
from pathlib import Path

import numpy as np

from ..records import EGO_FIELDS as RAW_EGO_FIELDS, OBJECT_FIELDS as RAW_OBJECT_FIELDS
from .kernels import ColumnParts, Series

#: the per-unit arrays of each series' files (``tr_*.npy``, ``ego_*.npy``)
ARRAYS = ("owner", "start", "length", "t")


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


def npy_header(dt: np.dtype, n: int) -> bytes:
    """A .npy (1.0) header for a 1-d array of ``n`` items, always 128 bytes: written first and
    rewritten in place once the count is known."""
    d = "{'descr': %r, 'fortran_order': False, 'shape': (%d,), }" % (np.lib.format.dtype_to_descr(dt), n)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + (d.ljust(117) + "\n").encode("latin1")


def try_load(path: Path, rows: int | None = None):
    """A cached array, or None when it is missing, unreadable (truncated, deleted meanwhile) or of
    the wrong length for this corpus: the caller then recomputes it, never scores with it."""
    try:
        arr = np.load(path) if path.exists() else None
    except (OSError, ValueError, EOFError):
        return None
    if arr is not None and rows is not None and (arr.ndim == 0 or arr.shape[0] != rows):
        return None
    return arr


def atomic_save(path: Path, arr: np.ndarray) -> None:
    """Write ``path`` whole or not at all: a temporary file of this process and thread, then one
    rename (two processes caching the same feature never write into one file)."""
    tmp = path.with_name(f"{path.name[:-4]}.{os.getpid()}-{threading.get_ident()}.tmp.npy")
    try:
        np.save(tmp, arr)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def commit_cache_dir(tmp: Path, cdir: Path) -> None:
    """Rename a fully written column cache folder into place (unless another process finished
    the same cache first), then remove the caches of older content versions (another process's
    unfinished folder is left alone unless it is an hour old: that process died)."""
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


def write_cache(cols, cdir: Path) -> None:
    """Write the columns ``cols`` (a `TrackColumns` scanned in memory) as the cache folder ``cdir``."""
    # a folder of this process and thread, renamed into place whole: two processes writing
    # the cache of the same library at once never mix their files
    tmp = cdir.with_name(f"{cdir.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for prefix, s in (("tr", cols.tracks), ("ego", cols.ego)):
            for a in ARRAYS:
                np.save(tmp / f"{prefix}_{a}.npy", getattr(s, a))
            for f, v in s.values.items():
                if f in RAW_OBJECT_FIELDS or f in RAW_EGO_FIELDS:
                    np.save(tmp / f"{prefix}_v_{f}.npy", v)
        np.save(tmp / "ego_ident.npy", cols.ego_ident)
        np.save(tmp / "track_ident.npy", cols.track_ident)
        np.save(tmp / "track_cls.npy", cols.track_cls)
        np.save(tmp / "track_ids.npy", cols.track_ids)
        (tmp / "meta.json").write_text(json.dumps({"video_ids": cols.video_ids, "cls_names": cols.cls_names,
                                                   "broken": cols.broken}))
        commit_cache_dir(tmp, cdir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # a cache that cannot be written is only slower


def load_cache(cdir: Path) -> ColumnParts:
    """The columns of the cache folder ``cdir``, memory-mapped."""
    meta = json.loads((cdir / "meta.json").read_text())

    def series(prefix, fields):
        arrs = {a: np.load(cdir / f"{prefix}_{a}.npy", mmap_mode="r") for a in ARRAYS}
        vals = {f: np.load(cdir / f"{prefix}_v_{f}.npy", mmap_mode="r") for f in fields}
        files = {"t": FileColumn(cdir / f"{prefix}_t.npy", arrs["t"])}
        files.update({f: FileColumn(cdir / f"{prefix}_v_{f}.npy", vals[f]) for f in fields})
        return Series(owner=np.asarray(arrs["owner"]), start=np.asarray(arrs["start"]),
                      length=np.asarray(arrs["length"]), t=arrs["t"], values=vals, files=files)
    return ColumnParts(meta["video_ids"], series("tr", RAW_OBJECT_FIELDS), series("ego", RAW_EGO_FIELDS),
                       np.load(cdir / "track_cls.npy"), meta["cls_names"], np.load(cdir / "track_ids.npy"),
                       ego_ident=np.load(cdir / "ego_ident.npy"), track_ident=np.load(cdir / "track_ident.npy"),
                       broken=dict(meta.get("broken") or {}))


def reuse_older(cache_dir: Path, cache_tag: str, name: str, role: str, ident: np.ndarray, compute,
                fill_missing: bool = True):
    """Feature ``name`` from the newest cache file of an older content version, its rows
    matched by unit identity; the units it lacks computed (``compute(idx)``) or, without
    ``fill_missing``, NaN. None when no older file is usable."""
    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:          # removed meanwhile by another process
            return -1.0
    olds = sorted((p for p in cache_dir.glob(f"feat-*-{name}.npy")
                   if not p.name.startswith(f"feat-{cache_tag}-") and ".tmp" not in p.name),
                  key=mtime, reverse=True)
    for old in olds:
        old_tag = old.name[len("feat-"):].split("-", 1)[0]
        vals = try_load(old)
        old_ident = try_load(cache_dir / f"ident-{old_tag}-{role}.npy")
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


def save_feature(cache_dir: Path, cache_tag: str, path: Path, name: str, role: str, ident: np.ndarray,
                 arr: np.ndarray) -> None:
    """Save feature ``name`` (and the unit identities of its role) at ``path``; remove its older
    versions and the identity files no feature uses any more."""
    try:
        idp = cache_dir / f"ident-{cache_tag}-{role}.npy"
        if not idp.exists():
            atomic_save(idp, ident)
        atomic_save(path, arr)
        for old in cache_dir.glob(f"feat-*-{name}.npy"):  # older versions of this feature
            if old != path:
                old.unlink(missing_ok=True)
        live = {p.name.split("-", 2)[1] for p in cache_dir.glob("feat-*.npy")}
        for idf in cache_dir.glob("ident-*.npy"):
            if idf.name.split("-", 2)[1] not in live and idf != idp:
                idf.unlink(missing_ok=True)
    except OSError:
        pass  # a cache that cannot be written is only slower


class ColumnCacheError(OSError):
    """A column cache file changed under a reader (cut short by another process)."""


class FileColumn:
    """Ranges of a 1-D .npy array of a column cache, read with ``pread`` into fresh arrays: the
    samples a feature reads pass through the OS's page cache but are not mapped into this
    process (a memory-mapped column read whole counts every page in the process's resident
    memory). The file stays open, so a cache folder removed by another process meanwhile stays
    readable (POSIX)."""

    def __init__(self, path: Path, mm: np.ndarray):
        self.path = Path(path)
        self.dtype = np.dtype(mm.dtype)
        self.size = int(mm.shape[0])
        self.offset = int(getattr(mm, "offset", 0))      # np.load's memmap: the header's length
        self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self._lock = threading.Lock()
        weakref.finalize(self, os.close, self._fd)

    def read(self, a: int, b: int) -> np.ndarray:
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
