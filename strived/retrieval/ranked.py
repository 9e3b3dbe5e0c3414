"""A source's ranking as arrays, and the library's video ids as integer codes (issue 13).

`engine.search` fuses rankings that cover every video of the library; held as lists of ids and
dicts keyed by id, each query pays Python work per video (~1 µs a video and source: 100 ms at
100,000 videos). Here a ranking is its ids (the list the response shows), its scores (float64,
best first) and each id's *code*: its position in the library's sorted id list, so the fusion,
the ranks and the tie-breaks are numpy operations over codes. `IdSpace` maps a source's own id
list (the dense index's, the BM25 index's, the rule scorer's) to codes once per list and library
state, not per query.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np


@dataclass
class Ranked:
    """One source's ranking, best first: ``ids`` and their ``scores`` (float64); ``space`` is the
    id list that ``index`` points into (``ids[i] == space[index[i]]``), which lets `IdSpace` map
    it to codes through a mapping cached per list. ``rows`` and ``peaks``: per-video extras
    (the dense source's best segment row, the rule's peak track)."""
    ids: list[str]
    scores: np.ndarray
    space: Sequence[str] | None = None
    index: np.ndarray | None = None
    rows: np.ndarray | None = None
    peaks: np.ndarray | None = None
    spans: Any = None                     # dense: (t0 array, t1 array) indexed by ``rows``
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def span_at(self, i: int) -> tuple[float, float] | None:
        """The span of the ``i``-th ranked video (the dense source's best segment), or None."""
        if self.spans is not None and self.rows is not None:
            r = int(self.rows[i])
            return (float(self.spans[0][r]), float(self.spans[1][r]))
        spans = self.extra.get("spans")
        return spans[i] if spans else None


# the id lists whose code mapping is remembered per library state (the dense, BM25 and rule
# scorer lists of the current state, plus a few left over from the previous one)
_MAPS_KEPT = 8


class IdSpace:
    """The library's video ids, sorted (code = position), for one content version."""

    def __init__(self, ids: list[str]):
        self.ids = ids
        self.code_of = {v: i for i, v in enumerate(ids)}
        self._maps: dict[int, tuple[Sequence[str], int, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def map_list(self, seq: Sequence[str]) -> np.ndarray:
        """Code of each id of ``seq`` (-1 for an id the library does not hold), cached for this
        list object while its length is unchanged (the indexes only append to their id lists)."""
        if seq is self.ids:
            return np.arange(len(seq), dtype=np.int64)
        hit = self._maps.get(id(seq))
        if hit is not None and hit[0] is seq and hit[1] == len(seq):
            return hit[2]
        if isinstance(seq, list) and seq == self.ids:
            # the same ids in the same order (the indexes list a library's videos sorted, as it
            # holds them): codes are positions, found by one list comparison at C speed, not a
            # lookup per video (~0.2 s of a first search at 100,000 videos)
            m = np.arange(len(seq), dtype=np.int64)
        else:
            get = self.code_of.get
            m = np.fromiter((get(v, -1) for v in seq), dtype=np.int64, count=len(seq))
        self._maps[id(seq)] = (seq, len(seq), m)   # holds ``seq``: its id cannot be reused
        while len(self._maps) > _MAPS_KEPT:
            self._maps.pop(next(iter(self._maps)))
        return m

    def codes(self, r: Ranked, extra: dict[str, int]) -> np.ndarray:
        """Codes of a ranking's ids; an id outside the library (an index that lags behind it)
        gets a code past the library's, numbered in ``extra`` (shared by one query's sources)."""
        if r.space is not None and r.index is not None:
            c = self.map_list(r.space)[r.index]
        else:
            get = self.code_of.get
            c = np.fromiter((get(v, -1) for v in r.ids), dtype=np.int64, count=len(r.ids))
        return self._fill(c, r.ids, extra)

    def codes_of_ids(self, ids: Sequence[str], extra: dict[str, int]) -> np.ndarray:
        get = self.code_of.get
        c = np.fromiter((get(v, -1) for v in ids), dtype=np.int64, count=len(ids))
        return self._fill(c, ids, extra)

    def _fill(self, c: np.ndarray, ids: Sequence[str], extra: dict[str, int]) -> np.ndarray:
        missing = np.flatnonzero(c < 0)
        if missing.size:
            c = c.copy()
            for i in missing.tolist():
                c[i] = extra.setdefault(ids[i], len(self.ids) + len(extra))
        return c


def per_content_version(cache: "weakref.WeakKeyDictionary", library, build):
    """``build()`` for ``library``, kept in ``cache`` (weak by library) until the library's content
    version changes."""
    ver = library.content_version
    cached = cache.get(library)
    if cached is None or cached[0] != ver:
        cached = (ver, build())
        cache[library] = cached
    return cached[1]


_spaces: "weakref.WeakKeyDictionary[Any, tuple[int, IdSpace]]" = weakref.WeakKeyDictionary()


def id_space(library) -> IdSpace:
    """The library's `IdSpace`, rebuilt when its content changes."""
    # Python's sort order of the ids = the order ties break in
    return per_content_version(_spaces, library, lambda: IdSpace(sorted(library.video_ids())))
