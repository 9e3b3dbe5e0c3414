"""More like this: from a span of a video (and optionally one of its tracks), the most similar
moments across the library. What the CLI (`strived similar`) and the app call.

Two sources, fused by RRF (k = 60) like a search's: the shape of the signals over the span
(`strived.retrieval.similar`: the ego's speed, acceleration and yaw rate, and with a track that
track's distance, lateral offset and lane, compared with windows of the same length over every
track of the same class group, or every ego series) and the dense neighbours of the span's text
(the library's segment vectors over the span, averaged, against every other segment). No LLM,
nothing from the network. The grid the signals are resampled onto is computed once per content
version of the library and kept beside its column cache (``cache/similar-TAG``).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .engine import scorer_for
from .errors import StrivedError
from .jobs import CancelFn, ProgressFn, check_cancel, report
from .retrieval import similar as K
from .retrieval.fusion import RRF_K, weighted_rrf
from .retrieval.sources import library_embedder, open_dense_index


@dataclass
class SimilarMoment:
    rank: int
    video_id: str
    t0: float
    t1: float
    score: float
    track_id: int | None = None      # the matched track (None: the ego, or dense only)
    cls: str | None = None
    distance: float | None = None    # signal distance (mean |difference| / scale); None: not compared
    known_points: int | None = None  # values compared for that distance
    dense_cosine: float | None = None
    dense_span: tuple[float, float] | None = None
    per_source: dict[str, float] = field(default_factory=dict)   # source -> rank (1-based)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["dense_span"] = list(self.dense_span) if self.dense_span else None
        return d


@dataclass
class SimilarResponse:
    example: dict
    moments: list[SimilarMoment]
    used: dict
    notices: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"example": self.example, "moments": [m.to_dict() for m in self.moments],
                "used": self.used, "notices": self.notices, "timings_ms": self.timings_ms}


# ---------------------------------------------------------------------- the grid cache
_memo: dict[tuple, tuple] = {}
_memo_lock = threading.Lock()
_GRID_FILES = ("k0", "n", "x")


def _range(s, name: str, lo: int, hi: int) -> np.ndarray:
    f = s.files.get(name)
    if f is not None:
        return f.read(lo, hi)
    return np.asarray((s.t if name == "t" else s.values[name])[lo:hi])


def _build_grid(s, channels: tuple[str, ...], cancel: CancelFn, progress: ProgressFn, stage: str,
                chunk_samples: int = 2_000_000) -> K.Grid:
    """The grid of every unit of series ``s`` (chunks of whole units of ~``chunk_samples``)."""
    n_units = s.n
    ends = s.start + s.length
    parts_k0, parts_n, parts_x = [], [], []
    a = 0
    while a < n_units:
        b = max(a + 1, int(np.searchsorted(ends, s.start[a] + chunk_samples, side="right")))
        b = min(b, n_units)
        check_cancel(cancel)
        lo, hi = int(s.start[a]), int(ends[b - 1])
        t = _range(s, "t", lo, hi)
        vals = [_range(s, c, lo, hi) for c in channels]
        k0, n, x = K.grid_units(t, s.start[a:b] - lo, s.length[a:b], vals)
        parts_k0.append(k0)
        parts_n.append(n)
        parts_x.append(x)
        report(progress, stage, b, n_units)
        a = b
    if not parts_x:
        return K.Grid(np.zeros(0, np.int64), np.zeros(0, np.int64),
                      np.zeros((0, len(channels)), np.float32), channels)
    return K.Grid(np.concatenate(parts_k0), np.concatenate(parts_n), np.concatenate(parts_x), channels)


def _save_grids(cdir: Path, grids: dict[str, K.Grid]) -> None:
    tmp = cdir.with_name(f"{cdir.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for role, g in grids.items():
            for name in _GRID_FILES:
                np.save(tmp / f"{role}_{name}.npy", getattr(g, name))
        (tmp / "meta.json").write_text(json.dumps({"grid_s": K.GRID_S, "max_gap_s": K.MAX_GAP_S,
                                                   "channels": {r: list(g.channels) for r, g in grids.items()}}))
        if (cdir / "meta.json").exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return
        shutil.rmtree(cdir, ignore_errors=True)
        tmp.rename(cdir)
        for old in cdir.parent.glob("similar-*"):
            if old.name != cdir.name and ".tmp-" not in old.name:
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)   # a cache that cannot be written is only slower


def _load_grids(cdir: Path) -> dict[str, K.Grid] | None:
    try:
        meta = json.loads((cdir / "meta.json").read_text())
        if meta.get("grid_s") != K.GRID_S or meta.get("max_gap_s") != K.MAX_GAP_S:
            return None
        out = {}
        for role, chans in meta["channels"].items():
            arr = {n: np.load(cdir / f"{role}_{n}.npy", mmap_mode="r" if n == "x" else None) for n in _GRID_FILES}
            out[role] = K.Grid(arr["k0"], arr["n"], arr["x"], tuple(chans))
        return out
    except (OSError, ValueError, KeyError):
        return None


def _grids(cols, cancel: CancelFn, progress: ProgressFn) -> dict[str, K.Grid]:
    """{"ego": Grid, "tr": Grid} of a corpus: memory, the disk cache of its content version, or
    built (and written there)."""
    key = (str(cols.cache_dir), cols.cache_tag, id(cols) if cols.cache_tag is None else None)
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None and hit[0] is cols.tracks:
        return hit[1]
    cdir = Path(cols.cache_dir) / f"similar-{cols.cache_tag}" if cols.cache_tag else None
    grids = _load_grids(cdir) if cdir is not None and (cdir / "meta.json").exists() else None
    if grids is None:
        grids = {"ego": _build_grid(cols.ego, K.EGO_CHANNELS, cancel, progress, "similar: ego signals"),
                 "tr": _build_grid(cols.tracks, K.TRACK_CHANNELS, cancel, progress, "similar: track signals")}
        if cdir is not None:
            _save_grids(cdir, grids)
    with _memo_lock:
        _memo.clear()
        _memo[key] = (cols.tracks, grids)
    return grids


# ---------------------------------------------------------------------- the example
def _check_example(library, cols, video_id: str, t0: float, t1: float, track_id: int | None) -> dict:
    """Validate the example (clear messages); returns its video index, track unit and class."""
    if not (np.isfinite(t0) and np.isfinite(t1)):
        raise StrivedError(f"the span {t0}-{t1} s is not a pair of numbers")
    if video_id in cols.broken:
        raise StrivedError(f"video {video_id!r} has damaged rows ({cols.broken[video_id]}); "
                           "run `strived check` on the library")
    if video_id not in cols.vindex:
        raise StrivedError(f"no video {video_id!r} in the library")
    if t0 < 0 or t1 <= t0:
        raise StrivedError(f"the span {t0:g}-{t1:g} s is empty or reversed: give START-END with "
                           "0 <= START < END (seconds)")
    if t1 - t0 < K.MIN_SPAN_S:
        raise StrivedError(f"the span {t0:g}-{t1:g} s is shorter than {K.MIN_SPAN_S:g} s: too short "
                           "to have a shape to compare")
    vi = cols.vindex[video_id]
    e = cols.ego
    n = int(e.length[vi])
    last = float(_range(e, "t", int(e.start[vi]) + n - 1, int(e.start[vi]) + n)[0]) if n else 0.0
    if t0 >= last:
        raise StrivedError(f"the span {t0:g}-{t1:g} s starts after the end of video {video_id!r} "
                           f"({last:.1f} s)")
    out = {"video": vi, "unit": None, "cls": None, "duration_s": last}
    if track_id is not None:
        units = np.flatnonzero((cols.tracks.owner == vi) & (cols.track_ids == int(track_id)))
        if units.size == 0:
            raise StrivedError(f"video {video_id!r} has no track {track_id}")
        out["unit"] = int(units[0])
        out["cls"] = cols.cls_names[int(cols.track_cls[units[0]])]
    return out


# ---------------------------------------------------------------------- dense neighbours
def _dense(library, video_id: str, t0: float, t1: float, top: int) -> tuple[list, list, list, str | None]:
    """(video ids, cosines, segment spans) of the best segment of each other video for the mean
    vector of the example's segments over the span; the example's own segments are left out.
    Empty lists and a reason when the dense index cannot answer."""
    try:
        idx = open_dense_index(library, library_embedder(library))
    except Exception as e:  # noqa: BLE001  (any reason the index cannot be read: said, not raised)
        return [], [], [], f"dense index unavailable ({e})"
    if len(idx) == 0:
        return [], [], [], "the dense index is empty (index or import videos to build it)"
    code = idx._code_of.get(video_id)
    if code is None:
        return [], [], [], f"video {video_id!r} has no segments in the dense index"
    ov = np.minimum(idx.t1, t1) - np.maximum(idx.t0, t0)
    own = (idx.code == code) & idx.alive
    rows = np.flatnonzero(own & (ov > 0))
    if rows.size == 0:
        return [], [], [], "no text segment of the dense index covers the span"
    q = (np.asarray(idx.vectors[rows], np.float64) * ov[rows, None]).sum(axis=0)
    q = (q / max(np.linalg.norm(q), 1e-12)).astype(np.float32)
    k = min(int(idx.alive.sum()), max(2000, 20 * top))
    hits, sims = idx.search_segments(q, k)
    keep = ~(own[hits] & (ov[hits] > 0))
    hits, sims = hits[keep], sims[keep]
    codes = idx.code[hits]
    _, first = np.unique(codes, return_index=True)
    first = np.sort(first)                      # best first: hits are ordered by cosine
    ids = [idx.video_ids[c] for c in codes[first].tolist()]
    spans = list(zip(idx.t0[hits[first]].astype(float).tolist(), idx.t1[hits[first]].astype(float).tolist()))
    return ids, sims[first].astype(float).tolist(), spans, None


# ---------------------------------------------------------------------- the call
def more_like_this(library, video_id: str, t0: float, t1: float, track_id: int | None = None, *,
                   top_k: int = 20, sources=("signals", "dense"), columns=None,
                   progress: ProgressFn = None, cancel: CancelFn = None) -> SimilarResponse:
    """The moments of the library most like [t0, t1] s of ``video_id`` (and its track
    ``track_id``), best first, one per video, the example's own span left out. ``sources``: a
    subset of ("signals", "dense"). ``columns``: the library's `TrackColumns` when the caller has
    them (else `engine.scorer_for(library).columns`). Raises StrivedError for an unknown video or
    track, a bad span, or a span with too few known values to compare."""
    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    notices: list[str] = []
    bad = [s for s in sources if s not in ("signals", "dense")]
    if bad or not sources:
        raise StrivedError(f"unknown source(s) {bad}; valid: signals, dense")
    cols = columns if columns is not None else scorer_for(library).columns
    ex = _check_example(library, cols, video_id, float(t0), float(t1), track_id)
    k0, p, q = K.span_points(float(t0), float(t1))
    example = {"video_id": video_id, "t0": float(t0), "t1": float(t1), "track_id": track_id,
               "cls": ex["cls"], "compared_span": [round(k0 * K.GRID_S, 3), round((k0 + (p - 1) * q) * K.GRID_S, 3)],
               "points": p, "point_step_s": round(q * K.GRID_S, 3)}
    rankings: dict[str, list[str]] = {}
    scores: dict[str, list[float]] = {}
    used: dict = {"sources": [], "grid_s": K.GRID_S, "scales": {}, "signals": [], "windows": 0,
                  "windows_compared": 0, "units": 0, "dense": None}
    sig_of: dict[str, dict] = {}
    if "signals" in sources:
        t = time.perf_counter()
        report(progress, "similar: signals", 0, 1)
        grids = _grids(cols, cancel, progress)
        timings["grid"] = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        res = _signal_ranking(cols, grids, ex, k0, p, q, (ex["video"], float(t0), float(t1)), cancel, used)
        timings["signals"] = (time.perf_counter() - t) * 1e3
        if res is not None:
            ids = [cols.video_ids[v] for v in res["video"].tolist()]
            rankings["signals"], scores["signals"] = ids, (-res["dist"]).tolist()
            used["sources"].append("signals")
            for i, vid in enumerate(ids):
                u = int(res["unit"][i])
                sig_of[vid] = {"k": int(res["k"][i]), "dist": float(res["dist"][i]), "known": int(res["known"][i]),
                               "track_id": int(cols.track_ids[u]) if ex["unit"] is not None else None,
                               "cls": cols.cls_names[int(cols.track_cls[u])] if ex["unit"] is not None else None}
        else:
            notices.append("the span has too few known signal values to compare shapes: dense only")
    dense_of: dict[str, tuple[float, tuple]] = {}
    if "dense" in sources:
        t = time.perf_counter()
        check_cancel(cancel)
        ids, sims, spans, why = _dense(library, video_id, float(t0), float(t1), top_k)
        timings["dense"] = (time.perf_counter() - t) * 1e3
        used["dense"] = {"available": why is None, "reason": why, "videos": len(ids)}
        if why:
            notices.append(why)
        else:
            rankings["dense"], scores["dense"] = ids, sims
            used["sources"].append("dense")
            dense_of = {v: (s, sp) for v, s, sp in zip(ids, sims, spans)}
    if not rankings:
        raise StrivedError(f"nothing to compare over {t0:g}-{t1:g} s of {video_id!r}: "
                           + "; ".join(notices or ["no source could run"]))
    fused = weighted_rrf(rankings, None, RRF_K, top_k=top_k, scores=scores)
    moments = _moments(fused, rankings, dense_of, sig_of, (p - 1) * q * K.GRID_S)
    timings["total"] = (time.perf_counter() - t_all) * 1e3
    report(progress, "similar: done", 1, 1)
    return SimilarResponse(example=example, moments=moments, used=used, notices=notices, timings_ms=timings)


def _moments(fused, rankings: dict[str, list[str]], dense_of: dict, sig_of: dict, step: float) -> list[SimilarMoment]:
    """The fused videos as moments: each source's rank, the dense span and cosine, and the signal
    window (``step`` s long) with its distance and track, which sets the moment's span when known."""
    pos = {s: {v: i for i, v in enumerate(r)} for s, r in rankings.items()}
    moments = []
    for rank, (vid, score) in enumerate(fused, 1):
        m = SimilarMoment(rank=rank, video_id=vid, t0=0.0, t1=0.0, score=float(score))
        m.per_source = {s: pos[s][vid] + 1 for s in rankings if vid in pos[s]}
        if vid in dense_of:
            m.dense_cosine, m.dense_span = float(dense_of[vid][0]), tuple(dense_of[vid][1])
            m.t0, m.t1 = m.dense_span
        s = sig_of.get(vid)
        if s is not None:
            m.t0 = round(max(0.0, s["k"] * K.GRID_S), 3)
            m.t1 = round(s["k"] * K.GRID_S + step, 3)
            m.distance, m.known_points = round(s["dist"], 4), s["known"]
            m.track_id, m.cls = s["track_id"], s["cls"]
        moments.append(m)
    return moments


