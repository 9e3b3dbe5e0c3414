"""The methods `strived eval` compares: each source alone, fusion, and the paper's ablations.

Rule-source variants (the paper's Table of ablations):
- calibrated library vs the same rule forms with their starting numbers ("without calibration");
- matcher + adapter vs always reusing the closest library rule ("without the adapter");
- binarised soft scores; without hard gates; without entity selectors (any class, any track).
With cross-fitting on (``--cv K``), every calibrated rule that scores an item was calibrated on the
other folds only, so benchmark numbers stay out-of-sample.
"""

from __future__ import annotations

import copy

from ..engine import SOURCES, SourceUnavailable, rule_ranking, search, scorer_for
from ..rules import parse_rule
from ..rules.explain import peak_span
from .bench import BenchQuery
from .registry import EvalContext, MethodOutput, MethodUnavailable, method


def _rulelib():
    from ..rulelib import library as L, resolve as R

    return L, R


def _cv_libraries(ctx: EvalContext, profiles: bool = True):
    """[(held-out item ids, library calibrated without them)], built once per evaluation.

    With ``profiles`` (the product's behaviour), each fold fits one library per calibration
    profile on that profile's training items only (perceived videos / imported track records),
    and each held-out item is scored by its own profile's library; without, one library is fitted
    on all training items (the single-profile ablation)."""
    key = ("cv_libs", profiles)
    if key in ctx.cache:
        return ctx.cache[key]
    from ..rulelib.fit.calibrate import calibrate_library
    from ..rulelib.fit.crossval import make_folds

    scorer = scorer_for(ctx.library)
    vids = [v for v in scorer.video_ids if v in set(ctx.bench.item_ids)]
    labels = labels_from_queries(ctx.bench, vids)
    folds = make_folds(vids, ctx.cv_folds)
    prof = ctx.library.video_profiles()
    groups = sorted({prof.get(v, "tracks") for v in vids}) if profiles else [None]
    libs = []
    for fold in folds:
        train = [v for v in vids if v not in set(fold)]
        for g in groups:
            tr = [v for v in train if g is None or prof.get(v, "tracks") == g]
            from ..rulelib.library import RuleLibrary

            lib, _ = calibrate_library(scorer, labels.restrict(tr),
                                       base=RuleLibrary.uncalibrated(profile=g or "tracks"))
            libs.append(({v for v in fold if g is None or prof.get(v, "tracks") == g}, lib))
    ctx.cache[key] = libs
    return libs


def _shipped_libraries(ctx: EvalContext, calibrated: bool, profiles: bool):
    """[(item ids or None, shipped library)]: per calibration profile, or one for all items."""
    L, _ = _rulelib()
    if not profiles:
        return [(None, L.load_default_library(calibrated=calibrated))]
    prof = ctx.library.video_profiles()
    return [({v for v, p in prof.items() if p == g}, L.load_default_library(calibrated=calibrated, profile=g))
            for g in sorted(set(prof.values()))]


def labels_from_queries(bench, videos: list[str]):
    """Weak labels for cross-fitting from any benchmark folder: each query's relevant items are
    positives of the library event its ``event`` key names, or, when that is not a library event,
    of the event the offline matcher assigns to the query text; ``ambiguous`` items are ignored."""
    from ..rulelib.library import load_default_library
    from ..rulelib.matcher import match_offline
    from ..rulelib.fit.weak_labels import WeakLabels

    lib = load_default_library(calibrated=False)
    pos: dict[str, set[str]] = {}
    ign: dict[str, set[str]] = {}
    for q in bench.queries:
        ev = q.event if q.event in lib.entries else match_offline(q.text, lib).event
        if ev not in lib.entries:
            continue
        pos.setdefault(ev, set()).update(q.relevant)
        ign.setdefault(ev, set()).update(q.ambiguous)
    ign = {e: s - pos.get(e, set()) for e, s in ign.items()}
    return WeakLabels(list(videos), pos, ign, {}, [f"benchmark queries:{bench.name}"])


