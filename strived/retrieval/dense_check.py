"""Checks of the dense index's contents before a search uses them (issue 37).

A checksum proves a file is as it was saved, not that what was saved is sound: one vector with a
flipped exponent (values of 1e35) gave a video a "cosine" of 1.8e35, ranked first for every
query, and an HNSW graph whose neighbour ids run past its element count made hnswlib read outside
its buffers (a segfault: no Python error to catch). So:

* `bad_vector_rows`: rows whose norm is not finite or not 1 (every embedder L2-normalises) are
  left out of the ranking, with the video named; the next indexing re-embeds them.
* `hnsw_graph_problem`: the graph file is parsed against hnswlib's documented layout
  (``hnswalg.h`` ``saveIndex``: a fixed header, the level-0 block of ``size_data_per_element``
  bytes per element, then each element's upper-level link lists) and every neighbour id, link
  count, level, label and the entry point is checked before hnswlib loads it. Parsing is one
  array pass over level 0 plus a walk of the (few) upper levels: cheaper and more exact than
  probing in a subprocess (a bad id need not crash there), and far cheaper than rebuilding the
  graph from the vectors on every open. A graph that fails is not loaded: search is exact over
  the vectors until the next indexing rebuilds the graph from them (they are the source of truth).

Both are paid once per state of the file: the answer is kept in the generation's ``contents.json``
under the file's stat and checksum (`cached`).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..errors import StrivedError


class DenseIndexCorrupt(StrivedError):
    """The dense index on disk is damaged or its files do not belong together."""

    def __init__(self, folder: str, reason: str):
        self.folder, self.reason = folder, reason
        super().__init__(f"the dense index in {folder} is damaged ({reason}); it is rebuilt from "
                         "the library by the next indexing or import (or `strived check --repair`)")

#: a stored vector's norm may differ from 1 by this much (float32 rounding is ~1e-7)
NORM_TOL = 1e-3
_CHUNK_ROWS = 65_536
_HEADER = struct.Struct("<QQQQQQiIQQQdQ")   # hnswlib 0.8 saveIndex header (96 bytes)


def bad_vector_rows(vectors: np.ndarray, rows=None) -> list[int]:
    """Row numbers (of ``rows``, default all) whose norm is not finite or not within `NORM_TOL`
    of 1, read in chunks (a memory-mapped file is not held in memory at once)."""
    n = len(vectors)
    bad: list[int] = []
    for a in range(0, n, _CHUNK_ROWS):
        with np.errstate(over="ignore", invalid="ignore"):
            v = np.asarray(vectors[a:a + _CHUNK_ROWS], np.float64)
            norm = np.sqrt(np.einsum("ij,ij->i", v, v))
        off = ~(np.abs(norm - 1.0) <= NORM_TOL)          # NaN and inf included
        bad.extend((a + np.flatnonzero(off)).tolist())
    return bad


def check_query_vector(q: np.ndarray) -> None:
    """A query vector must be a unit vector like the rows (else every similarity is off)."""

    with np.errstate(over="ignore", invalid="ignore"):
        q64 = np.asarray(q, np.float64)
        norm = float(np.sqrt(q64 @ q64))
    if not abs(norm - 1.0) <= NORM_TOL:
        raise StrivedError(f"the embedder gave the query a vector of norm {norm:.3g}, not 1: it is "
                           "broken or not the one that built the index")


def drop_bad_rows(index, rows) -> list[str]:
    """Leave ``index``'s rows with unusable vectors out of its ranking, naming their videos in
    ``index.bad_videos``. Returns those videos."""
    rows = [int(r) for r in rows if 0 <= int(r) < len(index.alive) and index.alive[int(r)]]
    if rows:
        index.alive = index.alive.copy()
        index.alive[rows] = False
    for r in rows:
        index.bad_videos.setdefault(index.video_ids[int(index.code[r])], vector_reason(index.vectors[r]))
    return sorted({index.video_ids[int(index.code[r])] for r in rows})


def load_graph(index, n_hnsw: int) -> None:
    """Load ``index``'s saved HNSW graph once `hnsw_graph_problem` passed it; a graph that fails
    is left out (``index.graph_problem``; search is exact) and rebuilt from the vectors by the next
    update. Raises DenseIndexCorrupt when hnswlib cannot read a sound-looking file."""
    path = index._file("hnsw.bin")
    if not path.is_file():    # the graph is an accelerator: rebuilt from the vectors when missing
        index._hnsw, index._hnsw_rows = None, 0
        index._sync_hnsw()
        return
    why = cached(index, "hnsw.bin", "graph", lambda: hnsw_graph_problem(path, n_hnsw, len(index.alive), index.dim))
    if why:
        index.graph_problem, index._hnsw, index._hnsw_rows = why, None, 0
        return
    import hnswlib

    g = hnswlib.Index(space="ip", dim=index.dim)
    try:
        g.load_index(str(path), max_elements=max(n_hnsw, len(index.alive)))
    except (RuntimeError, OSError, ValueError) as e:
        raise DenseIndexCorrupt(str(index.folder), f"hnsw.bin is unreadable ({e})") from None
    index._hnsw, index._hnsw_rows = g, n_hnsw


def prime_checks(index) -> None:
    """Work out now, at index time, the checks a new process makes when it opens ``index``'s
    saved generation (`cached`: the norms of every stored vector, the soundness of the HNSW
    graph), so that a new process's first search reads their answers instead (at 100,000 videos
    that open otherwise reads the 768 MB of vectors and walks the 842 MB graph). Reads the files
    as saved, as an open does; best effort, like `cached`."""
    files = index.meta.get("files") or {}
    if index.meta.get("legacy") or not isinstance(index.meta.get("generation"), str):
        return
    if "vectors.npy" in files:
        cached(index, "vectors.npy", "bad_rows", lambda: bad_vector_rows(
            np.load(index._file("vectors.npy"), allow_pickle=False, mmap_mode="r")))
    n_hnsw = int(index.meta.get("hnsw_rows") or 0)
    if n_hnsw and "hnsw.bin" in files:
        cached(index, "hnsw.bin", "graph", lambda: hnsw_graph_problem(index._file("hnsw.bin"), n_hnsw,
                                                                      len(index.alive), index.dim))


def vector_reason(vec: np.ndarray) -> str:
    """Why one stored vector is unusable, in words."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.asarray(vec, np.float64)
        norm = float(np.sqrt(v @ v))
    if not np.isfinite(v).all():
        return "its vector holds NaN or infinite values"
    if norm == 0:
        return "its vector is all zeros"
    return f"its vector has norm {norm:.3g}, not 1 (a damaged value?)"


