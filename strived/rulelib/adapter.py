"""Rule adapter, offline: a new rule for a query, written from the closest calibrated rule.

The exemplar keeps its calibrated *scale* (magnitudes, windows, weights, gate thresholds); the
query changes its *structure* (paper, "Adaptation at retrieval time"):

* classes named in the query ("scooter", "truck or bus") replace the class filter;
* a side ("from the left", "on its right") flips signed lateral terms of a sided exemplar, or
  adds a side gate to one without a side (``loc_x < -1.5`` / ``> 1.5``); for ego rules it sets
  the sign of the heading change;
* ego vs another vehicle: an ego exemplar for a query about another vehicle is replaced by its
  object analogue (and vice versa) before adapting;
* "close", "near", "extremely close" add (or tighten) a distance gate;
* "highway" adds an ego speed gate; conditions (snow, "for no apparent reason") cannot be encoded
  and are reported in the notices.

The query is read once (`strived.query.ParsedQuery`: its classes, side, subject and qualifiers);
every produced rule is validated with `parse_rule`.
"""

from __future__ import annotations

import copy

from ..query import ParsedQuery, as_parsed, parse_query
from ..rules.model import MAX_SECONDS, parse_rule
from ..events import as_step, get_event
from .compose import DEFAULT_GAP_S
from .lexicon import EGO_OTHER, OTHER_EGO
from .matcher import MatchResult

CLOSE_GATE_M = 5.0
EXTREME_CLOSE_GATE_M = 3.0
SIDE_GATE_M = 1.5
#: "highway" = at motorway speed: 60 km/h, the minimum speed for motorways in many countries (vehicles
#: that cannot go faster may not use them: Germany, China, Japan 50-60 km/h). Was 20 m/s (72 km/h), which
#: failed free-flowing but slower motorway traffic (bench-dev's comma2k19 freeway windows run 16.6-19.8 m/s).
HIGHWAY_SPEED_MPS = 16.7


def _flip_direction(d):
    return {"positive": "negative", "negative": "positive"}.get(d, d)


def _fragments(rule: dict) -> list[dict]:
    """The parts of a rule that carry entity/gates/soft scores: itself, or its steps and negations."""
    if "sequence" in rule:
        return list(rule["sequence"]) + list(rule.get("absent") or [])
    return [rule]


#: fields whose sign says left or right (mirrored with the rule)
SIGNED_FIELDS = ("loc_x", "loc_x_road", "lane_rel", "heading", "yaw_rate")


def _flip_side(rule: dict) -> None:
    """Mirror a rule left <-> right: signed loc_x / lane_rel / heading / yaw_rate terms (in every
    step and negation of a sequence)."""
    for frag in _fragments(rule):
        for s in frag.get("soft_scores", []):
            if s["field"] in SIGNED_FIELDS and s.get("direction") in (
                    "positive", "negative", "increasing", "decreasing"):
                s["direction"] = {"positive": "negative", "negative": "positive",
                                  "increasing": "decreasing", "decreasing": "increasing"}[s["direction"]]
        for g in frag.get("hard_gates", []):
            if g["field"] in SIGNED_FIELDS:
                g["value"] = -float(g["value"])
                g["op"] = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[g["op"]]


def _side_of(rule: dict) -> str | None:
    """The side a rule encodes, if any (from its signed lateral / heading terms)."""
    for frag in _fragments(rule):
        for g in frag.get("hard_gates", []):
            if g["field"] in ("loc_x", "loc_x_road"):
                return "left" if g["op"] in ("lt", "le") and g["value"] < 0 else "right"
        for s in frag.get("soft_scores", []):
            if s["field"] == "heading" and s.get("direction") in ("positive", "negative"):
                return "left" if s["direction"] == "positive" else "right"
            if s["field"] in ("loc_x", "loc_x_road") and s.get("direction") in ("positive", "negative"):
                # an object moving towards +x came from the left
                return "left" if s["direction"] == "positive" else "right"
    return None


def _is_obj(frag: dict) -> bool:
    return (frag.get("entity") or {}).get("role", "object") == "object"


def adapt_offline(query: "str | ParsedQuery", match: MatchResult, library,
                  available_fields: set[str] | None = None) -> tuple[dict, list[str]]:
    """(adapted rule dict, notices): `adapt_offline_from` without the exemplar."""
    rule, notices, _ = adapt_offline_from(query, match, library, available_fields)
    return rule, notices