def _transform(rule_d: dict, no_gates: bool, no_entity: bool) -> dict:
    d = copy.deepcopy(rule_d)
    if "sequence" in d:
        # a sequence rule: the ablation applies to its steps (a negation's gates are its scope)
        for st in d["sequence"]:
            if no_gates:
                st["hard_gates"] = []
            if no_entity and st.get("entity", {}).get("role", "object") == "object":
                st["entity"].update({"class_filter": None, "selection": "any", "agg_mode": "any"})
        if all(not st.get("hard_gates") and not st.get("soft_scores") for st in d["sequence"]):
            return None
        return d
    if no_gates:
        d["hard_gates"] = []
    if no_entity:
        ent = d.setdefault("entity", {})
        if ent.get("role", "object") == "object":
            ent.update({"class_filter": None, "selection": "any", "agg_mode": "any"})
        for s in d.get("soft_scores", []):
            s.pop("min_fraction", None)
    if not d.get("hard_gates") and not d.get("soft_scores"):
        return None  # nothing left to score: the rule source carries no information
    return d


def _resolve(ctx, q: BenchQuery, rule_lib, adapter: bool, videos=None):
    from ..engine import available_fields

    L, R = _rulelib()
    avail = available_fields(ctx.library, videos=videos)
    if adapter:
        rr = R.resolve_rule(q.text, library=rule_lib, llm=ctx.llm, available_fields=avail)
        return rr.rule
    from ..rulelib.matcher import match_offline

    m = match_offline(q.text, rule_lib)
    event = m.event if m.event in rule_lib.entries else None
    if event is None:
        rr = R.resolve_rule(q.text, library=rule_lib, llm=ctx.llm, available_fields=avail)
        event = rr.exemplar_event or rr.event
    return rule_lib.rule(event)


def rule_hits(ctx: EvalContext, q: BenchQuery, *, calibrated=True, adapter=True, binarize=False,
              no_gates=False, no_entity=False, profiles=True):
    """(hits [(video_id, score, peak_track)], spans of the top items) for one query and variant."""
    L, R = _rulelib()
    key = ("rule", q.id, calibrated, adapter, binarize, no_gates, no_entity, profiles)
    if key in ctx.cache:
        return ctx.cache[key]
    if calibrated and ctx.rule_library is not None:
        parts = [(None, ctx.rule_library)]
    elif calibrated and ctx.cv_folds:
        parts = [(fold, lib) for fold, lib in _cv_libraries(ctx, profiles)]
    else:
        parts = _shipped_libraries(ctx, calibrated, profiles)
    hits, rules = [], {}
    for fold, lib in parts:
        r = _resolve(ctx, q, lib, adapter, fold)
        if no_gates or no_entity:
            d = _transform(r.to_dict(), no_gates, no_entity)
            if d is None:
                continue
            r = parse_rule(d)
        for vid, s, peak in rule_ranking(ctx.library, r, binarize=binarize):
            if fold is None or vid in fold:
                hits.append((vid, s, peak))
                rules[vid] = r
    hits.sort(key=lambda h: (-h[1], h[0]))
    spans = {}
    for vid, s, peak in hits[:10]:
        sp = peak_span(ctx.library.get_video(vid), rules[vid], peak)
        if sp:
            spans[vid] = sp
    ctx.cache[key] = (hits, spans)
    return hits, spans


