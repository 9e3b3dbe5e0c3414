"""The engine facade: what the CLI and the app both call.

``search`` runs the paper's query path: resolve a rule (explicit rule, or the calibrated library's
matcher/adapter), score it over the library (symbolic source), rank by the dense and BM25 sources
where they are available, weight the sources by the fusion router, fuse by weighted RRF (k = 60).
A source that cannot run (no index, no model) is left out with a notice, never silently faked.
"""

from __future__ import annotations

import copy
import threading
import time
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

from .errors import Cancelled, SourceUnavailable, StrivedError
from .jobs import CancelFn, ProgressFn, check_cancel, report
from .query import ParsedQuery, parse_query
from .retrieval.fusion import RRF_K, shared_ranks_array
from .retrieval.ranked import Ranked, per_content_version
from .rules import Rule, RuleScorer, parse_rule

SOURCES = ("rule", "dense", "bm25")


@dataclass
class SearchHit:
    rank: int
    video_id: str
    path: str | None
    score: float
    span_s: tuple[float, float] | None
    per_source: dict[str, dict]
    peak_track: int | None = None
    # estimated probability that the result matches the query (strived.retrieval.relevance);
    # None when no fitted model applies (e.g. a single-source search)
    relevance: float | None = None
    # sequence rules: each step's unit, anchor and span, and each negation (strived.rules.sequence)
    steps: list[dict] | None = None
    absent: list[dict] | None = None
    # an event across a file boundary of a drive: id, span in drive time, per-file parts (strived.drive_hits)
    drive: dict | None = None

    def to_dict(self) -> dict:
        d = {"rank": self.rank, "video_id": self.video_id, "path": self.path, "score": self.score,
             "span_s": list(self.span_s) if self.span_s else None, "per_source": self.per_source,
             "peak_track": self.peak_track, "relevance": self.relevance}
        if self.steps is not None:
            d["steps"], d["absent"] = self.steps, self.absent or []
        if self.drive is not None:
            d["drive"] = self.drive
        return d


@dataclass
class SearchResponse:
    query: str
    hits: list[SearchHit]
    rule: dict | None
    match: dict
    weights: dict[str, float]
    notices: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    sources_used: list[str] = field(default_factory=list)
    rankings: dict[str, list[str]] = field(default_factory=dict)
    # each source's scores, aligned with ``rankings`` (equal scores share a rank in the fusion)
    ranking_scores: dict[str, list[float]] = field(default_factory=dict, repr=False)
    # the rule each calibration profile ran ({"tracks": rule, "video": rule}) when they differ,
    # and the profile of each video; `rule` is then the rule of the library's main profile
    rules_by_profile: dict[str, dict] = field(default_factory=dict)
    video_profiles: dict[str, str] = field(default_factory=dict, repr=False)
    # videos the rule source could not evaluate -> the fields they lack (not ranked by the rule)
    rule_unjudged: dict[str, list[str]] = field(default_factory=dict)

    def rule_for(self, video_id: str) -> dict | None:
        """The rule that scored ``video_id`` (its calibration profile's rule)."""
        if self.rules_by_profile:
            p = self.video_profiles.get(video_id)
            if p in self.rules_by_profile:
                return self.rules_by_profile[p]
        return self.rule

    def to_dict(self) -> dict:
        d = {"query": self.query, "hits": [h.to_dict() for h in self.hits], "rule": self.rule,
             "match": self.match, "weights": self.weights, "notices": self.notices,
             "timings_ms": self.timings_ms, "sources_used": self.sources_used}
        if self.rules_by_profile:
            d["rules_by_profile"] = self.rules_by_profile
        d["rule_cannot_evaluate"] = self.rule_unjudged
        return d


_scorers: "weakref.WeakKeyDictionary[Any, tuple[int, RuleScorer]]" = weakref.WeakKeyDictionary()


def scorer_for(library) -> RuleScorer:
    """A RuleScorer whose column cache is reused until the library's content changes."""
    return per_content_version(_scorers, library, lambda: RuleScorer(library))


def resolve_query_rule(query: "str | ParsedQuery", *, library=None, llm=None, event: str | None = None,
                       rule_library=None, available_fields: set[str] | None = None) -> tuple[Rule, dict]:
    """Rule for a query: the calibrated library's matcher/adapter when present, else the
    hand-written rule of ``event``. Returns (rule, match info)."""
    if event:
        from .rulelib.hand_rules import hand_rule

        d = hand_rule(event)
        if d is None:
            raise StrivedError(f"no hand-written rule for event {event!r}")
        return parse_rule(d), {"event": event, "confidence": 1.0, "mode": "hand", "source": "hand",
                               "notices": []}
    from .rulelib.resolve import resolve_rule

    rr = resolve_rule(query, library=rule_library, llm=llm, available_fields=available_fields)
    return rr.rule, {"event": rr.event, "confidence": rr.confidence, "p_event": rr.p_event,
                     "mode": rr.mode, "source": rr.source, "notices": list(rr.notices),
                     "exemplar_event": rr.exemplar_event, "reason": rr.reason}


