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
from ...events import EVENT_KEYS, get_event
from ..library import LibraryEntry, RuleLibrary
from .llm_fit import LLMProposer
from .optimizer import OptimizerProposer, canonical_form, grid_distance
from .weak_labels import WeakLabels

DEFAULT_TARGET_AP = 0.9
#: With sources given, a number moves only on evidence from at least this many sources (issue 31:
#: a fit carried by one source's clips did not hold on footage from new sources)
MIN_SOURCES = 2
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

    def __init__(self, scorer, labels: WeakLabels, event: str, videos: list[str] | None,
                 groups: dict[str, str] | None = None):
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
        # leave-one-source-out subsets that keep positives: a move must gain on each of them
        self.subsets: list[np.ndarray] = []
        self.n_sources_pos = 0
        if groups is not None:
            g = np.array([groups.get(v, v) for v in keep])
            with_pos = sorted(set(g[self.is_pos]))
            self.n_sources_pos = len(with_pos)
            for src in with_pos:
                m = g != src
                if self.is_pos[m].any():
                    self.subsets.append(m)
        self.robust = groups is not None

    def gain(self, s_new: np.ndarray, s_old: np.ndarray) -> float:
        """How much ranking by ``s_new`` instead of ``s_old`` gains, counted robustly: with
        sources, the smallest AP gain over the whole set and every set with one source left out,
        so a move carried by one source's clips alone gains nothing; fewer than
        ``MIN_SOURCES`` sources with positives allow no move (-inf)."""
        full = (average_precision_pessimistic(s_new, self.is_pos)
                - average_precision_pessimistic(s_old, self.is_pos))
        if not self.robust:
            return full
        if self.n_sources_pos < MIN_SOURCES:
            return float("-inf")
        gains = [full] + [average_precision_pessimistic(s_new[m], self.is_pos[m])
                          - average_precision_pessimistic(s_old[m], self.is_pos[m]) for m in self.subsets]
        return min(gains)

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
                    groups: dict[str, str] | None = None,
                    progress: ProgressFn = None, cancel: CancelFn = None) -> EventReport:
    """Calibrate one event's numbers on ``labels`` (positives ∪ negatives among ``videos``).

    ``scorer``: a `RuleScorer` over (at least) the calibration videos. ``proposer``:
    "optimizer" or "llm" (then ``llm`` is an `LLMClient`; failures fall back per iteration).
    ``groups`` (video id -> source): numbers move only where the AP gain holds with any one
    source left out (`_Evaluator.gain`); the best rule is the one with the largest such gain over
    the starting form, ties going to the form's own numbers.
    Returns an `EventReport` with AP per iteration; raises Cancelled when ``cancel()`` is true.
    """
    t0 = time.perf_counter()
    form = canonical_form(form or get_event(event).form)
    ev = _Evaluator(scorer, labels, event, videos, groups)
    n_pos, n_neg = int(ev.is_pos.sum()), int((~ev.is_pos).sum())
    state = LoopState(event, form, len(ev.idx), target_ap)
    opt = OptimizerProposer(form, field_stats, seed=seed)
    llm_prop = None
    if proposer == "llm":
        llm_prop = LLMProposer(llm, event, form, field_stats)
    start_ap, start_s, _ = ev(form)
    best_s = start_s
    rep = EventReport(event, n_pos, n_neg, start_ap, start_ap, form, form)
    if n_pos == 0:
        rep.stopped = "no positives: starting numbers kept"
        rep.elapsed_s = time.perf_counter() - t0
        return rep
    for it in range(1, max_iterations + 1):
        check_cancel(cancel)
        state.iteration = it
        cands, name, failed = _propose(llm_prop, opt, state, rep)
        best_c, failed = _best_candidate(ev, cands, state, opt, form, best_s, name, rep, failed)
        if best_c is None:
            continue
        ap, s, h, cand, g = best_c
        improved = state.best_rule is None or g > 1e-12 or (
            abs(g) <= 1e-12 and abs(ap - state.best_ap) <= 1e-12
            and grid_distance(opt.params, cand, form) < grid_distance(opt.params, state.best_rule, form))
        if improved:
            state.best_ap, state.best_rule, best_s = ap, cand, s
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
    keep = state.best_rule is not None and (ev.gain(best_s, start_s) > 1e-12 if ev.robust
                                            else state.best_ap >= start_ap)
    rep.best_rule = state.best_rule if keep else form
    rep.best_ap = state.best_ap if keep else start_ap
    rep.best_rule = parse_rule(rep.best_rule).to_dict()
    rep.elapsed_s = time.perf_counter() - t0
    return rep


