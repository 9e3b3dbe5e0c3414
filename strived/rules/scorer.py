"""Fast rule scoring over a whole corpus (the paper's appendix "Rule Scoring: Formal Definitions").

    S_hard(v)   = prod_g 1[ exists candidate o, exists t : op_g(phi_g(o, t), theta_g) ]
    s_c(o)      = min(1, max_{0 < t2 - t1 <= window_c} change_c(o; t1, t2) / delta_c)
    S_track(o)  = sum_c w_c s~_c(o) / sum_c w_c        (0 when no soft score is known on o)
                  s~_c(o) = s_c(o) where c is known on o (its field has a value somewhere over o;
                  over the video's ego series for an ego field), else E[s_c]: the mean of s_c over
                  the units of this scoring (the candidates of the videos passing the gates) where c
                  is known -- an unknown term takes its expected value, neither 0 nor the other
                  terms' evidence scaled up; a term no unit knows is left out (sums over the rest)
    S_entity(v) = max_o S_track(o)                       (agg_mode "any")
                  (max_o S_track(o) + mean_o S_track(o)) / 2   (agg_mode "consensus")
    S(v)        = S_hard(v) * S_entity(v)

Decisions where the paper is silent (docs/rules.md): candidates are the tracks passing the class
filter (and, for selection "closest", only the candidate with the smallest mean distance); a video
with no candidate scores 0; ego fields are read from the ego series (an ego soft score inside an
object rule is shared by every candidate); ``min_fraction`` zeroes a constraint for a video unless
that fraction of its candidates where the constraint is known reach s_c >= 0.5 (``binarize``
thresholds the known terms, and E[s_c] is the mean of the binarised known values, after
``min_fraction``); a rule without soft scores gives S_track = 1.
Per-track window features come from `TrackColumns` (cached), so repeated scoring costs only a few
array passes over the tracks. Sequence rules (ordered steps, scoped negations) are scored by
`strived.rules.sequence.run_sequence` (a dynamic programme over the steps, exact).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..jobs import CancelFn, cancel_scope, check_cancel
from .candidates import candidate_units
from .columns import TrackColumns
from .explain import explain_video
from .model import EGO_FIELDS, Rule, SoftScore
from .sequence import run_sequence, sequence_term_means


_MISSING = object()


@dataclass
class ScoreResult:
    video_ids: list[str]
    scores: np.ndarray  # float64 [V]
    hard: np.ndarray  # bool [V]
    peak_track: np.ndarray  # int64 [V] track id of the best candidate, -1 if none or the video fails the gates
    #: the expected value E[s_c] each soft score imputed where it is unknown (None: no unit knows
    #: it, left out): a tuple per soft score for a single rule; for a sequence rule a dict
    #: {("step", k) | ("absent", n): tuple per soft score of that fragment}
    term_means: object = None

    def ranking(self, top_k: int | None = None) -> list[tuple[str, float]]:
        """(video_id, score) best first; ties broken by video id (deterministic)."""
        order = np.lexsort((np.arange(len(self.video_ids)), -self.scores))
        if top_k is not None:
            order = order[:top_k]
        return [(self.video_ids[i], float(self.scores[i])) for i in order]


def soft_values(cols: TrackColumns, c: SoftScore, binarize: bool = False, units=None) -> np.ndarray:
    """Per-unit score s_c in [0, 1]: per track for object fields, per video for ego fields.
    ``binarize`` (the paper's "binarised soft scores" ablation): 1 where s_c >= 0.5, else 0.
    ``units`` (sorted unit indices): only those are needed; the others may be NaN (their window
    features are not computed)."""
    if c.type == "temporal_change":
        raw = cols.window_change(c.field, c.window_s, c.direction, units=units)
        s = np.minimum(1.0, raw / c.magnitude)
    else:
        raw = cols.trend_run(c.field, c.direction, units=units)
        s = np.minimum(1.0, raw / (2.0 * c.min_duration_s))
    if binarize:
        return np.where(np.isnan(s), np.nan, (s >= 0.5).astype(np.float64))
    return s


def _gate_units(cols: TrackColumns, g) -> np.ndarray:
    """Per-unit (track, or video for ego fields) truth of a gate."""
    if g.min_time_fraction is not None:
        return cols.fraction_holds(g.field, g.op, g.value, g.min_time_fraction)
    if g.min_seconds is not None:
        return cols.held_for(g.field, g.op, g.value, g.min_seconds)
    mn, mx = cols.minmax(g.field)
    with np.errstate(invalid="ignore"):
        if g.op == "lt":
            return mn < g.value
        if g.op == "le":
            return mn <= g.value
        if g.op == "gt":
            return mx > g.value
        return mx >= g.value


class RuleScorer:
    """Scores rules over every video of a library or an in-memory corpus."""

    def __init__(self, library=None, *, columns: TrackColumns | None = None):
        self.library = library
        self._cols = columns

    @classmethod
    def from_records(cls, recs) -> "RuleScorer":
        sc = cls(None, columns=TrackColumns.from_records(list(recs)))
        sc._recs = {r.info.id: r for r in recs}
        return sc

    @property
    def columns(self) -> TrackColumns:
        if self._cols is None:
            self._cols = TrackColumns.from_library(self.library)
        return self._cols

    @property
    def video_ids(self) -> list[str]:
        return self.columns.video_ids

    def records(self, video_id: str):
        if self.library is not None:
            return self.library.get_video(video_id)
        return self._recs[video_id]

    # ------------------------------------------------------------------
    def candidates(self, rule: Rule) -> tuple[np.ndarray, np.ndarray, bool]:
        """(unit mask, unit owner video index, is_ego) for the rule's entity."""
        return candidate_units(self.columns, rule.entity)

    def score(self, rule: Rule, binarize: bool = False, cancel: CancelFn = None) -> ScoreResult:
        """Score every video; exact implementation of the appendix formulas (see module doc).
        ``binarize`` thresholds each soft score at 0.5 (ablation). ``cancel`` (strived.jobs) is
        checked before each gate and soft score and, through `cancel_scope`, before each chunk of
        a window feature being computed; Cancelled leaves no feature half-computed in the cache."""
        with cancel_scope(cancel):
            return self._score(rule, binarize, cancel)

    def _score(self, rule: Rule, binarize: bool, cancel: CancelFn) -> ScoreResult:
        cols = self.columns
        V = cols.n_videos
        if rule.sequence is not None:
            scores, peak, st = run_sequence(cols, rule, binarize=binarize)
            self._remember_means(rule, binarize, st.term_means)
            return ScoreResult(video_ids=list(cols.video_ids), scores=scores,
                               hard=np.ones(V, bool), peak_track=peak, term_means=st.term_means)
        mask, owner, is_ego = self.candidates(rule)
        hard = _hard_gates(cols, rule, mask, owner, cancel)
        # soft scores per unit: only candidates of videos that pass the hard gates can make a
        # score (the others score 0 whatever their soft values), so only their window features
        # are computed (a window never used before costs the passing candidates only)
        has_cand = np.zeros(V, bool)
        has_cand[owner[mask]] = True
        mask = mask & hard[owner]
        if rule.soft_scores:
            unit, means = _unit_scores(cols, rule, mask, owner, is_ego, binarize, cancel)
        else:
            unit, means = np.ones(mask.shape[0], np.float64), ()
        best, peak = _aggregate(cols, rule, mask, owner, unit, is_ego)
        entity = np.where(has_cand, best, 0.0)
        scores = np.where(hard, entity, 0.0)
        self._remember_means(rule, binarize, means)
        return ScoreResult(video_ids=list(cols.video_ids), scores=scores, hard=hard, peak_track=peak,
                           term_means=means)

    #: how many rules' expected terms a scorer remembers (explanations and spans ask for them)
    MEANS_MEMO = 64

    _means_lock = threading.Lock()   # the memo is written by search and inspect workers alike

    def _remember_means(self, rule: Rule, binarize: bool, means) -> None:
        with self._means_lock:
            memo = self.__dict__.setdefault("_means_memo", {})
            key = (rule, bool(binarize))
            memo.pop(key, None)
            while len(memo) >= self.MEANS_MEMO:
                memo.pop(next(iter(memo)))
            memo[key] = means

    def term_means(self, rule: Rule, binarize: bool = False):
        """The expected value E[s_c] each soft score of ``rule`` imputes where it is unknown, over
        this scorer's corpus (`ScoreResult.term_means`); remembered per rule, else computed by
        scoring (cheap once the rule's features are cached)."""
        with self._means_lock:
            hit = self.__dict__.get("_means_memo", {}).get((rule, bool(binarize)), _MISSING)
        if hit is not _MISSING:
            return hit
        if rule.sequence is not None:
            means = sequence_term_means(self.columns, rule)
            self._remember_means(rule, binarize, means)
            return means
        return self.score(rule, binarize=binarize).term_means

    def explain(self, video_id: str, rule: Rule):
        """Per-track per-frame traces, the peak track and the time span where the score peaked;
        unknown terms take this corpus's expected values (the numbers `score` uses)."""
        return explain_video(self.records(video_id), rule, term_means=self.term_means(rule))


def _hard_gates(cols: TrackColumns, rule: Rule, mask: np.ndarray, owner: np.ndarray, cancel: CancelFn) -> np.ndarray:
    """Per-video truth of the rule's hard gates: a product of per-video existence tests."""
    hard = np.ones(cols.n_videos, bool)
    for g in rule.hard_gates:
        check_cancel(cancel)
        ok = _gate_units(cols, g)
        if g.field in EGO_FIELDS:
            hard &= ok  # ego units are videos
        else:
            per_video = np.zeros(cols.n_videos, bool)
            sel = ok & mask
            per_video[owner[sel]] = True
            hard &= per_video
    return hard


def _unit_scores(cols: TrackColumns, rule: Rule, mask: np.ndarray, owner: np.ndarray, is_ego: bool,
                 binarize: bool, cancel: CancelFn) -> tuple[np.ndarray, tuple]:
    """(S_track per unit, E[s_c] per soft score) over the candidate units ``mask``.

    A term whose field has no value at all over a unit (a track; the video's ego series for an
    ego field) is unknown there: it takes the term's expected value, the mean of s_c over the
    units of this scoring where it is known (after binarize and min_fraction); a term no unit
    knows is left out (the weights renormalised over the others), and a unit where no term is
    known scores 0."""
    V = cols.n_videos
    n_units = mask.shape[0]
    acc = np.zeros(n_units, np.float64)
    wk = np.zeros(n_units, np.float64)
    n_known = np.zeros(n_units, np.int64)
    means = []
    need_units = np.flatnonzero(mask)
    need_videos = None
    for c in rule.soft_scores:
        check_cancel(cancel)
        ego_in_obj = c.field in EGO_FIELDS and not is_ego
        if ego_in_obj and need_videos is None:
            need_videos = np.flatnonzero(np.bincount(owner[need_units], minlength=V))
        s = soft_values(cols, c, binarize, units=need_videos if ego_in_obj else need_units)
        known = cols.known(c.field)   # per unit of the field's role
        if ego_in_obj:
            s = s[owner]  # the video's ego value, shared by each of its tracks
            known = known[owner]
        kn = mask & known
        if c.min_fraction is not None:
            # the share of the candidates where the term is known that reach 0.5
            nk = np.bincount(owner[kn], minlength=V).astype(np.float64)
            hit = np.bincount(owner[kn], weights=(s[kn] >= 0.5), minlength=V)
            with np.errstate(invalid="ignore", divide="ignore"):
                frac = np.where(nk > 0, hit / np.maximum(nk, 1), 0.0)
            keep = frac >= c.min_fraction - 1e-12
            s = np.where(keep[owner], s, 0.0)
        n_known += known
        if kn.any():
            m = float(np.mean(s[kn]))          # E[s_c] over this scoring's known units
            means.append(m)
            acc += c.weight * np.where(known, s, m)
            wk += c.weight
        else:                                   # nobody knows it: left out everywhere
            means.append(None)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where((wk > 0) & (n_known > 0), acc / np.where(wk > 0, wk, 1.0), 0.0)
    return unit, tuple(means)


def _aggregate(cols: TrackColumns, rule: Rule, mask: np.ndarray, owner: np.ndarray, unit: np.ndarray,
               is_ego: bool) -> tuple[np.ndarray, np.ndarray]:
    """(S_entity per video, peak track id per video: -1 when none) over the candidates ``mask``."""
    V = cols.n_videos
    best = np.zeros(V, np.float64)
    peak = np.full(V, -1, np.int64)
    if mask.any():
        # units are grouped by video (owner ascending): per-video max by reduceat, the peak
        # unit is the first unit of its video reaching that max (ties: lowest track id order)
        cand = np.flatnonzero(mask)
        o = owner[cand]
        u = unit[cand]
        starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]])
        vids = o[starts]
        gmax = np.maximum.reduceat(u, starts)
        best[vids] = gmax
        is_max = u == np.repeat(gmax, np.diff(np.r_[starts, len(o)]))
        mi = np.flatnonzero(is_max)
        first = mi[np.r_[True, o[mi][1:] != o[mi][:-1]]]
        peak[o[first]] = -1 if is_ego else cols.track_ids[cand[first]]
        if rule.entity.agg_mode == "consensus":
            tot = np.add.reduceat(u, starts)
            cnt = np.diff(np.r_[starts, len(o)])
            best[vids] = 0.5 * (gmax + tot / cnt)
    return best, peak
