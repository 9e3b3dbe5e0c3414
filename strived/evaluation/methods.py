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

from ..engine import (SOURCES, SourceUnavailable, available_fields, resolve_profile_rules, rule_ranking, scorer_for,
                      search)
from ..query import parse_query
from ..retrieval.relevance import RERANK_K, RelevanceModel, fit_logistic, fit_with_heldout, hit_features
from ..retrieval.router_fit import EQUAL, Example, FittedRouter, fit_router, query_kind
from ..rulelib import library as L
from ..rulelib import resolve as R
from ..rulelib.fit.calibrate import calibrate_library
from ..rulelib.fit.crossval import group_of, make_folds
from ..rulelib.fit.weak_labels import WeakLabels
from ..rulelib.hand_rules import hand_rule
from ..rulelib.library import RuleLibrary, load_default_library
from ..rulelib.matcher import match_offline
from ..rules import parse_rule
from ..rules.explain import peak_span
from .bench import BenchQuery
from .registry import EvalContext, MethodOutput, MethodUnavailable, method


def _cv_libraries(ctx: EvalContext, profiles: bool = True):
    """[(held-out item ids, library calibrated without them)], built once per evaluation.

    With ``profiles`` (the product's behaviour), each fold fits one library per calibration
    profile on that profile's training items only (perceived videos / imported track records),
    and each held-out item is scored by its own profile's library; without, one library is fitted
    on all training items (the single-profile ablation)."""
    key = ("cv_libs", profiles)
    if key in ctx.cache:
        return ctx.cache[key]

    scorer = scorer_for(ctx.library)
    vids = [v for v in scorer.video_ids if v in set(ctx.bench.item_ids)]
    labels = labels_from_queries(ctx.bench, vids)
    folds = eval_folds(ctx, vids)
    groups_of = item_groups(ctx)
    prof = ctx.library.video_profiles()
    groups = sorted({prof.get(v, "tracks") for v in vids}) if profiles else [None]
    libs = []
    for fold in folds:
        train = [v for v in vids if v not in set(fold)]
        for g in groups:
            tr = [v for v in train if g is None or prof.get(v, "tracks") == g]

            lib, _ = calibrate_library(scorer, labels.restrict(tr),
                                       base=RuleLibrary.uncalibrated(profile=g or "tracks"),
                                       groups=groups_of)
            libs.append(({v for v in fold if g is None or prof.get(v, "tracks") == g}, lib))
    ctx.cache[key] = libs
    return libs


def item_groups(ctx: EvalContext) -> dict[str, str]:
    """Item id -> its source (the manifest's ``group``, or the id's prefix)."""
    return {it.id: it.group for it in ctx.bench.items}


def eval_folds(ctx: EvalContext, vids: list[str]) -> list[list[str]]:
    """The cross-fitting folds over ``vids``: one per source (``--cv source``: leave one source
    out), or K folds of whole recording sequences (``--cv K``)."""
    if ctx.cv_folds == "source":
        g = item_groups(ctx)
        return make_folds(vids, len(vids) + 1, group_fn=lambda v: g.get(v, v))

    orig = {it.id: it.mirror_of for it in ctx.bench.items if it.mirror_of}
    return make_folds(vids, int(ctx.cv_folds), group_fn=lambda v: group_of(orig.get(v, v)))


def _shipped_libraries(ctx: EvalContext, calibrated: bool, profiles: bool):
    """[(item ids or None, shipped library)]: per calibration profile, or one for all items."""
    if not profiles:
        return [(None, L.load_default_library(calibrated=calibrated))]
    prof = ctx.library.video_profiles()
    return [({v for v, p in prof.items() if p == g}, L.load_default_library(calibrated=calibrated, profile=g))
            for g in sorted(set(prof.values()))]


def labels_from_queries(bench, videos: list[str]):
    """Weak labels for cross-fitting from any benchmark folder: each query's relevant items are
    positives of the library event its ``event`` key names, or, when that is not a library event,
    of the event the offline matcher assigns to the query text; ``ambiguous`` items are ignored."""
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
    avail = available_fields(ctx.library, videos=videos)
    if adapter:
        rr = R.resolve_rule(q.text, library=rule_lib, llm=ctx.llm, available_fields=avail)
        return rr.rule

    m = match_offline(q.text, rule_lib)
    event = m.event if m.event in rule_lib.entries else None
    if event is None:
        rr = R.resolve_rule(q.text, library=rule_lib, llm=ctx.llm, available_fields=avail)
        event = rr.exemplar_event or rr.event
    return rule_lib.rule(event)


