"""Naive reference scorer: plain loops over the appendix formulas, one video at a time.

It is the oracle the fast scorer is tested against (to 1e-6) and the base of `explain`, which needs
per-frame values anyway. Keep it obviously correct rather than fast.
"""

from __future__ import annotations

import math

import numpy as np

from ..records import VideoRecords
from .columns import T_EPS, TREND_MAX_GAP_S
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
    return [float(x) for x in tr.fields[field_name]]


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


def gate_holds(rec: VideoRecords, cands, g) -> bool:
    def unit_ok(times, values) -> bool:
        flags = [op_holds(v, g.op, g.value) for v in values if not math.isnan(v)]
        if g.min_time_fraction is None:
            return any(flags)
        return bool(flags) and sum(flags) / len(flags) >= g.min_time_fraction - 1e-12
    if g.field in EGO_FIELDS:
        return unit_ok(rec.t, ego_series(rec, g.field))
    return any(unit_ok(rec.t[tr.pos], track_series(rec, tr, g.field)) for tr in cands)


def score_video(rec: VideoRecords, rule: Rule) -> float:
    """S(v) = S_hard(v) * S_entity(v) by direct evaluation of the formulas."""
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
