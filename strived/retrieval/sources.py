"""The dense and sparse sources and the router, as plain functions for the engine facade.

    ensure_text_index(library)                  # once after indexing/importing (incremental)
    route(query, llm=None)                       # RouterResult(weights, source, notice, reasoning)
    bm25_ranking(library, query)                 # [(video_id, score)]
    dense_ranking(library, query)                # [(video_id, score, (t0_s, t1_s))]

Rankings are best-first with ties broken by video id. BM25 lists only videos sharing a word with
the query; dense lists every indexed video (exact search) or the HNSW neighbourhood (large
libraries). Both work on records-only libraries: their texts come from the records.
In-memory indexes are cached per process and keyed on the library's text/dense state, so a
repeated query costs only the search itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..errors import SourceUnavailable, StrivedError
from ..jobs import CancelFn, ProgressFn, check_cancel, report
from .dense import DenseIndex, DenseIndexCorrupt, index_stamp
from . import tokenize as tok
from .dense_check import prime_checks
from .embedders import EmbedderError, HFVisionLanguageEmbedder, MiniLMTextEmbedder
from .ranked import Ranked
from .router import RouterResult, route  # noqa: F401  (re-exported for the engine)
from .sparse import DEFAULT_BACKEND, BM25Index, BM25IndexDamaged
from .summaries import build_texts, load_summaries, texts_fingerprint

_EMBED_BATCH_SEGMENTS = 256
_FLUSH_MIN_ROWS = 4096


@dataclass
class TextIndexReport:
    """What `ensure_text_index` did."""

    texts_built: int = 0
    texts_fresh: int = 0
    dense_embedded: int = 0
    dense_removed: int = 0
    dense_skipped: dict[str, str] = field(default_factory=dict)   # video_id -> reason
    embedder: str | None = None
    dense_kind: str | None = None
    dense_unavailable: str | None = None  # why no dense index could be built (embedder missing)
    dense_rebuilt: str | None = None      # why the dense index was rebuilt from scratch (damaged)
    texts_skipped: dict[str, str] = field(default_factory=dict)  # video_id -> why it has no texts


_lock = threading.Lock()
_bm25_cache: dict[tuple, BM25Index] = {}
_dense_cache: dict[tuple, DenseIndex] = {}
_default_embedder = None
_hf_embedders: dict[tuple, object] = {}
_query_vecs: "OrderedDict[tuple, np.ndarray]" = OrderedDict()
_QUERY_CACHE_MAX = 256


def get_default_embedder():
    """The offline default embedder (MiniLM, text of perception), loaded once per process."""
    global _default_embedder
    with _lock:
        if _default_embedder is None:
            _default_embedder = MiniLMTextEmbedder()
        return _default_embedder


LIBRARY_EMBEDDER_KEY = "dense_embedder"  # library meta: {"model_dir": str | None}


def library_embedder(library):
    """The embedder this library's dense index uses: the offline default (MiniLM over text of
    perception) unless the user chose a vision-language model directory for it
    (`set_library_embedder`). Raises EmbedderError when that directory cannot be used."""
    choice = library.meta_get(LIBRARY_EMBEDDER_KEY) or {}
    model_dir = choice.get("model_dir")
    if not model_dir:
        return get_default_embedder()
    key = ("hf", str(model_dir))
    with _lock:
        emb = _hf_embedders.get(key)
    if emb is None:
        emb = HFVisionLanguageEmbedder(model_dir)
        with _lock:
            _hf_embedders[key] = emb
    return emb


def set_library_embedder(library, model_dir: str | None) -> bool:
    """Choose the library's dense embedder (None/"" = the offline default). Returns True when the
    choice changed, in which case the next `ensure_text_index` rebuilds the dense index."""
    model_dir = str(model_dir) if model_dir else None
    current = (library.meta_get(LIBRARY_EMBEDDER_KEY) or {}).get("model_dir")
    if current == model_dir:
        return False
    library.meta_set(LIBRARY_EMBEDDER_KEY, {"model_dir": model_dir, "rebuild": True})
    return True


def _dense_key(library, embedder) -> tuple:
    return (str(library.folder), embedder.name, str(embedder.version),
            index_stamp(library.folder / "dense"))


def open_dense_index(library, embedder=None, rebuild: bool = False) -> DenseIndex:
    """The library's dense index for ``embedder`` (cached). Raises DenseIndexMismatch, and
    DenseIndexCorrupt when the files on disk are damaged (`ensure_text_index` rebuilds it)."""
    embedder = embedder or library_embedder(library)
    key = _dense_key(library, embedder)
    if not rebuild:
        with _lock:
            idx = _dense_cache.get(key)
        if idx is not None:
            return idx
    idx = DenseIndex.open(library.dense_dir, embedder, rebuild=rebuild)
    with _lock:
        _dense_cache.clear()
        _dense_cache[_dense_key(library, embedder)] = idx
    return idx


def ensure_text_index(library, embedder=None, progress: ProgressFn = None, cancel: CancelFn = None,
                      *, dense: bool = True, rebuild_dense: bool = False) -> TextIndexReport:
    """Bring summaries, segments and (``dense=True``) the dense index up to date.

    Incremental: only videos whose records or captions changed are re-described and re-embedded.
    Progress stages ``"texts"`` and ``"dense"`` (videos). Cancel is checked per batch; what was
    embedded before a cancel is saved. Raises DenseIndexMismatch when the index on disk was built
    by another embedder and ``rebuild_dense`` is False.
    """
    r = build_texts(library, progress, cancel)
    rep = TextIndexReport(texts_built=r.n_built, texts_fresh=r.n_fresh, texts_skipped=dict(r.skipped or {}))
    save_bm25_index(library)          # a new process's first search loads it instead of building it
    if not dense:
        return rep
    embedder, rebuild_dense = _ready_embedder(library, embedder, rep, rebuild_dense)
    if embedder is None:
        return rep
    try:
        idx = open_dense_index(library, embedder, rebuild=rebuild_dense)
    except DenseIndexCorrupt as e:  # a damaged index is rebuilt from the library, never extended
        rep.dense_rebuilt = e.reason
        idx = open_dense_index(library, embedder, rebuild=True)
    _update_dense(library, idx, embedder, rep, progress, cancel)
    prime_search_answers(library, idx)
    return rep


def prime_search_answers(library, idx: DenseIndex | None = None) -> None:
    """Work out now, at index time, what a new process's first search would otherwise compute
    over the whole library: the checks of the dense index's files made when it is opened
    (`dense_check.prime_checks`: every vector's norm, the HNSW graph's soundness) and whether
    the text indexes lag the library (`text_index_notice`, kept in the cache folder). ``idx``:
    the dense index just updated (else it is opened, which checks it)."""
    if idx is None:
        try:
            idx = open_dense_index(library)
        except Exception:  # noqa: BLE001  (a missing or damaged index: its search says so)
            idx = None
    if idx is not None:
        prime_checks(idx)
    _lag_notice(library, ["dense", "bm25"])


def _ready_embedder(library, embedder, rep: TextIndexReport, rebuild_dense: bool) -> tuple:
    """(the dense index's embedder, loaded, or None when it cannot be used: said in
    ``rep.dense_unavailable``; whether to rebuild the index: the user chose another embedder)."""
    if embedder is None:
        try:
            embedder = library_embedder(library)
        except EmbedderError as e:
            rep.dense_unavailable = str(e)
            return None, rebuild_dense
        choice = library.meta_get(LIBRARY_EMBEDDER_KEY) or {}
        if choice.get("rebuild"):
            rebuild_dense = True
            library.meta_set(LIBRARY_EMBEDDER_KEY, {"model_dir": choice.get("model_dir")})
    rep.embedder, rep.dense_kind = embedder.name, embedder.kind
    if hasattr(embedder, "load"):
        try:
            embedder.load()  # a build without the embedder (e.g. the lite bundle) keeps BM25 and rules
        except EmbedderError as e:
            rep.dense_unavailable = str(e)
            return None, rebuild_dense
    return embedder, rebuild_dense


def _update_dense(library, idx: DenseIndex, embedder, rep: TextIndexReport, progress: ProgressFn,
                  cancel: CancelFn) -> None:
    """Drop from ``idx`` the videos the library no longer has; embed the new and changed ones
    (and those whose stored vectors are unusable), in batches; what was embedded is kept on a
    cancel or an error."""
    stamps = library.summary_stamps()
    for vid in [v for v in list(idx.stamps) if v not in stamps]:
        idx.remove(vid)
        rep.dense_removed += 1
    # a video whose stored vectors are unusable (`dense_check`) is embedded again
    todo = sorted(v for v, s in stamps.items() if idx.stamps.get(v) != s or v in idx.bad_videos)
    videos = {v["id"]: v for v in library.list_videos()} if todo else {}
    total = len(todo)
    report(progress, "dense", 0, total)
    # rows are added to the index in bulk, flushed when the pending rows reach the index's size
    # (geometric: the row arrays are copied O(log n) times, not once per video)
    pending: list = []
    pending_rows = 0

    def flush():
        nonlocal pending, pending_rows
        if pending:
            idx.add_many(pending)
            pending, pending_rows = [], 0
    try:
        i = 0
        while i < total:
            check_cancel(cancel)
            batch, n_seg = [], 0
            while i < total and (not batch or n_seg < _EMBED_BATCH_SEGMENTS):
                vid = todo[i]
                segs = library.segments_of(vid)
                batch.append((vid, segs))
                n_seg += len(segs)
                i += 1
            if embedder.kind == "text-of-perception":
                pending_rows += _embed_texts_batch(embedder, batch, stamps, pending, rep)
                if pending_rows >= max(_FLUSH_MIN_ROWS, len(idx.alive)):
                    flush()
            else:
                _embed_videos_batch(idx, embedder, batch, videos, stamps, rep)
            report(progress, "dense", i, total, item=batch[-1][0])
    finally:
        flush()
        idx.finish_updates()
        with _lock:
            _dense_cache.clear()
            _dense_cache[_dense_key(library, embedder)] = idx


def _embed_texts_batch(embedder, batch: list, stamps: dict, pending: list, rep: TextIndexReport) -> int:
    """Embed the segment texts of a batch of videos in one call; their rows go to ``pending``.
    Returns the number of rows added."""
    flat = [s for _, segs in batch for s in segs]
    vecs = embedder.embed_segments(None, flat) if flat else np.zeros((0, embedder.dim))
    k = 0
    for vid, segs in batch:
        pending.append((vid, [(s[0], s[1], s[2]) for s in segs], vecs[k:k + len(segs)], stamps[vid]))
        k += len(segs)
        rep.dense_embedded += 1
    return k


def _embed_videos_batch(idx: DenseIndex, embedder, batch: list, videos: dict, stamps: dict,
                        rep: TextIndexReport) -> None:
    """Embed a batch of videos one by one (a visual embedder reads each video's frames); a video
    it cannot embed is skipped with the reason."""
    for vid, segs in batch:
        try:
            vecs = embedder.embed_segments(videos[vid], segs)
        except StrivedError as e:
            rep.dense_skipped[vid] = str(e)
            continue
        idx.add(vid, [(s[0], s[1], s[2]) for s in segs], vecs, stamps[vid])
        rep.dense_embedded += 1


_fp_cache: dict[int, tuple] = {}


def _texts_fingerprint(library) -> tuple:
    """`texts_fingerprint`, recomputed only when the database changed since the last call on
    this connection (its own writes: ``total_changes``; another connection's: ``PRAGMA
    data_version``): the fingerprint scans the summaries, which costs ~10 ms a search at 100,000
    videos."""
    conn = library.conn
    try:
        stamp = library.change_stamp()
    except Exception:  # noqa: BLE001  (a closed or foreign connection: no shortcut)
        return texts_fingerprint(library)
    key = id(conn)
    with _lock:
        hit = _fp_cache.get(key)
    if hit is not None and hit[0] is conn and hit[1] == stamp:
        return hit[2]
    fp = texts_fingerprint(library)
    with _lock:
        if len(_fp_cache) > 64:
            _fp_cache.clear()
        _fp_cache[key] = (conn, stamp, fp)
    return fp


def _bm25_file(library, backend: str):
    return library.cache_dir / f"bm25-{backend}.npz"


def _bm25_disk_key(library) -> dict:
    """What a saved BM25 index must have been built from: this library (its creation stamp), its
    summaries as they are now (count, newest update, newest row: any rewrite, addition or removal
    changes one of them) and the tokenizer's code and stop words."""
    import hashlib
    import inspect

    n, newest = library.summaries_state()
    last_row = library.last_summary_row()
    global _tokenizer_hash
    if _tokenizer_hash is None:
        _tokenizer_hash = hashlib.blake2b((inspect.getsource(tok.tokenize) + " ".join(sorted(tok.STOP_WORDS)))
                                          .encode(), digest_size=8).hexdigest()
    return {"library": str(library.meta_get("created_at")), "summaries": [int(n), newest, last_row],
            "tokenizer": _tokenizer_hash}


_tokenizer_hash: str | None = None
_bm25_notes: dict[str, str] = {}      # library folder -> notice for its next search (damaged file)


def _bm25_build(library, backend: str, disk_key: dict) -> BM25Index:
    """Build the index from the summaries and save it (bm25s) for later processes; a file that
    cannot be written (read-only folder, full disk) only costs the next process the rebuild."""
    ids, texts = load_summaries(library)
    if not ids:
        raise SourceUnavailable("bm25", "no video summaries yet: they are written when indexing "
                                        "or import finishes")
    idx = BM25Index(ids, texts, backend)
    if backend == "bm25s":
        try:
            idx.save(_bm25_file(library, backend), disk_key)
        except OSError:
            pass
    return idx


def _bm25_index(library, backend: str) -> BM25Index:
    key = _texts_fingerprint(library) + (backend,)
    with _lock:
        idx = _bm25_cache.get(key)
    if idx is None:
        disk_key = _bm25_disk_key(library)
        if backend == "bm25s":
            try:
                idx = BM25Index.load(_bm25_file(library, backend), disk_key)
            except BM25IndexDamaged as e:
                _bm25_notes[str(library.folder)] = (
                    f"the saved BM25 index was damaged ({e.reason}); it was rebuilt from the video "
                    "summaries")
                idx = None
        if idx is None:
            idx = _bm25_build(library, backend, disk_key)
        with _lock:
            for k in [k for k in _bm25_cache if k[0] == key[0]]:
                del _bm25_cache[k]
            _bm25_cache[key] = idx
    return idx


def save_bm25_index(library, backend: str = DEFAULT_BACKEND) -> bool:
    """Build and save the BM25 index of the library's summaries unless the saved one is current
    (called at index time, so that a new process's first search only loads it). Returns True
    when it was (re)built; False when it was current or there are no summaries."""
    if backend != "bm25s" or not library.has_summaries():
        return False
    disk_key = _bm25_disk_key(library)
    try:
        if BM25Index.load(_bm25_file(library, backend), disk_key) is not None:
            return False
    except BM25IndexDamaged:
        pass                      # replaced below
    idx = _bm25_build(library, backend, disk_key)
    with _lock:
        key = texts_fingerprint(library) + (backend,)
        for k in [k for k in _bm25_cache if k[0] == key[0]]:
            del _bm25_cache[k]
        _bm25_cache[key] = idx
    return True


def bm25_ranking(library, query: str, top_k: int | None = None,
                 backend: str = DEFAULT_BACKEND, as_ranked: bool = False):
    """BM25 over the video summaries: [(video_id, score)] for videos sharing a word with
    ``query``, best first. Raises SourceUnavailable when no summaries exist. ``as_ranked``:
    the same ranking as a `Ranked` (arrays; what `engine.search` fuses)."""
    idx = _bm25_index(library, backend)
    if not as_ranked:
        return idx.search(query, top_k)
    order, sc = idx.rank(query, top_k)
    ids = getattr(idx, "_ids_arr", None)
    if ids is None:
        ids = idx._ids_arr = np.asarray(idx.doc_ids, dtype=object)
    return Ranked(ids=ids[order].tolist(), scores=sc, space=idx.doc_ids, index=order)


def _query_vector(embedder, query: str) -> np.ndarray:
    key = (embedder.name, str(embedder.version), query)
    with _lock:
        v = _query_vecs.get(key)
        if v is not None:
            _query_vecs.move_to_end(key)
            return v
    v = embedder.embed_texts([query])[0]
    with _lock:
        _query_vecs[key] = v
        while len(_query_vecs) > _QUERY_CACHE_MAX:
            _query_vecs.popitem(last=False)
    return v


def dense_ranking(library, query: str, embedder=None, top_k: int | None = None, as_ranked: bool = False):
    """Dense retrieval: [(video_id, cosine of the best segment, (t0_s, t1_s) of it)], best first.
    Raises SourceUnavailable when the index is empty, DenseIndexMismatch for another embedder.
    ``as_ranked``: the same ranking as a `Ranked` (arrays; what `engine.search` fuses)."""
    if embedder is None:
        try:
            embedder = library_embedder(library)
        except EmbedderError as e:
            raise SourceUnavailable("dense", str(e)) from None
    try:
        idx = open_dense_index(library, embedder)
    except DenseIndexCorrupt as e:
        raise SourceUnavailable("dense", f"the dense index is damaged ({e.reason}); the next "
                                         "indexing or import rebuilds it (or `strived check "
                                         "--repair`)") from None
    if len(idx) == 0:
        # is the embedder there at all? ("not installed" reads differently from "empty"); asked
        # without loading it where it can say so (loading MiniLM imports torch: seconds)
        check = getattr(embedder, "check_installed", None) or getattr(embedder, "load", None)
        if check is not None:
            try:
                check()
            except EmbedderError as e:
                raise SourceUnavailable("dense", str(e)) from None
        raise SourceUnavailable("dense", f"the dense index ({embedder.name}) is empty: index or "
                                         "import videos (it is built with the BM25 texts)")
    if not as_ranked:
        return idx.search_videos(_query_vector(embedder, query), top_k)
    codes, sims, rows = idx.rank_videos(_query_vector(embedder, query), top_k)
    ids = getattr(idx, "_ids_arr", None)
    if ids is None or len(ids) != len(idx.video_ids):
        ids = idx._ids_arr = np.asarray(idx.video_ids, dtype=object)
    return Ranked(ids=ids[codes].tolist(), scores=sims.astype(np.float64), space=idx.video_ids,
                  index=codes, rows=rows, spans=(idx.t0, idx.t1))


_stale_cache: dict[tuple, str | None] = {}
#: the last answers of `text_index_notice` for a library state, in its cache folder: a new
#: process's first search reads them (computing one reads every video row: ~0.1 s at 10,000
#: videos, ~1 s at 100,000); written at index time (`ensure_text_index`) and by the first search
_NOTICE_FILE = "text_index_notice.json"


def text_index_notice(library, sources=("dense", "bm25")) -> str | None:
    """A notice when the BM25 texts or the dense index lag behind the library's records (an
    indexing or import run that was killed or cancelled before it updated them), saying how many
    videos those sources do not rank yet; None when they are up to date. Cached per library state
    (in this process, and in a small file of the library's cache folder)."""
    sources = [s for s in sources if s in ("dense", "bm25")]
    if not sources:
        return None
    damaged = _bm25_notes.pop(str(library.folder), None) if "bm25" in sources else None
    if damaged:
        lag = text_index_notice(library, sources)
        return damaged if lag is None else f"{damaged}; {lag}"
    return _lag_notice(library, sources)


def _lag_notice(library, sources: list[str]) -> str | None:
    """`text_index_notice` without the damaged-file notes: from this process's cache, else the
    cache folder's file for this exact state (creation, content version, summaries, dense index
    files), else computed (`_compute_lag_notice`) and kept in both."""
    import json

    stamp = index_stamp(library.folder / "dense")
    key = (str(library.folder), library.content_version, _texts_fingerprint(library)[1:], stamp, tuple(sources))
    with _lock:
        if key in _stale_cache:
            return _stale_cache[key]
    name = ",".join(sorted(sources))
    disk_key = json.dumps([library.meta_get("created_at"), library.content_version,
                           list(library.summaries_state()), library.last_summary_row(), stamp])
    saved = library.side_cache_read(_NOTICE_FILE, disk_key) or {}
    notes = saved.get("notes") if isinstance(saved.get("notes"), dict) else {}
    if name in notes and (notes[name] is None or isinstance(notes[name], str)):
        note = notes[name]
    else:
        note = _compute_lag_notice(library, sources)
        library.side_cache_write(_NOTICE_FILE, disk_key, {"notes": dict(notes, **{name: note})})
    with _lock:
        if len(_stale_cache) > 64:
            _stale_cache.clear()
        _stale_cache[key] = note
    return note


def _compute_lag_notice(library, sources: list[str]) -> str | None:
    n_videos = len(library)
    # videos whose summary is missing or older than their records (BM25 and dense both lag there)
    stale_text = library.text_stale_ids()
    lagging: dict[str, int] = {}
    if "bm25" in sources:
        lagging["BM25"] = len(stale_text)
    idx = None
    if "dense" in sources:
        try:
            idx = open_dense_index(library)
        except Exception:  # noqa: BLE001  (a missing or damaged index has its own notice)
            idx = None
        if idx is not None and len(idx):
            # a vision-language embedder skips videos it cannot read: only re-embeds count there
            every = idx.meta.get("kind") == "text-of-perception"
            lag = {v for v, st in library.summary_stamps().items()
                   if idx.stamps.get(v) != st and (every or v in idx.stamps)}
            lag |= stale_text if every else (stale_text & set(idx.stamps))
            lagging["dense"] = len(lag)
    lagging = {k: v for k, v in lagging.items() if v}
    note = _dense_damage_notice(idx) if "dense" in sources else None
    if lagging:
        worst = max(lagging.values())
        lag_note = (f"{worst} of {n_videos} videos were added or changed after the "
                    f"{' and '.join(sorted(lagging))} index{'es' if len(lagging) > 1 else ''} were last "
                    "updated (an interrupted indexing or import?): those sources do not rank them yet; "
                    "index or import again to bring them up to date")
        note = f"{note}; {lag_note}" if note else lag_note
    return note


def _dense_damage_notice(idx) -> str | None:
    """What the dense index left out because its contents are unsound (`dense_check`), or None."""
    if idx is None:
        return None
    parts = []
    bad = sorted(idx.bad_videos.items())
    if bad:
        shown = "; ".join(f"{v}: {why}" for v, why in bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
        parts.append(f"the dense index holds unusable vectors for {len(bad)} video{'s' if len(bad) > 1 else ''} "
                     f"({shown}): dense search leaves them out until the next indexing or import "
                     "re-embeds them")
    if idx.graph_problem:
        parts.append(f"the dense index's HNSW graph is unsound ({idx.graph_problem}): it was not loaded, "
                     "dense search is exact (slower) until the next indexing or import rebuilds it")
    return "; ".join(parts) or None


def clear_caches() -> None:
    """Forget in-memory indexes (tests; after deleting a library)."""
    with _lock:
        _bm25_cache.clear()
        _dense_cache.clear()
        _query_vecs.clear()
        _stale_cache.clear()
        _bm25_notes.clear()
        _fp_cache.clear()