def hnsw_graph_problem(path: str | Path, n_elements: int, n_rows: int, dim: int) -> str | None:
    """Why the hnswlib graph file at ``path`` cannot be used for an index of ``n_rows`` rows of
    ``dim`` floats whose first ``n_elements`` are in the graph, or None when it is sound."""
    try:
        data = np.fromfile(path, np.uint8)
    except OSError as e:
        return f"cannot read it ({e.strerror or e})"
    if data.size < _HEADER.size:
        return f"it has {data.size} bytes, less than its header"
    (off0, max_el, cur, size_el, label_off, data_off, maxlevel, enter, max_m, max_m0, m, _mult,
     _efc) = _HEADER.unpack_from(data, 0)
    want_data_off = 4 + 4 * max_m0
    if (off0 != 0 or not 0 < max_m0 < 65536 or not 0 < max_m < 65536 or data_off != want_data_off
            or label_off != data_off + 4 * dim or size_el != label_off + 8):
        return "its header does not describe a graph of this index's vectors"
    if cur != n_elements or cur > max_el:
        return f"it holds {cur} elements, the index {n_elements}"
    end0 = _HEADER.size + cur * size_el
    if data.size < end0:
        return "it is cut short"
    if cur == 0:
        return None
    if not 0 <= enter < cur or not 0 <= maxlevel < 64:
        return f"its entry point {enter} (level {maxlevel}) is not an element"
    lvl0 = data[_HEADER.size:end0].view(np.uint32).reshape(cur, size_el // 4)
    why = _links_problem(lvl0[:, :1 + max_m0], max_m0, cur, "level 0")
    if why:
        return why
    labels = lvl0[:, label_off // 4:label_off // 4 + 2].copy().view(np.uint64).reshape(-1)
    if int(labels.max()) >= n_rows or np.unique(labels).size != cur:
        return "its labels are not the index's row numbers"
    levels, upper, why = _upper_levels(data, end0, cur, max_m)
    if why:
        return why
    if int(levels.max()) != maxlevel or levels[enter] != maxlevel:
        return "its entry point is not on its top level"
    for lvl, links in upper:               # a neighbour on level l must itself reach level l
        why = _links_problem(links, max_m, cur, f"level {lvl}")
        if why:
            return why
        counts = links[:, 0] & 0xFFFF
        ids = links[:, 1:][np.arange(max_m)[None, :] < counts[:, None]]
        if ids.size and int(levels[ids].min()) < lvl:
            return f"a link on level {lvl} leads to an element below that level"
    return None


def _links_problem(links: np.ndarray, max_links: int, cur: int, where: str) -> str | None:
    counts = links[:, 0] & 0xFFFF
    if int(counts.max(initial=0)) > max_links:
        return f"a link list on {where} claims {int(counts.max())} links, at most {max_links} fit"
    ids = links[:, 1:1 + max_links][np.arange(max_links)[None, :] < counts[:, None]]
    if ids.size and int(ids.max()) >= cur:
        return f"a neighbour id on {where} is {int(ids.max())}, past its {cur} elements"
    return None


def _upper_levels(data: np.ndarray, pos: int, cur: int, max_m: int):
    """(level of each element, [(level, link lists of that level)], problem) of the upper-level
    block that follows level 0."""
    per_level = 4 * (max_m + 1)
    levels = np.zeros(cur, np.int64)
    chunks: dict[int, list] = {}
    buf = memoryview(data)
    size = len(data)
    unpack = struct.Struct("<I").unpack_from
    for i in range(cur):
        if pos + 4 > size:
            return levels, [], "it is cut short in its upper levels"
        (n,) = unpack(buf, pos)
        pos += 4
        if n:
            if n % per_level or pos + n > size:
                return levels, [], f"element {i} has a link block of {n} bytes"
            k = n // per_level
            levels[i] = k
            block = data[pos:pos + n].view(np.uint32).reshape(k, max_m + 1)
            for lvl in range(1, k + 1):
                chunks.setdefault(lvl, []).append(block[lvl - 1])
            pos += n
    if pos != size:
        return levels, [], f"it has {size - pos} bytes past its last element"
    return levels, [(lvl, np.stack(c)) for lvl, c in sorted(chunks.items())], None


CONTENTS = "contents.json"   # in a generation folder: these checks' answers, per file state


def cached(index, name: str, tag: str, compute):
    """``compute()`` once per state of the generation file ``name`` of ``index``: the answer is
    kept in the generation's `CONTENTS` under the file's stat and checksum (as ``verified.json``
    keeps the checksums' stamps) and reused while they are the same. Best effort: a read-only
    library computes it on every open."""
    import json
    import os

    gen, info = index.meta.get("generation"), (index.meta.get("files") or {}).get(name)
    if index.meta.get("legacy") or not isinstance(gen, str) or not isinstance(info, dict):
        return compute()
    gdir = index.folder / gen
    try:
        st = (gdir / name).stat()
    except OSError:
        return compute()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, info.get("blake2b")]
    try:
        got = json.loads((gdir / CONTENTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        got = {}
    if not isinstance(got, dict):
        got = {}
    hit = got.get(f"{name}#{tag}")
    if isinstance(hit, list) and len(hit) == 2 and hit[0] == stamp:
        return hit[1]
    out = compute()
    got[f"{name}#{tag}"] = [stamp, out]
    tmp = gdir / f"{CONTENTS}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(got), encoding="utf-8")
        os.replace(tmp, gdir / CONTENTS)
    except OSError:          # read-only (EROFS even for the unlink of nothing), full disk
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    return out
