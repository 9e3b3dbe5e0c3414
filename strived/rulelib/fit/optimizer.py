"""The offline proposer: a seeded coordinate / random search over a rule form's numbers.

The search space is the paper's (appendix "L2R Calibration"): gate thresholds θ, soft-score
magnitudes δ, weights w and windows ΔT (plus trend durations and the consensus/min-time
fractions where the form has them). Values come from discrete grids: windows from a short list so
the scorer's per-(field, window, direction) feature cache is reused across proposals; magnitudes
and thresholds from per-field grids merged with the corpus' field-statistics percentiles when
given. The structure of the form never changes.

One *iteration* of the loop evaluates a batch: a sweep of one parameter over its grid with the
others at the best-so-far values (coordinates in a seeded order, gates first when the feedback
says a gate rejects positives), and, after a cycle without improvement, a batch of seeded random
joint perturbations. The best of the batch is the iteration's proposal.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass

WINDOW_GRID_S = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0)
WEIGHT_GRID = (0.25, 0.5, 0.75, 1.0)
FRACTION_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
TIME_FRACTION_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
#: how long a gate's condition must hold unbroken (min_seconds), in seconds: from a stop-line
#: pause (1-2 s) to waiting at a light (several seconds)
HELD_SECONDS_GRID = (1.0, 2.0, 3.0, 5.0, 8.0)
DURATION_GRID_S = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

# change magnitudes (δ) per field, in the field's unit
MAGNITUDE_GRID = {
    "distance": (2, 3, 4, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60),
    "loc_z": (2, 3, 4, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60),
    "loc_x": (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20),
    "abs_loc_x": (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20),
    "loc_x_road": (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20),
    "abs_loc_x_road": (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20),
    "lane_rel": (0.5, 1, 1.5, 2, 3, 4),
    "bbox_area": (500, 1000, 2000, 5000, 10000, 20000, 40000, 80000),
    "score": (0.1, 0.2, 0.3, 0.4, 0.5),
    "speed": (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15),
    "yaw_rate": (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8),
    "accel": (0.5, 1, 1.5, 2, 3, 4, 6),
    "heading": (0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.2, 1.5, 2.0),
}
# gate thresholds (θ) per (field, op family)
GATE_GRID = {
    ("distance", "lt"): (2, 3, 4, 5, 6, 8, 10, 15, 20, 25, 30, 40, 50, 60),
    ("loc_z", "lt"): (2, 3, 4, 5, 6, 8, 10, 15, 20, 25, 30, 40, 50, 60),
    ("abs_loc_x", "lt"): (0.5, 1, 1.5, 2, 2.5, 3, 4, 5),
    ("loc_x", "lt"): (-5, -4, -3, -2.5, -2, -1.5, -1, -0.5),
    ("loc_x", "gt"): (0.5, 1, 1.5, 2, 2.5, 3, 4, 5),
    ("speed", "gt"): (0.5, 1, 2, 3, 4, 5, 7, 10),
    ("speed", "lt"): (0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0),
    ("accel", "lt"): (-5, -4, -3, -2.5, -2, -1.5, -1, -0.7, -0.5),
    ("accel", "gt"): (0.5, 1, 1.5, 2, 3),
}
_MULTIPLIERS = (0.25, 0.4, 0.5, 0.6, 0.75, 0.85, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0)


@dataclass(frozen=True)
class Param:
    """One tunable number of a rule form: where it lives and the values it may take."""

    path: tuple            # e.g. ("soft_scores", 0, "magnitude")
    kind: str              # gate | magnitude | window | weight | fraction | duration
    grid: tuple[float, ...]

    @property
    def name(self) -> str:
        return "/" + "/".join(str(p) for p in self.path)


def get_at(rule: dict, path: tuple):
    node = rule
    for p in path:
        node = node[p]
    return node


def set_at(rule: dict, path: tuple, value) -> None:
    node = rule
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def _merge_grid(base, start, extra=()) -> tuple[float, ...]:
    vals = {round(float(v), 6) for v in base} | {round(float(start), 6)}
    vals |= {round(float(v), 6) for v in extra if v is not None and v == v and v > 0}
    return tuple(sorted(vals))


def _stat_values(field_stats, fld: str, window_s: float) -> list[float]:
    """Percentile values of max|Δ| for the field and window, when statistics are given."""
    if not field_stats:
        return []
    per = field_stats.get(fld, {}) if isinstance(field_stats, dict) else {}
    for key in (window_s, str(window_s), f"{window_s:g}", f"{window_s:g}s", int(window_s)):
        if key in per and isinstance(per[key], dict):
            return [v for k, v in per[key].items() if str(k).upper().startswith("P")]
    return []


GAP_GRID_S = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
NEG_WINDOW_GRID_S = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0)
STEP_WEIGHT_GRID = (0.5, 1.0, 2.0)


def _fragment_params(frag: dict, prefix: tuple, field_stats) -> list[Param]:
    """Tunable numbers of one pattern (a rule, a sequence step or a negation)."""
    params: list[Param] = []
    for i, g in enumerate(frag.get("hard_gates", [])):
        fld, op, v = g["field"], g["op"], float(g["value"])
        fam = "lt" if op in ("lt", "le", "<", "<=") else "gt"
        base = GATE_GRID.get((fld, fam)) or tuple(v * m for m in _MULTIPLIERS)
        if v < 0 and ((fld, fam) not in GATE_GRID or max(base) > 0):
            base = tuple(sorted(v * m for m in _MULTIPLIERS))   # keep the threshold's sign
        elif v > 0 and min(base) < 0:
            base = tuple(sorted(v * m for m in _MULTIPLIERS))
        if v == 0:
            continue              # a sign gate (e.g. distance > 0: "ahead"): structure, not scale
        params.append(Param(prefix + ("hard_gates", i, "value"), "gate", _merge_grid(base, v)))
        if g.get("min_time_fraction") is not None:
            params.append(Param(prefix + ("hard_gates", i, "min_time_fraction"), "fraction",
                                _merge_grid(TIME_FRACTION_GRID, g["min_time_fraction"])))
        if g.get("min_seconds") is not None:
            params.append(Param(prefix + ("hard_gates", i, "min_seconds"), "duration",
                                _merge_grid(HELD_SECONDS_GRID, g["min_seconds"])))
    softs = frag.get("soft_scores", [])
    for i, s in enumerate(softs):
        fld = s["field"]
        if s["type"] in ("temporal_change", "max_change"):
            mag = float(s.get("magnitude") or 2.0 * float(s.get("min_delta", 1.0)))
            win = float(s.get("window_seconds", 4.0))
            base = MAGNITUDE_GRID.get(fld) or tuple(mag * m for m in _MULTIPLIERS)
            params.append(Param(prefix + ("soft_scores", i, "magnitude"), "magnitude",
                                _merge_grid(base, mag, _stat_values(field_stats, fld, win))))
            params.append(Param(prefix + ("soft_scores", i, "window_seconds"), "window",
                                _merge_grid(WINDOW_GRID_S, win)))
        else:
            params.append(Param(prefix + ("soft_scores", i, "min_duration_seconds"), "duration",
                                _merge_grid(DURATION_GRID_S, s.get("min_duration_seconds", 2.0))))
        if i > 0:  # the first weight stays fixed: only weight ratios matter
            params.append(Param(prefix + ("soft_scores", i, "weight"), "weight",
                                _merge_grid(WEIGHT_GRID, s.get("weight", 1.0))))
        if s.get("min_fraction") is not None:
            params.append(Param(prefix + ("soft_scores", i, "min_fraction"), "fraction",
                                _merge_grid(FRACTION_GRID, s["min_fraction"])))
    return params


def param_space(form: dict, field_stats: dict | None = None) -> list[Param]:
    """The tunable numbers of ``form`` with their grids (gates first, then soft scores). For a
    sequence: each step's numbers, its gap's upper bound and (after the first) its weight, then
    each negation's scope thresholds and time window."""
    if "sequence" not in form:
        return _fragment_params(form, (), field_stats)
    params: list[Param] = []
    for k, st in enumerate(form["sequence"]):
        params += _fragment_params(st, ("sequence", k), field_stats)
        gap = st.get("gap")
        if gap is not None and float(gap.get("max_seconds", 0.0)) > 0:
            lo = float(gap.get("min_seconds", 0.0))
            grid = tuple(v for v in _merge_grid(GAP_GRID_S, gap["max_seconds"]) if v >= lo)
            params.append(Param(("sequence", k, "gap", "max_seconds"), "gap", grid))
        if k > 0:
            params.append(Param(("sequence", k, "weight"), "weight",
                                _merge_grid(STEP_WEIGHT_GRID, st.get("weight", 1.0))))
    for n, a in enumerate(form.get("absent") or []):
        params += [p for p in _fragment_params(a, ("absent", n), field_stats)]
        for key in ("before_seconds", "after_seconds"):
            params.append(Param(("absent", n, key), "window",
                                tuple(sorted({round(float(v), 6) for v in NEG_WINDOW_GRID_S}
                                             | {round(float(a.get(key, 0.0)), 6)}))))
    return params


