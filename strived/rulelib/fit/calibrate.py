"""The L2R calibration loop, per event (paper, appendix "L2R Calibration: Precise Definitions").

    for t = 1..20:
        rule_t  = proposer(form, feedback)                     # numbers only; structure fixed
        AP_t    = AP(ranking of rule_t over positives ∪ negatives)   (Eq. ap-suppl)
        best    = argmax_{t' <= t} AP_t'                             (Eq. bestrule-suppl)
        feedback = AP_t, best-so-far rule and AP, score percentiles, issue tags
        stop when best AP >= target
    library[event] = best

AP is the only selection criterion. Ties in score are ranked pessimistically (positives after
negatives), so a rule cannot gain AP from the order of video ids; ``ignore`` videos (ambiguous
instances) take no part. Proposers: `optimizer.OptimizerProposer` (offline, seeded) and
`llm_fit.LLMProposer`; an invalid proposal is a failed iteration, and the loop then uses the
optimiser's proposal for that iteration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import RuleError
from ...jobs import CancelFn, ProgressFn, check_cancel, report
from ...rules.model import parse_rule
from ..events import get_event
from .optimizer import OptimizerProposer, canonical_form, grid_distance
from .weak_labels import WeakLabels

DEFAULT_TARGET_AP = 0.9
MAX_ITERATIONS = 20
PERCENTILES = (10, 25, 50, 75, 90, 95)


def average_precision_pessimistic(scores: np.ndarray, is_pos: np.ndarray) -> float:
    """AP of the ranking by ``scores`` (paper Eq. ap-suppl), ties ranked positives-last."""
    n_pos = int(is_pos.sum())
    if n_pos == 0:
        return 0.0
    order = np.lexsort((is_pos.astype(np.int8), -scores))   # within a tie: negatives first
    hits = is_pos[order].astype(np.float64)
    cum = np.cumsum(hits)
    ranks = np.arange(1, len(hits) + 1)
    return float((cum / ranks)[hits > 0].sum() / n_pos)


@dataclass
class Iteration:
    """One loop iteration: the proposal kept, its AP and the feedback computed from it."""

    iteration: int
    proposer: str
    ap: float
    best_ap: float
    n_candidates: int
    percentiles: dict
    nonzero_ratio: float
    issues: list[str]
    failed: str | None = None

    def to_dict(self) -> dict:
        return {"iteration": self.iteration, "proposer": self.proposer, "ap": round(self.ap, 4),
                "best_ap": round(self.best_ap, 4), "n_candidates": self.n_candidates,
                "percentiles": {k: round(v, 3) for k, v in self.percentiles.items()},
                "nonzero_ratio": round(self.nonzero_ratio, 3), "issues": self.issues,
                "failed": self.failed}


@dataclass
class EventReport:
    """The calibration record of one event (written into the per-event report)."""

    event: str
    n_pos: int
    n_neg: int
    start_ap: float
    best_ap: float
    best_rule: dict
    start_rule: dict
    iterations: list[Iteration] = field(default_factory=list)
    stopped: str = ""
    elapsed_s: float = 0.0
    n_failed: int = 0

    def to_dict(self) -> dict:
        return {"event": self.event, "n_pos": self.n_pos, "n_neg": self.n_neg,
                "start_ap": round(self.start_ap, 4), "best_ap": round(self.best_ap, 4),
                "stopped": self.stopped, "elapsed_s": round(self.elapsed_s, 3),
                "n_failed": self.n_failed, "best_rule": self.best_rule,
                "iterations": [it.to_dict() for it in self.iterations]}


class LoopState:
    """What a proposer sees: the iteration number, the best-so-far rule/AP and the last feedback."""

    def __init__(self, event: str, form: dict, n_videos: int, target_ap: float):
        self.event, self.form, self.n_videos, self.target_ap = event, form, n_videos, target_ap
        self.iteration = 0
        self.best_rule: dict | None = None
        self.best_ap = -1.0
        self.last: Iteration | None = None
        self.history: list[Iteration] = []

    @property
    def last_issues(self) -> list[str]:
        return self.last.issues if self.last else []


def issue_tags(scores: np.ndarray, is_pos: np.ndarray, hard: np.ndarray) -> list[str]:
    """Diagnostics fed back to the proposer (paper's revision prompt: "issue tags")."""
    tags = []
    n = len(scores)
    if n == 0:
        return ["empty_corpus"]
    pos_rate = float(is_pos.mean())
    nz = float((scores > 0.05).mean())
    if nz > max(0.5, 3 * pos_rate):
        tags.append(f"too_permissive: {nz:.0%} of videos nonzero (positives are {pos_rate:.0%})")
    if nz < 0.5 * pos_rate:
        tags.append(f"too_strict: only {nz:.0%} of videos nonzero (positives are {pos_rate:.0%})")
    if is_pos.any():
        rej = float((~hard[is_pos]).mean())
        if rej > 0.25:
            tags.append(f"gate_rejects_positives: {rej:.0%} of positives fail the hard gates")
        zero_soft = float(((scores <= 0.05) & hard)[is_pos].mean())
        if zero_soft > 0.25:
            tags.append(f"soft_misses_positives: {zero_soft:.0%} of positives pass the gates "
                        "but score ~0")
        neg = scores[~is_pos]
        if len(neg) and np.median(scores[is_pos]) <= np.median(neg):
            tags.append("no_separation: median positive score <= median negative score")
    if float((scores >= 0.999).mean()) > 0.3:
        tags.append(f"saturated: {(scores >= 0.999).mean():.0%} of videos score 1.0 "
                    "(magnitudes too small)")
    return tags


class _Evaluator:
    """Scores candidate rules on the calibration videos and computes AP + feedback."""

    def __init__(self, scorer, labels: WeakLabels, event: str, videos: list[str] | None):
        ids = scorer.video_ids
        index = {v: i for i, v in enumerate(ids)}
        universe = [v for v in (videos if videos is not None else labels.videos) if v in index]
        ign = labels.ignore.get(event, set()) - labels.positives.get(event, set())
        keep = [v for v in universe if v not in ign]
        self.idx = np.array([index[v] for v in keep], dtype=np.int64)
        pos = labels.positives.get(event, set())
        self.is_pos = np.array([v in pos for v in keep], dtype=bool)
        self.scorer = scorer
        self.n_evals = 0

    def __call__(self, rule_dict: dict):
        rule = parse_rule(rule_dict)          # raises RuleError
        res = self.scorer.score(rule)
        self.n_evals += 1
        s, h = res.scores[self.idx], res.hard[self.idx]
        return average_precision_pessimistic(s, self.is_pos), s, h


def calibrate_event(event: str, scorer, labels: WeakLabels, *, proposer: str = "optimizer",
                    llm=None, field_stats: dict | None = None, target_ap: float = DEFAULT_TARGET_AP,
                    max_iterations: int = MAX_ITERATIONS, seed: int = 0,
                    videos: list[str] | None = None, form: dict | None = None,
                    progress: ProgressFn = None, cancel: CancelFn = None) -> EventReport:
    """Calibrate one event's numbers on ``labels`` (positives ∪ negatives among ``videos``).

    ``scorer``: a `RuleScorer` over (at least) the calibration videos. ``proposer``:
    "optimizer" or "llm" (then ``llm`` is an `LLMClient`; failures fall back per iteration).
    Returns an `EventReport` with AP per iteration; raises Cancelled when ``cancel()`` is true.
    """
    t0 = time.perf_counter()
    form = canonical_form(form or get_event(event).form)
    ev = _Evaluator(scorer, labels, event, videos)
    n_pos, n_neg = int(ev.is_pos.sum()), int((~ev.is_pos).sum())
    state = LoopState(event, form, len(ev.idx), target_ap)
    opt = OptimizerProposer(form, field_stats, seed=seed)
    llm_prop = None
    if proposer == "llm":
        from .llm_fit import LLMProposer
        llm_prop = LLMProposer(llm, event, form, field_stats)
    start_ap, _, _ = ev(form)
    rep = EventReport(event, n_pos, n_neg, start_ap, start_ap, form, form)
    if n_pos == 0:
        rep.stopped = "no positives: starting numbers kept"
        rep.elapsed_s = time.perf_counter() - t0
        return rep
    for it in range(1, max_iterations + 1):
        check_cancel(cancel)
        state.iteration = it
        failed, name = None, opt.name
        cands: list[dict] = []
        if llm_prop is not None:
            try:
                cands = [llm_prop.propose(state)]
                name = llm_prop.name
            except Exception as e:           # LLMError, RuleError, form mismatch: a failed iteration
                failed = f"{type(e).__name__}: {e}"[:300]
                rep.n_failed += 1
        if not cands:
            cands = opt.propose(state)
            name = opt.name
        best_c = None
        for c in cands:
            try:
                ap, s, h = ev(c)
            except RuleError as e:
                failed = f"RuleError: {e}"[:300]
                rep.n_failed += 1 if name != opt.name else 0
                continue
            if best_c is None or ap > best_c[0] + 1e-12 or (
                    abs(ap - best_c[0]) <= 1e-12 and state.best_rule is not None and
                    grid_distance(opt.params, c, form) < grid_distance(opt.params, best_c[3], form)):
                best_c = (ap, s, h, c)
        if best_c is None:
            continue
        ap, s, h, cand = best_c
        improved = ap > state.best_ap + 1e-12 or (
            abs(ap - state.best_ap) <= 1e-12 and state.best_rule is not None
            and grid_distance(opt.params, cand, form) < grid_distance(opt.params, state.best_rule, form))
        if improved:
            state.best_ap, state.best_rule = ap, cand
        pct = {f"P{p}": float(np.percentile(s, p)) if len(s) else 0.0 for p in PERCENTILES}
        rec = Iteration(it, name, ap, state.best_ap, len(cands), pct, float((s > 0.05).mean()),
                        issue_tags(s, ev.is_pos, h), failed)
        state.last = rec
        state.history.append(rec)
        rep.iterations.append(rec)
        report(progress, f"calibrate:{event}", it, max_iterations, item=event,
               message=f"AP {ap:.3f} (best {state.best_ap:.3f})")
        if state.best_ap >= target_ap:
            rep.stopped = f"target AP {target_ap} reached"
            break
    else:
        rep.stopped = f"{max_iterations} iterations"
    rep.best_ap = max(state.best_ap, start_ap)
    rep.best_rule = state.best_rule if state.best_rule is not None and state.best_ap >= start_ap else form
    rep.best_rule = parse_rule(rep.best_rule).to_dict()
    rep.elapsed_s = time.perf_counter() - t0
    return rep


#: An event needs at least this many positives to be calibrated: with one or two, the optimiser
#: finds numbers that isolate those videos (e.g. a 2 m distance gate for a cut-in) instead of the
#: event; the human-written starting numbers generalise better.
MIN_POSITIVES = 3


def calibrate_library(scorer, labels: WeakLabels, events: list[str] | None = None, *,
                      base=None, progress: ProgressFn = None, cancel: CancelFn = None,
                      provenance: dict | None = None, **kw):
    """Calibrate ``events`` (default: every inventory event) and return (RuleLibrary, reports).

    Events without positives keep their starting numbers (``calibrated`` false, with a note).
    ``base``: a `RuleLibrary` whose forms to start from (default: the inventory).
    """
    import datetime

    from ..events import EVENT_KEYS
    from ..library import LibraryEntry, RuleLibrary

    base = base or RuleLibrary.uncalibrated()
    keys = list(events or EVENT_KEYS)
    entries = {k: e for k, e in base.entries.items()}
    reports = []
    for i, key in enumerate(keys):
        check_cancel(cancel)
        report(progress, "calibrate", i, len(keys), item=key)
        form = base.entries[key].start_rule if key in base.entries else None
        rep = calibrate_event(key, scorer, labels, form=form, cancel=cancel, **kw)
        reports.append(rep)
        ok = rep.n_pos >= MIN_POSITIVES
        entries[key] = LibraryEntry(
            key, rep.best_rule if ok else parse_rule(rep.start_rule).to_dict(),
            parse_rule(rep.start_rule).to_dict(), calibrated=ok, ap=rep.best_ap if ok else None,
            start_ap=rep.start_ap if ok else None, iterations=len(rep.iterations),
            n_pos=rep.n_pos, n_neg=rep.n_neg,
            note=None if ok else (f"{rep.n_pos} positives in the calibration corpus (fewer than "
                                  f"{MIN_POSITIVES}): too few to fit numbers without overfitting; "
                                  "starting numbers kept"))
    report(progress, "calibrate", len(keys), len(keys))
    _inherit_from_parents(entries)
    prov = dict(provenance or {})
    prov.setdefault("proposer", kw.get("proposer", "optimizer"))
    prov.setdefault("seed", kw.get("seed", 0))
    prov.setdefault("target_ap", kw.get("target_ap", DEFAULT_TARGET_AP))
    prov.setdefault("max_iterations", kw.get("max_iterations", MAX_ITERATIONS))
    prov.setdefault("ap", "pessimistic ties (positives ranked after tied negatives)")
    lib = RuleLibrary(entries, prov, datetime.datetime.now(datetime.timezone.utc)
                      .isoformat(timespec="seconds"))
    return lib, reports


def _rule_units(rule: dict) -> list[dict]:
    """The parts of a rule dict that carry gates and soft scores: its steps, or itself."""
    return list(rule["sequence"]) if rule.get("sequence") else [rule]


def _shared(c: dict, p: dict) -> int:
    """How many gates (field, operator) and soft scores (type, field, direction) two units share."""
    gates = {(g["field"], g["op"]) for g in p.get("hard_gates") or []}
    softs = {(q["type"], q["field"], q.get("direction")) for q in p.get("soft_scores") or []}
    return (sum((g["field"], g["op"]) in gates for g in c.get("hard_gates") or [])
            + sum((q["type"], q["field"], q.get("direction")) in softs for q in c.get("soft_scores") or []))


def _align_units(cu: list[dict], pu: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of child and parent units: one to one when both have the same number; when the child
    has extra steps of its own (e.g. a rear-end's "ahead in the lane before"), the parent's units
    in order onto the child's units about the same entities that share the most with them."""
    import itertools

    if len(cu) == len(pu):
        return list(zip(cu, pu))
    if len(cu) < len(pu) or len(cu) > 8:
        return []
    role = lambda u: (u.get("entity") or {}).get("role")  # noqa: E731
    best, best_score = [], 0
    for idx in itertools.combinations(range(len(cu)), len(pu)):
        pairs = [(cu[i], p) for i, p in zip(idx, pu)]
        if any(role(c) != role(p) for c, p in pairs):
            continue
        score = sum(_shared(c, p) for c, p in pairs)
        if score > best_score:
            best, best_score = pairs, score
    return best


def inherit_numbers(child: dict, parent: dict) -> tuple[dict, list[str]]:
    """``child`` with the numbers of the gates and soft scores it shares with ``parent`` (same
    field and operator; same type, field and direction), unit by unit (``_align_units``) where the
    units are about the same entity (ego or other road user). Returns (new rule dict, what was
    taken)."""
    import copy

    out = copy.deepcopy(child)
    cu, pu = _rule_units(out), _rule_units(parent)
    taken = []
    for c, p in _align_units(cu, pu):
        if (c.get("entity") or {}).get("role") != (p.get("entity") or {}).get("role"):
            continue    # the ego's speed is not the lead car's
        for g in c.get("hard_gates") or []:
            m = [h for h in p.get("hard_gates") or [] if h["field"] == g["field"] and h["op"] == g["op"]]
            if len(m) == 1 and m[0]["value"] != g["value"]:
                taken.append(f"{g['field']} {g['op']} {g['value']:g} -> {m[0]['value']:g}")
                g["value"] = m[0]["value"]
        for sc in c.get("soft_scores") or []:
            m = [q for q in p.get("soft_scores") or [] if q["type"] == sc["type"] and q["field"] == sc["field"]
                 and q.get("direction") == sc.get("direction")]
            if len(m) != 1:
                continue
            for k in ("window_seconds", "magnitude", "min_duration_seconds"):
                if m[0].get(k) is not None and sc.get(k) is not None and m[0][k] != sc[k]:
                    taken.append(f"{sc['field']} {k} {sc[k]:g} -> {m[0][k]:g}")
                    sc[k] = m[0][k]
    return out, taken


def _inherit_from_parents(entries: dict) -> None:
    """An event with too few positives to calibrate takes, for the gates and soft scores it shares
    with its calibrated parent event, the parent's fitted numbers: both read the same perception
    (e.g. a rear-end is a collision with the car ahead: ranging at contact range fails the same
    way), and the parent's numbers were fitted on several positives instead of none."""
    from ..events import EVENT_KEYS, get_event

    for key, e in list(entries.items()):
        ev = get_event(key) if key in EVENT_KEYS else None
        par = entries.get(ev.parent) if ev is not None and ev.parent else None
        if e.calibrated or par is None or not par.calibrated:
            continue
        rule, taken = inherit_numbers(e.rule, par.rule)
        if not taken:
            continue
        e.rule = parse_rule(rule).to_dict()   # (raises if the result were not a valid rule)
        e.note = ((e.note + "; ") if e.note else "") + (
            f"numbers shared with the calibrated parent event '{ev.parent}' taken from it: " + ", ".join(taken))
