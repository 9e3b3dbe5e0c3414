"""Naive reference scorer: plain loops over the appendix formulas, one video at a time.

It is the oracle the fast scorer is tested against (to 1e-6) and the base of `explain`, which needs
per-frame values anyway. Keep it obviously correct rather than fast. The expected value an unknown
soft term takes (`corpus_term_means`) is computed here independently of the fast scorer, by plain
loops over the corpus; `score_corpus` scores a corpus with them.
"""

from __future__ import annotations

import math

import numpy as np

from ..availability import confident_ego
from ..records import VideoRecords
from .kernels import T_EPS, TREND_MAX_GAP_S
from .model import EGO_FIELDS, Rule, SoftScore
from .road import ROAD_MAX_TURN_RAD


def ego_series(rec: VideoRecords, field_name: str) -> list[float]:
    if field_name == "heading":
        out, h = [], 0.0
        y = [0.0 if math.isnan(x) else float(np.float32(x)) for x in rec.ego["yaw_rate"]]
        for j in range(len(rec.t)):
            if j > 0:
                h += 0.5 * (y[j] + y[j - 1]) * (rec.t[j] - rec.t[j - 1])
            out.append(h)
        return out
    return [float(np.float32(x)) for x in confident_ego(rec.ego, field_name)]   # speed: confident samples


def track_series(rec: VideoRecords, tr, field_name: str) -> list[float]:
    if field_name == "abs_loc_x":
        return [abs(float(x)) for x in tr.fields["loc_x"]]
    if field_name in ("loc_x_road", "abs_loc_x_road"):
        road = road_lateral(rec, tr)
        return road if field_name == "loc_x_road" else [abs(x) for x in road]
    return [float(x) for x in tr.fields[field_name]]


def road_lateral(rec: VideoRecords, tr) -> list[float]:
    """loc_x of a track as seen from the ego's heading at the track's last sample: each later step
    adds (mean depth of its two samples) x (the ego's heading change over it). Depth is loc_z, else
    distance; a step with no depth at either end adds nothing."""
    heading = [float(np.float32(h)) for h in ego_series(rec, "heading")]
    xs = [float(x) for x in tr.fields["loc_x"]]
    zs = [float(z) if not math.isnan(float(z)) else float(d)
          for z, d in zip(tr.fields["loc_z"], tr.fields["distance"])]
    frames = [int(p) for p in tr.pos]
    out = [0.0] * len(xs)
    later = 0.0
    for k in range(len(xs) - 1, -1, -1):
        out[k] = xs[k] + later
        if k > 0:
            z0, z1 = zs[k - 1], zs[k]
            if math.isnan(z0) and math.isnan(z1):
                zbar = 0.0
            elif math.isnan(z0):
                zbar = z1
            elif math.isnan(z1):
                zbar = z0
            else:
                zbar = 0.5 * (z0 + z1)
            later += zbar * (heading[frames[k]] - heading[frames[k - 1]])
    for k in range(len(xs)):
        if abs(heading[frames[k]] - heading[frames[-1]]) > ROAD_MAX_TURN_RAD:
            out[k] = math.nan
    return out


def _any_value(values) -> bool:
    return any(not math.isnan(float(v)) for v in values)


def ego_known(rec: VideoRecords, field_name: str) -> bool:
    """Whether an ego field has any value in the video (heading: where some yaw rate is, since a
    missing yaw rate adds nothing to the integral and heading itself is never NaN)."""
    if field_name == "heading":
        return _any_value(rec.ego["yaw_rate"])
    return _any_value(ego_series(rec, field_name))


def field_known(rec: VideoRecords, tr, field_name: str) -> bool:
    """Whether a soft score on ``field_name`` is known on a unit: the field has a value somewhere
    over it (the track ``tr``; the video's ego series for an ego field, whatever ``tr``)."""
    if field_name in EGO_FIELDS:
        return ego_known(rec, field_name)
    return _any_value(track_series(rec, tr, field_name))


def imputed_mean(terms) -> float:
    """The weighted mean of a unit's soft terms ``(weight, s or None where unknown, E or None)``:
    a known term counts s, an unknown one its expected value E (left out when E is None); 0 when
    no term is known on the unit."""
    if all(s is None for _, s, _ in terms):
        return 0.0
    num, den = 0.0, 0.0
    for w, s, e in terms:
        if s is not None:
            num += w * s
            den += w
        elif e is not None:
            num += w * e
            den += w
    return num / den


