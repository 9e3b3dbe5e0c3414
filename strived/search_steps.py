"""The named steps of a search, run in order by `strived.engine.search`: the rule source (resolve
the query's rule, rank the library by it, note the videos it cannot judge), the dense and BM25
sources (each timed; one that cannot run is left out with a notice), the fusion weights, and the
weighted RRF (k = 60) over video codes."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from .availability import unjudged_notice
from .errors import Cancelled, SourceUnavailable, StrivedError
from .jobs import CancelFn, ProgressFn, check_cancel, report
from .query import ParsedQuery
from .retrieval import router as R
from .retrieval import sources as S
from .retrieval.fusion import shared_ranks_array
from .retrieval.ranked import Ranked, id_space
from .rule_source import (add_damaged, json_key, ranked_from_hits, resolve_profile_rules, resolve_query_rule,
                          rule_ranking, rule_unjudged)
from .rules import Rule, parse_rule


@dataclass
class SearchRun:
    """One search's state, filled in by the steps in order."""

    library: Any
    query: str
    parsed: ParsedQuery
    sources: Sequence[str]
    llm: Any = None
    progress: ProgressFn = None
    cancel: CancelFn = None
    notices: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    ranked: dict[str, Ranked] = field(default_factory=dict)   # each source's ranking as arrays
    match: dict = field(default_factory=dict)
    rule_obj: Rule | None = None
    rules_by_profile: dict[str, dict] = field(default_factory=dict)
    rule_of: dict[str, Rule] = field(default_factory=dict)   # {profile: rule} when the profiles' rules differ
    unjudged: dict[str, list[str]] = field(default_factory=dict)  # videos the rule cannot evaluate -> fields
    step: int = 0

    def step_done(self, name: str) -> None:
        """A source has run: progress (one step per source, and the hits), then a cancel check."""
        self.step += 1
        report(self.progress, "search", self.step, len(self.sources) + 1, message=name)
        check_cancel(self.cancel)


# ------------------------------------------------------------------------------- the rule source
def run_rule_source(run: SearchRun, *, rule: Rule | dict | None, event: str | None, rule_library,
                    rule_hits: list[tuple[str, float, int]] | None, match_hint: dict | None) -> None:
    """The rule source: its rule, then its ranking; left out with a notice when it cannot run."""
    try:
        resolve_rule(run, rule=rule, event=event, rule_library=rule_library, rule_hits=rule_hits,
                     match_hint=match_hint)
        rank_by_rule(run, rule_hits)
    except SourceUnavailable as e:
        run.notices.append(f"rule source skipped: {e}")
    run.step_done("rule")


def resolve_rule(run: SearchRun, *, rule: Rule | dict | None, event: str | None, rule_library,
                 rule_hits: list[tuple[str, float, int]] | None, match_hint: dict | None) -> None:
    """The rule the search runs: the caller's ``rule``, ``event``'s hand-written rule, the given
    ``rule_library``'s, else the calibrated library's rule of each profile; with ``rule_hits``
    (the caller's ranking) none."""
    t0 = time.perf_counter()
    if rule is not None:
        run.rule_obj = rule if isinstance(rule, Rule) else parse_rule(rule)
        run.match = {"event": run.rule_obj.event, "confidence": None, "mode": "user", "source": "user",
                     "notices": [f"rule {p or '/'}: {m}" for p, m in run.rule_obj.warnings]}
    elif rule_hits is None and (event or rule_library is not None):
        run.rule_obj, run.match = resolve_query_rule(run.parsed, library=run.library, llm=run.llm, event=event,
                                                     rule_library=rule_library)
    elif rule_hits is None:
        profile_rules, run.match = resolve_profile_rules(run.parsed, library=run.library, llm=run.llm)
        run.rule_obj = profile_rules[run.match["profile"]]
        if len({json_key(r) for r in profile_rules.values()}) > 1:
            run.rules_by_profile = {p: r.to_dict() for p, r in profile_rules.items()}
            run.rule_of = {p: r for p, r in profile_rules.items()}
    else:   # the caller's rule hits; ``match_hint``: what the matcher made of the query
        run.match = {"event": None, "confidence": None, **(match_hint or {}), "mode": "precomputed",
                     "source": "caller", "notices": []}
    run.notices.extend(run.match.get("notices") or [])
    run.timings["resolve_rule"] = (time.perf_counter() - t0) * 1e3