def _query_rankings(ctx, q: BenchQuery, variant: dict) -> tuple[dict[str, list[str]], dict[str, list[float]]]:
    """Each source's ranking of the benchmark's items for ``q`` under a rule variant, and its
    scores aligned with it (cached)."""
    key = ("rankings", q.id, tuple(sorted(variant.items())))
    if key not in ctx.cache:
        hits, _ = rule_hits(ctx, q, **variant)
        try:
            resp = search(ctx.library, q.text, sources=SOURCES, weights={s: 1.0 for s in SOURCES},
                          top_k=10**9, span_k=0, llm=ctx.llm, rule_hits=hits)
        except SourceUnavailable as e:
            raise MethodUnavailable(str(e)) from None
        items = set(ctx.bench.item_ids)
        keep = {s: [i for i, v in enumerate(r) if v in items] for s, r in resp.rankings.items()}
        ctx.cache[key] = ({s: [resp.rankings[s][i] for i in ix] for s, ix in keep.items()},
                          {s: [resp.ranking_scores[s][i] for i in ix] for s, ix in keep.items()})
    return ctx.cache[key]


def _example(ctx, q: BenchQuery, variant: dict):
    from ..retrieval.router_fit import Example, query_kind

    rankings, scores = _query_rankings(ctx, q, variant)
    return Example(q.text, rankings, set(q.relevant), set(q.ambiguous), query_kind(q.text), scores)


def _cv_router_weights(ctx, q: BenchQuery, variant: dict) -> dict[str, float]:
    """Router weights for ``q`` fitted on every *other* query of the benchmark (leave one query
    out), on the same rule variant's rankings: out-of-sample like the cross-fitted rules."""
    from ..retrieval.router_fit import fit_router

    exs = [_example(ctx, o, variant) for o in ctx.bench.queries if o.id != q.id]
    w, _ = fit_router(exs).weights(q.text)
    return w


def _search(ctx, q, sources, weights=None, router="auto", **variant) -> MethodOutput:
    hits = spans = None
    if "rule" in sources:
        hits, spans = rule_hits(ctx, q, **variant)
    if weights is None and router == "auto" and len(sources) > 1 and ctx.cv_folds and ctx.llm is None:
        weights = _cv_router_weights(ctx, q, variant)
    try:
        resp = search(ctx.library, q.text, sources=sources, weights=weights, top_k=10**9, span_k=0,
                      llm=ctx.llm, rule_hits=hits, router=router)
    except SourceUnavailable as e:
        raise MethodUnavailable(str(e)) from None
    missing = [s for s in sources if s not in resp.sources_used]
    if missing:
        raise MethodUnavailable("; ".join(n for n in resp.notices if "skipped" in n) or
                                f"source(s) {missing} unavailable")
    out_spans = dict(spans or {})
    for h in resp.hits:
        if h.video_id not in out_spans and h.span_s:
            out_spans[h.video_id] = h.span_s
    return MethodOutput([h.video_id for h in resp.hits], out_spans, list(resp.notices))


# name -> (sources, rule-source variant, description); one registration per row
_VARIANTS = {
    "full": (SOURCES, {}, "the full system: routed weighted RRF of rule, dense, BM25 (router fitted on "
                          "labelled queries; with --cv, on the other queries only)"),
    "full-wordlist": (SOURCES, {"router": "wordlist"},
                      "full system with the word-list router (the paper's three facts as word lists)"),
    "equal": (SOURCES, {"weights": {s: 1.0 for s in SOURCES}}, "unweighted RRF of rule, dense, BM25"),
    "rule": (("rule",), {}, "symbolic path alone: calibrated library, matcher + adapter"),
    "dense": (("dense",), {}, "dense retrieval alone"),
    "bm25": (("bm25",), {}, "BM25 over per-video summaries alone"),
    "rule-one-profile": (("rule",), {"profiles": False},
                         "symbolic path alone, one calibration for perceived videos and track records"),
    "full-one-profile": (SOURCES, {"profiles": False},
                         "full system, one calibration for perceived videos and track records"),
    "rule-uncalibrated": (("rule",), {"calibrated": False},
                          "symbolic path alone with the rule forms' starting numbers"),
    "full-uncalibrated": (SOURCES, {"calibrated": False},
                          "full system without the calibrated library (starting numbers)"),
    "full-no-adapter": (SOURCES, {"adapter": False},
                        "full system, always reusing the closest library rule (no adapter)"),
    "full-binarised": (SOURCES, {"binarize": True}, "full system with soft scores binarised at 0.5"),
    "full-no-gates": (SOURCES, {"no_gates": True}, "full system without hard gates"),
    "full-no-entity": (SOURCES, {"no_entity": True},
                       "full system without entity selectors (any class, any track)"),
}