def _propose(llm_prop, opt: OptimizerProposer, state: LoopState, rep: EventReport) -> tuple[list[dict], str, str | None]:
    """(candidate rules, proposer name, failure or None) of one iteration: the LLM's proposal when
    there is an LLM proposer and it succeeds (a failure is counted in ``rep``), else the optimiser's."""
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
    return cands, name, failed


def _best_candidate(ev: _Evaluator, cands: list[dict], state: LoopState, opt: OptimizerProposer, form: dict,
                    best_s: np.ndarray, name: str, rep: EventReport, failed: str | None) -> tuple:
    """((ap, scores, hard, rule, gain) of the candidate with the largest gain over ``best_s``, ties
    to the one nearest the form's numbers, or None; the iteration's failure). A candidate that is
    no valid rule is skipped (counted in ``rep`` when the LLM proposed it)."""
    best_c = None
    for c in cands:
        try:
            ap, s, h = ev(c)
        except RuleError as e:
            failed = f"RuleError: {e}"[:300]
            rep.n_failed += 1 if name != opt.name else 0
            continue
        g = ev.gain(s, best_s) if state.best_rule is not None else 0.0
        if best_c is None or g > best_c[4] + 1e-12 or (
                abs(g - best_c[4]) <= 1e-12 and state.best_rule is not None and
                grid_distance(opt.params, c, form) < grid_distance(opt.params, best_c[3], form)):
            best_c = (ap, s, h, c, g)
    return best_c, failed


#: An event needs at least this many positives to be calibrated: with one or two, the optimiser
#: finds numbers that isolate those videos (e.g. a 2 m distance gate for a cut-in) instead of the
#: event; the human-written starting numbers generalise better.
MIN_POSITIVES = 3


def heldout_by_source(event: str, scorer, labels: WeakLabels, groups: dict[str, str], form: dict,
                      videos: list[str] | None = None, cancel: CancelFn = None, **kw) -> dict:
    """Leave-one-source-out check of calibrating ``event``: each source's videos are scored by the
    rule calibrated on the other sources, and the pooled AP of those held-out scores is compared
    with the starting form's AP over the same videos. Returns {"heldout_ap", "hand_ap",
    "n_sources"}; the APs are None when no source holds a positive."""
    vids = [v for v in (videos if videos is not None else labels.videos) if v in set(scorer.video_ids)]
    ign = labels.ignore.get(event, set()) - labels.positives.get(event, set())
    vids = [v for v in vids if v not in ign]
    pos = labels.positives.get(event, set())
    index = {v: i for i, v in enumerate(scorer.video_ids)}
    start = scorer.score(parse_rule(canonical_form(form))).scores
    srcs = sorted({groups.get(v, v) for v in vids})
    got_s, got_h, got_y = [], [], []
    for src in srcs:
        check_cancel(cancel)
        test = [v for v in vids if groups.get(v, v) == src]
        train = [v for v in vids if groups.get(v, v) != src]
        ii = np.array([index[v] for v in test], dtype=np.int64)
        if not (pos & set(train)):
            s = start[ii]
        else:
            rep = calibrate_event(event, scorer, labels, videos=train, form=form, groups=groups,
                                  cancel=cancel, **kw)
            s = scorer.score(parse_rule(rep.best_rule)).scores[ii]
        got_s.append(s), got_h.append(start[ii]), got_y.append(np.array([v in pos for v in test], bool))
    y = np.concatenate(got_y) if got_y else np.zeros(0, bool)
    if not y.any():
        return {"heldout_ap": None, "hand_ap": None, "n_sources": len(srcs)}
    return {"heldout_ap": average_precision_pessimistic(np.concatenate(got_s), y),
            "hand_ap": average_precision_pessimistic(np.concatenate(got_h), y), "n_sources": len(srcs)}