def rank_by_rule(run: SearchRun, rule_hits: list[tuple[str, float, int]] | None) -> None:
    """The rule's ranking (or the caller's ``rule_hits``), and the videos it cannot judge: those
    lacking a field it needs, and those whose stored records are damaged."""
    library = run.library
    t1 = time.perf_counter()
    if rule_hits is None and hasattr(library, "availability"):
        run.unjudged = rule_unjudged(library, run.rule_of if run.rule_of else run.rule_obj)
        note = unjudged_notice(run.unjudged, library.availability(), len(library))
        if note:
            run.notices.append(note)
    if rule_hits is not None:
        run.ranked["rule"] = ranked_from_hits(rule_hits)
    else:
        run.ranked["rule"] = rule_ranking(library, run.rule_of if run.rule_of else run.rule_obj,
                                          unjudged=run.unjudged, cancel=run.cancel, as_ranked=True)
        run.unjudged = add_damaged(library, run.unjudged, run.notices)
    run.timings["rule"] = (time.perf_counter() - t1) * 1e3


# ------------------------------------------------------------------------------- the text sources
_preloads: dict[tuple, threading.Thread] = {}
_preload_lock = threading.Lock()


def _wait_preload(key: tuple, fn, cancel: CancelFn, poll_s: float = 0.02) -> None:
    """Run ``fn()``, a load that cannot stop part-way (a model, an index's files) and uses no
    database connection, in a helper thread, and wait for it while checking ``cancel``. A cancel
    returns at once (Cancelled) and lets the load finish by itself: it fills the process caches
    the next search reuses (a search meanwhile waits on the same thread instead of loading
    twice). Errors are left to the call that follows, which reports them."""
    t = _start_preload(key, fn)
    while t.is_alive():
        t.join(poll_s)
        check_cancel(cancel)


def _start_preload(key: tuple, fn) -> threading.Thread:
    """The helper thread running ``fn()`` under ``key`` (`_wait_preload`), started unless one is
    still running."""
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
    return t


def _dense_preload(library, query: str):
    """(key, fn) of the load a dense search of ``query`` needs first: the index opened and the
    query embedded (the text model loaded; the vector is kept by `sources._query_vector`, the
    one `dense_ranking` then reads); None when the embedder cannot be had (`dense_ranking` says
    why). Reads the library on the calling thread; ``fn`` uses no database connection."""
    try:
        emb = S.library_embedder(library)
    except Exception:  # noqa: BLE001  (dense_ranking says what is wrong)
        return None

    def preload():
        if len(S.open_dense_index(library, emb)) == 0:
            # what dense_ranking checks for an empty index (without loading the model
            # where the embedder can say whether it is installed)
            (getattr(emb, "check_installed", None) or emb.load)()
        else:
            S._query_vector(emb, query)
    return (str(library.folder), emb.name), preload


def start_text_preload(run: SearchRun) -> None:
    """Start the dense source's first loads (`_dense_preload`: a process's first dense search
    opens the index and loads the text model, ~0.1-0.3 s with the numpy encoder; torch: 2-8 s) in
    a helper thread as the search starts, so they overlap the rule source; the dense step then
    waits for that thread. The same objects and the same vector as loading them in the dense
    step: the results do not change, only when the loading happens."""
    if "dense" not in run.sources or not (run.query or "").strip():
        return
    pre = _dense_preload(run.library, run.query)
    if pre is not None:
        _start_preload(*pre)


def _dense(library, query: str, top_k: int | None, cancel: CancelFn = None):
    # done in a helper thread (started by `start_text_preload`, or here), so a cancel is seen
    pre = _dense_preload(library, query)
    if pre is not None:
        _wait_preload(*pre, cancel)
    check_cancel(cancel)
    return S.dense_ranking(library, query, top_k=top_k, as_ranked=True)


def _bm25(library, query: str, top_k: int | None, cancel: CancelFn = None):
    # checked before and after (the caller): its first load (0.3 s at 10k videos) reads the
    # library's connection, so it is not moved to a helper thread like the dense one
    return S.bm25_ranking(library, query, top_k=top_k, as_ranked=True)


