"""The dense segment index: one row per (video, segment) in the library's ``dense/`` folder.

Layout (committed atomically): ``manifest.json`` names the current generation folder
``gen-NNNNNN/`` and lists each of its files with its size and BLAKE2b checksum, plus the format,
the embedder (name/version/dim/kind) and the counts. A generation holds ``vectors.npy``
(n × dim float32, L2-normalised), ``rows.npz`` (segment number, t0/t1 seconds, alive flag, video
code), ``videos.json`` (video ids, and per video the stamp of the text/records it was embedded
from) and, above ``exact_max_rows`` live rows, ``hnsw.bin`` (hnswlib, cosine = inner product on unit
vectors). A save writes a new generation beside the current one, then swaps the manifest in one
rename and deletes the old generation: a kill or a full disk at any point leaves the previous
index whole. Opening verifies sizes, checksums and that the arrays agree (a file is hashed once
per state on disk: ``verified.json`` in the generation keeps each file's size, mtime, ctime and
inode from when it matched, so any write makes it hashed again); a damaged index raises
`DenseIndexCorrupt` (the sources module rebuilds it from the library). An index written before
generations (the same files directly in ``dense/`` beside ``meta.json``) is read after the same
consistency checks and rewritten in the new layout on its next save.

Search: exact (one matrix–vector product) below ``exact_max_rows`` (default 20,000 segments:
≈ 5 ms here), HNSW above. A video's score is the max over its segments (cosine similarity), and
the result carries that best segment's (t0, t1) so a hit points at where it matched.

The index records the embedder that built it; opening it with another embedder (name, version or
dimension) raises `DenseIndexMismatch` saying what to re-run.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import StrivedError
from .dense_check import (DenseIndexCorrupt, bad_vector_rows, cached, check_query_vector,  # noqa: F401
                          drop_bad_rows, load_graph)
from .minilm_numpy import _one_blas_thread

FORMAT = "strived.dense/1"
MANIFEST = "manifest.json"
LEGACY_FILES = ("meta.json", "vectors.npy", "rows.npz", "videos.json", "hnsw.bin")
#: in a generation folder: the files whose checksum matched, each with the stat it had then
VERIFIED = "verified.json"
EXACT_MAX_ROWS = 20_000
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH_MIN = 200


class DenseIndexMismatch(StrivedError):
    """The dense index was built by another embedder."""

    def __init__(self, folder: str, built: dict, wanted: dict):
        self.folder, self.built, self.wanted = folder, built, wanted
        super().__init__(
            f"the dense index in {folder} was built with embedder {built.get('embedder')!r} "
            f"(version {built.get('version')}, {built.get('dim')}-d) but {wanted.get('embedder')!r} "
            f"(version {wanted.get('version')}, {wanted.get('dim')}-d) was asked for: rebuild it "
            "with that embedder (`ensure_text_index(..., rebuild_dense=True)`, or delete the "
            "folder), or search with the embedder that built it")


class DenseIndexWriteError(StrivedError):
    """The dense index could not be saved (full disk, read-only folder); the previous one is kept."""

    def __init__(self, folder: str, reason: str):
        self.folder, self.reason = folder, reason
        super().__init__(f"cannot save the dense index in {folder} ({reason}); the previous index "
                         "is kept (free some space and index again to bring it up to date)")


def _checksum(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _stat_stamp(st: os.stat_result, digest) -> list:
    """What identifies a file's state on disk: any write changes its mtime and ctime (and a
    replaced file its inode), and ctime cannot be set back by hand."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest]