def available_fields(library, profile: str | None = None, videos=None) -> set[str] | None:
    """Rule fields (derived ones included) that at least one video of ``library`` (of ``profile``,
    or among ``videos``) has values for; None when nothing is known to be missing."""
    from .availability import DERIVED_FROM, field_available
    from .rules.model import ALL_FIELDS

    if not hasattr(library, "availability"):
        return None
    avails = library.availability()
    memo_key = None
    if videos is None and hasattr(library, "content_version"):
        # asked on every search, per profile: remembered until the library's content changes
        memo_key = (library.content_version, id(avails), profile)
        memo = getattr(library, "_available_fields_memo", None)
        if memo is not None and memo[0] == memo_key:
            return set(memo[1]) if memo[1] is not None else None
    prof = library.video_profiles() if profile else {}
    # videos share a few availability records (the library interns them): test each one once
    distinct = {id(avails[v]): avails[v] for v in avails
                if (profile is None or prof.get(v) == profile) and (videos is None or v in videos)}
    out = None
    if distinct:
        out = {f for f in ALL_FIELDS
               if any(field_available(av, DERIVED_FROM.get(f, f)) is not False for av in distinct.values())}
    if memo_key is not None:
        library._available_fields_memo = (memo_key, frozenset(out) if out is not None else None)
    return out


def _profile_counts(library) -> "Counter[str]":
    """{profile: number of videos}, counted once per library state (every search asks; counting
    is a pass over every video)."""
    prof = library.video_profiles()
    key = (getattr(library, "content_version", None), id(prof))
    memo = getattr(library, "_profile_counts_memo", None)
    if memo is None or memo[0] != key or key[0] is None:
        memo = (key, prof, Counter(prof.values()))     # holds ``prof``: its id is not reused
        try:
            library._profile_counts_memo = memo
        except AttributeError:
            pass
    return memo[2]


def resolve_profile_rules(query: "str | ParsedQuery", *, library, llm=None) -> tuple[dict[str, Rule], dict]:
    """The query's rule for each calibration profile present in ``library`` (videos perceived by
    our pipeline use the ``video`` profile, imported track records the ``tracks`` profile).
    Returns ({profile: rule}, match info of the main profile, with every profile's match)."""
    from .rulelib.learned import learned_notice, search_rules
    from .rulelib.library import PROFILES

    n_of = _profile_counts(library)                            # videos per profile
    present = set(n_of) or {"tracks"}
    rules, matches = {}, {}
    for p in PROFILES:
        if p in present:
            lib_p, note = search_rules(library, p)        # shipped numbers + any learned here
            rules[p], matches[p] = resolve_query_rule(query, library=library, llm=llm, rule_library=lib_p,
                                                      available_fields=available_fields(library, p))
            note = note or learned_notice(lib_p, matches[p], p)
            if note:
                matches[p]["notices"].append(note)
    main = max(matches, key=lambda p: (n_of.get(p, 0), p == "tracks"))
    match = dict(matches[main])
    match["profile"] = main
    if len(matches) > 1:
        match["profiles"] = {p: {k: m.get(k) for k in ("event", "confidence", "p_event", "mode", "source")}
                             for p, m in matches.items()}
        for p, m in matches.items():
            for n in m.get("notices") or []:
                if n not in match["notices"]:
                    match["notices"].append(n)
    return rules, match


def rule_unjudged(library, rule: "Rule | dict[str, Rule]") -> dict[str, list[str]]:
    """{video_id: [fields]} of the videos the rule cannot evaluate (a needed field was not estimated
    for them: see strived.availability). ``rule`` may be {profile: rule}."""
    from .availability import AvailGroups, unjudgeable

    avails = library.availability()
    # the videos grouped by their (interned) availability record, once per library state: a
    # search then tests each distinct record, not each video
    memo_key = (getattr(library, "content_version", None), id(avails))
    memo = getattr(library, "_avail_groups_memo", None)
    if memo is None or memo[0] != memo_key or memo_key[0] is None:
        memo = (memo_key, {})
        try:
            library._avail_groups_memo = memo
        except AttributeError:
            pass
    groups = memo[1]
    if not isinstance(rule, dict):
        if None not in groups:
            groups[None] = AvailGroups(avails, list(avails))
        return unjudgeable(avails, rule, groups=groups[None])
    prof = library.video_profiles()
    out: dict[str, list[str]] = {}
    for p, r in rule.items():
        if p not in groups:
            groups[p] = AvailGroups(avails, [v for v, q in prof.items() if q == p])
        out.update(unjudgeable(avails, r, groups=groups[p]))
    return out


