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

Every produced rule is validated with `parse_rule`.
"""

from __future__ import annotations

import copy
import re

from ..rules.model import parse_rule
from .events import get_event
from .matcher import EGO_OTHER, OTHER_EGO, MatchResult, qualifiers

CLOSE_GATE_M = 5.0
EXTREME_CLOSE_GATE_M = 3.0
SIDE_GATE_M = 1.5
HIGHWAY_SPEED_MPS = 20.0


def _flip_direction(d):
    return {"positive": "negative", "negative": "positive"}.get(d, d)


def _flip_side(rule: dict) -> None:
    """Mirror a rule left <-> right: signed loc_x / lane_rel / heading / yaw_rate terms."""
    for s in rule["soft_scores"]:
        if s["field"] in ("loc_x", "lane_rel", "heading", "yaw_rate") and s.get("direction") in (
                "positive", "negative", "increasing", "decreasing"):
            s["direction"] = {"positive": "negative", "negative": "positive",
                              "increasing": "decreasing", "decreasing": "increasing"}[s["direction"]]
    for g in rule["hard_gates"]:
        if g["field"] in ("loc_x", "lane_rel", "heading", "yaw_rate"):
            g["value"] = -float(g["value"])
            g["op"] = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[g["op"]]


def _side_of(rule: dict) -> str | None:
    """The side a rule encodes, if any (from its signed lateral / heading terms)."""
    for g in rule["hard_gates"]:
        if g["field"] == "loc_x":
            return "left" if g["op"] in ("lt", "le") and g["value"] < 0 else "right"
    for s in rule["soft_scores"]:
        if s["field"] == "heading" and s.get("direction") in ("positive", "negative"):
            return "left" if s["direction"] == "positive" else "right"
        if s["field"] == "loc_x" and s.get("direction") in ("positive", "negative"):
            # an object moving towards +x came from the left
            return "left" if s["direction"] == "positive" else "right"
    return None


def adapt_offline(query: str, match: MatchResult, library,
                  available_fields: set[str] | None = None) -> tuple[dict, list[str]]:
    """(adapted rule dict, notices) for ``query`` from ``match.event``'s library rule.

    ``available_fields``: the fields some video of the searched library has; a gate on any other
    field would judge no video at all, so it is not added (and a notice says so)."""
    q = qualifiers(query)
    notices: list[str] = []

    def can_gate(field: str, what: str) -> bool:
        if available_fields is None or field in available_fields:
            return True
        notices.append(f"no '{what}' gate added: no video in this library has {field} "
                       "(it was not estimated), so the gate could not judge any video")
        return False
    key = match.event
    if key == "none" or key not in library.entries:
        key = "object_approach" if "object_approach" in library.entries else library.keys()[0]
        notices.append(f"no library event fits; adapted from '{key}'")
    ev = get_event(key)
    if q["other"] and not q["ego"] and ev.subject == "ego" and EGO_OTHER.get(key) in library.entries:
        key = EGO_OTHER[key]
        notices.append(f"the query is about another vehicle: exemplar '{key}'")
    elif q["ego"] and not q["other"] and ev.subject == "object" and OTHER_EGO.get(key) in library.entries:
        key = OTHER_EGO[key]
        notices.append(f"the query is about the ego: exemplar '{key}'")
    ev = get_event(key)
    rule = copy.deepcopy(library.entries[key].rule)
    suffix: list[str] = []
    is_obj = rule["entity"]["role"] == "object"
    # classes
    if q["classes"] and is_obj:
        rule["entity"]["class_filter"] = list(q["classes"])
        suffix.append("_".join(q["classes"]))
    elif q["classes"] and not is_obj:
        notices.append(f"classes {q['classes']} ignored: '{key}' is an ego rule")
    # side
    side = q["side"]
    if side:
        have = _side_of(rule)
        if have and have != side:
            _flip_side(rule)
        elif have is None:
            if not is_obj and any(s["field"] == "heading" for s in rule["soft_scores"]):
                for s in rule["soft_scores"]:
                    if s["field"] == "heading":
                        s["direction"] = "positive" if side == "left" else "negative"
            elif is_obj and can_gate("loc_x", side):
                op, val = ("lt", -SIDE_GATE_M) if side == "left" else ("gt", SIDE_GATE_M)
                rule["hard_gates"].append({"field": "loc_x", "op": op, "value": val})
            elif is_obj:
                pass
            else:
                notices.append(f"side '{side}' cannot be encoded on '{key}'")
        if not key.endswith(side):
            suffix.append(side)
    # proximity
    if q["close"] and is_obj:
        limit = EXTREME_CLOSE_GATE_M if re.search(r"\b(extremely|very|dangerously)\b", query.lower()) \
            else CLOSE_GATE_M
        gates = [g for g in rule["hard_gates"] if g["field"] == "distance" and g["op"] in ("lt", "le")]
        if gates:
            for g in gates:
                g["value"] = min(float(g["value"]), limit)
        elif can_gate("distance", "close"):
            rule["hard_gates"].append({"field": "distance", "op": "lt", "value": limit})
        suffix.append("close")
    if q["highway"]:
        gates = [g for g in rule["hard_gates"] if g["field"] == "speed" and g["op"] in ("gt", "ge")]
        if gates:
            for g in gates:
                g["value"] = max(float(g["value"]), HIGHWAY_SPEED_MPS)
        elif can_gate("speed", "highway speed"):
            rule["hard_gates"].append({"field": "speed", "op": "gt", "value": HIGHWAY_SPEED_MPS,
                                       "min_time_fraction": 0.5})
        suffix.append("highway")
    if q["condition"]:
        notices.append("the query's condition (weather / 'no apparent reason') cannot be measured "
                       "in the records; the rule ignores it")
    rule["event"] = key + ("_" + "_".join(suffix) if suffix else "")
    rule["description"] = f"adapted from '{key}' for the query {query!r}"
    return parse_rule(rule).to_dict(), notices