def adapt_offline_from(query: "str | ParsedQuery", match: MatchResult, library,
                       available_fields: set[str] | None = None) -> tuple[dict, list[str], str]:
    """(adapted rule dict, notices, exemplar event) for ``query`` from ``match.event``'s library
    rule (the exemplar may differ from the match: ego/other swap, a fallback, a composed query's
    first part).

    ``available_fields``: the fields some video of the searched library has; a gate on any other
    field would judge no video at all, so it is not added (and a notice says so). A composed query
    ("X then Y", "X without Y") that no library composite covers gets a sequence rule built from
    its parts' calibrated rules (`build_sequence`)."""
    pq = as_parsed(query)
    q = pq.qualifiers
    notices: list[str] = []

    def can_gate(field: str, what: str) -> bool:
        if available_fields is None or field in available_fields:
            return True
        notices.append(f"no '{what}' gate added: no video in this library has {field} "
                       "(it was not estimated), so the gate could not judge any video")
        return False
    comp = (match.qualifiers or {}).get("composition")
    if comp and not (comp.get("composite") and comp["composite"] in library.entries):
        built = build_sequence(pq, comp, library, notices)
        if built is not None:
            first = next(k for k in comp.get("first_events") or [] if k in library.entries)
            return parse_rule(built).to_dict(), notices, first
    key = _exemplar_key(pq, match, library, notices)
    rule = copy.deepcopy(library.entries[key].rule)
    suffix: list[str] = []
    steps = rule["sequence"] if "sequence" in rule else [rule]
    obj_steps = [f for f in steps if _is_obj(f)]
    # classes (the rule's own object units: not a negation's scope)
    classes = list(pq.classes)
    if classes and obj_steps:
        for f in obj_steps:
            f["entity"]["class_filter"] = list(classes)
        suffix.append("_".join(classes))
    elif classes:
        notices.append(f"classes {classes} ignored: '{key}' is an ego rule")
    if pq.side:
        _adapt_side(rule, key, pq.side, steps, obj_steps, can_gate, notices, suffix)
    if q.close and obj_steps:
        _adapt_close(obj_steps, q.extreme, can_gate)
        suffix.append("close")
    if q.highway:
        _adapt_highway(rule, steps[0], can_gate)
        suffix.append("highway")
    if q.condition:
        notices.append("the query's condition (weather / 'no apparent reason') cannot be measured "
                       "in the records; the rule ignores it")
    rule["event"] = key + ("_" + "_".join(suffix) if suffix else "")
    rule["description"] = f"adapted from '{key}' for the query {pq.text!r}"
    return parse_rule(rule).to_dict(), notices, key


def _exemplar_key(pq: ParsedQuery, match: MatchResult, library, notices: list[str]) -> str:
    """The library event to adapt from: the match's, a fallback when it has none, or its ego / other
    analogue when the query is about the other party (each change said in ``notices``)."""
    key = match.event
    if key == "none" or key not in library.entries:
        key = "object_approach" if "object_approach" in library.entries else library.keys()[0]
        notices.append(f"no library event fits; adapted from '{key}'")
    ev = get_event(key)
    if pq.other_vehicle_mentioned and not pq.ego_mentioned and ev.subject == "ego" and EGO_OTHER.get(key) in library.entries:
        key = EGO_OTHER[key]
        notices.append(f"the query is about another vehicle: exemplar '{key}'")
    elif pq.ego_mentioned and not pq.other_vehicle_mentioned and ev.subject == "object" and OTHER_EGO.get(key) in library.entries:
        key = OTHER_EGO[key]
        notices.append(f"the query is about the ego: exemplar '{key}'")
    return key


def _adapt_side(rule: dict, key: str, side: str, steps: list[dict], obj_steps: list[dict], can_gate,
                notices: list[str], suffix: list[str]) -> None:
    """The query's side: flip a sided rule, set an ego rule's heading sign, or gate the first object
    step on ``loc_x``; says so when the side cannot be encoded."""
    have = _side_of(rule)
    if have and have != side:
        _flip_side(rule)
    elif have is None:
        first = steps[0]
        if not _is_obj(first) and any(s["field"] == "heading" for s in first["soft_scores"]):
            for s in first["soft_scores"]:
                if s["field"] == "heading":
                    s["direction"] = "positive" if side == "left" else "negative"
        elif obj_steps and can_gate("loc_x", side):
            op, val = ("lt", -SIDE_GATE_M) if side == "left" else ("gt", SIDE_GATE_M)
            obj_steps[0]["hard_gates"].append({"field": "loc_x", "op": op, "value": val})
        elif obj_steps:
            pass
        else:
            notices.append(f"side '{side}' cannot be encoded on '{key}'")
    if not key.endswith(side):
        suffix.append(side)


