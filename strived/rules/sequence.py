"""Temporal composition: scoring sequence rules (ordered steps with gaps, scoped negations).

Semantics (docs/rules.md, "Sequences"):

* A *step* is a fragment (entity, gates, soft scores) realised by one unit u (a candidate track, or
  the ego series) at one anchor sample j of that unit (time t_j). Its per-sample score is

      q(u, j) = Π_g 1[op_g(φ_g(u or ego, t_j), θ_g)] · Σ_c w_c tr~_c(u, j) / Σ_c w_c

  (1 without soft scores; 0 when no soft score is known on u), where a soft score is known on u
  when its field has a value somewhere over the unit (over the video's ego series for an ego
  field); tr~_c = tr_c where it is known, else the term's expected value E_c: the mean over the
  fragment's candidate units of the corpus where c is known of their s_c = max_j tr_c(u, j) (as
  for single rules; a term no candidate knows is left out, the sums over the others), and tr_c
  is the per-frame
  trace of soft score c ending at j: for temporal_change
  ``min(1, max_{i: 0 < t_j - t_i <= ΔT} change(i, j) / δ)``; for monotonic_trend
  ``min(1, run ending at j / (2 D))``. Ego fields in an object step are read at the same frame.
* A *negation* n with the same kind of fragment has, at frame time t, the factor
  ``p_n(t) = 1 - max { q_n(u', j') : t_j' in [t - before_n, t + after_n] }`` (1 when nothing is
  there); it is anchored to one step k_n.
* The score of a video is the best assignment of (unit, anchor) to the steps, in order:

      S(v) = max_{(u_k, j_k)}  Π_k q_k(u_k, j_k)^(w_k / Σw) · Π_n p_n(t_{j_{k_n}})
             subject to  min_gap_k <= t_{j_k} - t_{j_{k-1}} <= max_gap_k   (k >= 1)
                         u_k = u_{k-1}                               (same_track steps)

  i.e. the weighted geometric mean of the steps' scores (0 when any step is absent) times the
  negations' factors. Window and gap bounds are inclusive to within T_EPS, as for soft scores.

The maximum is computed exactly by dynamic programming over the steps: with G_1 = q_1^a_1 · p and
``G_k(u, j) = M_k(u, j) · q_k(u, j)^a_k · Π p(t_j)``, where M_k is the maximum of G_{k-1} over the
anchors allowed by the gap (over every unit of the video, or over the same track), S(v) = max G_K.
Each M_k is a sliding-window maximum (sparse table) over the frames of a video or the samples of a
track. Time: O(K (N + F) log(N + F)) for N track samples and F frames of the corpus, plus the
per-sample traces (O(N log N) per soft score); memory O(N + F).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .candidates import candidate_units
from .columns import TrackColumns
from .kernels import T_EPS, US, compare, range_extreme
from .model import EGO_FIELDS, MAX_SECONDS, Rule

# ---------------------------------------------------------------------------- per-sample scores


def _candidate_mask(cols: TrackColumns, entity) -> np.ndarray:
    """Candidate tracks of an object fragment (class filter; 'closest' keeps one per video)."""
    mask, _, _ = candidate_units(cols, entity)
    return mask


def _fragment_terms(cols: TrackColumns, frag, mask: np.ndarray | None):
    """Per soft score of a fragment, over the samples of its role's series (ego frames, or track
    samples): (its trace, per-sample known-ness or None when every unit knows it, per-unit
    known-ness). Units: videos for an ego fragment, tracks for an object fragment."""
    ego = frag.entity.role == "ego"
    frame = None if ego else cols.track_frame()
    owner = None if ego else cols.tracks.owner
    for c in frag.soft_scores:
        ego_field = c.field in EGO_FIELDS
        tr = soft_trace(cols, c)
        known_u = cols.known(c.field)                # per unit of the field's role
        if ego_field and not ego:
            tr = tr[frame]                           # the ego's trace at the track sample's frame
            known_u = known_u[owner]
        s = cols.ego if ego else cols.tracks
        known = None if known_u.all() else known_u[s.sample_track()]
        yield c, tr, known, known_u


def fragment_term_means(cols: TrackColumns, frag, mask: np.ndarray | None = None) -> tuple:
    """E_c per soft score of a fragment over this corpus: the mean, over the fragment's candidate
    units (the videos for an ego fragment) where c is known, of the unit's s_c = max of its trace
    over its samples; None where no candidate knows c (the term is then left out)."""
    ego = frag.entity.role == "ego"
    s = cols.ego if ego else cols.tracks
    if ego:
        cand = np.ones(s.n, bool)
    else:
        cand = _candidate_mask(cols, frag.entity) if mask is None else mask
    st = s.sample_track()
    out = []
    for c, tr, _, known_u in _fragment_terms(cols, frag, mask):
        kn = cand & known_u
        if not kn.any():
            out.append(None)
            continue
        umax = np.zeros(s.n, np.float64)
        np.maximum.at(umax, st, np.nan_to_num(tr, nan=0.0))
        out.append(float(np.mean(umax[kn])))
    return tuple(out)


def sequence_term_means(cols: TrackColumns, rule: Rule) -> dict:
    """{("step", k) | ("absent", n): `fragment_term_means`} of a sequence rule over this corpus."""
    out = {("step", k): fragment_term_means(cols, st) for k, st in enumerate(rule.sequence)}
    out.update({("absent", n): fragment_term_means(cols, a) for n, a in enumerate(rule.absent)})
    return out


def fragment_samples(cols: TrackColumns, frag, mask: np.ndarray | None = None,
                     means: tuple | None = None) -> np.ndarray:
    """q(u, j) of a fragment for every sample of its role's series: the F ego samples (frames) for
    an ego fragment, the N track samples for an object fragment (0 for non-candidates).
    ``means``: the E_c an unknown term takes (`fragment_term_means`; default: over ``cols``)."""
    ego = frag.entity.role == "ego"
    n = cols.ego.t.shape[0] if ego else cols.tracks.t.shape[0]
    frame = None if ego else cols.track_frame()

    def at(arr: np.ndarray, fld: str) -> np.ndarray:
        return arr[frame] if (fld in EGO_FIELDS and not ego) else arr

    if not ego and mask is None:
        mask = _candidate_mask(cols, frag.entity)
    ok = np.ones(n, bool)
    for g in frag.hard_gates:
        _, v = cols.series_for(g.field)
        ok &= at(compare(v, g.op, g.value) & ~np.isnan(v), g.field)
    if frag.soft_scores:
        # a term whose field has no value over the sample's unit (its track; the video's ego
        # series for an ego field) is unknown there: it takes E_c (left out where E_c is None);
        # a unit where no term is known scores 0
        if means is None:
            means = fragment_term_means(cols, frag, mask)
        acc = np.zeros(n, np.float64)
        wk = np.zeros(n, np.float64)
        n_known = np.zeros(n, np.int64)
        for (c, tr, known, _), m in zip(_fragment_terms(cols, frag, mask), means):
            if known is None:               # a value on every unit (the usual case): no masking
                acc += c.weight * tr
                wk += c.weight
                n_known += 1
            elif m is not None:
                acc += c.weight * np.where(known, tr, m)
                wk += c.weight
                n_known += known
            else:
                acc += np.where(known, c.weight * tr, 0.0)
                wk += np.where(known, c.weight, 0.0)
                n_known += known
        q = np.where((wk > 0) & (n_known > 0), acc / np.where(wk > 0, wk, 1.0), 0.0)
    else:
        q = np.ones(n, np.float64)
    q = np.where(ok, q, 0.0)
    if not ego:
        q = np.where(mask[cols.tracks.sample_track()], q, 0.0)
    return q


def soft_trace(cols: TrackColumns, c) -> np.ndarray:
    """Per-sample trace of a soft score ending at each sample, in [0, 1]."""
    if c.type == "temporal_change":
        return np.minimum(1.0, cols.end_change(c.field, c.window_s, c.direction) / c.magnitude)
    return np.minimum(1.0, cols.end_trend(c.field, c.direction) / (2.0 * c.min_duration_s))


# ---------------------------------------------------------------------------- windows


class _Grid:
    """Sorted integer time keys of a set of samples grouped by unit (a video's frames or a track's
    samples): window queries are searchsorted on them."""

    def __init__(self, group: np.ndarray, t: np.ndarray, max_shift_s: float, max_cached: int = 8):
        self.max_cached = max_cached
        t_us = np.round(np.asarray(t, np.float64) * US).astype(np.int64)
        lo = int(t_us.min()) if t_us.size else 0
        rel = t_us - lo
        top = int(rel.max()) if rel.size else 0
        self.cap = top + 1
        shift = min(int(round((max_shift_s + T_EPS) * US)), self.cap) + 1
        self.span = top + 2 * shift + 1
        self.key = group.astype(np.int64) * self.span + rel + shift
        self.n = t_us.size
        if self.n > 1 and np.any(np.diff(self.key) < 0):
            raise ValueError("samples are not in time order within their unit")
        self._ranges: dict = {}

    def _us(self, s: float) -> int:
        x = int(round(s * US))
        return max(-self.cap, min(self.cap, x))

    def _range(self, a_us: int, b_us: int) -> tuple[np.ndarray, np.ndarray]:
        """Samples of the same group with key in [key + a_us, key + b_us] (cached: few distinct
        windows are asked)."""
        k = (a_us, b_us)
        if k not in self._ranges:
            while len(self._ranges) >= self.max_cached:
                self._ranges.pop(next(iter(self._ranges)))
            it = np.int32 if self.n < 2**31 - 1 else np.int64
            lo = np.searchsorted(self.key, self.key + a_us, side="left").astype(it)
            hi = (np.searchsorted(self.key, self.key + b_us, side="right") - 1).astype(it)
            self._ranges[k] = (lo, hi)
        return self._ranges[k]

    def back_range(self, min_s: float, max_s: float) -> tuple[np.ndarray, np.ndarray]:
        """For every sample: the index range [lo, hi] of samples of the same group whose time t'
        satisfies min_s - T_EPS <= t - t' <= max_s + T_EPS (lo > hi when empty)."""
        return self._range(-self._us(max_s + T_EPS), -self._us(min_s - T_EPS))

    def around_range(self, before_s: float, after_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Index range of samples of the same group with t' in [t - before, t + after] (± T_EPS)."""
        return self._range(-self._us(before_s + T_EPS), self._us(after_s + T_EPS))


def _grid(cols: TrackColumns, frames: bool) -> "_Grid":
    """The frame grid (videos' frames) or the track grid (tracks' samples) of a corpus, cached with
    its window ranges (a repeated query recomputes neither). Its key spacing admits any shift
    the schema allows (MAX_SECONDS, capped at the longest unit)."""
    s = cols.ego if frames else cols.tracks
    g = s._feat.get(("grid",))
    if g is None:
        # the track grid is N-sized (object-frames): keep fewer window ranges than the frame grid
        g = s._feat[("grid",)] = _Grid(s.sample_track(), s.t, MAX_SECONDS, 8 if frames else 2)
    return g


def _range_max(vals: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max vals[lo:hi+1] per query, 0 for empty ranges (all vals are >= 0)."""
    out = np.zeros(lo.shape[0], np.float64)
    ok = lo <= hi
    if ok.any() and vals.size:
        out[ok] = range_extreme(vals, lo[ok], hi[ok], np.maximum)
    return out


def _frame_max(cols: TrackColumns, vals: np.ndarray, is_ego: bool) -> np.ndarray:
    """Per frame: the max over the samples at that frame (ego: the values themselves)."""
    if is_ego:
        return vals
    out = np.zeros(cols.ego.t.shape[0], np.float64)
    if vals.size:
        np.maximum.at(out, cols.track_frame(), vals)
    return out


# ---------------------------------------------------------------------------- the DP


@dataclass
class SequenceState:
    """Per-step DP arrays of one scoring run (kept for explanations)."""

    q: list[np.ndarray] = field(default_factory=list)      # step's per-sample score
    g: list[np.ndarray] = field(default_factory=list)      # DP value per sample
    absent_frame: list[np.ndarray] = field(default_factory=list)   # per-frame negation score
    factor: list[np.ndarray] = field(default_factory=list)         # per-frame factor p_n(t)
    term_means: dict = field(default_factory=dict)   # the E_c used (`sequence_term_means`)


def run_sequence(cols: TrackColumns, rule: Rule, keep: bool = False, binarize: bool = False,
                 term_means: dict | None = None):
    """(per-video score [V], per-video peak track id of the last object step or -1, state).
    ``binarize`` (ablation): each step's score q is 1 where q >= 0.5, else 0 (after an unknown
    term took its E_c). ``term_means``: the E_c of each fragment (`sequence_term_means`; default:
    over ``cols``, the corpus being scored; an explanation of one video passes its corpus's)."""
    V = cols.n_videos
    state = SequenceState()
    if V == 0:
        return np.zeros(0), np.zeros(0, np.int64), state
    if term_means is None:
        term_means = sequence_term_means(cols, rule)
    state.term_means = term_means
    E = cols.ego
    fgrid = _grid(cols, True)
    tgrid = None
    wsum = sum(s.weight for s in rule.sequence)

    # negation factors per frame, per step they are anchored to
    factors: dict[int, np.ndarray] = {}
    for n_a, a in enumerate(rule.absent):
        is_ego = a.entity.role == "ego"
        r = fragment_samples(cols, a, means=term_means[("absent", n_a)])
        per_frame = _frame_max(cols, r, is_ego)
        lo, hi = fgrid.around_range(a.before_s, a.after_s)
        p = 1.0 - _range_max(per_frame, lo, hi)
        factors[a.step] = factors[a.step] * p if a.step in factors else p
        if keep:
            state.absent_frame.append(per_frame)
            state.factor.append(p)

    g = None
    prev_ego = None
    for k, step in enumerate(rule.sequence):
        is_ego = step.entity.role == "ego"
        q = fragment_samples(cols, step, means=term_means[("step", k)])
        if binarize:
            q = (q >= 0.5).astype(np.float64)
        val = np.power(q, step.weight / wsum)
        frames = np.arange(E.t.shape[0]) if is_ego else cols.track_frame()
        if k > 0:
            # only anchors where this step scores need the best earlier value (exact: the others
            # stay 0 whatever it is)
            need = np.flatnonzero(val > 0)
            m = np.zeros(val.shape[0], np.float64)
            if need.size and (g > 0).any():
                if step.same_track:
                    if tgrid is None:
                        tgrid = _grid(cols, False)
                    lo, hi = tgrid.back_range(step.min_gap_s, step.max_gap_s)
                    m[need] = _range_max(g, lo[need], hi[need])
                else:
                    per_frame = _frame_max(cols, g, prev_ego)
                    lo, hi = fgrid.back_range(step.min_gap_s, step.max_gap_s)
                    f = frames[need]
                    m[need] = _range_max(per_frame, lo[f], hi[f])
            val = m * val
        if k in factors:
            val = val * factors[k][frames]
        g = val
        prev_ego = is_ego
        if keep:
            state.q.append(q)
            state.g.append(g)

    # per-video maximum of the last step
    scores = np.zeros(V, np.float64)
    peak = np.full(V, -1, np.int64)
    if prev_ego:
        np.maximum.at(scores, E.sample_track(), g)
    elif g.size:
        st = cols.tracks.sample_track()
        owner = cols.tracks.owner[st]
        np.maximum.at(scores, owner, g)
        hit = np.flatnonzero((g > 0) & (g == scores[owner]))
        if hit.size:
            vids, first = np.unique(owner[hit], return_index=True)
            peak[vids] = cols.track_ids[st[hit[first]]]
    return scores, peak, state


# ---------------------------------------------------------------------------- one video: the match


@dataclass
class StepMatch:
    """How one step was realised in the best assignment."""

    index: int
    name: str
    role: str                 # "object" | "ego"
    track: int                # track id; -1 for the ego
    cls: str
    anchor_s: float           # the step's anchor time (end of its evidence)
    span_s: tuple[float, float]
    score: float              # the step's own score q at the anchor

    def to_dict(self) -> dict:
        return {"step": self.index, "name": self.name, "role": self.role, "track": self.track,
                "cls": self.cls, "anchor_s": round(self.anchor_s, 4),
                "span_s": [round(self.span_s[0], 4), round(self.span_s[1], 4)],
                "score": round(self.score, 6)}


@dataclass
class AbsenceMatch:
    """A negation at the best assignment: its factor and the strongest offender in its window."""

    index: int
    name: str
    step: int
    window_s: tuple[float, float]
    factor: float
    track: int | None = None   # the offending unit (-1 = ego), None when nothing is there
    cls: str | None = None
    time_s: float | None = None

    def to_dict(self) -> dict:
        return {"absent": self.index, "name": self.name, "step": self.step,
                "window_s": [round(self.window_s[0], 4), round(self.window_s[1], 4)],
                "factor": round(self.factor, 6), "track": self.track, "cls": self.cls,
                "time_s": None if self.time_s is None else round(self.time_s, 4)}


@dataclass
class SequenceMatch:
    score: float
    steps: list[StepMatch]
    absent: list[AbsenceMatch]
    state: SequenceState | None = None
    cols: TrackColumns | None = None

    @property
    def span_s(self) -> tuple[float, float] | None:
        """From the start of the first step's evidence to the latest anchor: covers every step."""
        if not self.steps:
            return None
        return (min(s.span_s[0] for s in self.steps), max(s.span_s[1] for s in self.steps))

    @property
    def peak_track(self) -> int | None:
        obj = [s.track for s in self.steps if s.role == "object"]
        return obj[-1] if obj else None

    def to_dicts(self) -> tuple[list[dict], list[dict]]:
        return [s.to_dict() for s in self.steps], [a.to_dict() for a in self.absent]


def _evidence_start(cols: TrackColumns, frag, sample: int, is_ego: bool) -> float:
    """Start time of the evidence of a fragment realised at ``sample`` (the earliest t1 among its
    soft scores' best windows ending there; the anchor itself for gate-only fragments)."""
    E, T = cols.ego, cols.tracks
    frame = sample if is_ego else int(cols.track_frame()[sample])
    anchor = float(E.t[frame])
    start = anchor
    for c in frag.soft_scores:
        ego_field = c.field in EGO_FIELDS
        s = E if ego_field else T
        j = frame if ego_field else sample
        unit = int(s.sample_track()[j])
        a, b = int(s.start[unit]), int(s.start[unit] + s.length[unit])
        _, v = cols.series_for(c.field)
        t = np.asarray(s.t[a:b], np.float64)
        x = np.asarray(v[a:b], np.float64)
        jj = j - a
        if np.isnan(x[jj]):
            continue
        if c.type == "temporal_change":
            ok = (~np.isnan(x[:jj])) & (t[jj] - t[:jj] <= c.window_s + T_EPS)
            if not ok.any():
                continue
            d = x[jj] - x[:jj]
            d = -d if c.direction == "negative" else (np.abs(d) if c.direction is None else d)
            d = np.where(ok, d, -np.inf)
            if d.max() > 0:   # the latest start among equal changes (as the per-frame traces do)
                start = min(start, float(t[jj - 1 - int(np.argmax(d[::-1]))]))
        else:
            run = float(cols.end_trend(c.field, c.direction)[j])
            if run > 0:
                start = min(start, float(t[jj]) - run)
    return start


def match_sequence(rec, rule: Rule, term_means: dict | None = None) -> SequenceMatch:
    """The best assignment of a sequence rule on one video, with each step's unit, anchor and span.
    ``term_means``: the E_c of the corpus the video was scored in (`RuleScorer.term_means`;
    default: the video alone), so that the match is the scorer's.

    Ties: the latest step's anchor as early as possible, then the lowest track id (ego first);
    walking back, each earlier step likewise."""
    cols = TrackColumns.from_records([rec])
    scores, _, st = run_sequence(cols, rule, keep=True, term_means=term_means)
    score = float(scores[0]) if scores.size else 0.0
    E, T = cols.ego, cols.tracks
    frames_t = np.asarray(E.t, np.float64)
    tf = cols.track_frame()
    out_steps: list[StepMatch] = []
    if score <= 0:
        return SequenceMatch(score, [], [], st, cols)

    def unit_info(is_ego, sample):
        if is_ego:
            return -1, "ego", float(frames_t[sample])
        u = int(T.sample_track()[sample])
        return int(cols.track_ids[u]), cols.cls_names[int(cols.track_cls[u])], float(frames_t[tf[sample]])

    def pick(cands: np.ndarray, g: np.ndarray, is_ego: bool) -> int:
        best = g[cands].max()
        top = cands[g[cands] >= best - 0.0]
        keys = [(unit_info(is_ego, int(i))[2], unit_info(is_ego, int(i))[0]) for i in top]
        return int(top[min(range(len(top)), key=lambda n: keys[n])])

    K = len(rule.sequence)
    chosen: list[int] = [0] * K
    is_ego_k = [s.entity.role == "ego" for s in rule.sequence]
    gK = st.g[-1]
    chosen[-1] = pick(np.flatnonzero(gK > 0), gK, is_ego_k[-1])
    for k in range(K - 1, 0, -1):
        step = rule.sequence[k]
        _, _, t_k = unit_info(is_ego_k[k], chosen[k])
        gp = st.g[k - 1]
        n = gp.shape[0]
        idx = np.arange(n)
        if is_ego_k[k - 1]:
            tp = frames_t
        else:
            tp = frames_t[tf]
        gap = t_k - tp
        ok = (gap >= step.min_gap_s - T_EPS) & (gap <= step.max_gap_s + T_EPS) & (gp > 0)
        if step.same_track:
            ok &= T.sample_track() == T.sample_track()[chosen[k]]
        chosen[k - 1] = pick(idx[ok], gp, is_ego_k[k - 1])
    for k, step in enumerate(rule.sequence):
        tid, cls, anchor = unit_info(is_ego_k[k], chosen[k])
        start = _evidence_start(cols, step, chosen[k], is_ego_k[k])
        out_steps.append(StepMatch(k, step.label(k), step.entity.role, tid, cls, anchor,
                                   (start, anchor), float(st.q[k][chosen[k]])))
    out_abs: list[AbsenceMatch] = []
    for n, a in enumerate(rule.absent):
        anchor = out_steps[a.step].anchor_s
        win = (anchor - a.before_s, anchor + a.after_s)
        frame = chosen[a.step] if is_ego_k[a.step] else int(tf[chosen[a.step]])
        factor = float(st.factor[n][frame])
        am = AbsenceMatch(n, a.label(n), a.step, win, factor)
        r = fragment_samples(cols, a, means=st.term_means[("absent", n)])
        is_ego = a.entity.role == "ego"
        t_r = frames_t if is_ego else frames_t[tf]
        inwin = (t_r >= win[0] - T_EPS) & (t_r <= win[1] + T_EPS) & (r > 0)
        if inwin.any():
            i = pick(np.flatnonzero(inwin), r, is_ego)
            am.track, am.cls, am.time_s = unit_info(is_ego, i)
        out_abs.append(am)
    return SequenceMatch(score, out_steps, out_abs, st, cols)