def canonical_form(form: dict) -> dict:
    """``form`` with ``min_delta`` turned into ``magnitude`` (δ = 2·min_delta), so the grids apply."""
    f = copy.deepcopy(form)
    frags = (list(f.get("sequence") or []) + list(f.get("absent") or [])) if "sequence" in f else [f]
    for frag in frags:
        for s in frag.get("soft_scores", []):
            if "min_delta" in s and "magnitude" not in s:
                s["magnitude"] = 2.0 * float(s.pop("min_delta"))
    return f


def grid_distance(params: list[Param], a: dict, b: dict) -> int:
    """Sum over parameters of the grid-step distance between rules ``a`` and ``b``."""
    total = 0
    for p in params:
        va, vb = get_at(a, p.path), get_at(b, p.path)
        ia = min(range(len(p.grid)), key=lambda k: abs(p.grid[k] - va))
        ib = min(range(len(p.grid)), key=lambda k: abs(p.grid[k] - vb))
        total += abs(ia - ib)
    return total


class OptimizerProposer:
    """Deterministic (seeded) coordinate + random search proposer; needs no LLM."""

    name = "optimizer"

    def __init__(self, form: dict, field_stats: dict | None = None, seed: int = 0,
                 n_random: int = 8):
        self.form = canonical_form(form)
        self.params = param_space(self.form, field_stats)
        self.rng = random.Random(seed)
        order = list(range(len(self.params)))
        self.rng.shuffle(order)
        self.order = order
        self.n_random = n_random
        self._cursor = 0
        self._stale = 0          # coordinates swept since the last improvement
        self._last_best = None

    def propose(self, state) -> list[dict]:
        """Candidates for this iteration. ``state`` exposes ``iteration`` (1-based), ``best_rule``,
        ``best_ap`` and ``last_issues`` (issue tags of the previous iteration)."""
        if state.iteration == 1 or state.best_rule is None or not self.params:
            return [copy.deepcopy(self.form)]
        best = state.best_rule
        if self._last_best is None or state.best_ap > self._last_best + 1e-12:
            self._stale = 0
        self._last_best = state.best_ap
        if self._stale >= len(self.params):
            self._stale = 0
            return self._random_batch(best)
        self._stale += 1
        p = self._next_param(state.last_issues)
        out = []
        for v in p.grid:
            cand = copy.deepcopy(best)
            set_at(cand, p.path, float(v))
            out.append(cand)
        return out

    def _next_param(self, issues) -> Param:
        if issues and any(t.startswith("gate_rejects_positives") for t in issues):
            gates = [i for i in self.order if self.params[i].kind == "gate"]
            if gates:
                # sweep the gates in turn while they are the problem
                i = gates[self._cursor % len(gates)]
                self._cursor += 1
                return self.params[i]
        i = self.order[self._cursor % len(self.order)]
        self._cursor += 1
        return self.params[i]

    def _random_batch(self, best: dict) -> list[dict]:
        out = []
        for _ in range(self.n_random):
            cand = copy.deepcopy(best)
            for p in self.params:
                if self.rng.random() < 0.5:
                    cur = get_at(cand, p.path)
                    k = min(range(len(p.grid)), key=lambda j: abs(p.grid[j] - cur))
                    k = max(0, min(len(p.grid) - 1, k + self.rng.choice((-2, -1, 1, 2))))
                    set_at(cand, p.path, float(p.grid[k]))
            out.append(cand)
        return out
