"""Sparse retrieval: BM25 over one summary text per video.

Scoring is Lucene's BM25 (Robertson & Zaragoza 2009, with Lucene's always-positive idf
``log(1 + (N - n + 0.5) / (n + 0.5))``, k1 = 1.5, b = 0.75). Okapi's idf goes negative for a term in
more than half the documents, which in generated summaries ("car" is in most) would push matching
videos *down*; Lucene's does not.

Two backends compute the same ranking: ``bm25s`` (default, chosen by measurement: see
benchmarks/bench_retrieval.py and docs/retrieval.md) and ``rank_bm25`` (BM25Okapi with the idf
replaced by Lucene's; kept as the test oracle). Scores differ by the constant factor (k1 + 1) that
Lucene drops, which changes no ranking.

A bm25s index can be saved to one ``.npz`` file (`BM25Index.save`, written whole then renamed into
place) and loaded by a new process (`BM25Index.load`) instead of tokenising and indexing every
summary again; the file carries the key it was built for (the caller's description of the texts)
and zip's CRC-32 of every member, so a stale file is refused and a damaged one is reported
(`BM25IndexDamaged`), never used. A loaded index scores queries with bm25s' own arithmetic over
the saved arrays (`_SavedLucene`) without importing bm25s.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .tokenize import tokenize

BACKENDS = ("bm25s", "rank_bm25")
DEFAULT_BACKEND = "bm25s"
K1 = 1.5
B = 0.75


#: version of the saved file's layout
FILE_FORMAT = 1


class BM25IndexDamaged(Exception):
    """A saved BM25 index file that cannot be read whole (truncated, corrupted, inconsistent)."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


def _bm25s_version() -> str:
    try:
        from importlib.metadata import version

        return version("bm25s")
    except Exception:  # noqa: BLE001
        return "unknown"


class BM25Index:
    """An in-memory BM25 index over ``(doc_ids, texts)``; `search` returns ``[(doc_id, score)]``
    sorted by score descending, ties by id, only documents sharing a token with the query."""

    def __init__(self, doc_ids: Sequence[str], texts: Sequence[str], backend: str = DEFAULT_BACKEND):
        if backend not in BACKENDS:
            raise ValueError(f"unknown BM25 backend {backend!r}; valid: {', '.join(BACKENDS)}")
        if len(doc_ids) != len(texts):
            raise ValueError("doc_ids and texts differ in length")
        self.backend = backend
        self.doc_ids = list(doc_ids)
        # Rank of each id in sorted order: a numeric tie-break key (no string work per query).
        self._id_rank = np.empty(len(self.doc_ids), np.int64)
        self._id_rank[np.argsort(np.asarray(self.doc_ids, dtype=object), kind="stable")] = \
            np.arange(len(self.doc_ids))
        corpus = [tokenize(t) for t in texts]
        self._empty = len(corpus) == 0
        if self._empty:
            self._impl = None
        elif backend == "bm25s":
            import bm25s

            # Empty documents would be dropped from bm25s' matrix shape; a sentinel keeps alignment.
            corpus = [toks or ["\x00empty"] for toks in corpus]
            self._impl = bm25s.BM25(method="lucene", k1=K1, b=B)
            self._impl.index(corpus, show_progress=False)
        else:
            self._impl = _LuceneOkapi([toks or ["\x00empty"] for toks in corpus], k1=K1, b=B)

    def __len__(self) -> int:
        return len(self.doc_ids)

    # ------------------------------------------------------------------ saved file
    def _file_meta(self, key) -> dict:
        return {"format": FILE_FORMAT, "backend": self.backend, "k1": K1, "b": B,
                "bm25s": _bm25s_version(), "key": key}

    def save(self, path: str | os.PathLike, key) -> None:
        """Write the index to ``path`` (one .npz: a temporary file of this process and thread,
        then one rename). ``key`` (JSON) describes the texts it was built from; `load` refuses
        the file for any other key. Only the bm25s backend is saved. Raises OSError."""
        if self.backend != "bm25s":
            raise ValueError("only the bm25s backend is saved")
        path = Path(path)
        meta = dict(self._file_meta(key), n_docs=len(self.doc_ids), doc_ids=self.doc_ids,
                    empty=self._empty)
        arrays = {"id_rank": self._id_rank}
        if not self._empty:
            sc = self._impl.scores
            meta["num_docs"] = int(sc["num_docs"])
            meta["vocab"] = self._impl.vocab_dict
            arrays.update(data=np.asarray(sc["data"]), indices=np.asarray(sc["indices"]),
                          indptr=np.asarray(sc["indptr"]))
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
        tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
            os.replace(tmp, path)
        finally:
            try:
                tmp.unlink()
            except OSError:
                pass

    @classmethod
    def load(cls, path: str | os.PathLike, key) -> "BM25Index | None":
        """The index saved at ``path`` for ``key``; None when there is none, or it was saved for
        other texts, parameters or another bm25s version (stale: the caller rebuilds it). Raises
        BM25IndexDamaged when the file is there but cannot be read whole."""
        import zipfile

        path = Path(path)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode("utf-8"))
                probe = cls.__new__(cls)
                probe.backend = meta.get("backend")
                if {k: meta.get(k) for k in ("format", "backend", "k1", "b", "bm25s", "key")} != \
                        json.loads(json.dumps(probe._file_meta(key))):
                    return None
                arrays = {k: z[k] for k in z.files if k != "meta"}
        except FileNotFoundError:        # removed meanwhile
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as e:
            raise BM25IndexDamaged(path, f"{type(e).__name__}: {e}") from None
        try:
            out = cls._from_saved(meta, arrays)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise BM25IndexDamaged(path, f"inconsistent contents ({type(e).__name__}: {e})") from None
        return out

    @classmethod
    def _from_saved(cls, meta: dict, arrays: dict) -> "BM25Index":
        ids = meta["doc_ids"]
        n = int(meta["n_docs"])
        rank = arrays["id_rank"]
        if not isinstance(ids, list) or len(ids) != n or rank.shape != (n,) or rank.dtype != np.int64:
            raise ValueError(f"{n} documents, {len(ids)} ids, id ranks of shape {rank.shape}")
        if n and not np.array_equal(np.sort(rank), np.arange(n)):
            raise ValueError("the id ranks are not a permutation")
        self = cls.__new__(cls)
        self.backend, self.doc_ids, self._id_rank = "bm25s", list(ids), rank
        self._empty = bool(meta["empty"])
        if self._empty:
            if n:
                raise ValueError("an empty index with documents")
            self._impl = None
            return self
        data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
        vocab = {str(k): int(v) for k, v in meta["vocab"].items()}
        num_docs = int(meta["num_docs"])
        if (data.ndim != 1 or data.dtype != np.float32 or indices.shape != data.shape
                or indices.dtype != np.int32 or indptr.dtype != np.int64 or indptr.ndim != 1
                or num_docs != n or not 1 <= len(indptr) - 1 <= len(vocab) or int(indptr[0]) != 0
                or int(indptr[-1]) != data.size or np.any(np.diff(indptr) < 0)
                or (indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n))
                or sorted(vocab.values()) != list(range(len(vocab)))
                # only bm25s' empty-token entry may lie past the matrix's columns
                or any(v >= len(indptr) - 1 for t, v in vocab.items() if t != "")):
            raise ValueError("the score matrix does not fit the vocabulary and documents")
        self._impl = _SavedLucene(data, indices, indptr, num_docs, vocab)
        return self

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float32, aligned with ``doc_ids``)."""
        toks = tokenize(query)
        if self._empty or not toks:
            return np.zeros(len(self.doc_ids), np.float32)
        if self.backend == "bm25s":
            return np.asarray(self._impl.get_scores(toks), dtype=np.float32)
        return np.asarray(self._impl.get_scores(toks), dtype=np.float32)

    def search(self, query: str, top_k: int | None = None) -> list[tuple[str, float]]:
        order, sc = self.rank(query, top_k)
        ids = getattr(self, "_ids_arr", None)
        if ids is None:
            ids = self._ids_arr = np.asarray(self.doc_ids, dtype=object)
        return list(zip(ids[order].tolist(), sc.tolist()))

    def rank(self, query: str, top_k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`search` as arrays: (document indices into ``doc_ids``, scores as float64)."""
        s = self.scores(query)
        hit = np.flatnonzero(s > 0)
        if hit.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        if top_k is not None and top_k < hit.size:
            # Keep every document scoring at least the k-th score (ties at the cut stay in).
            kth = np.partition(s[hit], hit.size - top_k)[hit.size - top_k]
            hit = hit[s[hit] >= kth]
        # Score descending, then id ascending (deterministic ties).
        order = hit[np.lexsort((self._id_rank[hit], -s[hit]))]
        if top_k is not None:
            order = order[:top_k]
        return order, s[order].astype(np.float64)