def _register_variant(name: str, sources, variant: dict, description: str) -> None:
    method(name, description)(lambda ctx, q: _search(ctx, q, sources, **variant))


for _name, (_sources, _variant, _desc) in _VARIANTS.items():
    _register_variant(_name, _sources, _variant, _desc)


@method("rule-hand", "symbolic path with the hand-written rule of the query's event key (no calibration)")
def _rule_hand(ctx, q):
    from ..rulelib.hand_rules import hand_rule

    if not q.event or hand_rule(q.event) is None:
        raise MethodUnavailable(f"no hand-written rule for event {q.event!r}")
    try:
        resp = search(ctx.library, q.text, sources=("rule",), event=q.event, top_k=10**9, span_k=10)
    except SourceUnavailable as e:
        raise MethodUnavailable(str(e)) from None
    return MethodOutput([h.video_id for h in resp.hits], {h.video_id: h.span_s for h in resp.hits if h.span_s})


def fit_router_on_benchmark(ctx: EvalContext, provenance: dict | None = None):
    """The fusion router fitted on every query of the benchmark (the product's rule variant), for
    shipping or for a user's own labelled folder (`strived eval --fit-router`)."""
    from ..retrieval.router_fit import fit_router

    exs = [_example(ctx, q, {}) for q in ctx.bench.queries if q.relevant]
    return fit_router(exs, provenance={"benchmark": ctx.bench.name, **(provenance or {})})


def relevance_groups(ctx: EvalContext, top: int = 50) -> list[tuple]:
    """Per query: (feature rows, labels) of the full system's top ``top`` hits, searched the way
    the "full" method does (cross-fitted rules and router weights when ``ctx.cv_folds``), so the
    evidence is out-of-sample. Labels: 1 relevant, 0 not; ambiguous items are left out."""
    import numpy as np

    from ..retrieval.relevance import hit_features

    out = []
    for q in ctx.bench.queries:
        hits, _ = rule_hits(ctx, q)
        weights = _cv_router_weights(ctx, q, {}) if ctx.cv_folds and ctx.llm is None else None
        try:
            resp = search(ctx.library, q.text, sources=SOURCES, weights=weights, top_k=top, span_k=0,
                          llm=ctx.llm, rule_hits=hits)
        except SourceUnavailable as e:
            raise MethodUnavailable(str(e)) from None
        if sorted(resp.sources_used) != sorted(SOURCES):
            raise MethodUnavailable(f"query {q.id}: sources {resp.sources_used} (all three are needed)")
        items, amb = set(ctx.bench.item_ids), set(q.ambiguous)
        rows, ys = [], []
        for h in resp.hits:
            if h.video_id not in items or h.video_id in amb:
                continue
            rows.append(hit_features(h.per_source, h.rank))
            ys.append(1.0 if h.video_id in q.relevant else 0.0)
        if rows:
            out.append((np.vstack(rows), np.asarray(ys)))
    return out


def fit_relevance_on_benchmark(ctx: EvalContext, provenance: dict):
    """The relevance model fitted on every query of the benchmark, with held-out figures."""
    from ..retrieval.relevance import fit_with_heldout

    model, metrics = fit_with_heldout(relevance_groups(ctx))
    model.provenance = {"benchmark": ctx.bench.name, "sources": list(SOURCES),
                        "hits_per_query": 50, **provenance, "heldout_leave_one_query_out": metrics}
    return model