def rule_ranking(library, rule: "Rule | dict[str, Rule]", binarize: bool = False,
                 unjudged: dict[str, list[str]] | None = None,
                 cancel: CancelFn = None, as_ranked: bool = False):
    """(video_id, score, peak_track) of videos with a score > 0, best first (ties by id).

    ``rule`` may be {profile: rule}: each video is then scored by its calibration profile's rule.
    Videos the rule cannot evaluate (``rule_unjudged``; pass it as ``unjudged`` when already
    computed) are left out: unknown is neither a match nor a non-match. ``cancel`` is checked per
    profile and inside the scorer (per gate, soft score and chunk of a feature computed).
    ``as_ranked``: the same ranking as a `Ranked` (arrays over the scorer's video list, what
    `search` fuses; no Python step per video)."""
    import numpy as np

    if unjudged is None and hasattr(library, "availability"):
        unjudged = rule_unjudged(library, rule)

    if isinstance(rule, dict):
        distinct = {json_key(r): r for r in rule.values()}
        if len(distinct) == 1:
            rule = next(iter(distinct.values()))
    scorer = scorer_for(library)
    if isinstance(rule, dict):
        prof = library.video_profiles()
        res = None
        for p, r in rule.items():
            check_cancel(cancel)
            rp = scorer.score(r, binarize=binarize, cancel=cancel)
            if res is None:
                res = copy.copy(rp)
                res.scores = np.zeros_like(rp.scores)
                res.peak_track = np.full_like(rp.peak_track, -1)
            sel = _profile_array(library, rp.video_ids, prof) == p
            res.scores[sel] = rp.scores[sel]
            res.peak_track[sel] = rp.peak_track[sel]
    else:
        res = scorer.score(rule, binarize=binarize, cancel=cancel)
    ids = res.video_ids
    if ids == scorer.video_ids:     # (C speed) the scorer's own list: one object per library state,
        ids = scorer.video_ids      # so its id codes and id array are worked out once
    ok = res.scores > 0
    if unjudged:
        at = _positions(ids, unjudged)
        ok[at[at >= 0]] = False
    nz = np.flatnonzero(ok)
    order = nz[np.lexsort((nz, -res.scores[nz]))]  # ids are sorted, so index order = id order
    memo = getattr(scorer, "_ids_array_memo", None)
    if memo is None or memo[0] is not ids:
        memo = (ids, np.asarray(ids, dtype=object) if len(ids) else np.zeros(0, dtype=object))
        scorer._ids_array_memo = memo
    r = Ranked(ids=memo[1][order].tolist(), scores=res.scores[order].astype(float),
               space=ids, index=order, peaks=res.peak_track[order].astype(int))
    return r if as_ranked else list(zip(r.ids, r.scores.tolist(), r.peaks.tolist()))


def _add_damaged(library, unjudged: dict[str, list[str]], notices: list[str]) -> dict[str, list[str]]:
    """``unjudged`` plus the videos whose stored records are damaged (the scorer left them out:
    `rules.rowcheck`), each with the reason; their notice goes to ``notices``."""
    from .rules.rowcheck import damaged_notice

    broken = scorer_for(library).columns.broken
    if not broken:
        return unjudged
    notices.append(damaged_notice(broken, len(library)))
    out = dict(unjudged)
    for vid, why in broken.items():
        out[vid] = [f"records damaged: {why}"]
    return out


_positions_memo: list = [None]   # (ids, {id: position}) of the last list of ids asked about


def _positions(ids: Sequence[str], wanted) -> "Any":
    """Position in ``ids`` of each id of ``wanted`` (-1 when absent), through a {id: position}
    map built once per distinct list of ids (a scorer returns an equal list on every call)."""
    import numpy as np

    memo = _positions_memo[0]
    if memo is None or memo[0] != ids:        # list equality: C speed, no work per video in Python
        memo = _positions_memo[0] = (list(ids), {v: i for i, v in enumerate(ids)})
    get = memo[1].get
    return np.fromiter((get(v, -1) for v in wanted), dtype=np.int64, count=len(wanted))