def mean_or_none(values: list) -> float | None:
    """The plain mean of ``values``, None when there are none (a term no unit knows)."""
    total = 0.0
    for v in values:
        total += v
    return total / len(values) if values else None


def valid_points(times, values) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in zip(times, values) if not math.isnan(v)]


def change_pairs_max(pts, window_s: float, direction: str | None) -> float:
    """max over pairs 0 < t2 - t1 <= window of the (signed or absolute) change, floored at 0."""
    best = 0.0
    for i in range(len(pts)):
        t1, v1 = pts[i]
        for j in range(i + 1, len(pts)):
            t2, v2 = pts[j]
            if t2 - t1 > window_s + T_EPS:
                break
            if direction == "positive":
                d = v2 - v1
            elif direction == "negative":
                d = v1 - v2
            else:
                d = abs(v2 - v1)
            best = max(best, d)
    return best


def smoothed(pts) -> list[float]:
    out = []
    for k in range(len(pts)):
        nb = [pts[k][1]]
        if k > 0:
            nb.append(pts[k - 1][1])
        if k + 1 < len(pts):
            nb.append(pts[k + 1][1])
        out.append(sum(nb) / len(nb))
    return out


def trend_run_max(pts, direction: str) -> float:
    if len(pts) < 2:
        return 0.0
    sm = smoothed(pts)
    sign = 1.0 if direction == "increasing" else -1.0
    best, run_start = 0.0, None
    for k in range(len(pts) - 1):
        ok = (pts[k + 1][0] - pts[k][0] <= TREND_MAX_GAP_S) and sign * (sm[k + 1] - sm[k]) > 0
        if ok:
            if run_start is None:
                run_start = pts[k][0]
            best = max(best, pts[k + 1][0] - run_start)
        else:
            run_start = None
    return best


def op_holds(v: float, op: str, x: float) -> bool:
    if math.isnan(v):
        return False
    return {"lt": v < x, "le": v <= x, "gt": v > x, "ge": v >= x}[op]


def soft_unit(pts, c: SoftScore) -> float:
    if c.type == "temporal_change":
        return min(1.0, change_pairs_max(pts, c.window_s, c.direction) / c.magnitude)
    return min(1.0, trend_run_max(pts, c.direction) / (2.0 * c.min_duration_s))


def candidate_tracks(rec: VideoRecords, rule: Rule) -> list:
    cands = [tr for tr in rec.tracks
             if rule.entity.class_filter is None or tr.cls in rule.entity.class_filter]
    if rule.entity.selection == "closest" and cands:
        def key(tr):
            d = [float(x) for x in tr.fields["distance"] if not math.isnan(x)]
            return (0 if d else 1, sum(d) / len(d) if d else 0.0, tr.track_id)
        cands = [min(cands, key=key)]
    return cands


def held_runs(times, values, op: str, x: float) -> list[tuple[float, float]]:
    """(first time, last time) of every maximal run of consecutive samples where op(value, x)
    holds; a sample without a value holds nothing and ends the run."""
    runs, start, prev = [], None, None
    for t, v in zip(times, values):
        if op_holds(float(v), op, x):
            if start is None:
                start = float(t)
            prev = float(t)
        elif start is not None:
            runs.append((start, prev))
            start = None
    if start is not None:
        runs.append((start, prev))
    return runs


def longest_held_run(times, values, op: str, x: float) -> tuple[float, float, float] | None:
    """(duration s, first time, last time) of the longest held run (the earliest of equals), or
    None when the condition never holds."""
    best = None
    for a, b in held_runs(times, values, op, x):
        if best is None or b - a > best[0]:
            best = (b - a, a, b)
    return best


def held_long_enough(times, values, g) -> bool:
    """A ``min_seconds`` gate on one unit: a held run of at least that long (to within T_EPS)."""
    best = longest_held_run(times, values, g.op, g.value)
    return best is not None and best[0] >= g.min_seconds - T_EPS


def gate_holds(rec: VideoRecords, cands, g) -> bool:
    def unit_ok(times, values) -> bool:
        if g.min_seconds is not None:
            return held_long_enough(times, values, g)
        flags = [op_holds(v, g.op, g.value) for v in values if not math.isnan(v)]
        if g.min_time_fraction is None:
            return any(flags)
        # over all the unit's samples: one without a value does not hold
        return bool(flags) and sum(flags) / len(values) >= g.min_time_fraction - 1e-12
    if g.field in EGO_FIELDS:
        return unit_ok(rec.t, ego_series(rec, g.field))
    return any(unit_ok(rec.t[tr.pos], track_series(rec, tr, g.field)) for tr in cands)