def calibrate_library(scorer, labels: WeakLabels, events: list[str] | None = None, *,
                      base=None, progress: ProgressFn = None, cancel: CancelFn = None,
                      provenance: dict | None = None, groups: dict[str, str] | None = None, **kw):
    """Calibrate ``events`` (default: every inventory event) and return (RuleLibrary, reports).

    Events without positives keep their starting numbers (``calibrated`` false, with a note).
    ``base``: a `RuleLibrary` whose forms to start from (default: the inventory).
    ``groups`` (video id -> source): numbers move only on evidence from two or more sources, and
    an event ships its calibrated numbers only where they beat its hand-written form's AP on
    sources left out of the fit (`heldout_by_source`); otherwise the hand form ships, with the
    figures in its note.
    """
    import datetime

    base = base or RuleLibrary.uncalibrated()
    keys = list(events or EVENT_KEYS)
    entries = {k: e for k, e in base.entries.items()}
    reports = []
    judged = set()       # events whose own labels chose the hand form: they inherit nothing
    for i, key in enumerate(keys):
        check_cancel(cancel)
        report(progress, "calibrate", i, len(keys), item=key)
        form = base.entries[key].start_rule if key in base.entries else None
        rep = calibrate_event(key, scorer, labels, form=form, groups=groups, cancel=cancel, **kw)
        reports.append(rep)
        ok = rep.n_pos >= MIN_POSITIVES
        note = None if ok else (f"{rep.n_pos} positives in the calibration corpus (fewer than "
                                f"{MIN_POSITIVES}): too few to fit numbers without overfitting; "
                                "starting numbers kept")
        heldout = None
        if ok and groups is not None:
            judged.add(key)
            if rep.best_rule == parse_rule(rep.start_rule).to_dict():
                ok = False
                note = ("hand-written numbers kept: no change of numbers gained AP with any one source "
                        "of the corpus left out (a fit needs evidence from two or more sources)")
            else:
                heldout = heldout_by_source(key, scorer, labels, groups, rep.start_rule, cancel=cancel,
                                            **kw)
                h, b = heldout["heldout_ap"], heldout["hand_ap"]
                if h is None or h <= b + 1e-9:
                    ok = False
                    note = (f"hand-written numbers kept: calibrated numbers scored AP {h:.3f} on sources "
                            f"left out of the fit vs {b:.3f} for the hand form ({heldout['n_sources']} "
                            "sources, leave one out)") if h is not None else \
                        "hand-written numbers kept: no source-held-out evidence"
                else:
                    note = (f"calibrated numbers: AP {h:.3f} on sources left out of the fit vs {b:.3f} for "
                            f"the hand form ({heldout['n_sources']} sources, leave one out)")
        entries[key] = LibraryEntry(
            key, rep.best_rule if ok else parse_rule(rep.start_rule).to_dict(),
            parse_rule(rep.start_rule).to_dict(), calibrated=ok, ap=rep.best_ap if ok else None,
            start_ap=rep.start_ap if rep.n_pos >= MIN_POSITIVES else None, iterations=len(rep.iterations),
            n_pos=rep.n_pos, n_neg=rep.n_neg, note=note)
    report(progress, "calibrate", len(keys), len(keys))
    # events not recalibrated in this run keep what they had; judged ones keep their judgement
    _inherit_from_parents(entries, skip=judged | (set(entries) - set(keys)))
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


def _inherit_from_parents(entries: dict, skip: set = frozenset()) -> None:
    """An event with too few positives to calibrate takes, for the gates and soft scores it shares
    with its calibrated parent event, the parent's fitted numbers: both read the same perception
    (e.g. a rear-end is a collision with the car ahead: ranging at contact range fails the same
    way), and the parent's numbers were fitted on several positives instead of none. ``skip``: events
    whose own labels were judged (they keep what that judgement chose)."""
    for key, e in list(entries.items()):
        ev = get_event(key) if key in EVENT_KEYS else None
        par = entries.get(ev.parent) if ev is not None and ev.parent else None
        if e.calibrated or key in skip or par is None or not par.calibrated:
            continue
        rule, taken = inherit_numbers(e.rule, par.rule)
        if not taken:
            continue
        e.rule = parse_rule(rule).to_dict()   # (raises if the result were not a valid rule)
        e.note = ((e.note + "; ") if e.note else "") + (
            f"numbers shared with the calibrated parent event '{ev.parent}' taken from it: " + ", ".join(taken))