def _profile_array(library, ids: Sequence[str], prof: dict[str, str]):
    """The calibration profile of each video of ``ids`` as an array (compared per profile),
    remembered per library state."""
    import numpy as np

    key = (library.content_version, len(ids), id(prof))
    cached = getattr(library, "_profile_array_memo", None)
    if cached is None or cached[0] != key or cached[1] != ids:
        arr = np.array([prof.get(v) for v in ids], dtype=object)
        cached = (key, list(ids), arr)
        library._profile_array_memo = cached
    return cached[2]


def json_key(rule: Rule) -> str:
    import json

    return json.dumps(rule.to_dict(), sort_keys=True)


_preloads: dict[tuple, threading.Thread] = {}
_preload_lock = threading.Lock()


def _wait_preload(key: tuple, fn, cancel: CancelFn, poll_s: float = 0.02) -> None:
    """Run ``fn()``, a load that cannot stop part-way (a model, an index's files) and uses no
    database connection, in a helper thread, and wait for it while checking ``cancel``. A cancel
    returns at once (Cancelled) and lets the load finish by itself: it fills the process caches
    the next search reuses (a search meanwhile waits on the same thread instead of loading
    twice). Errors are left to the call that follows, which reports them."""
    def run():
        try:
            fn()
        except BaseException:  # noqa: BLE001  (reported by the ranking call that follows)
            pass
    with _preload_lock:
        t = _preloads.get(key)
        if t is None or not t.is_alive():
            t = threading.Thread(target=run, name="strived-preload", daemon=True)
            _preloads[key] = t
            t.start()
    while t.is_alive():
        t.join(poll_s)
        check_cancel(cancel)


def _dense(library, query: str, top_k: int | None, cancel: CancelFn = None):
    from .retrieval.sources import dense_ranking, library_embedder, open_dense_index

    if cancel is not None:
        # a process's first dense search opens the index (~0.5 s at 10k videos) and loads the
        # text model (0.15 s numpy; torch: 2-8 s): done in a helper thread, so a cancel is seen
        try:
            emb = library_embedder(library)          # reads the library: on this thread
        except Exception:  # noqa: BLE001  (dense_ranking says what is wrong)
            emb = None
        if emb is not None:
            def preload():
                if len(open_dense_index(library, emb)) == 0:
                    # what dense_ranking checks for an empty index (without loading the model
                    # where the embedder can say whether it is installed)
                    (getattr(emb, "check_installed", None) or emb.load)()
                else:
                    emb.embed_texts([query])

            _wait_preload((str(library.folder), emb.name), preload, cancel)
    check_cancel(cancel)
    return dense_ranking(library, query, top_k=top_k, as_ranked=True)


def _bm25(library, query: str, top_k: int | None, cancel: CancelFn = None):
    from .retrieval.sources import bm25_ranking

    # checked before and after (the caller): its first load (0.3 s at 10k videos) reads the
    # library's connection, so it is not moved to a helper thread like the dense one
    return bm25_ranking(library, query, top_k=top_k, as_ranked=True)


def route_weights(query: "str | ParsedQuery", llm=None, library=None, mode: str = "auto") -> tuple[dict[str, float], str, str | None]:
    """(weights, router source, notice). Equal weights when no router module is present."""
    from .retrieval.router import route

    kind = "text"
    if library is not None:
        try:
            choice = library.meta_get("dense_embedder") or {}
            kind = "visual" if choice.get("model_dir") else "text"
        except Exception:  # noqa: BLE001  (a library without meta: the default embedder)
            kind = "text"
    r = route(query, llm=llm, dense_kind=kind, mode=mode)
    return dict(r.weights), r.source, r.notice


def build_text_index(library, progress: ProgressFn = None, cancel: CancelFn = None) -> str | None:
    """Bring a library's search indexes up to date after videos were added (incremental): the
    BM25 texts and dense index, then the rule features of every calibrated library rule (so the
    first search of each event needs no feature computation). Returns a notice when a part is
    unavailable."""
    from .retrieval.sources import ensure_text_index

    note = None
    rep = ensure_text_index(library, progress=progress, cancel=cancel)
    if rep.dense_unavailable:
        note = f"dense retrieval unavailable: {rep.dense_unavailable}"
    elif rep.dense_rebuilt:
        note = f"the dense index was damaged ({rep.dense_rebuilt}) and has been rebuilt"
    if rep.texts_skipped:
        big = list(rep.texts_skipped.values())
        more = [f"and {len(big) - 3} more such videos"] if len(big) > 3 else []
        note = "; ".join(([note] if note else []) + big[:3] + more)
    warm_rule_features(library, progress=progress, cancel=cancel)
    return note