def soft_terms(rec: VideoRecords, rule: Rule, binarize: bool = False):
    """(candidates, per soft score the list of its s_c per candidate, None where unknown), or
    None when the video has no candidate or fails a gate (it takes no part in the scoring: 0).
    ``binarize``: each known s_c becomes 1 if s_c >= 0.5 else 0; ``min_fraction`` then zeroes the
    known values of a constraint that too few known candidates reach."""
    is_ego = rule.entity.role == "ego"
    cands = [None] if is_ego else candidate_tracks(rec, rule)
    if not cands:
        return None
    for g in rule.hard_gates:
        if not gate_holds(rec, [] if is_ego else cands, g):
            return None
    ego_pts_cache: dict[str, list] = {}

    def pts_for(tr, field_name):
        if field_name in EGO_FIELDS:
            if field_name not in ego_pts_cache:
                ego_pts_cache[field_name] = valid_points(rec.t, ego_series(rec, field_name))
            return ego_pts_cache[field_name]
        return valid_points(rec.t[tr.pos], track_series(rec, tr, field_name))

    per_c = []   # per soft score, per candidate: s_c, or None where the term is unknown
    for c in rule.soft_scores:
        vals = [soft_unit(pts_for(tr, c.field), c) if field_known(rec, tr, c.field) else None
                for tr in cands]
        if binarize:
            vals = [None if s is None else (1.0 if s >= 0.5 else 0.0) for s in vals]
        if c.min_fraction is not None:
            known = [s for s in vals if s is not None]
            frac = sum(1 for s in known if s >= 0.5) / len(known) if known else 0.0
            if frac < c.min_fraction - 1e-12:
                vals = [None if s is None else 0.0 for s in vals]
        per_c.append(vals)
    return cands, per_c


def _known_values(per_video_terms: list, n_terms: int) -> list[list[float]]:
    """Per soft score: every known value over the candidates of the videos given."""
    out: list[list[float]] = [[] for _ in range(n_terms)]
    for got in per_video_terms:
        if got is None:
            continue
        for k, vals in enumerate(got[1]):
            for s in vals:
                if s is not None:
                    out[k].append(s)
    return out


def corpus_term_means(recs, rule: Rule, binarize: bool = False):
    """The expected value E[s_c] of each soft score over a corpus, by plain loops: the mean of its
    known values over the candidates of the videos that pass the gates (after ``binarize`` and
    ``min_fraction``), None where no candidate knows it. A sequence rule: {("step", k) |
    ("absent", n): per soft score of that fragment, the mean over its candidate units where it is
    known of the unit's maximum trace}."""
    recs = list(recs)
    if rule.sequence is not None:
        frags = [(("step", k), st) for k, st in enumerate(rule.sequence)] + \
            [(("absent", n), a) for n, a in enumerate(rule.absent)]
        return {key: _fragment_means([fragment_units(rec, f) for rec in recs], f) for key, f in frags}
    known = _known_values([soft_terms(rec, rule, binarize) for rec in recs], len(rule.soft_scores))
    return tuple(mean_or_none(v) for v in known)


def score_video(rec: VideoRecords, rule: Rule, binarize: bool = False, term_means=None) -> float:
    """S(v) = S_hard(v) * S_entity(v) by direct evaluation of the formulas. Per candidate, a soft
    score whose field has no value over it (over the ego series for an ego field) is unknown and
    takes its expected value ``term_means`` (`corpus_term_means` of the corpus scored; default:
    of this video alone); one that no unit knows is left out; 0 when no term is known.
    ``binarize``: each known s_c becomes 1 if s_c >= 0.5 else 0 (sequences: each step's q)."""
    if rule.sequence is not None:
        return score_sequence_video(rec, rule, binarize=binarize, term_means=term_means)
    got = soft_terms(rec, rule, binarize)
    if got is None:
        return 0.0
    cands, per_c = got
    if term_means is None:      # the video alone is the corpus
        term_means = tuple(mean_or_none(v) for v in _known_values([got], len(rule.soft_scores)))
    if rule.soft_scores:
        unit = [imputed_mean([(c.weight, per_c[k][i], term_means[k]) for k, c in enumerate(rule.soft_scores)])
                for i in range(len(cands))]
    else:
        unit = [1.0] * len(cands)
    if rule.entity.agg_mode == "consensus":
        return 0.5 * (max(unit) + sum(unit) / len(unit))
    return max(unit)