def _adapt_close(obj_steps: list[dict], extreme: bool, can_gate) -> None:
    """"close" / "extremely close": tighten each object step's distance gate, or add one."""
    limit = EXTREME_CLOSE_GATE_M if extreme else CLOSE_GATE_M
    for f in obj_steps:
        gates = [g for g in f["hard_gates"] if g["field"] == "distance" and g["op"] in ("lt", "le")]
        if gates:
            for g in gates:
                g["value"] = min(float(g["value"]), limit)
        elif can_gate("distance", "close") and not (f.get("same_track") and not f["hard_gates"]):
            # (a gate-less step on the same track as the previous one is placed by that step's
            # gates: "close" applies there, not to the motion that follows it)
            f["hard_gates"].append({"field": "distance", "op": "lt", "value": limit})


def _adapt_highway(rule: dict, target: dict, can_gate) -> None:
    """"highway": raise the first step's ego speed gate to motorway speed, or add one."""
    gates = [g for g in target["hard_gates"] if g["field"] == "speed" and g["op"] in ("gt", "ge")]
    if gates:
        for g in gates:
            g["value"] = max(float(g["value"]), HIGHWAY_SPEED_MPS)
    elif can_gate("speed", "highway speed"):
        g = {"field": "speed", "op": "gt", "value": HIGHWAY_SPEED_MPS}
        if "sequence" not in rule:
            g["min_time_fraction"] = 0.5
        target["hard_gates"].append(g)


def _video_stay_form(steps: list[dict]) -> bool:
    """One step carries the motion (soft scores and gates); every other step is gates only on the
    same track (events.video_form's "stays" steps)."""
    moving = [s for s in steps if s.get("soft_scores")]
    return (len(moving) == 1 and bool(moving[0].get("hard_gates"))
            and all(s.get("hard_gates") and (s is steps[0] or s.get("same_track"))
                    for s in steps if s is not moving[0]))


# ---- composed queries -------------------------------------------------------------------------

AHEAD_M = 30.0
NEAR_M = 15.0
LANE_HALF_M = 1.5
LANE_OUTER_M = 5.5

def _steps_of(rule: dict, name: str) -> list[dict]:
    if "sequence" in rule:
        return copy.deepcopy(rule["sequence"])
    return [as_step(rule, name)]


def _scope_fragment(text: str) -> tuple[dict, str]:
    """A negation's fragment from words naming things ("no car ahead", "no pedestrian within
    20 m", "no vehicle in the left lane"): classes and a spatial scope as gates."""
    p = parse_query(text)
    q = p.qualifiers
    classes = list(p.classes_named) or (["pedestrian"] if q.someone else ["car", "truck", "bus", "motorcycle"])
    gates = []
    if q.within_m is not None:
        r = q.within_m
        gates += [{"field": "distance", "op": "gt", "value": -r}, {"field": "distance", "op": "lt", "value": r}]
        what = f"within {r:g} m"
    elif q.ahead:
        gates += [{"field": "distance", "op": "gt", "value": 0.0},
                  {"field": "distance", "op": "lt", "value": AHEAD_M},
                  {"field": "abs_loc_x", "op": "lt", "value": LANE_HALF_M}]
        what = f"ahead in the lane (< {AHEAD_M:g} m)"
    elif q.behind:
        gates += [{"field": "distance", "op": "lt", "value": 0.0},
                  {"field": "distance", "op": "gt", "value": -AHEAD_M}]
        what = "behind (only 360° records see it)"
    else:
        gates += [{"field": "distance", "op": "gt", "value": -NEAR_M},
                  {"field": "distance", "op": "lt", "value": NEAR_M}]
        what = f"within {NEAR_M:g} m"
    if p.side:
        sign = -1.0 if p.side == "left" else 1.0
        lo, hi = sorted((sign * LANE_HALF_M, sign * LANE_OUTER_M))
        gates += [{"field": "loc_x", "op": "gt", "value": lo}, {"field": "loc_x", "op": "lt", "value": hi}]
        what += f", in the {p.side} lane"
    ent = {"role": "object", "class_filter": classes, "selection": "any", "agg_mode": "any"}
    return {"entity": ent, "hard_gates": gates, "soft_scores": []}, f"{'/'.join(classes)} {what}"