def warm_rule_features(library, progress: ProgressFn = None, cancel: CancelFn = None) -> int:
    """Score every rule of the shipped library once, which computes and caches (on disk, per video)
    the window features they read. Returns the number of rules scored."""
    from .rulelib.library import load_default_library

    if len(library) == 0:
        return 0
    todo = {}
    for p in sorted(set(library.video_profiles().values())):
        lib = load_default_library(profile=p)
        for key in lib.keys():
            r = lib.rule(key)
            if r.sequence is not None:
                continue  # sequence rules read per-sample traces kept in memory only: nothing to warm
            todo.setdefault(json_key(r), (key, r))
    scorer = scorer_for(library)
    for k, (key, r) in enumerate(todo.values()):
        check_cancel(cancel)
        report(progress, "features", k, len(todo), item=key)
        scorer.score(r, cancel=cancel)
    report(progress, "features", len(todo), len(todo))
    return len(todo)


_span_memos: "weakref.WeakKeyDictionary[Any, tuple[int, OrderedDict]]" = weakref.WeakKeyDictionary()
_SPAN_MEMO_RULES = 64
_span_lock = threading.Lock()


def _span_memo(library, rule: Rule) -> dict:
    """Spans already computed for ``rule`` on this library, {(video_id, peak_track): span};
    forgotten when the library's content changes (a repeated query computes no span)."""
    import json

    ver = library.content_version
    key = json.dumps(rule.to_dict(), sort_keys=True)
    with _span_lock:
        cached = _span_memos.get(library)
        if cached is None or cached[0] != ver:
            cached = (ver, OrderedDict())
            _span_memos[library] = cached
        memos = cached[1]
        memo = memos.get(key)
        if memo is None:
            memo = memos[key] = {}
            while len(memos) > _SPAN_MEMO_RULES:
                memos.popitem(last=False)
        else:
            memos.move_to_end(key)
        return memo


def _span_records(library, video_id: str, peak_track: int | None):
    """What `peak_span` reads of a video: its times, ego series and only the peak track (reading
    every track of a video is ~10x slower per hit). Raises KeyError when the video is absent."""
    keep = [int(peak_track)] if peak_track is not None and peak_track >= 0 else []
    return library.get_video(video_id, track_ids=keep)


def _ranked_from_hits(hits: Sequence[tuple[str, float, int]]) -> Ranked:
    """A caller's precomputed rule ranking [(video_id, score, peak_track)] as a `Ranked`."""
    import numpy as np

    ids, sc, peaks = (list(x) for x in zip(*hits)) if hits else ([], [], [])
    return Ranked(ids=ids, scores=np.asarray(sc, np.float64).reshape(-1),
                  peaks=np.asarray(peaks, np.int64).reshape(-1))


def _ranked_from_list(out: Sequence[tuple]) -> Ranked:
    """A source's plain ranking [(video_id, score[, (t0_s, t1_s) or None])] as a `Ranked`."""
    import numpy as np

    ids = [r[0] for r in out]
    spans = [tuple(r[2]) if len(r) > 2 and r[2] is not None else None for r in out]
    return Ranked(ids=ids, scores=np.asarray([float(r[1]) for r in out], np.float64).reshape(-1),
                  extra={"spans": spans} if any(x is not None for x in spans) else {})


def _fuse_codes(space, extra: dict[str, int], n_codes: int, used: Sequence[str], codes: dict,
                ranks: dict, weights: dict[str, float], rrf_k: int, top_k: int | None,
                abstain_codes, n_judged: int) -> list[tuple[str, float]]:
    """`fusion.weighted_rrf` over video codes, the same sums in the same order (so the same
    floats) and the same order of the result (score descending, then id), without a Python step
    per video: each source adds its terms w / (rrf_k + shared rank) to an array over the codes;
    the videos the rule could not judge (``abstain_codes``) get its expected term."""
    import numpy as np

    if rrf_k < 0:
        raise ValueError("rrf_k must be >= 0")
    fused = np.zeros(n_codes, np.float64)
    present = np.zeros(n_codes, bool)          # videos some source ranked (or abstained on)
    for s in used:
        w = float(weights.get(s, 0.0))
        if w < 0:
            raise ValueError(f"weight of {s!r} is negative ({w})")
        np.add.at(fused, codes[s], w / (rrf_k + ranks[s]))   # sequential, as repeated ids add up
        present[codes[s]] = True
    if abstain_codes is not None and len(abstain_codes):
        w = float(weights.get("rule", 0.0))
        if w != 0.0 and n_judged > 0:
            expected = w * sum((1.0 / (rrf_k + ranks["rule"])).tolist()) / n_judged
            np.add.at(fused, abstain_codes, expected)
            present[abstain_codes] = True
    cand = np.flatnonzero(present)
    if top_k is not None and 0 <= top_k < cand.size:
        if top_k == 0:
            return []
        vals = fused[cand]
        kth = np.partition(vals, cand.size - top_k)[cand.size - top_k]
        cand = cand[vals >= kth]                   # ties at the cut stay in the sort
    names = space.ids
    if extra:
        names = list(space.ids) + sorted(extra, key=extra.get)
        order = sorted(cand.tolist(), key=lambda c: (-fused[c], names[c]))
    else:                                      # codes are in id order
        order = cand[np.lexsort((cand, -fused[cand]))].tolist()
    out = [(names[c], float(fused[c])) for c in order]
    return out[:top_k]