def _read_verified(gdir: Path) -> dict:
    try:
        got = json.loads((gdir / VERIFIED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _write_verified(gdir: Path, stamps: dict) -> None:
    """Best effort (a search must not need write access): a later open skips hashing the files
    whose stat is unchanged since they matched their checksums."""
    tmp = gdir / f"{VERIFIED}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(stamps), encoding="utf-8")
        os.replace(tmp, gdir / VERIFIED)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def _verify_files(folder: Path, meta: dict, rehash: bool = False) -> None:
    """Check the generation's files against the manifest's sizes and checksums; raise
    DenseIndexCorrupt. A file is hashed once per state on disk (``verified.json``): the 1.6 GB of
    a 100,000-video index take ~3 s to hash, paid again by every new search process otherwise.
    ``rehash`` hashes every file anyway: bit rot changes no stat (`strived check` asks for it)."""
    bad = lambda why: DenseIndexCorrupt(str(folder), why)  # noqa: E731
    gen, files = meta.get("generation"), meta.get("files")
    if not isinstance(gen, str) or not gen.startswith("gen-") or "/" in gen or not isinstance(files, dict):
        raise bad("manifest.json names no generation")
    verified, checked = ({} if rehash else _read_verified(folder / gen)), {}
    for name, info in files.items():
        p = folder / gen / name
        try:
            st = p.stat()
        except OSError:
            raise bad(f"{gen}/{name} is missing") from None
        if st.st_size != info.get("bytes"):
            raise bad(f"{gen}/{name} has {st.st_size} bytes, the manifest says {info.get('bytes')} "
                      "(cut short?)")
        stamp = _stat_stamp(st, info.get("blake2b"))
        if verified.get(name) != stamp and _checksum(p) != info.get("blake2b"):
            raise bad(f"{gen}/{name} does not match its checksum")
        checked[name] = stamp
    if checked != verified:
        _write_verified(folder / gen, checked)


def verify_index_files(folder: str | os.PathLike) -> dict | None:
    """Hash every file of the dense index in ``folder`` against its manifest, whatever
    ``verified.json`` says. Returns the manifest (None: no index); raises DenseIndexCorrupt."""
    folder = Path(folder)
    meta = read_manifest(folder)
    if meta is not None and not meta.get("legacy"):
        _verify_files(folder, meta, rehash=True)
    return meta


def _fsync_write(path: Path, write) -> None:
    with open(path, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def index_stamp(folder: str | os.PathLike) -> tuple | None:
    """What changes whenever the index on disk changes (for in-memory caches), or None."""
    folder = Path(folder)
    for name in (MANIFEST, "meta.json"):
        try:
            st = (folder / name).stat()
        except OSError:
            continue
        return (name, st.st_mtime_ns, st.st_size, st.st_ino)
    return None


def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The manifest (or a pre-generation ``meta.json``, marked ``legacy``), None when there is
    no index. Raises DenseIndexCorrupt when it is unreadable."""
    folder = Path(folder)
    for name, legacy in ((MANIFEST, False), ("meta.json", True)):
        p = folder / name
        if not p.is_file():
            continue
        try:
            meta = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise DenseIndexCorrupt(str(folder), f"{name} is unreadable: {e}") from None
        if not isinstance(meta, dict) or "dim" not in meta:
            raise DenseIndexCorrupt(str(folder), f"{name} is not an index manifest")
        if legacy:
            meta["legacy"] = True
        return meta
    return None


class DenseIndex:
    """See the module docstring. Not thread-safe for writes; searches may run concurrently."""

    def __init__(self, folder: Path, meta: dict, exact_max_rows: int = EXACT_MAX_ROWS):
        self.folder = Path(folder)
        self.meta = meta
        self.exact_max_rows = exact_max_rows
        self.dim = int(meta["dim"])
        self.vectors = np.zeros((0, self.dim), np.float32)
        self.seg = np.zeros(0, np.int32)
        self.t0 = np.zeros(0, np.float64)
        self.t1 = np.zeros(0, np.float64)
        self.alive = np.zeros(0, bool)
        self.code = np.zeros(0, np.int32)     # index into self.video_ids
        self.video_ids: list[str] = []
        self._code_of: dict[str, int] = {}
        self.stamps: dict[str, str] = {}
        self._hnsw = None
        self._hnsw_rows = 0                   # rows [0, _hnsw_rows) are in the HNSW graph
        self._dirty = False
        #: videos with unusable vectors (`dense_check`): {video_id: reason}; their rows are not
        #: ranked and the next `ensure_text_index` re-embeds them
        self.bad_videos: dict[str, str] = {}
        self.graph_problem: str | None = None  # why the saved graph was not loaded (search is exact)

    # ------------------------------------------------------------------ open / save
    @staticmethod
    def embedder_meta(embedder) -> dict:
        return {"embedder": embedder.name, "version": str(embedder.version),
                "dim": int(embedder.dim), "kind": embedder.kind}

    @classmethod
    def open(cls, folder: str | os.PathLike, embedder, *, rebuild: bool = False,
             exact_max_rows: int = EXACT_MAX_ROWS) -> "DenseIndex":
        """Open the index in ``folder`` for ``embedder`` (empty if absent or ``rebuild``; with
        ``rebuild`` the old files stay valid until the new index is saved).
        Raises DenseIndexMismatch when it was built by another embedder, DenseIndexCorrupt when
        its files are damaged or do not belong together."""
        folder = Path(folder)  # created by the first save (a read-only library has none)
        want = cls.embedder_meta(embedder)
        if rebuild:
            return cls._empty(folder, want, exact_max_rows)
        for attempt in range(3):
            meta = read_manifest(folder)
            if meta is None:
                return cls._empty(folder, want, exact_max_rows)
            built = {k: meta.get(k) for k in want}
            if meta.get("format") != FORMAT or built != want:
                raise DenseIndexMismatch(str(folder), built, want)
            idx = cls(folder, meta, exact_max_rows)
            try:
                idx._load()
                return idx
            except DenseIndexCorrupt:
                # a writer in another process may have swapped the manifest while we read the
                # generation it replaced: read the new one; a manifest that stays is real damage
                again = read_manifest(folder)
                if again is None or again.get("generation") == meta.get("generation") or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _empty(cls, folder: Path, want: dict, exact_max_rows: int) -> "DenseIndex":
        prev = None
        try:
            prev = read_manifest(folder)
        except DenseIndexCorrupt:
            pass
        idx = cls(folder, dict(want, format=FORMAT), exact_max_rows)
        if prev is not None:
            idx.meta["generation_no"] = int(prev.get("generation_no") or 0)
        idx._dirty = prev is not None  # an explicit rebuild replaces the old index on save
        return idx

    def _file(self, name: str) -> Path:
        gen = self.meta.get("generation")
        return self.folder / gen / name if gen else self.folder / name

    def _load(self) -> None:
        f, meta = self.folder, self.meta
        bad = lambda why: DenseIndexCorrupt(str(f), why)  # noqa: E731
        files = meta.get("files") if not meta.get("legacy") else None
        if not meta.get("legacy"):
            _verify_files(f, meta)
            if "vectors.npy" not in files:
                if int(meta.get("n_rows") or 0):
                    raise bad("the manifest lists no vectors")
                return
        elif not (f / "vectors.npy").is_file():
            if int(meta.get("n_rows") or 0):
                raise bad("vectors.npy is missing")
            return
        try:
            # memory-mapped: a search through the HNSW graph never reads them, so a large
            # index does not hold its vectors twice in memory (exact search reads them)
            vectors = np.load(self._file("vectors.npy"), allow_pickle=False, mmap_mode="r")
            with np.load(self._file("rows.npz"), allow_pickle=False) as rows:
                seg, t0, t1 = rows["seg"], rows["t0"], rows["t1"]
                alive, code = rows["alive"].astype(bool), rows["code"]
            v = json.loads(self._file("videos.json").read_text(encoding="utf-8"))
            video_ids, stamps = list(v["ids"]), dict(v["stamps"])
        except (OSError, ValueError, KeyError, TypeError, EOFError) as e:
            raise bad(f"cannot read its files ({type(e).__name__}: {e})") from None
        n = len(vectors) if vectors.ndim == 2 else -1
        if vectors.ndim != 2 or vectors.shape[1] != self.dim or vectors.dtype != np.float32:
            raise bad(f"vectors have shape {vectors.shape} {vectors.dtype}, expected (n, {self.dim}) float32")
        if any(len(a) != n or a.ndim != 1 for a in (seg, t0, t1, alive, code)):
            raise bad(f"{n} vectors but rows of lengths {[len(a) for a in (seg, t0, t1, alive, code)]}")
        if n and (int(code.min()) < 0 or int(code.max()) >= len(video_ids)):
            raise bad(f"row video codes run to {int(code.max())} but {len(video_ids)} videos are listed")
        if "n_rows" in meta and int(meta["n_rows"]) != n:
            raise bad(f"the manifest says {meta['n_rows']} rows, the files hold {n}")
        if not set(stamps) <= set(video_ids) or len(set(video_ids)) != len(video_ids):
            raise bad("videos.json is inconsistent")
        alive_codes = set(np.unique(code[alive]).tolist()) if n else set()
        if not {video_ids[c] for c in alive_codes} <= set(stamps):
            raise bad("live rows and embedded videos disagree")
        self.vectors, self.seg, self.t0, self.t1, self.alive, self.code = vectors, seg, t0, t1, alive, code
        self.video_ids, self.stamps = video_ids, stamps
        self._code_of = {vid: i for i, vid in enumerate(self.video_ids)}
        # unusable vectors and an unsound graph are left out, not trusted (`dense_check`)
        drop_bad_rows(self, cached(self, "vectors.npy", "bad_rows", lambda: bad_vector_rows(vectors)))
        n_hnsw = int(meta.get("hnsw_rows", 0))
        if n_hnsw:
            if n_hnsw > n:
                raise bad(f"the graph holds {n_hnsw} rows, the files {n}")
            load_graph(self, n_hnsw)

    def save(self) -> None:
        """Write a new generation and swap the manifest in one rename (see the module docstring).
        Compacts away dead rows first when they are more than a third of the rows. Raises
        DenseIndexWriteError (the previous index stays) when the disk is full or read-only."""
        if not self._dirty:
            return
        if len(self.alive) and (~self.alive).sum() * 3 > len(self.alive):
            self._compact()
        f = self.folder
        gen_no = int(self.meta.get("generation_no") or 0) + 1
        gen = f"gen-{gen_no:06d}"
        gdir = f / gen
        try:
            if gdir.exists():  # left by a save that was killed before its manifest swap
                shutil.rmtree(gdir)
            gdir.mkdir(parents=True)
            _fsync_write(gdir / "vectors.npy", lambda fh: np.save(fh, self.vectors))
            _fsync_write(gdir / "rows.npz", lambda fh: np.savez(fh, seg=self.seg, t0=self.t0, t1=self.t1,
                                                                alive=self.alive, code=self.code))
            _fsync_write(gdir / "videos.json", lambda fh: fh.write(json.dumps(
                {"ids": self.video_ids, "stamps": self.stamps}).encode("utf-8")))
            names = ["vectors.npy", "rows.npz", "videos.json"]
            if self._hnsw is not None:
                self._hnsw.save_index(str(gdir / "hnsw.bin"))
                names.append("hnsw.bin")
            files = {n: {"bytes": (gdir / n).stat().st_size, "blake2b": _checksum(gdir / n)} for n in names}
            _write_verified(gdir, {n: _stat_stamp((gdir / n).stat(), files[n]["blake2b"]) for n in names})
            _fsync_dir(gdir)
            meta = {k: v for k, v in self.meta.items() if k not in ("legacy",)}
            meta.update(format=FORMAT, generation=gen, generation_no=gen_no, files=files,
                        n_rows=int(len(self.alive)), n_alive=int(self.alive.sum()),
                        n_videos=len(self.stamps), hnsw_rows=int(self._hnsw_rows) if self._hnsw is not None else 0)
            tmp = f / (MANIFEST + ".tmp")
            _fsync_write(tmp, lambda fh: fh.write(json.dumps(meta, indent=1).encode("utf-8")))
            os.replace(tmp, f / MANIFEST)   # the commit point
            _fsync_dir(f)
        except OSError as e:
            shutil.rmtree(gdir, ignore_errors=True)
            (f / (MANIFEST + ".tmp")).unlink(missing_ok=True)
            short = e.errno is None and "written" in str(e)  # numpy's short write on a full disk
            why = (f"the disk is full{f': {e}' if short else ''}" if e.errno == errno.ENOSPC or short
                   else (e.strerror or str(e)))
            raise DenseIndexWriteError(str(f), why) from None
        except RuntimeError as e:  # hnswlib reports its write errors so
            shutil.rmtree(gdir, ignore_errors=True)
            raise DenseIndexWriteError(str(f), str(e)) from None
        self.meta = meta
        self._dirty = False
        self._remove_stale(keep=gen)

    def _remove_stale(self, keep: str) -> None:
        """Old generations, leftovers of killed saves and the pre-generation files."""
        for p in self.folder.iterdir():
            try:
                if p.is_dir() and p.name.startswith("gen-") and p.name != keep:
                    shutil.rmtree(p, ignore_errors=True)
                elif p.name in LEGACY_FILES or p.name.endswith(".tmp"):
                    p.unlink()
            except OSError:
                pass

    # ------------------------------------------------------------------ updates
    def __len__(self) -> int:
        return int(self.alive.sum())

    def remove(self, video_id: str) -> None:
        code = self._code_of.get(video_id)
        if code is None:
            return
        dead = np.flatnonzero((self.code == code) & self.alive)
        self.alive[dead] = False
        if self._hnsw is not None:
            for r in dead[dead < self._hnsw_rows]:
                self._hnsw.mark_deleted(int(r))
        self.stamps.pop(video_id, None)
        self._dirty = True

    def add(self, video_id: str, segments: Sequence[tuple[int, float, float]], vectors: np.ndarray,
            stamp: str = "") -> None:
        """Add (or replace) a video's segment rows. ``segments`` = [(seg, t0_s, t1_s)]."""
        self.add_many([(video_id, segments, vectors, stamp)])

    def add_many(self, entries: Sequence[tuple[str, Sequence[tuple[int, float, float]], np.ndarray, str]]) -> None:
        """`add` for many videos ``[(video_id, segments, vectors, stamp)]`` with one concatenation
        of the row arrays (adding videos one at a time copies the whole index each time: quadratic
        in the library size)."""
        parts: dict[str, list] = {"vectors": [], "seg": [], "t0": [], "t1": [], "code": []}
        last = {e[0]: k for k, e in enumerate(entries)}       # a video given twice: the last wins
        todo = [(v, segs, np.asarray(vecs, np.float32), st) for k, (v, segs, vecs, st) in enumerate(entries)
                if last[v] == k]
        for _, segments, vectors, _ in todo:                  # checked before anything changes
            if vectors.shape != (len(segments), self.dim):
                raise ValueError(f"expected {len(segments)}×{self.dim} vectors, got {vectors.shape}")
        for video_id, segments, vectors, stamp in todo:
            self.remove(video_id)
            self.bad_videos.pop(video_id, None)
            code = self._code_of.get(video_id)
            if code is None:
                code = len(self.video_ids)
                self.video_ids.append(video_id)
                self._code_of[video_id] = code
            n = len(segments)
            parts["vectors"].append(vectors)
            parts["seg"].append(np.array([s[0] for s in segments], np.int32))
            parts["t0"].append(np.array([s[1] for s in segments], np.float64))
            parts["t1"].append(np.array([s[2] for s in segments], np.float64))
            parts["code"].append(np.full(n, code, np.int32))
            self.stamps[video_id] = stamp
            self._dirty = True
        if not parts["code"]:
            return
        n_new = sum(len(c) for c in parts["code"])
        for name, new in parts.items():
            setattr(self, name, np.concatenate([getattr(self, name)] + new))
        self.alive = np.concatenate([self.alive, np.ones(n_new, bool)])
        n0 = len(self.alive) - n_new
        for vid in drop_bad_rows(self, [n0 + r for r in bad_vector_rows(self.vectors[n0:])]):
            self.stamps.pop(vid, None)        # not embedded: the next update embeds it again

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive)
        self.vectors, self.seg = self.vectors[keep], self.seg[keep]
        self.t0, self.t1, self.code = self.t0[keep], self.t1[keep], self.code[keep]
        self.alive = np.ones(len(keep), bool)
        self._hnsw, self._hnsw_rows = None, 0   # row numbers changed: rebuild the graph
        self._sync_hnsw()

    def _sync_hnsw(self) -> None:
        """Bring the HNSW graph up to date with the rows (only above the exact-search size)."""
        n = len(self.alive)
        if int(self.alive.sum()) < self.exact_max_rows:
            return
        import hnswlib

        if self._hnsw is None:
            g = hnswlib.Index(space="ip", dim=self.dim)
            g.init_index(max_elements=max(n, 1024), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M,
                         random_seed=0)
            g.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
            self._hnsw, self._hnsw_rows, self.graph_problem = g, 0, None
        g = self._hnsw
        if n > g.get_max_elements():
            g.resize_index(max(n, int(g.get_max_elements() * 1.5)))
        if n > self._hnsw_rows:
            new = np.arange(self._hnsw_rows, n)
            g.add_items(self.vectors[new], new)
            for r in new[~self.alive[new]]:
                g.mark_deleted(int(r))
            self._hnsw_rows = n
            self._dirty = True

    def finish_updates(self) -> None:
        """Update the HNSW graph (if large enough) and save."""
        self._sync_hnsw()
        self.save()

    # ------------------------------------------------------------------ search
    @property
    def uses_hnsw(self) -> bool:
        return self._hnsw is not None and int(self.alive.sum()) >= self.exact_max_rows

    def search_segments(self, qvec: np.ndarray, k: int, exact: bool | None = None):
        """(row indices, cosine similarities) of the ``k`` best live segments."""
        q = np.asarray(qvec, np.float32).reshape(-1)
        n_alive = int(self.alive.sum())
        k = min(k, n_alive)
        if k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        use_exact = (not self.uses_hnsw) if exact is None else exact
        check_query_vector(q)
        if use_exact or self._hnsw is None:
            sims = np.clip(_matvec(self.vectors, q), -1.0, 1.0)
            sims[~self.alive] = -np.inf
            if k < len(sims):
                part = np.argpartition(-sims, k - 1)[:k]
            else:
                part = np.arange(len(sims))
            order = part[np.lexsort((part, -sims[part]))]
            return order[sims[order] > -np.inf], sims[order][sims[order] > -np.inf]
        self._hnsw.set_ef(max(HNSW_EF_SEARCH_MIN, k))
        labels, _ = self._hnsw.knn_query(q[None, :], k=k)
        rows = labels[0].astype(np.int64)
        rows = np.sort(rows[rows < len(self.alive)])
        rows = rows[self.alive[rows]]          # rows with unusable vectors are not ranked
        # scored from the checked vectors, not the graph's own copy of them
        sims = np.clip(np.asarray(self.vectors[rows], np.float32) @ q, -1.0, 1.0)
        order = np.lexsort((rows, -sims))
        return rows[order], sims[order].astype(np.float32)

    def _id_rank(self) -> np.ndarray:
        """Each video code's position in id order (ties between equal scores break on the id),
        recomputed when videos were added."""
        cached = getattr(self, "_id_rank_cache", None)
        if cached is None or len(cached) != len(self.video_ids):
            ids = self.video_ids
            cached = np.empty(len(ids), np.int64)
            cached[np.asarray(sorted(range(len(ids)), key=ids.__getitem__), np.int64)] = np.arange(len(ids))
            self._id_rank_cache = cached
        return cached

    def search_videos(self, qvec: np.ndarray, top_k: int | None = None, exact: bool | None = None
                      ) -> list[tuple[str, float, tuple[float, float]]]:
        """[(video_id, max segment cosine, (t0_s, t1_s) of that segment)], best first, ties by id.
        ``top_k`` None = every indexed video (exact) or as many as HNSW returns for 2000 rows."""
        codes, sims, rows = self.rank_videos(qvec, top_k, exact)
        ids = [self.video_ids[c] for c in codes.tolist()]
        return list(zip(ids, sims.astype(float).tolist(),
                        zip(self.t0[rows].astype(float).tolist(), self.t1[rows].astype(float).tolist())))

    def rank_videos(self, qvec: np.ndarray, top_k: int | None = None, exact: bool | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`search_videos` as arrays: (video codes into ``video_ids``, best segment cosine
        (float32), that segment's row), best first, ties by id."""
        empty = (np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64))
        n_alive = int(self.alive.sum())
        if n_alive == 0:
            return empty
        use_exact = (not self.uses_hnsw) if exact is None else exact
        if use_exact:
            return self._exact_videos(np.asarray(qvec, np.float32).reshape(-1), top_k)
        k = min(n_alive, max(2000, 20 * (top_k or 100)))
        rows, sims = self.search_segments(qvec, k, exact=False)
        codes = self.code[rows].astype(np.int64)
        # rows are sorted best-first, so a video's first occurrence is its best segment.
        _, first = np.unique(codes, return_index=True)
        order = first[np.lexsort((self._id_rank()[codes[first]], -sims[first]))]
        if top_k is not None:
            order = order[:top_k]
        return codes[order], sims[order], rows[order].astype(np.int64)

    def _exact_videos(self, q: np.ndarray, top_k: int | None):
        check_query_vector(q)
        sims = np.clip(_matvec(self.vectors, q), -1.0, 1.0)   # rows are unit vectors (checked)
        sims[~self.alive] = -np.inf
        n_codes = len(self.video_ids)
        best = np.full(n_codes, -np.inf, np.float32)
        np.maximum.at(best, self.code, sims)             # per-video max over segments
        at_best = np.flatnonzero(sims == best[self.code])
        best_row = np.full(n_codes, -1, np.int64)
        best_row[self.code[at_best[::-1]]] = at_best[::-1]   # first row reaching the max wins
        cand = np.flatnonzero(np.isfinite(best))
        if top_k is not None and top_k < cand.size:
            kth = np.partition(best[cand], cand.size - top_k)[cand.size - top_k]
            cand = cand[best[cand] >= kth]
        order = cand[np.lexsort((self._id_rank()[cand], -best[cand]))]   # score desc, then id
        if top_k is not None:
            order = order[:top_k]
        return order.astype(np.int64), best[order], best_row[order]


def _matvec(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``vectors @ q`` on one BLAS thread: below ``exact_max_rows`` the product is small (~2 ms at
    20,000 rows), and a multi-threaded BLAS waking its threads on a busy machine took 8 ms at
    5,000 rows (this machine, 2 cores) against 0.15-1 ms on one; each row's dot product is the
    same computation either way (checked: identical floats)."""
    with _one_blas_thread():
        return vectors @ q