def _signal_ranking(cols, grids: dict, ex: dict, k0: int, p: int, q: int, exclude, cancel: CancelFn,
                    used: dict) -> dict | None:
    """`best_windows` of the example's signature over the candidates of its role (fills ``used``);
    None when the signature has too few known values."""
    if ex["unit"] is None:
        grid, ego, unit = grids["ego"], None, ex["video"]
        units = np.arange(cols.n_videos, dtype=np.int64)
        owner = units
    else:
        grid, ego, unit = grids["tr"], grids["ego"], ex["unit"]
        group = K.class_group(ex["cls"])
        codes = [i for i, c in enumerate(cols.cls_names) if c in group]
        units = np.flatnonzero(np.isin(cols.track_cls, codes)).astype(np.int64)
        owner = cols.tracks.owner[units].astype(np.int64)
        used["class_group"] = sorted(group)
    sig = K.signature(grid, unit, ego, ex["video"], k0, p, q)
    chans = grid.channels + (ego.channels if ego is not None else ())
    known = np.isfinite(sig).sum(axis=0)
    for c in np.flatnonzero(known < 2):      # a channel known at fewer than 2 points has no shape
        sig[:, c] = np.nan
    used["signals"] = [c for c, n in zip(chans, known) if n >= 2]
    used["unknown_signals"] = [c for c, n in zip(chans, known) if n < 2]
    used["scales"] = {c: K.SCALES[c] for c in used["signals"]}
    if int(np.isfinite(sig).sum()) < 3:
        return None
    res = K.best_windows(grid, units, owner, sig, q, ego=ego, exclude=exclude, cancel=cancel)
    used.update(windows=res["windows"], windows_compared=res["compared"], units=int(len(units)),
                min_known_points=res["need"], signature_known_points=int(np.isfinite(sig).sum()))
    return res