def score_corpus(recs, rule: Rule, binarize: bool = False) -> list[float]:
    """`score_video` of every video of a corpus, unknown terms taking the corpus's expected values."""
    recs = list(recs)
    means = corpus_term_means(recs, rule, binarize)
    return [score_video(rec, rule, binarize=binarize, term_means=means) for rec in recs]


# ---------------------------------------------------------------------------- sequences (naive)

def _trace_change_end(pts_idx, window_s: float, direction: str | None, magnitude: float) -> dict:
    """{sample index: min(1, best change over pairs ending there / magnitude)} by plain loops.
    ``pts_idx``: [(sample index, t, v)] of the valid samples in time order."""
    out = {}
    for b in range(len(pts_idx)):
        i2, t2, v2 = pts_idx[b]
        best = 0.0
        for a in range(b - 1, -1, -1):
            _, t1, v1 = pts_idx[a]
            if t2 - t1 > window_s + T_EPS:
                break
            d = v2 - v1 if direction == "positive" else v1 - v2 if direction == "negative" else abs(v2 - v1)
            best = max(best, d)
        out[i2] = min(1.0, best / magnitude)
    return out


def _trace_trend_end(pts_idx, direction: str, min_duration_s: float) -> dict:
    out = {i: 0.0 for i, _, _ in pts_idx}
    pts = [(t, v) for _, t, v in pts_idx]
    if len(pts) < 2:
        return out
    sm = smoothed(pts)
    sign = 1.0 if direction == "increasing" else -1.0
    run_start = None
    for k in range(len(pts) - 1):
        ok = (pts[k + 1][0] - pts[k][0] <= TREND_MAX_GAP_S) and sign * (sm[k + 1] - sm[k]) > 0
        if ok:
            if run_start is None:
                run_start = pts[k][0]
            out[pts_idx[k + 1][0]] = min(1.0, (pts[k + 1][0] - run_start) / (2.0 * min_duration_s))
        else:
            run_start = None
    return out


def fragment_units(rec: VideoRecords, frag) -> list:
    """The units of a sequence fragment on one video, by direct evaluation: [(unit key, frames,
    per soft score its trace on the unit or None where it is unknown, per gate its values)];
    unit key -1 is the ego; frames index ``rec.t``. Non-candidate tracks are not units."""
    is_ego = frag.entity.role == "ego"
    ego_vals = {}

    def ego_vals_for(f):
        if f not in ego_vals:
            ego_vals[f] = ego_series(rec, f)
        return ego_vals[f]

    def unit_trace(frames: list[int], series_of, c) -> list[float]:
        """The soft trace of c on a unit whose samples sit at ``frames``."""
        vals = series_of(c.field)
        pts = [(i, float(rec.t[frames[i]]), vals[i]) for i in range(len(frames)) if not math.isnan(vals[i])]
        tr = (_trace_change_end(pts, c.window_s, c.direction, c.magnitude) if c.type == "temporal_change"
              else _trace_trend_end(pts, c.direction, c.min_duration_s))
        return [tr.get(i, 0.0) for i in range(len(frames))]

    units = [(-1, list(range(len(rec.t))), None)] if is_ego else \
        [(tr.track_id, [int(p) for p in tr.pos], tr) for tr in candidate_tracks(rec, frag)]
    out = []
    ego_traces: dict = {}
    for key, frames, tr in units:
        def series_of(f, tr=tr, frames=frames):
            if f in EGO_FIELDS:
                ev = ego_vals_for(f)
                return [ev[j] for j in frames]
            return track_series(rec, tr, f)
        traces = []   # per soft score: its trace on this unit, or None where it is unknown
        for c in frag.soft_scores:
            if not field_known(rec, tr, c.field):
                traces.append(None)
            elif c.field in EGO_FIELDS and not is_ego:
                if c not in ego_traces:
                    ego_traces[c] = unit_trace(list(range(len(rec.t))), lambda f: ego_vals_for(f), c)
                traces.append([ego_traces[c][j] for j in frames])
            else:
                traces.append(unit_trace(frames, series_of, c))
        out.append((key, frames, traces, [series_of(g.field) for g in frag.hard_gates]))
    return out


def _fragment_means(units_per_video: list, frag) -> tuple:
    """Per soft score of a fragment: the mean over the units given (of every video) where it is
    known of the unit's s_c, the maximum of its trace (0 for a unit without samples)."""
    out = []
    for n in range(len(frag.soft_scores)):
        maxima = []
        for units in units_per_video:
            for _, _, traces, _ in units:
                if traces[n] is not None:
                    maxima.append(max(traces[n], default=0.0))
        out.append(mean_or_none(maxima))
    return tuple(out)


