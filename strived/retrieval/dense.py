"""The dense segment index: one row per (video, segment) in the library's ``dense/`` folder.

Files: ``meta.json`` (format, embedder name/version/dim/kind, counts), ``vectors.npy`` (n × dim
float32, L2-normalised), ``rows.npz`` (segment number, t0/t1 seconds, alive flag, video code),
``videos.json`` (video ids, and per video the stamp of the text/records it was embedded from) and,
above ``exact_max_rows`` live rows, ``hnsw.bin`` (hnswlib, cosine = inner product on unit vectors).

Search: exact (one matrix–vector product) below ``exact_max_rows`` (default 20,000 segments:
≈ 5 ms here), HNSW above. A video's score is the max over its segments (cosine similarity), and
the result carries that best segment's (t0, t1) so a hit points at where it matched.

The index records the embedder that built it; opening it with another embedder (name, version or
dimension) raises `DenseIndexMismatch` saying what to re-run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import StrivedError

FORMAT = "strived.dense/1"
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


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


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

    # ------------------------------------------------------------------ open / save
    @staticmethod
    def embedder_meta(embedder) -> dict:
        return {"embedder": embedder.name, "version": str(embedder.version),
                "dim": int(embedder.dim), "kind": embedder.kind}

    @classmethod
    def open(cls, folder: str | os.PathLike, embedder, *, rebuild: bool = False,
             exact_max_rows: int = EXACT_MAX_ROWS) -> "DenseIndex":
        """Open the index in ``folder`` for ``embedder`` (created empty if absent or ``rebuild``).
        Raises DenseIndexMismatch when it was built by another embedder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        want = cls.embedder_meta(embedder)
        meta_path = folder / "meta.json"
        if rebuild or not meta_path.is_file():
            for name in ("meta.json", "vectors.npy", "rows.npz", "videos.json", "hnsw.bin"):
                (folder / name).unlink(missing_ok=True)
            return cls(folder, dict(want, format=FORMAT), exact_max_rows)
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as e:
            raise StrivedError(f"dense index {folder} is unreadable ({e}); rebuild it") from None
        built = {k: meta.get(k) for k in want}
        if meta.get("format") != FORMAT or built != want:
            raise DenseIndexMismatch(str(folder), built, want)
        idx = cls(folder, meta, exact_max_rows)
        idx._load()
        return idx

    def _load(self) -> None:
        f = self.folder
        if not (f / "vectors.npy").is_file():
            return
        self.vectors = np.load(f / "vectors.npy")
        rows = np.load(f / "rows.npz")
        self.seg, self.t0, self.t1 = rows["seg"], rows["t0"], rows["t1"]
        self.alive, self.code = rows["alive"].astype(bool), rows["code"]
        v = json.loads((f / "videos.json").read_text())
        self.video_ids, self.stamps = v["ids"], v["stamps"]
        self._code_of = {vid: i for i, vid in enumerate(self.video_ids)}
        n_hnsw = int(self.meta.get("hnsw_rows", 0))
        if n_hnsw and (f / "hnsw.bin").is_file():
            import hnswlib

            g = hnswlib.Index(space="ip", dim=self.dim)
            g.load_index(str(f / "hnsw.bin"), max_elements=max(n_hnsw, len(self.alive)))
            self._hnsw, self._hnsw_rows = g, n_hnsw

    def save(self) -> None:
        """Write all files atomically (meta.json last). Compacts away dead rows first when they
        are more than a third of the rows."""
        if not self._dirty:
            return
        if len(self.alive) and (~self.alive).sum() * 3 > len(self.alive):
            self._compact()
        f = self.folder
        _atomic_write(f / "vectors.npy", lambda p: np.save(open(p, "wb"), self.vectors))
        _atomic_write(f / "rows.npz", lambda p: np.savez(open(p, "wb"), seg=self.seg, t0=self.t0,
                                                          t1=self.t1, alive=self.alive, code=self.code))
        _atomic_write(f / "videos.json", lambda p: p.write_text(json.dumps(
            {"ids": self.video_ids, "stamps": self.stamps})))
        if self._hnsw is not None:
            _atomic_write(f / "hnsw.bin", lambda p: self._hnsw.save_index(str(p)))
        self.meta.update(n_rows=int(len(self.alive)), n_alive=int(self.alive.sum()),
                         n_videos=len(self.stamps), hnsw_rows=int(self._hnsw_rows))
        _atomic_write(f / "meta.json", lambda p: p.write_text(json.dumps(self.meta, indent=1)))
        self._dirty = False

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
        vectors = np.asarray(vectors, np.float32)
        if vectors.shape != (len(segments), self.dim):
            raise ValueError(f"expected {len(segments)}×{self.dim} vectors, got {vectors.shape}")
        self.remove(video_id)
        code = self._code_of.get(video_id)
        if code is None:
            code = len(self.video_ids)
            self.video_ids.append(video_id)
            self._code_of[video_id] = code
        n = len(segments)
        self.vectors = np.concatenate([self.vectors, vectors])
        self.seg = np.concatenate([self.seg, np.array([s[0] for s in segments], np.int32)])
        self.t0 = np.concatenate([self.t0, np.array([s[1] for s in segments], np.float64)])
        self.t1 = np.concatenate([self.t1, np.array([s[2] for s in segments], np.float64)])
        self.alive = np.concatenate([self.alive, np.ones(n, bool)])
        self.code = np.concatenate([self.code, np.full(n, code, np.int32)])
        self.stamps[video_id] = stamp
        self._dirty = True

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
            self._hnsw, self._hnsw_rows = g, 0
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
        if use_exact or self._hnsw is None:
            sims = self.vectors @ q
            sims[~self.alive] = -np.inf
            if k < len(sims):
                part = np.argpartition(-sims, k - 1)[:k]
            else:
                part = np.arange(len(sims))
            order = part[np.lexsort((part, -sims[part]))]
            return order[sims[order] > -np.inf], sims[order][sims[order] > -np.inf]
        self._hnsw.set_ef(max(HNSW_EF_SEARCH_MIN, k))
        labels, dists = self._hnsw.knn_query(q[None, :], k=k)
        return labels[0].astype(np.int64), (1.0 - dists[0]).astype(np.float32)

    def search_videos(self, qvec: np.ndarray, top_k: int | None = None, exact: bool | None = None
                      ) -> list[tuple[str, float, tuple[float, float]]]:
        """[(video_id, max segment cosine, (t0_s, t1_s) of that segment)], best first, ties by id.
        ``top_k`` None = every indexed video (exact) or as many as HNSW returns for 2000 rows."""
        n_alive = int(self.alive.sum())
        if n_alive == 0:
            return []
        use_exact = (not self.uses_hnsw) if exact is None else exact
        if use_exact:
            return self._exact_videos(np.asarray(qvec, np.float32).reshape(-1), top_k)
        k = min(n_alive, max(2000, 20 * (top_k or 100)))
        rows, sims = self.search_segments(qvec, k, exact=False)
        codes = self.code[rows]
        # rows are sorted best-first, so a video's first occurrence is its best segment.
        _, first = np.unique(codes, return_index=True)
        out = [(self.video_ids[codes[i]], float(sims[i]), (float(self.t0[rows[i]]), float(self.t1[rows[i]])))
               for i in first]
        out.sort(key=lambda x: (-x[1], x[0]))
        return out[:top_k] if top_k is not None else out

    def _exact_videos(self, q: np.ndarray, top_k: int | None):
        sims = self.vectors @ q
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
        ids = [self.video_ids[c] for c in cand]
        order = sorted(range(len(cand)), key=lambda i: (-float(best[cand[i]]), ids[i]))
        if top_k is not None:
            order = order[:top_k]
        out = []
        for i in order:
            c, r = cand[i], best_row[cand[i]]
            out.append((ids[i], float(best[c]), (float(self.t0[r]), float(self.t1[r]))))
        return out