def rule_hits(ctx: EvalContext, q: BenchQuery, *, calibrated=True, adapter=True, binarize=False,
              no_gates=False, no_entity=False, profiles=True):
    """(hits [(video_id, score, peak_track)], spans of the top items) for one query and variant."""
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
                          top_k=10**9, span_k=0, llm=ctx.llm, rule_hits=hits, rerank=False)
        except SourceUnavailable as e:
            raise MethodUnavailable(str(e)) from None
        items = set(ctx.bench.item_ids)
        keep = {s: [i for i, v in enumerate(r) if v in items] for s, r in resp.rankings.items()}
        ctx.cache[key] = ({s: [resp.rankings[s][i] for i in ix] for s, ix in keep.items()},
                          {s: [resp.ranking_scores[s][i] for i in ix] for s, ix in keep.items()})
    return ctx.cache[key]


def _example(ctx, q: BenchQuery, variant: dict):
    rankings, scores = _query_rankings(ctx, q, variant)
    return Example(q.text, rankings, set(q.relevant), set(q.ambiguous), query_kind(q.text), scores)


def _cv_router_weights(ctx, q: BenchQuery, variant: dict) -> dict[str, float]:
    """Router weights for ``q`` fitted on every *other* query of the benchmark (leave one query
    out), on the same rule variant's rankings: out-of-sample like the cross-fitted rules."""
    exs = [_example(ctx, o, variant) for o in ctx.bench.queries if o.id != q.id]
    w, _ = fit_router(exs).weights(q.text)
    return w


def _fold_searches(ctx, q: BenchQuery, sources, variant: dict, top_k: int = 10**9,
                   weights=None, router: str = "auto"):
    """Per source fold: (held-out item ids, the product's search over all items with router
    weights fitted on the other queries' labels over the *other* sources' items only; with
    ``weights`` or a non-fitted ``router``, those instead)."""
    hits = rule_hits(ctx, q, **variant)[0] if "rule" in sources else None
    for fold in eval_folds(ctx, list(ctx.bench.item_ids)):
        held = set(fold)
        if weights is not None or router != "auto":
            try:
                yield held, search(ctx.library, q.text, sources=sources, weights=weights, router=router,
                                   top_k=top_k, span_k=0, llm=ctx.llm, rule_hits=hits, rerank=False)
            except SourceUnavailable as e:
                raise MethodUnavailable(str(e)) from None
            continue
        exs = []
        for o in ctx.bench.queries:
            if o.id == q.id or not (set(o.relevant) - held):
                continue
            ex = _example(ctx, o, variant)
            keep = {s: [i for i, v in enumerate(r) if v not in held] for s, r in ex.rankings.items()}
            exs.append(Example(ex.query, {s: [ex.rankings[s][i] for i in ix] for s, ix in keep.items()},
                               ex.relevant - held, ex.ambiguous - held, ex.kind,
                               {s: [ex.scores[s][i] for i in ix] for s, ix in keep.items() if s in ex.scores}))
        w = fit_router(exs).weights(q.text)[0] if exs else {s: 1.0 for s in sources}
        try:
            resp = search(ctx.library, q.text, sources=sources, weights={s: w.get(s, 0.0) for s in sources},
                          top_k=top_k, span_k=0, llm=ctx.llm, rule_hits=hits, rerank=False)
        except SourceUnavailable as e:
            raise MethodUnavailable(str(e)) from None
        yield held, resp


def _source_fold_fusion(ctx, q: BenchQuery, sources, variant: dict, rerank: bool = False,
                        weights=None, router: str = "auto") -> MethodOutput:
    """Leave-one-source-out fusion: each fold's fused scores of its own items (`_fold_searches`),
    merged into one ranking; with ``rerank``, its first `RERANK_K` ordered by a relevance model
    fitted on the other sources' hits of the other queries (`_nested_relevance`)."""
    fused: dict[str, float] = {}
    feats: dict[str, tuple[int, object]] = {}
    for k, (held, resp) in enumerate(_fold_searches(ctx, q, sources, variant, weights=weights, router=router)):
        for h in resp.hits:
            if h.video_id in held:
                fused[h.video_id] = h.score
                if rerank:
                    feats[h.video_id] = (k, hit_features(h.per_source, h.rank, query_match(ctx, q.text)))
    order = sorted(fused, key=lambda v: (-fused[v], v))
    if rerank:
        head = order[:RERANK_K]
        p = {v: float(_nested_relevance(ctx, feats[v][0], q.id).predict(feats[v][1])[0]) for v in head}
        order = sorted(head, key=lambda v: (-p[v], head.index(v))) + order[RERANK_K:]
    spans = rule_hits(ctx, q, **variant)[1] if "rule" in sources else {}
    return MethodOutput(order, dict(spans))