def build_sequence(query: "str | ParsedQuery", comp: dict, library, notices: list[str]) -> dict | None:
    """A sequence rule for a composed query from its parts' calibrated library rules: "X then Y"
    (Y's anchor 0..5 s after X's, or 'within N s'), "X while Y" (same anchor), "X without Y" (X
    with Y negated in the 4 s before to 1 s after X's anchor). None when a part has no event."""
    text = as_parsed(query).text
    e1 = [k for k in comp.get("first_events") or [] if k in library.entries]
    e2 = [k for k in comp.get("second_events") or [] if k in library.entries]
    if not e1:
        return None
    ev1 = e1[0]
    steps = _steps_of(library.entries[ev1].rule, comp["first"])
    kind = comp["kind"]
    within = comp.get("within_s")
    if kind in ("sequence", "concurrent"):
        if not e2:
            return None
        ev2 = e2[0]
        more = _steps_of(library.entries[ev2].rule, comp["second"])
        gap = (0.0, 0.0) if kind == "concurrent" else (0.0, float(within or DEFAULT_GAP_S))
        more[0]["gap"] = {"min_seconds": gap[0], "max_seconds": gap[1]}
        inherit = parse_query(comp["second"]).part_subject is None   # the part names no actor
        more[0]["same_track"] = bool(inherit and _is_obj(steps[-1]) and _is_obj(more[0]))
        rule = {"event": f"{ev1}_{'while' if kind == 'concurrent' else 'then'}_{ev2}",
                "description": f"composed from '{ev1}' and '{ev2}' for the query {text!r}",
                "sequence": steps + more}
        how = ("at the same time" if kind == "concurrent" else
               f"{gap[0]:g}-{gap[1]:g} s after" + ("" if within else " (default; say 'within N s')"))
        notices.append(f"no calibrated composite for '{ev1}' {comp['connective']} '{ev2}': a sequence "
                       f"of their calibrated rules, '{ev2}' {how} '{ev1}'"
                       + ("; the same track" if more[0]["same_track"] else ""))
        return rule
    # absent: "X without Y", around X's motion (the last step with soft scores: a video cut-in's
    # "stays in the lane" step after it only places the same track)
    anchor = max((i for i, st in enumerate(steps) if st.get("soft_scores")), default=len(steps) - 1)
    windows = [float(c.get("window_seconds") or c.get("min_duration_seconds") or 0.0)
               for c in steps[anchor].get("soft_scores", [])]
    before, after = max(windows + [2.0]), 1.0
    if not steps[anchor].get("soft_scores"):
        # a state (gates only: "standing still", "cruising"): the negation covers the whole clip
        before = after = MAX_SECONDS
    if e2:
        r2 = library.entries[e2[0]].rule
        if "sequence" not in r2:
            frag = as_step(r2, comp["second"])
        elif len(r2["sequence"]) == 1 and not r2.get("absent"):
            frag = copy.deepcopy(r2["sequence"][0])   # a one-step form (video profile)
        elif not r2.get("absent") and _video_stay_form(r2["sequence"]):
            # a video form whose other steps only keep the same track in place (a cut-in that
            # stays in the lane): the motion step with its gates is what must not happen
            frag = copy.deepcopy(next(s for s in r2["sequence"] if s.get("soft_scores")))
        else:
            frag = None
        if frag is None:
            return None
        frag = {k: frag[k] for k in ("entity", "hard_gates", "soft_scores")}
        what = f"'{e2[0]}'"
    else:
        frag, what = _scope_fragment(comp["second"])
    absent = {"name": comp["second"], **frag, "step": anchor, "before_seconds": before,
              "after_seconds": after}
    when = ("anywhere in the clip" if before >= 3600 else
            f"from {before:g} s before to {after:g} s after it")
    notices.append(f"no calibrated composite for '{ev1}' without {what}: '{ev1}' with {what} negated "
                   f"{when}")
    return {"event": f"{ev1}_without", "description": f"composed from '{ev1}' for the query {text!r}",
            "sequence": steps, "absent": [absent]}