def route_weights(query: "str | ParsedQuery", llm=None, library=None, mode: str = "auto") -> tuple[dict[str, float], str, str | None]:
    """(weights, router source, notice). Equal weights when no router module is present."""
    kind = "text"
    if library is not None:
        try:
            choice = library.meta_get("dense_embedder") or {}
            kind = "visual" if choice.get("model_dir") else "text"
        except Exception:  # noqa: BLE001  (a library without meta: the default embedder)
            kind = "text"
    r = R.route(query, llm=llm, dense_kind=kind, mode=mode)
    return dict(r.weights), r.source, r.notice


def _ranked_from_list(out: Sequence[tuple]) -> Ranked:
    """A source's plain ranking [(video_id, score[, (t0_s, t1_s) or None])] as a `Ranked`."""
    import numpy as np

    ids = [r[0] for r in out]
    spans = [tuple(r[2]) if len(r) > 2 and r[2] is not None else None for r in out]
    return Ranked(ids=ids, scores=np.asarray([float(r[1]) for r in out], np.float64).reshape(-1),
                  extra={"spans": spans} if any(x is not None for x in spans) else {})


def run_text_sources(run: SearchRun) -> None:
    """The dense and BM25 sources asked for, each timed; one that cannot run is left out, loudly."""
    for name, fn in (("dense", _dense), ("bm25", _bm25)):
        if name not in run.sources:
            continue
        check_cancel(run.cancel)
        t0 = time.perf_counter()
        try:
            out = fn(run.library, run.query, None, run.cancel)
            run.ranked[name] = out if isinstance(out, Ranked) else _ranked_from_list(out)
        except Cancelled:
            raise
        except StrivedError as e:  # a source that cannot run is left out, loudly
            run.notices.append(f"{name} source skipped: {e}")
        except Exception as e:  # noqa: BLE001  (a broken source must not take the search down)
            run.notices.append(f"{name} source skipped: it failed ({type(e).__name__}: {e})")
        run.timings[name] = (time.perf_counter() - t0) * 1e3
        run.step_done(name)


# ------------------------------------------------------------------------------- weights and fusion
def choose_weights(run: SearchRun, used: list[str], weights: dict[str, float] | None,
                   router: str) -> dict[str, float]:
    """The weight of each source that ran: ``weights`` when given, else the fusion router's (1.0
    for a single source); a notice when the text index lags the library."""
    if "dense" in used or "bm25" in used:
        note = S.text_index_notice(run.library, [s for s in used if s in ("dense", "bm25")])
        if note:
            run.notices.append(note)
    t0 = time.perf_counter()
    if weights is None:
        if len(used) > 1:
            weights, rsrc, note = route_weights(run.parsed, llm=run.llm, library=run.library, mode=router)
            run.match["router"] = rsrc
            if note:
                run.notices.append(note)
        else:
            weights = {s: 1.0 for s in used}
    run.timings["router"] = (time.perf_counter() - t0) * 1e3
    return {s: float(weights.get(s, 0.0)) for s in used}


@dataclass
class Fusion:
    """The fused list and what the per-hit details read: every video as a code (its place in the
    library's sorted ids, then ``extra``), each source's codes, shared ranks and scores."""

    used: list[str]
    weights: dict[str, float]
    rrf_k: int
    space: Any
    extra: dict[str, int]           # ids a lagging index holds that the library does not
    codes: dict[str, Any]
    n_codes: int
    n_ranked: dict[str, int]
    ranks: dict[str, Any]           # fractional ranks (fusion.shared_ranks), by position
    scores: dict[str, list[float]]  # each source's scores in its ranking's order
    fused: list[tuple[str, float]]  # (video_id, fused score), best first


def fuse(run: SearchRun, used: list[str], w_used: dict[str, float], rrf_k: int, top_k: int) -> Fusion:
    """Weighted RRF of the sources that ran (one source: its own ranking). The fusion and the
    per-hit lookups are array operations over video codes, not a Python step per video and source."""
    ranked, unjudged, library = run.ranked, run.unjudged, run.library
    # each source's scores in its ranking's order: equal scores share a rank in the fusion
    ranked_scores = {s: ranked[s].scores.tolist() for s in used}
    import numpy as np

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
    return Fusion(used=used, weights=w_used, rrf_k=rrf_k, space=space, extra=extra, codes=codes,
                  n_codes=n_codes, n_ranked=n_ranked, ranks=fused_rank, scores=ranked_scores, fused=fused)


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