def fragment_cells(rec: VideoRecords, frag, means: tuple | None = None, units: list | None = None) -> dict:
    """{(unit key, frame index): q} of a sequence fragment on one video, by direct evaluation:
    unit key -1 is the ego; frames index ``rec.t``. Non-candidate tracks have no cells. An unknown
    soft term takes its expected value ``means`` (default: over this video's units)."""
    if units is None:
        units = fragment_units(rec, frag)
    if means is None:
        means = _fragment_means([units], frag)
    cells = {}
    for key, frames, traces, gate_vals in units:
        for i, j in enumerate(frames):
            ok = all(op_holds(gv[i], g.op, g.value) for g, gv in zip(frag.hard_gates, gate_vals))
            if not ok:
                q = 0.0
            elif frag.soft_scores:
                q = imputed_mean([(c.weight, None if traces[n] is None else traces[n][i], means[n])
                                  for n, c in enumerate(frag.soft_scores)])
            else:
                q = 1.0
            cells[(key, j)] = q
    return cells


def absence_factors(rec: VideoRecords, a, means: tuple | None = None, units: list | None = None) -> list[float]:
    """p(t_j) for every frame j: 1 - the negated fragment's best score in [t_j - before, t_j + after]."""
    per_frame = [0.0] * len(rec.t)
    for (_, j), q in fragment_cells(rec, a, means, units).items():
        per_frame[j] = max(per_frame[j], q)
    out = []
    for j, t in enumerate(rec.t):
        worst = 0.0
        for j2, t2 in enumerate(rec.t):
            if t - a.before_s - T_EPS <= t2 <= t + a.after_s + T_EPS:
                worst = max(worst, per_frame[j2])
        out.append(1.0 - worst)
    return out


def score_sequence_video(rec: VideoRecords, rule: Rule, binarize: bool = False, term_means=None) -> float:
    """S(v) of a sequence rule by plain loops: a step-by-step maximisation over (unit, frame)
    cells (docs/rules.md, "Sequences"); the tests check it against exhaustive enumeration.
    ``term_means``: the expected value of each fragment's soft terms (`corpus_term_means` of the
    corpus; default: of this video alone)."""
    units = {("step", k): fragment_units(rec, st) for k, st in enumerate(rule.sequence)}
    units.update({("absent", n): fragment_units(rec, a) for n, a in enumerate(rule.absent)})
    if term_means is None:      # the video alone is the corpus
        frag = {("step", k): st for k, st in enumerate(rule.sequence)}
        frag.update({("absent", n): a for n, a in enumerate(rule.absent)})
        term_means = {key: _fragment_means([u], frag[key]) for key, u in units.items()}
    wsum = sum(s.weight for s in rule.sequence)
    factor = {}
    for n_a, a in enumerate(rule.absent):
        f = absence_factors(rec, a, term_means[("absent", n_a)], units[("absent", n_a)])
        factor[a.step] = [x * y for x, y in zip(factor[a.step], f)] if a.step in factor else f
    g = None
    for k, step in enumerate(rule.sequence):
        cells = fragment_cells(rec, step, term_means[("step", k)], units[("step", k)])
        if binarize:
            cells = {k: (1.0 if q >= 0.5 else 0.0) for k, q in cells.items()}

        def gap_ok(j, j2):
            gap = float(rec.t[j]) - float(rec.t[j2])
            return step.min_gap_s - T_EPS <= gap <= step.max_gap_s + T_EPS
        if k > 0 and step.same_track:
            by_unit: dict = {}
            for (u2, j2), g2 in g.items():
                by_unit.setdefault(u2, []).append((j2, g2))
        elif k > 0:
            # the best earlier cell does not depend on the unit: one maximum per frame
            per_frame = [0.0] * len(rec.t)
            for (_, j2), g2 in g.items():
                per_frame[j2] = max(per_frame[j2], g2)
            m_frame = [max([per_frame[j2] for j2 in range(len(rec.t)) if gap_ok(j, j2)], default=0.0)
                       for j in range(len(rec.t))]
        new = {}
        for (u, j), q in cells.items():
            val = q ** (step.weight / wsum)
            if k > 0:
                if step.same_track:
                    best = max([g2 for j2, g2 in by_unit.get(u, []) if gap_ok(j, j2)], default=0.0)
                else:
                    best = m_frame[j]
                val = best * val
            if k in factor:
                val = val * factor[k][j]
            new[(u, j)] = val
        g = new
    return max(g.values(), default=0.0)