class _SavedLucene:
    """The scorer of a loaded index: bm25s' own query scoring (``BM25.get_scores`` of the
    lucene method: the query's in-vocabulary token ids in order, each adding its column of the
    saved score matrix with ``np.add.at`` into float32 zeros) over the saved arrays, the same
    operations in the same order, so the same floats, without importing bm25s (and scipy:
    ~0.4 s of a new process's first search). Has the attributes `BM25Index.save` reads."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_docs: int,
                 vocab: dict[str, int]):
        self.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": num_docs}
        self.vocab_dict = vocab

    def get_scores(self, toks: list[str]) -> np.ndarray:
        sc = self.scores
        indptr = sc["indptr"]
        ids = np.asarray([self.vocab_dict[t] for t in toks if t in self.vocab_dict], dtype=np.int32)
        if int(ids.max(initial=0)) >= len(indptr) - 1:
            raise ValueError(f"The maximum token ID in the query ({int(ids.max())}) is higher than the "
                             "number of tokens in the index.")
        out = np.zeros(int(sc["num_docs"]), np.float32)
        for a, b in zip(indptr[ids], indptr[ids + 1]):
            np.add.at(out, sc["indices"][a:b], sc["data"][a:b])
        return out


class _LuceneOkapi:
    """rank_bm25's BM25Okapi with Lucene's idf (the oracle for the bm25s backend)."""

    def __init__(self, corpus: list[list[str]], k1: float, b: float):
        from rank_bm25 import BM25Okapi

        class _Impl(BM25Okapi):
            def _calc_idf(self, nd):
                self.idf = {w: math.log(1.0 + (self.corpus_size - n + 0.5) / (n + 0.5))
                            for w, n in nd.items()}

        self._bm = _Impl(corpus, k1=k1, b=b)

    def get_scores(self, toks: list[str]) -> np.ndarray:
        return self._bm.get_scores(toks)
