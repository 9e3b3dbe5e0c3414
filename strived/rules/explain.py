"""Why a video scored what it did: per-track per-frame signal traces, the peak track and the time
span where the score peaked (the UI's timeline draws these; exports use the span as the clip).

Per-frame soft trace of a temporal_change constraint at sample t2:
``min(1, max_{t1 : 0 < t2 - t1 <= window} change(t1, t2) / delta)``; its maximum over t2 is the
track's s_c. For monotonic_trend the trace is the length of the steady run ending at t2, scored the
same way. The span is the window (t1, t2) (or the run) that realised the largest weighted term of
the peak track.

A soft score whose field has no value over a unit (over the video's ego series for an ego field)
is unknown there, as in the scorers: its trace and maximum are NaN, its name is in the unit's
``unknown`` list, and in the unit's ``combined`` trace and ``unit_score`` it takes its expected
value over the corpus scored (``term_means``, `RuleScorer.term_means`), reported in the unit's
``imputed`` {term index: value}; a term no unit of the corpus knows is left out, and a unit with
no known term scores 0 (the numbers the scorers use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..availability import DERIVED_FROM
from ..records import VideoRecords
from .kernels import T_EPS, TREND_MAX_GAP_S
from .model import EGO_FIELDS, OBJECT_FIELDS, Rule, SoftScore
from .reference import (candidate_tracks, corpus_term_means, ego_known, ego_series, field_known,
                        held_long_enough, longest_held_run, op_holds, score_video, smoothed,
                        track_series)
from .sequence import fragment_samples, match_sequence


@dataclass
class TrackTrace:
    track: int  # track id; -1 for the ego series
    cls: str
    t: np.ndarray
    values: dict[str, np.ndarray]
    soft: dict[str, np.ndarray]
    gates: dict[str, np.ndarray]
    combined: np.ndarray
    unit_score: float
    soft_max: dict[str, float] = field(default_factory=dict)
    spans: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    # soft scores unknown on this unit: their field has no value over it (over the video's ego
    # series for an ego field). Their trace is NaN and their soft_max NaN (unknown, not 0); in
    # ``combined`` and ``unit_score`` each takes its expected value over the corpus, given here by
    # term index (a term no unit of the corpus knows is not in it: left out)
    unknown: list[str] = field(default_factory=list)
    imputed: dict[int, float] = field(default_factory=dict)


@dataclass
class Explanation:
    video_id: str
    score: float
    hard_ok: bool
    span_s: tuple[float, float] | None
    peak_track: int | None
    traces: list[TrackTrace]
    ego: TrackTrace | None = None
    gate_results: dict[str, bool] = field(default_factory=dict)
    # for each gate: the unit (trace) that met it, preferring the peak track; None when none did
    # (`gate_witnesses` turns it into who and when)
    gate_met: dict[str, "TrackTrace | None"] = field(default_factory=dict)
    # sequence rules: how each step was realised (unit, anchor, span, score) and each negation
    steps: list = field(default_factory=list)
    absent: list = field(default_factory=list)
    # where each ego field the rule reads came from (availability ``source``: ``video``,
    # ``telemetry:...``, ``burnin:ocr``, mixes joined by ``+``; ``unknown`` without a record)
    sources: dict[str, str] = field(default_factory=dict)

    def steps_dicts(self) -> tuple[list[dict], list[dict]]:
        """JSON-ready steps and negations (empty for single-pattern rules)."""
        return [s.to_dict() for s in self.steps], [a.to_dict() for a in self.absent]


def _change_trace(times, values, c: SoftScore):
    """Per-sample best change ending there, and the (t1, t2) of the overall best."""
    pts = [(i, float(t), float(v)) for i, (t, v) in enumerate(zip(times, values)) if not math.isnan(v)]
    trace = np.zeros(len(times))
    best, best_span = 0.0, None
    for b in range(len(pts)):
        i2, t2, v2 = pts[b]
        local = 0.0
        local_t1 = None
        for a in range(b - 1, -1, -1):
            _, t1, v1 = pts[a]
            if t2 - t1 > c.window_s + T_EPS:
                break
            d = v2 - v1 if c.direction == "positive" else v1 - v2 if c.direction == "negative" else abs(v2 - v1)
            if d > local:
                local, local_t1 = d, t1
        trace[i2] = min(1.0, local / c.magnitude)
        if local > best:
            best, best_span = local, (local_t1, t2)
    return trace, min(1.0, best / c.magnitude), best_span


def _trend_trace(times, values, c: SoftScore):
    idx = [i for i, v in enumerate(values) if not math.isnan(v)]
    pts = [(float(times[i]), float(values[i])) for i in idx]
    trace = np.zeros(len(times))
    if len(pts) < 2:
        return trace, 0.0, None
    sm = smoothed(pts)
    sign = 1.0 if c.direction == "increasing" else -1.0
    best, span, run_start = 0.0, None, None
    for k in range(len(pts) - 1):
        ok = (pts[k + 1][0] - pts[k][0] <= TREND_MAX_GAP_S) and sign * (sm[k + 1] - sm[k]) > 0
        if ok:
            if run_start is None:
                run_start = pts[k][0]
            dur = pts[k + 1][0] - run_start
            trace[idx[k + 1]] = min(1.0, dur / (2.0 * c.min_duration_s))
            if dur > best:
                best, span = dur, (run_start, pts[k + 1][0])
        else:
            run_start = None
    return trace, min(1.0, best / (2.0 * c.min_duration_s)), span


def _unknown_trace(n: int):
    """(trace, soft max, span) of a soft score that is unknown on a unit: NaN, not 0."""
    return np.full(n, np.nan), math.nan, None


def _soft_trace(times, values, c: SoftScore):
    return _change_trace(times, values, c) if c.type == "temporal_change" else _trend_trace(times, values, c)


def explain_video(rec: VideoRecords, rule: Rule, term_means=None) -> Explanation:
    """Explain ``rule`` on one video (see module doc). The score equals the scorers' score over
    the corpus whose expected terms ``term_means`` gives (`RuleScorer.term_means`; default: the
    video alone)."""
    if term_means is None:
        term_means = corpus_term_means([rec], rule)
    if rule.sequence is not None:
        return explain_sequence(rec, rule, term_means)
    is_ego = rule.entity.role == "ego"
    score = score_video(rec, rule, term_means=term_means)
    fields = rule.fields()
    ego_fields = [f for f in fields if f in EGO_FIELDS]
    obj_fields = [f for f in fields if f in OBJECT_FIELDS]

    # the ego series as a trace (always built when the rule reads an ego field)
    ego_trace = _ego_trace(rec, rule, ego_fields) if (ego_fields or is_ego) else None
    if is_ego:
        units = [ego_trace]
    else:
        units = [_track_trace(rec, rule, tr, obj_fields, ego_trace) for tr in candidate_tracks(rec, rule)]
    _combine_terms(units, rule, term_means)
    gate_results, gate_units = _gate_results(rule, units, ego_trace)
    hard_ok = all(gate_results.values())

    peak_track, span = None, None
    peak = max(units, key=lambda u: (u.unit_score, -u.track)) if units else None
    gate_met = {name: _gate_witness(met, peak) for name, met in gate_units.items()}
    if units and score > 0:
        peak_track = None if is_ego else peak.track
        # the same span the result list shows (one definition: peak_span)
        span = peak_span(rec, rule, peak_track)
    if span is not None:
        span = (float(span[0]), float(span[1]))
    traces = [u for u in units if u is not ego_trace]
    return Explanation(video_id=rec.info.id, score=float(score), hard_ok=hard_ok, span_s=span,
                       peak_track=peak_track, traces=traces, ego=ego_trace, gate_results=gate_results,
                       gate_met=gate_met, sources=ego_sources(rec, rule))


def _ego_trace(rec: VideoRecords, rule: Rule, ego_fields: list[str]) -> TrackTrace:
    """The video's ego series as a trace: the ego fields the rule reads (speed when none), the
    soft traces of its ego soft scores and the per-sample truth of its ego gates."""
    vals = {f: np.asarray(ego_series(rec, f), np.float64) for f in (ego_fields or ["speed"])}
    ego_trace = TrackTrace(track=-1, cls="ego", t=rec.t.copy(), values=vals, soft={}, gates={},
                           combined=np.zeros(len(rec.t)), unit_score=0.0)
    for c in rule.soft_scores:
        if c.field in EGO_FIELDS:
            if ego_known(rec, c.field):
                tr_, smax, span = _soft_trace(rec.t, vals[c.field], c)
            else:
                tr_, smax, span = _unknown_trace(len(rec.t))
                ego_trace.unknown.append(c.name)
            ego_trace.soft[c.name], ego_trace.soft_max[c.name], ego_trace.spans[c.name] = tr_, smax, span
    for g in rule.hard_gates:
        if g.field in EGO_FIELDS:
            ego_trace.gates[g.describe()] = np.array([op_holds(v, g.op, g.value) for v in vals[g.field]])
    return ego_trace


def _track_trace(rec: VideoRecords, rule: Rule, tr, obj_fields: list[str], ego_trace: TrackTrace | None) -> TrackTrace:
    """One candidate track as a trace: its object fields (distance when none), soft traces (an ego
    soft score's shared by every track) and the per-sample truth of its object gates."""
    t = rec.t[tr.pos]
    vals = {f: np.asarray(track_series(rec, tr, f), np.float64) for f in obj_fields or ["distance"]}
    tt = TrackTrace(track=tr.track_id, cls=tr.cls, t=t, values=vals, soft={}, gates={},
                    combined=np.zeros(len(t)), unit_score=0.0)
    for c in rule.soft_scores:
        if c.field in EGO_FIELDS:
            # shared ego value, resampled onto this track's frames for plotting
            tt.soft[c.name] = ego_trace.soft[c.name][tr.pos]
            tt.soft_max[c.name] = ego_trace.soft_max[c.name]
            tt.spans[c.name] = ego_trace.spans[c.name]
            if c.name in ego_trace.unknown:
                tt.unknown.append(c.name)
        elif field_known(rec, tr, c.field):
            tt.soft[c.name], tt.soft_max[c.name], tt.spans[c.name] = _soft_trace(t, vals[c.field], c)
        else:
            tt.soft[c.name], tt.soft_max[c.name], tt.spans[c.name] = _unknown_trace(len(t))
            tt.unknown.append(c.name)
    for g in rule.hard_gates:
        if g.field not in EGO_FIELDS:
            tt.gates[g.describe()] = np.array([op_holds(v, g.op, g.value) for v in vals[g.field]])
    return tt


def _combine_terms(units: list[TrackTrace], rule: Rule, term_means) -> None:
    """Each unit's ``unit_score`` and ``combined`` trace: min_fraction, then the weighted mean over
    the known terms with the unknown ones imputed (same decisions as the scorers)."""
    if rule.soft_scores and units:
        for c in rule.soft_scores:
            if c.min_fraction is not None:
                known = [u for u in units if c.name not in u.unknown]
                frac = sum(1 for u in known if u.soft_max[c.name] >= 0.5) / len(known) if known else 0.0
                if frac < c.min_fraction - 1e-12:
                    for u in known:
                        u.soft_max[c.name] = 0.0
        for u in units:
            if all(c.name in u.unknown for c in rule.soft_scores):
                u.unit_score = 0.0      # nothing known on this unit: it scores 0, as the scorers say
                u.combined = np.zeros(len(u.t))
                continue
            # a known term counts its own value, an unknown one its expected value over the
            # corpus (left out when no unit knows it)
            u.imputed = {k: float(term_means[k]) for k, c in enumerate(rule.soft_scores)
                         if c.name in u.unknown and term_means[k] is not None}
            num_max, num_tr, wk = 0.0, np.zeros(len(u.t)), 0.0
            for k, c in enumerate(rule.soft_scores):
                if c.name not in u.unknown:
                    num_max += c.weight * u.soft_max[c.name]
                    num_tr = num_tr + c.weight * u.soft[c.name]
                elif k in u.imputed:
                    num_max += c.weight * u.imputed[k]
                    num_tr = num_tr + c.weight * u.imputed[k]
                else:
                    continue
                wk += c.weight
            u.unit_score = num_max / wk
            u.combined = num_tr / wk
    else:
        for u in units:
            u.unit_score = 1.0
            u.combined = np.ones(len(u.t))


def _gate_results(rule: Rule, units: list[TrackTrace], ego_trace: TrackTrace | None):
    """({gate: met by some unit}, {gate: the units that met it})."""
    gate_results = {}
    gate_units: dict[str, list] = {}
    for g in rule.hard_gates:
        name = g.describe()
        if g.field in EGO_FIELDS:
            src = [ego_trace]
        else:
            src = [u for u in units if u is not ego_trace]
        if g.min_seconds is not None:
            met = [u for u in src if held_long_enough(u.t, u.values[g.field], g)]
        elif g.min_time_fraction is None:
            met = [u for u in src if bool(u.gates[name].any())]
        else:
            met = []
            for u in src:
                allv = list(u.values[g.field])
                vals = [v for v in allv if not math.isnan(v)]
                if vals and sum(op_holds(v, g.op, g.value) for v in vals) / len(allv) >= g.min_time_fraction - 1e-12:
                    met.append(u)
        gate_results[name] = bool(met)
        gate_units[name] = met
    return gate_results, gate_units


def ego_sources(rec: VideoRecords, rule: Rule) -> dict[str, str]:
    """{ego field the rule reads: the source of its values in this video}."""
    avail = rec.info.attrs.get("availability") if isinstance(rec.info.attrs, dict) else None
    out = {}
    for f in rule.fields():
        if f in EGO_FIELDS:
            e = (avail or {}).get(DERIVED_FROM.get(f, f))
            out[f] = str(e.get("source")) if isinstance(e, dict) and e.get("source") else "unknown"
    return out


def _gate_witness(met: list, peak) -> "TrackTrace | None":
    """Which unit met a gate, and when: the peak unit when it is among them (the explanation then
    agrees with the score), else the best-scoring one that did."""
    if not met:
        return None
    return peak if peak is not None and any(m is peak for m in met) else max(met, key=lambda m: (m.unit_score, -m.track))


def gate_witnesses(expl: Explanation, rule: Rule) -> list[dict]:
    """JSON-ready, one per gate: ``{"gate", "met", "track", "cls", "first_s", "last_s",
    "fraction", "is_peak_track"}`` (track -1 = the ego series). For a gate with ``min_seconds``,
    first_s / last_s bound the longest unbroken run that held (where it was met) and ``held_s``
    is its duration."""
    out = []
    for g in rule.hard_gates:
        name = g.describe()
        u = expl.gate_met.get(name)
        if u is None:
            out.append({"gate": name, "met": False, **({"source": expl.sources[g.field]}
                                                       if g.field in expl.sources else {})})
            continue
        held = np.asarray(u.gates[name], bool)
        t = np.asarray(u.t, float)
        vals = np.asarray(u.values[g.field], float)
        ok = ~np.isnan(vals)
        w = {"gate": name, "met": True, "track": int(u.track), "cls": u.cls,
             "first_s": float(t[held][0]) if held.any() else None,
             "last_s": float(t[held][-1]) if held.any() else None,
             "fraction": float(held[ok].mean()) if ok.any() else None,
             "is_peak_track": expl.peak_track is not None and u.track == expl.peak_track}
        if g.field in expl.sources:
            w["source"] = expl.sources[g.field]    # which source gave the speed (or accel...)
        if g.min_seconds is not None:
            best = longest_held_run(t, vals, g.op, g.value)
            if best is not None:
                w["held_s"], w["first_s"], w["last_s"] = best
        out.append(w)
    return out


def _directed(dv: np.ndarray, direction: str | None) -> np.ndarray:
    """Changes v(t2) - v(t1) as the soft score counts them: signed, mirrored or absolute."""
    if direction == "negative":
        return -dv
    return np.abs(dv) if direction is None else dv


def _pairwise_best(t: np.ndarray, v: np.ndarray, c: SoftScore):
    """(best change, (t1, t2)) by a vectorised pair matrix; for one track (n up to a few thousand)."""
    ok = ~np.isnan(v)
    t, v = t[ok].astype(np.float64), v[ok].astype(np.float64)
    n = t.size
    if n < 2:
        return 0.0, None
    w = c.window_s + T_EPS
    if n > 32 and np.all(np.diff(t) > 0) and np.isfinite(v).all():
        return _banded_best(t, v, c, w)
    dt = t[None, :] - t[:, None]  # [i, j] = t_j - t_i
    valid = (dt > 0) & (dt <= w)
    dv = np.where(valid, _directed(v[None, :] - v[:, None], c.direction), -np.inf)
    k = int(np.argmax(dv))
    i, j = divmod(k, dv.shape[1])
    if not np.isfinite(dv[i, j]) or dv[i, j] <= 0:
        return 0.0, None
    return float(dv[i, j]), (float(t[i]), float(t[j]))


def _banded_best(t: np.ndarray, v: np.ndarray, c: SoftScore, w: float):
    """`_pairwise_best` for strictly increasing times: only the pairs (i, i + k) with lag k up to
    the window are formed ([i, k - 1] = pair (i, i + k)), so the result, ties included (smallest
    i, then smallest j), is the pair matrix's, at a fraction of its size."""
    n = t.size
    # t_j - t_i grows with j for a fixed i (also in floating point): the largest useful lag is
    # the largest k with some pair inside the window.
    lag = int(np.max(np.searchsorted(t, t + w, side="right") - np.arange(n))) if n else 1
    lag = max(1, min(lag, n - 1))
    while lag < n - 1 and bool(np.any(t[lag + 1:] - t[:n - lag - 1] <= w)):
        lag += 1
    j = np.arange(n)[:, None] + np.arange(1, lag + 1)[None, :]
    inb = j < n
    j = np.minimum(j, n - 1)
    dt = t[j] - t[:, None]
    valid = inb & (dt > 0) & (dt <= w)
    dv = np.where(valid, _directed(v[j] - v[:, None], c.direction), -np.inf)
    k = int(np.argmax(dv))
    i, kk = divmod(k, lag)
    if not np.isfinite(dv[i, kk]) or dv[i, kk] <= 0:
        return 0.0, None
    return float(dv[i, kk]), (float(t[i]), float(t[j[i, kk]]))


def peak_span(rec: VideoRecords, rule: Rule, peak_track: int | None,
              term_means=None) -> tuple[float, float] | None:
    """The event span for a scored video without building full traces (fast path for result lists):
    the window of the peak unit's largest weighted soft term (the same choice `explain_video` makes);
    without soft scores, the longest run of the first gate with ``min_seconds`` (on the ego series,
    or the peak track), else the unit's life. ``term_means``: a sequence's expected terms over the
    corpus scored (`RuleScorer.term_means`), so that its match is the scorer's."""

    if rule.sequence is not None:
        return match_sequence(rec, rule, term_means).span_s
    tr = None
    if rule.entity.role == "ego":
        t_unit = rec.t
    elif peak_track is None or peak_track < 0:
        return None  # an object rule without a peak track scored nothing: no span
    else:
        try:
            tr = rec.track(int(peak_track))
        except KeyError:
            return None
        t_unit = rec.t[tr.pos]
    best, span = -1.0, None
    for c in rule.soft_scores:
        if c.field in EGO_FIELDS:
            t, vals = rec.t, np.asarray(ego_series(rec, c.field), np.float64)
        else:
            t, vals = t_unit, np.asarray(track_series(rec, tr, c.field), np.float64)
        if c.type == "temporal_change":
            ch, sp = _pairwise_best(t, vals, c)
            s = min(1.0, ch / c.magnitude)
        else:
            _, s, sp = _trend_trace(t, vals, c)
        if sp is not None and c.weight * s > best:
            best, span = c.weight * s, sp
    if span is None:
        # a gate held for a duration (min_seconds) is the event: its longest run on the unit
        for g in rule.hard_gates:
            if g.min_seconds is None or (g.field not in EGO_FIELDS and tr is None):
                continue
            if g.field in EGO_FIELDS:
                run = longest_held_run(rec.t, ego_series(rec, g.field), g.op, g.value)
            else:
                run = longest_held_run(t_unit, track_series(rec, tr, g.field), g.op, g.value)
            if run is not None:
                span = (run[1], run[2])
                break
    if span is None and len(t_unit):
        span = (float(t_unit[0]), float(t_unit[-1]))
    return span


def explain_sequence(rec: VideoRecords, rule: Rule, term_means=None) -> Explanation:
    """Explanation of a sequence rule: the best assignment's steps (unit, anchor, span, score),
    each negation's factor and offender, and a trace per unit involved: the per-frame score of each
    step it realised (the step's q) or of the negation it violated. ``term_means``: the expected
    terms over the corpus scored (default: the video alone)."""
    m = match_sequence(rec, rule, term_means)
    cols = m.cols
    T = cols.tracks
    units: dict[int, TrackTrace] = {}

    def trace_for(track: int) -> TrackTrace:
        if track in units:
            return units[track]
        if track < 0:
            t = rec.t.copy()
            tt = TrackTrace(track=-1, cls="ego", t=t, values={}, soft={}, gates={},
                            combined=np.zeros(len(t)), unit_score=0.0)
        else:
            tr = rec.track(track)
            t = rec.t[tr.pos]
            tt = TrackTrace(track=track, cls=tr.cls, t=t, values={}, soft={}, gates={},
                            combined=np.zeros(len(t)), unit_score=0.0)
        units[track] = tt
        return tt

    def unit_slice(track: int, arr: np.ndarray) -> np.ndarray:
        if track < 0:
            return np.asarray(arr, np.float64)
        u = int(np.flatnonzero(cols.track_ids == track)[0])
        a = int(T.start[u])
        return np.asarray(arr[a:a + int(T.length[u])], np.float64)

    def add_values(tt: TrackTrace, frag) -> None:
        for f in [g.field for g in frag.hard_gates] + [c.field for c in frag.soft_scores]:
            if f in EGO_FIELDS and tt.track >= 0:
                continue
            if f not in tt.values:
                tt.values[f] = (np.asarray(ego_series(rec, f), np.float64) if tt.track < 0 else
                                np.asarray(track_series(rec, rec.track(tt.track), f), np.float64))

    for sm in m.steps:
        step = rule.sequence[sm.index]
        tt = trace_for(sm.track)
        add_values(tt, step)
        name = f"step {sm.index + 1}: {sm.name}" if step.name else sm.name
        tt.soft[name] = unit_slice(sm.track, m.state.q[sm.index])
        tt.soft_max[name] = sm.score
        tt.spans[name] = sm.span_s
        tt.combined = np.maximum(tt.combined, tt.soft[name])
        tt.unit_score = max(tt.unit_score, sm.score)
    for am in m.absent:
        if am.track is None:
            continue
        a = rule.absent[am.index]
        tt = trace_for(am.track)
        add_values(tt, a)
        name = f"absent: {am.name}"
        tt.soft[name] = unit_slice(am.track, fragment_samples(cols, a, means=m.state.term_means[("absent", am.index)]))
        tt.soft_max[name] = 1.0 - am.factor
        tt.spans[name] = am.window_s
    ego = units.pop(-1, None)
    traces = [units[k] for k in sorted(units)]
    span = m.span_s
    return Explanation(video_id=rec.info.id, score=float(m.score), hard_ok=m.score > 0,
                       span_s=None if span is None else (float(span[0]), float(span[1])),
                       peak_track=m.peak_track, traces=traces, ego=ego,
                       gate_results={f"step {s.index + 1} ({s.name}) realised": True for s in m.steps},
                       steps=m.steps, absent=m.absent, sources=ego_sources(rec, rule))