def _nested_relevance(ctx, fold: int, query_id: str):
    """The relevance model for the items of source fold ``fold`` under query ``query_id``: fitted
    on the hits of every *other* query (out-of-scope ones included) over the *other* folds' items,
    each hit's features taken from the search of its own fold. Cached per (fold, query)."""
    import numpy as np

    key = ("nested_relevance", fold, query_id)
    if key in ctx.cache:
        return ctx.cache[key]
    rows = _fold_relevance_rows(ctx)
    X = [r for (f, qid), (rs, _) in rows.items() if f != fold and qid != query_id for r in rs]
    y = [v for (f, qid), (_, ys) in rows.items() if f != fold and qid != query_id for v in ys]
    model = RelevanceModel(fit_logistic(np.vstack(X), np.asarray(y)))
    ctx.cache[key] = model
    return model


def _fold_relevance_rows(ctx) -> dict:
    """{(fold index, query id): (feature rows, labels)} of each fold's own items among the top 50
    of its search, for every query and the shipped out-of-scope fitting queries."""
    if "fold_relevance_rows" in ctx.cache:
        return ctx.cache["fold_relevance_rows"]
    out = {}
    extra = [BenchQuery(f"oos{k}", t, []) for k, t in enumerate(out_of_scope_queries("fit"))]
    for q in list(ctx.bench.queries) + extra:
        for k, (held, resp) in enumerate(_fold_searches(ctx, q, SOURCES, {}, top_k=50)):
            rows, ys, _ = _relevance_rows(ctx, q, resp, held)
            out[(k, q.id)] = (rows, ys)
    ctx.cache["fold_relevance_rows"] = out
    return out


def _search(ctx, q, sources, weights=None, router="auto", rerank=False, **variant) -> MethodOutput:
    hits = spans = None
    if ctx.cv_folds == "source" and ctx.llm is None and len(sources) > 1 and (
            (weights is None and router == "auto") or (rerank and tuple(sources) == SOURCES)):
        # fitted router and/or relevance reranking: both fitted inside each source fold
        return _source_fold_fusion(ctx, q, sources, variant, rerank=rerank and tuple(sources) == SOURCES,
                                   weights=weights, router=router)
    if "rule" in sources:
        hits, spans = rule_hits(ctx, q, **variant)
    if weights is None and router == "auto" and len(sources) > 1 and ctx.cv_folds and ctx.llm is None:
        weights = _cv_router_weights(ctx, q, variant)
    try:
        resp = search(ctx.library, q.text, sources=sources, weights=weights, top_k=10**9, span_k=0,
                      llm=ctx.llm, rule_hits=hits, router=router, rerank=rerank,
                      match_hint={k: v for k, v in query_match(ctx, q.text).items()
                                  if k in ("event", "confidence")} if rerank else None)
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
                          "labelled queries; with --cv, on the other queries only, and with --cv source "
                          "on the other sources only)"),
    "full-wordlist": (SOURCES, {"router": "wordlist"},
                      "full system with the word-list router (the paper's three facts as word lists)"),
    "equal": (SOURCES, {"weights": {s: 1.0 for s in SOURCES}}, "unweighted RRF of rule, dense, BM25"),
    "full-rerank": (SOURCES, {"rerank": True},
                    "full system with its first 20 reranked by the relevance estimate (the paper's "
                    "optional reranker; with --cv source the relevance model is fitted inside each fold)"),
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
    if not q.event or hand_rule(q.event) is None:
        raise MethodUnavailable(f"no hand-written rule for event {q.event!r}")
    try:
        resp = search(ctx.library, q.text, sources=("rule",), event=q.event, top_k=10**9, span_k=10)
    except SourceUnavailable as e:
        raise MethodUnavailable(str(e)) from None
    return MethodOutput([h.video_id for h in resp.hits], {h.video_id: h.span_s for h in resp.hits if h.span_s})


def fit_router_on_benchmark(ctx: EvalContext, provenance: dict | None = None, heldout: dict | None = None):
    """The fusion router fitted on every query of the benchmark (the product's rule variant), for
    shipping or for a user's own labelled folder (`strived eval --fit-router`).

    ``heldout``: the evaluation's ``methods`` figures. When they hold the fitted router ("full")
    and equal weights measured out of sample and the fitted router does not beat equal weights on
    mAP, the router returned keeps equal weights for every query kind, and says so."""
    exs = [_example(ctx, q, {}) for q in ctx.bench.queries if q.relevant]
    prov = {"benchmark": ctx.bench.name, **(provenance or {})}
    fr = fit_router(exs, provenance=prov)
    full, eq = (heldout or {}).get("full"), (heldout or {}).get("equal")
    if full is not None and eq is not None:
        cmp = {"fitted": {k: round(full[k], 4) for k in ("mAP", "Acc@1")},
               "equal": {k: round(eq[k], 4) for k in ("mAP", "Acc@1")}}
        if full["mAP"] <= eq["mAP"]:
            return FittedRouter({}, EQUAL, {**fr.provenance, "heldout": cmp, "decision": (
                "equal weights for every query kind: the fitted router did not beat them out of sample "
                f"(mAP {full['mAP']:.3f} vs {eq['mAP']:.3f}, {ctx.cv_folds} cross-fitting)")})
        fr.provenance.update(heldout=cmp, decision="fitted cells: they beat equal weights out of sample")
    return fr


