"""Naive reference scorer: plain loops over the appendix formulas, one video at a time.

It is the oracle the fast scorer is tested against (to 1e-6) and the base of `explain`, which needs
per-frame values anyway. Keep it obviously correct rather than fast.
"""

from __future__ import annotations

import math

import numpy as np

from ..records import VideoRecords
from .columns import ROAD_MAX_TURN_RAD, T_EPS, TREND_MAX_GAP_S
from .model import EGO_FIELDS, Rule, SoftScore


def ego_series(rec: VideoRecords, field_name: str) -> list[float]:
    if field_name == "heading":
        out, h = [], 0.0
        y = [0.0 if math.isnan(x) else float(np.float32(x)) for x in rec.ego["yaw_rate"]]
        for j in range(len(rec.t)):
            if j > 0:
                h += 0.5 * (y[j] + y[j - 1]) * (rec.t[j] - rec.t[j - 1])
            out.append(h)
        return out
    return [float(np.float32(x)) for x in rec.ego[field_name]]


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


def score_video(rec: VideoRecords, rule: Rule) -> float:
    """S(v) = S_hard(v) * S_entity(v) by direct evaluation of the formulas."""
    if rule.sequence is not None:
        return score_sequence_video(rec, rule)
    is_ego = rule.entity.role == "ego"
    cands = [None] if is_ego else candidate_tracks(rec, rule)
    if not cands:
        return 0.0
    for g in rule.hard_gates:
        if not gate_holds(rec, [] if is_ego else cands, g):
            return 0.0
    ego_pts_cache: dict[str, list] = {}

    def pts_for(tr, field_name):
        if field_name in EGO_FIELDS:
            if field_name not in ego_pts_cache:
                ego_pts_cache[field_name] = valid_points(rec.t, ego_series(rec, field_name))
            return ego_pts_cache[field_name]
        return valid_points(rec.t[tr.pos], track_series(rec, tr, field_name))

    per_c = []
    for c in rule.soft_scores:
        vals = [soft_unit(pts_for(tr, c.field), c) for tr in cands]
        if c.min_fraction is not None:
            frac = sum(1 for s in vals if s >= 0.5) / len(vals)
            if frac < c.min_fraction - 1e-12:
                vals = [0.0] * len(vals)
        per_c.append(vals)
    if rule.soft_scores:
        wsum = sum(c.weight for c in rule.soft_scores)
        unit = [sum(c.weight * per_c[k][i] for k, c in enumerate(rule.soft_scores)) / wsum
                for i in range(len(cands))]
    else:
        unit = [1.0] * len(cands)
    if rule.entity.agg_mode == "consensus":
        return 0.5 * (max(unit) + sum(unit) / len(unit))
    return max(unit)


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


def fragment_cells(rec: VideoRecords, frag) -> dict:
    """{(unit key, frame index): q} of a sequence fragment on one video, by direct evaluation:
    unit key -1 is the ego; frames index ``rec.t``. Non-candidate tracks have no cells."""
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
    cells = {}
    ego_traces: dict = {}
    for key, frames, tr in units:
        def series_of(f, tr=tr, frames=frames):
            if f in EGO_FIELDS:
                ev = ego_vals_for(f)
                return [ev[j] for j in frames]
            return track_series(rec, tr, f)
        traces = []
        for c in frag.soft_scores:
            if c.field in EGO_FIELDS and not is_ego:
                if c not in ego_traces:
                    ego_traces[c] = unit_trace(list(range(len(rec.t))), lambda f: ego_vals_for(f), c)
                traces.append([ego_traces[c][j] for j in frames])
            else:
                traces.append(unit_trace(frames, series_of, c))
        gate_vals = [series_of(g.field) for g in frag.hard_gates]
        wsum = sum(c.weight for c in frag.soft_scores)
        for i, j in enumerate(frames):
            ok = all(op_holds(gv[i], g.op, g.value) for g, gv in zip(frag.hard_gates, gate_vals))
            if not ok:
                q = 0.0
            elif frag.soft_scores:
                q = sum(c.weight * traces[n][i] for n, c in enumerate(frag.soft_scores)) / wsum
            else:
                q = 1.0
            cells[(key, j)] = q
    return cells


def absence_factors(rec: VideoRecords, a) -> list[float]:
    """p(t_j) for every frame j: 1 - the negated fragment's best score in [t_j - before, t_j + after]."""
    per_frame = [0.0] * len(rec.t)
    for (_, j), q in fragment_cells(rec, a).items():
        per_frame[j] = max(per_frame[j], q)
    out = []
    for j, t in enumerate(rec.t):
        worst = 0.0
        for j2, t2 in enumerate(rec.t):
            if t - a.before_s - T_EPS <= t2 <= t + a.after_s + T_EPS:
                worst = max(worst, per_frame[j2])
        out.append(1.0 - worst)
    return out


def score_sequence_video(rec: VideoRecords, rule: Rule) -> float:
    """S(v) of a sequence rule by plain loops: a step-by-step maximisation over (unit, frame)
    cells (docs/rules.md, "Sequences"); the tests check it against exhaustive enumeration."""
    wsum = sum(s.weight for s in rule.sequence)
    factor = {}
    for a in rule.absent:
        f = absence_factors(rec, a)
        factor[a.step] = [x * y for x, y in zip(factor[a.step], f)] if a.step in factor else f
    g = None
    for k, step in enumerate(rule.sequence):
        cells = fragment_cells(rec, step)

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
