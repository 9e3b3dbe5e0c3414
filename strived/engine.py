"""The engine facade: what the CLI and the app both call.

``search`` runs the paper's query path: resolve a rule (explicit rule, or the calibrated library's
matcher/adapter), score it over the library (symbolic source), rank by the dense and BM25 sources
where they are available, weight the sources by the fusion router, fuse by weighted RRF (k = 60).
A source that cannot run (no index, no model) is left out with a notice, never silently faked.
Its steps are `strived.search_steps` (sources, weights, fusion) and `strived.search_hits` (spans
and per-source details); the rule source is `strived.rule_source`.
"""

from __future__ import annotations

import time
from typing import Sequence

from .drive_hits import merge_hits
from .errors import SourceUnavailable, StrivedError
from .jobs import CancelFn, ProgressFn
from .query import parse_query
from .response import SearchHit, SearchResponse
from .retrieval.fusion import RRF_K
from .retrieval.relevance import rerank_by_relevance
from .retrieval.sources import ensure_text_index
from .rule_source import (available_fields, json_key, resolve_profile_rules, resolve_query_rule,
                          rule_ranking, rule_unjudged, scorer_for, warm_rule_features)
from .rules import Rule, parse_rule
from .rules.explain import explain_video
from .search_hits import HitBuilder
from .search_steps import (SearchRun, choose_weights, fuse, route_weights, run_rule_source, run_text_sources,
                           start_text_preload)

# the facade: what the CLI, the app, the evaluation and the benchmarks import from here
__all__ = ["SOURCES", "SearchHit", "SearchResponse", "SourceUnavailable", "StrivedError", "available_fields",
           "build_text_index", "explain", "json_key", "parse_query", "parse_rule", "resolve_profile_rules",
           "resolve_query_rule", "route_weights", "rule_ranking", "rule_unjudged", "scorer_for", "search",
           "warm_rule_features"]

SOURCES = ("rule", "dense", "bm25")


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
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise StrivedError(f"unknown source(s) {unknown}; valid: {', '.join(SOURCES)}")
    run = SearchRun(library=library, query=query, parsed=parsed, sources=sources, llm=llm,
                    progress=progress, cancel=cancel)
    start_text_preload(run)      # the dense source's first loads overlap the rule source
    if "rule" in sources:
        run_rule_source(run, rule=rule, event=event, rule_library=rule_library, rule_hits=rule_hits,
                        match_hint=match_hint)
    run_text_sources(run)
    rankings = {name: r.ids for name, r in run.ranked.items()}
    used = [s for s in sources if s in rankings]
    w_used = choose_weights(run, used, weights, router)
    fusion = fuse(run, used, w_used, rrf_k, top_k)
    t0 = time.perf_counter()
    builder = HitBuilder(run, fusion, span_k)
    hits = builder.hits()
    run.timings["spans"] = (time.perf_counter() - t0) * 1e3
    if rerank:
        hits = rerank_by_relevance(hits)
    hits = merge_hits(library, hits)      # an event across a file boundary of a drive: one hit
    run.timings["total"] = (time.perf_counter() - t_all) * 1e3
    return SearchResponse(query=query, hits=hits, rule=run.rule_obj.to_dict() if run.rule_obj else None,
                          match=run.match, weights=w_used, notices=run.notices, timings_ms=run.timings,
                          sources_used=used, rankings=rankings, ranking_scores=fusion.scores,
                          rules_by_profile=run.rules_by_profile,
                          video_profiles=builder.profiles, rule_unjudged=run.unjudged)


def explain(library, video_id: str, rule: Rule | dict):
    """Per-track per-frame traces and the peak span of ``rule`` on one video (for the timeline)."""
    r = rule if isinstance(rule, Rule) else parse_rule(rule)
    why = scorer_for(library).columns.broken.get(video_id)
    if why:      # its rows cannot be read back (`rules.rowcheck`): said, not a traceback
        raise StrivedError(f"the stored records of video {video_id!r} are damaged ({why}): re-index or "
                           f"re-import it, or remove it (`strived remove {video_id}`)")
    # an unknown soft term takes its expected value over the library (the scorer's numbers)
    return explain_video(library.get_video(video_id), r, term_means=scorer_for(library).term_means(r))


def build_text_index(library, progress: ProgressFn = None, cancel: CancelFn = None) -> str | None:
    """Bring a library's search indexes up to date after videos were added (incremental): the
    BM25 texts and dense index, then the rule features of every calibrated library rule (so the
    first search of each event needs no feature computation). Returns a notice when a part is
    unavailable."""
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