def query_match(ctx: EvalContext, text: str) -> dict:
    """The matcher's answer for a query as the product gives it (event, calibrated confidence):
    evaluation searches pass cross-fitted rule hits, so their responses carry no match."""
    key = ("match", text)
    if key not in ctx.cache:
        ctx.cache[key] = resolve_profile_rules(parse_query(text), library=ctx.library, llm=ctx.llm)[1]
    return ctx.cache[key]


def _relevance_rows(ctx: EvalContext, q: BenchQuery, resp, keep=None):
    """(feature rows, labels, item sources) of a response's hits; ambiguous items left out."""
    items, amb, grp = set(ctx.bench.item_ids), set(q.ambiguous), item_groups(ctx)
    rows, ys, gs = [], [], []
    for h in resp.hits:
        if h.video_id not in items or h.video_id in amb or (keep is not None and h.video_id not in keep):
            continue
        rows.append(hit_features(h.per_source, h.rank, query_match(ctx, q.text)))
        ys.append(1.0 if h.video_id in q.relevant else 0.0)
        gs.append(grp.get(h.video_id, ""))
    return rows, ys, gs


def out_of_scope_queries(part: str = "fit") -> list[str]:
    """The shipped out-of-scope queries (``resources/out_of_scope_queries.json``): ``fit`` or
    ``heldout``."""
    import json
    from pathlib import Path

    p = Path(__file__).resolve().parents[2] / "resources" / "out_of_scope_queries.json"
    return list(json.loads(p.read_text(encoding="utf-8"))[part])


def relevance_groups(ctx: EvalContext, top: int = 50, by: str = "query",
                     out_of_scope: list[str] = ()) -> list[tuple]:
    """(feature rows, labels) of the full system's top ``top`` hits, searched the way the "full"
    method does (cross-fitted rules and router weights when ``ctx.cv_folds``), so the evidence is
    out-of-sample. Labels: 1 relevant, 0 not; ambiguous items are left out. One group per query
    (``by="query"``) or per item source (``by="source"``: for leave-one-source-out fitting).
    ``out_of_scope``: query texts no item answers (every hit a non-match), added as queries."""
    import numpy as np

    per: dict[str, tuple[list, list]] = {}
    extra = [BenchQuery(f"oos{k}", t, []) for k, t in enumerate(out_of_scope)]
    for q in list(ctx.bench.queries) + extra:
        if ctx.cv_folds == "source" and ctx.llm is None:
            parts = list(_fold_searches(ctx, q, SOURCES, {}, top_k=top))
        else:
            hits, _ = rule_hits(ctx, q)
            weights = _cv_router_weights(ctx, q, {}) if ctx.cv_folds and ctx.llm is None else None
            try:
                parts = [(None, search(ctx.library, q.text, sources=SOURCES, weights=weights, top_k=top,
                                       span_k=0, llm=ctx.llm, rule_hits=hits, rerank=False))]
            except SourceUnavailable as e:
                raise MethodUnavailable(str(e)) from None
        for held, resp in parts:
            if sorted(resp.sources_used) != sorted(SOURCES):
                raise MethodUnavailable(f"query {q.id}: sources {resp.sources_used} (all three are needed)")
            rows, ys, gs = _relevance_rows(ctx, q, resp, held)
            for r, y, g in zip(rows, ys, gs):
                key = q.id if by == "query" else g
                per.setdefault(key, ([], []))
                per[key][0].append(r), per[key][1].append(y)
    return [(np.vstack(r), np.asarray(y)) for _, (r, y) in sorted(per.items()) if r]


def fit_relevance_on_benchmark(ctx: EvalContext, provenance: dict):
    """The relevance model fitted on every query of the benchmark, with held-out figures."""
    by = "source" if ctx.cv_folds == "source" else "query"
    oos = out_of_scope_queries("fit")
    model, metrics = fit_with_heldout(relevance_groups(ctx, by=by, out_of_scope=oos))
    provenance = {**provenance, "out_of_scope_queries": len(oos)}
    model.provenance = {"benchmark": ctx.bench.name, "sources": list(SOURCES),
                        "hits_per_query": 50, **provenance, f"heldout_leave_one_{by}_out": metrics}
    return model