def search(library, query: str, *, rule: Rule | dict | None = None, event: str | None = None,
           weights: dict[str, float] | None = None, sources: Sequence[str] = SOURCES,
           top_k: int = 50, llm=None, span_k: int = 20, rrf_k: int = RRF_K,
           rule_library=None, rule_hits: list[tuple[str, float, int]] | None = None,
           router: str = "auto", rerank: bool = False, match_hint: dict | None = None,
           progress: ProgressFn = None, cancel: CancelFn = None) -> SearchResponse:
    """Search a library with a plain-language query.

    ``rule`` (a Rule or rule JSON) overrides rule resolution; ``event`` uses the hand-written rule
    of a benchmark event key; ``weights`` overrides the router ({"rule", "dense", "bm25"});
    ``sources`` restricts the sources (one source = that source's own ranking, no fusion).
    ``rerank``: the fused list's first 20 ordered by the relevance estimate (the paper's optional
    reranker over K' = 20; `relevance.rerank_by_relevance`). Off by default: measured leaving one
    source out it did not beat the fused order (issue 31; the ``full-rerank`` ablation). The query
    is parsed once (`strived.query.parse_query`); the matcher, adapter and router read
    that value, the dense and BM25 sources the text.
    """
    t_all = time.perf_counter()
    if not (query or "").strip() and rule is None and event is None and rule_hits is None:
        raise StrivedError("the query is empty: say what to look for (e.g. \"a car cuts in from the left\")")
    parsed = parse_query(query)
    timings: dict[str, float] = {}
    notices: list[str] = []
    rankings: dict[str, list[str]] = {}
    ranked: dict[str, Ranked] = {}   # each source's ranking as arrays (ids, scores, extras)
    match: dict = {}
    rule_obj: Rule | None = None
    rules_by_profile: dict[str, dict] = {}
    rule_of: dict[str, Rule] = {}  # {profile: rule} when the profiles' rules differ
    unjudged: dict[str, list[str]] = {}  # videos the rule cannot evaluate -> the fields they lack
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise StrivedError(f"unknown source(s) {unknown}; valid: {', '.join(SOURCES)}")
    steps = len(sources) + 1
    step = 0

    if "rule" in sources:
        t0 = time.perf_counter()
        try:
            if rule is not None:
                rule_obj = rule if isinstance(rule, Rule) else parse_rule(rule)
                match = {"event": rule_obj.event, "confidence": None, "mode": "user", "source": "user",
                         "notices": [f"rule {p or '/'}: {m}" for p, m in rule_obj.warnings]}
            elif rule_hits is None and (event or rule_library is not None):
                rule_obj, match = resolve_query_rule(parsed, library=library, llm=llm, event=event,
                                                     rule_library=rule_library)
            elif rule_hits is None:
                profile_rules, match = resolve_profile_rules(parsed, library=library, llm=llm)
                rule_obj = profile_rules[match["profile"]]
                if len({json_key(r) for r in profile_rules.values()}) > 1:
                    rules_by_profile = {p: r.to_dict() for p, r in profile_rules.items()}
                    rule_of = {p: r for p, r in profile_rules.items()}
            else:   # the caller's rule hits; ``match_hint``: what the matcher made of the query
                match = {"event": None, "confidence": None, **(match_hint or {}), "mode": "precomputed",
                         "source": "caller", "notices": []}
            notices.extend(match.get("notices") or [])
            timings["resolve_rule"] = (time.perf_counter() - t0) * 1e3
            t1 = time.perf_counter()
            if rule_hits is None and hasattr(library, "availability"):
                from .availability import unjudged_notice

                unjudged = rule_unjudged(library, rule_of if rule_of else rule_obj)
                note = unjudged_notice(unjudged, library.availability(), len(library))
                if note:
                    notices.append(note)
            if rule_hits is not None:
                ranked["rule"] = _ranked_from_hits(rule_hits)
            else:
                ranked["rule"] = rule_ranking(library, rule_of if rule_of else rule_obj, unjudged=unjudged,
                                              cancel=cancel, as_ranked=True)
                unjudged = _add_damaged(library, unjudged, notices)
            timings["rule"] = (time.perf_counter() - t1) * 1e3
        except SourceUnavailable as e:
            notices.append(f"rule source skipped: {e}")
        step += 1
        report(progress, "search", step, steps, message="rule")
        check_cancel(cancel)

    for name, fn in (("dense", _dense), ("bm25", _bm25)):
        if name not in sources:
            continue
        check_cancel(cancel)
        t0 = time.perf_counter()
        try:
            out = fn(library, query, None, cancel)
            ranked[name] = out if isinstance(out, Ranked) else _ranked_from_list(out)
        except Cancelled:
            raise
        except StrivedError as e:  # a source that cannot run is left out, loudly
            notices.append(f"{name} source skipped: {e}")
        except Exception as e:  # noqa: BLE001  (a broken source must not take the search down)
            notices.append(f"{name} source skipped: it failed ({type(e).__name__}: {e})")
        timings[name] = (time.perf_counter() - t0) * 1e3
        step += 1
        report(progress, "search", step, steps, message=name)
        check_cancel(cancel)

    for name, r in ranked.items():
        rankings[name] = r.ids
    used = [s for s in sources if s in rankings]
    if "dense" in used or "bm25" in used:
        from .retrieval.sources import text_index_notice

        note = text_index_notice(library, [s for s in used if s in ("dense", "bm25")])
        if note:
            notices.append(note)
    t0 = time.perf_counter()
    if weights is None:
        if len(used) > 1:
            weights, rsrc, note = route_weights(parsed, llm=llm, library=library, mode=router)
            match["router"] = rsrc
            if note:
                notices.append(note)
        else:
            weights = {s: 1.0 for s in used}
    timings["router"] = (time.perf_counter() - t0) * 1e3
    w_used = {s: float(weights.get(s, 0.0)) for s in used}
    # each source's scores in its ranking's order: equal scores share a rank in the fusion
    ranked_scores = {s: ranked[s].scores.tolist() for s in used}

    # every video as a code (its place in the library's sorted ids): the fusion and the per-hit
    # lookups below are array operations, not a Python step per video and source
    import numpy as np

    from .retrieval.ranked import id_space

    space = id_space(library)
    extra: dict[str, int] = {}                     # ids a lagging index holds that the library does not
    codes = {s: space.codes(ranked[s], extra) for s in used}
    un_codes = space.codes_of_ids(list(unjudged), extra) if unjudged else np.zeros(0, np.int64)
    n_codes = len(space) + len(extra)
    n_ranked = {s: len(ranked[s]) for s in used}
    # fractional ranks (fusion.shared_ranks), by position in each ranking
    fused_rank = {s: shared_ranks_array(ranked[s].scores) for s in used}
    if len(used) == 1:
        only = used[0]
        fused = list(zip(ranked[only].ids, ranked_scores[only]))[:top_k]
    else:
        fused = _fuse_codes(space, extra, n_codes, used, codes, fused_rank, w_used, rrf_k, top_k,
                            un_codes if ("rule" in used and unjudged) else None,
                            max(0, len(library) - len(unjudged)))

    # spans: the rule's peak window for the top hits (records needed), else the dense segment
    t0 = time.perf_counter()
    hits: list[SearchHit] = []
    vids_meta = None
    profiles = library.video_profiles() if rule_of else {}
    memos = {p: _span_memo(library, r) for p, r in rule_of.items()}
    span_memo = _span_memo(library, rule_obj) if rule_obj is not None else None
    # 1-based position of each video (by code) in each ranking, 0 when it is absent
    pos_of = {}
    for s in used:
        pos_of[s] = np.zeros(n_codes, np.int64)
        pos_of[s][codes[s]] = np.arange(1, n_ranked[s] + 1)
    best_bm25 = float(ranked["bm25"].scores.max()) if "bm25" in used and n_ranked["bm25"] else 0.0
    rule_desc = None      # the rule's scores negated (ascending), for percentiles; built on first use
    from .retrieval.relevance import default_model, hit_features

    rel_model = default_model()
    if rel_model is not None and sorted(rel_model.provenance.get("sources", [])) != sorted(used):
        rel_model = None          # fitted on full three-source searches only
    code_get = space.code_of.get
    for k, (vid, sc) in enumerate(fused, start=1):
        check_cancel(cancel)
        c = code_get(vid)
        if c is None:
            c = extra[vid]
        at = {s: int(pos_of[s][c]) for s in used}          # 0: not ranked by s
        peak = int(ranked["rule"].peaks[at["rule"] - 1]) if at.get("rule") else None
        span = steps = None
        if k <= span_k and rule_obj is not None and at.get("rule"):
            from .rules.explain import peak_span

            v_rule, v_memo = rule_obj, span_memo
            if rule_of and profiles.get(vid) in rule_of:
                v_rule, v_memo = rule_of[profiles[vid]], memos[profiles[vid]]
            key = (vid, peak)
            if key in v_memo:
                span = v_memo[key]
            elif v_rule.sequence is not None:
                from .rules.sequence import match_sequence

                try:  # a sequence's span covers its steps: every track may take part
                    # (unknown terms take the library's expected values, as when it was scored)
                    m = match_sequence(library.get_video(vid), v_rule,
                                       scorer_for(library).term_means(v_rule))
                    span = (m.span_s, *m.to_dicts())
                except KeyError:
                    span = None
                v_memo[key] = span
            else:
                try:
                    span = peak_span(_span_records(library, vid, peak), v_rule, peak)
                except KeyError:
                    span = None
                v_memo[key] = span
            if v_rule.sequence is not None and span is not None:
                span, steps, absent = span
        if span is None and at.get("dense"):
            span = ranked["dense"].span_at(at["dense"] - 1)
        per_source = {s: {"rank": at[s] or None, "of": n_ranked[s],
                          "score": float(ranked[s].scores[at[s] - 1]) if at[s] else None,
                          "weight": w_used[s],
                          "contribution": (w_used[s] / (rrf_k + float(fused_rank[s][at[s] - 1]))) if at[s] else 0.0}
                      for s in used}
        if "rule" in per_source and per_source["rule"]["rank"]:
            # share of the judged videos this one scores at least as high as (1.0 = the top):
            # one minus the share that score strictly higher, so every video of a tie gets the same
            if rule_desc is None:
                rule_desc = np.negative(np.asarray(ranked["rule"].scores, np.float64))
            higher = int(np.searchsorted(rule_desc, -per_source["rule"]["score"], side="left"))
            per_source["rule"]["percentile"] = 1.0 - higher / max(1, n_ranked["rule"])
            tied = int(np.searchsorted(rule_desc, -per_source["rule"]["score"], side="right")) - higher
            if tied > 1:   # videos sharing this exact score: the rule cannot order them
                per_source["rule"]["tie"] = {"first": higher + 1, "size": tied}
        if "bm25" in per_source and per_source["bm25"]["rank"] and best_bm25 > 0:
            per_source["bm25"]["score_vs_best"] = per_source["bm25"]["score"] / best_bm25
        if "rule" in per_source and vid in unjudged:
            per_source["rule"]["status"] = "cannot evaluate"
            per_source["rule"]["missing_fields"] = list(unjudged[vid])
        if vids_meta is None:
            ids = [v for v, _ in fused]
            vids_meta = library.video_paths(ids if len(ids) <= 500 else None)
        rel = float(rel_model.predict(hit_features(per_source, k, match))[0]) if rel_model is not None else None
        hits.append(SearchHit(rank=k, video_id=vid, path=vids_meta.get(vid), score=float(sc),
                              span_s=span, per_source=per_source, peak_track=peak,
                              steps=steps, absent=absent if steps is not None else None, relevance=rel))
    timings["spans"] = (time.perf_counter() - t0) * 1e3
    if rerank:
        from .retrieval.relevance import rerank_by_relevance

        hits = rerank_by_relevance(hits)
    from .drive_hits import merge_hits

    hits = merge_hits(library, hits)      # an event across a file boundary of a drive: one hit
    timings["total"] = (time.perf_counter() - t_all) * 1e3
    return SearchResponse(query=query, hits=hits, rule=rule_obj.to_dict() if rule_obj else None,
                          match=match, weights=w_used, notices=notices, timings_ms=timings,
                          sources_used=used, rankings=rankings, ranking_scores=ranked_scores,
                          rules_by_profile=rules_by_profile,
                          video_profiles=profiles, rule_unjudged=unjudged)


def explain(library, video_id: str, rule: Rule | dict):
    """Per-track per-frame traces and the peak span of ``rule`` on one video (for the timeline)."""
    from .rules.explain import explain_video

    r = rule if isinstance(rule, Rule) else parse_rule(rule)
    why = scorer_for(library).columns.broken.get(video_id)
    if why:      # its rows cannot be read back (`rules.rowcheck`): said, not a traceback
        raise StrivedError(f"the stored records of video {video_id!r} are damaged ({why}): re-index or "
                           f"re-import it, or remove it (`strived remove {video_id}`)")
    # an unknown soft term takes its expected value over the library (the scorer's numbers)
    return explain_video(library.get_video(video_id), r, term_means=scorer_for(library).term_means(r))
