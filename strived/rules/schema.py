"""The vocabulary of a rule document and its one JSON Schema: the fields a rule can read (object
and ego), their units, the comparison operators, the bounds of every number a rule carries, and
the schema `model.parse_rule` validates every rule against (`rule_schema`)."""

from __future__ import annotations

import copy
from typing import Any

OBJECT_FIELDS = ("distance", "loc_x", "loc_z", "lane_rel", "bbox_area", "score", "abs_loc_x", "loc_x_road",
                 "abs_loc_x_road")
EGO_FIELDS = ("speed", "yaw_rate", "accel", "heading", "jolt")
ALL_FIELDS = OBJECT_FIELDS + EGO_FIELDS
FIELD_UNITS = {"distance": "m", "loc_x": "m", "loc_z": "m", "lane_rel": "lanes", "bbox_area": "px²",
               "score": "", "abs_loc_x": "m", "speed": "m/s", "yaw_rate": "rad/s", "accel": "m/s²",
               "heading": "rad", "jolt": "rad/s", "loc_x_road": "m", "abs_loc_x_road": "m"}
OPS = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
OP_SYMBOL = {"lt": "<", "le": "≤", "gt": ">", "ge": "≥"}

#: Bounds of every number a rule carries (issue: a 1e14 window overflowed the scorer). Windows,
#: durations, gaps and negation windows are seconds; values and magnitudes are in the field's unit
#: (bbox_area is px², hence the wide bound); weights are relative.
MAX_SECONDS = 3600.0
MAX_ABS_VALUE = 1e9
MAX_WEIGHT = 1000.0
MAX_STEPS = 8
MAX_ABSENT = 8
MAX_DEPTH = 32


def _num(lo=None, hi=None, *, excl_lo=False, nullable=False, desc=None, default=None) -> dict:
    d: dict[str, Any] = {"type": ["number", "null"] if nullable else "number"}
    if lo is not None:
        d["exclusiveMinimum" if excl_lo else "minimum"] = lo
    if hi is not None:
        d["maximum"] = hi
    if default is not None:
        d["default"] = default
    if desc:
        d["description"] = desc
    return d


ENTITY_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "role": {"enum": ["object", "ego"], "default": "object",
                 "description": "object = other road users; ego = the ego vehicle's own series"},
        "class_filter": {"type": ["array", "null"], "maxItems": 64,
                         "items": {"type": "string", "minLength": 1, "maxLength": 64},
                         "description": "classes to consider; null = any class"},
        "selection": {"enum": ["any", "closest"], "default": "any",
                      "description": "closest = only the track with the smallest mean distance"},
        "agg_mode": {"enum": ["any", "consensus"], "default": "any",
                     "description": "any = max over tracks; consensus = (max + mean) / 2"},
    },
}

GATE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["field", "op", "value"],
    "properties": {
        "field": {"enum": list(ALL_FIELDS)},
        "op": {"enum": list(OPS)},
        "value": _num(-MAX_ABS_VALUE, MAX_ABS_VALUE),
        "min_time_fraction": _num(0, 1, excl_lo=True, nullable=True,
                                  desc="extension: the condition must hold in at least this "
                                       "fraction of the track's frames (null = in at least one frame)"),
        "min_seconds": _num(0, MAX_SECONDS, excl_lo=True, nullable=True,
                            desc="extension, seconds: the condition must hold over an unbroken run "
                                 "of the unit's samples lasting at least this long (last sample's "
                                 "time minus the first's; a sample without a value breaks the run). "
                                 "A duration, not a share of the clip: 'stopped for 3 s' is found "
                                 "in a clip of any length. Not with min_time_fraction (null = in at "
                                 "least one frame)"),
    },
}

SOFT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "field"],
    "properties": {
        "type": {"enum": ["temporal_change", "max_change", "monotonic_trend"]},
        "field": {"enum": list(ALL_FIELDS)},
        "window_seconds": _num(0, MAX_SECONDS, excl_lo=True),
        "magnitude": _num(0, MAX_ABS_VALUE, excl_lo=True,
                          desc="normaliser delta: score = min(1, change / delta)"),
        "min_delta": _num(0, MAX_ABS_VALUE / 2, excl_lo=True,
                          desc="threshold at which the score is 0.5 (= magnitude / 2)"),
        "direction": {"enum": [None, "positive", "negative", "increasing", "decreasing"]},
        "min_duration_seconds": _num(0, MAX_SECONDS, excl_lo=True),
        "weight": _num(0, MAX_WEIGHT, default=1.0),
        "min_fraction": _num(0, 1, nullable=True),
    },
}


def _fragment_props() -> dict:
    return {"name": {"type": ["string", "null"], "maxLength": 200},
            "entity": copy.deepcopy(ENTITY_SCHEMA),
            "hard_gates": {"type": "array", "maxItems": 32, "items": copy.deepcopy(GATE_SCHEMA)},
            "soft_scores": {"type": "array", "maxItems": 32, "items": copy.deepcopy(SOFT_SCHEMA)}}


STEP_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["entity"],
    "description": "one step of a sequence: a rule fragment realised by one unit (a track, or the ego) "
                   "at one anchor time; its gates hold at that time, its soft scores are the "
                   "per-frame traces ending there",
    "properties": {
        **_fragment_props(),
        "weight": _num(0, MAX_WEIGHT, excl_lo=True, default=1.0,
                       desc="exponent weight of the step in the weighted geometric mean"),
        "gap": {"type": "object", "additionalProperties": False, "required": ["max_seconds"],
                "description": "time from the previous step's anchor to this step's anchor "
                               "(every step after the first)",
                "properties": {"min_seconds": _num(0, MAX_SECONDS, default=0.0),
                               "max_seconds": _num(0, MAX_SECONDS)}},
        "same_track": {"type": "boolean", "default": False,
                       "description": "this step must be realised by the same track as the previous step"},
    },
}

ABSENT_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["entity"],
    "description": "scoped negation: a fragment that must NOT hold within [t - before_seconds, "
                   "t + after_seconds] of the anchor time t of step `step`; its gates are the "
                   "spatial scope (e.g. distance < 20). The sequence score is multiplied by "
                   "1 - (the fragment's best per-frame score inside that window)",
    "properties": {
        **_fragment_props(),
        "step": {"type": "integer", "minimum": 0, "maximum": MAX_STEPS - 1,
                 "description": "the step whose anchor time the window is around (default: the last)"},
        "before_seconds": _num(0, MAX_SECONDS, default=0.0),
        "after_seconds": _num(0, MAX_SECONDS, default=0.0),
    },
}

RULE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://strived.local/schema/rule/1",
    "title": "STRIVE-D symbolic rule",
    "description": "Either a single pattern (entity, hard_gates, soft_scores): S = S_hard · S_entity. "
                   "Gates: a video passes gate g if some candidate track (or the ego series, for ego "
                   "fields) satisfies op(field, value) in some frame. Soft scores give a per-track "
                   "score in [0, 1]; the entity selector aggregates tracks. Or a sequence: ordered "
                   "steps with gaps between them, scored as the best assignment of (unit, time) to "
                   "the steps: the weighted geometric mean of the steps' scores, times the scoped "
                   "negations' factors (docs/rules.md).",
    "type": "object",
    "anyOf": [{"required": ["entity", "soft_scores"]}, {"required": ["sequence"]}],
    "additionalProperties": False,
    "properties": {
        "event": {"type": ["string", "null"], "maxLength": 200, "description": "event name (snake_case)"},
        "description": {"type": ["string", "null"], "maxLength": 2000},
        "confidence": _num(0, 1, nullable=True),
        "scoring_notes": {"type": ["string", "null"], "maxLength": 2000},
        "entity": copy.deepcopy(ENTITY_SCHEMA),
        "hard_gates": {"type": "array", "maxItems": 32, "items": copy.deepcopy(GATE_SCHEMA)},
        "soft_scores": {"type": "array", "maxItems": 32, "items": copy.deepcopy(SOFT_SCHEMA)},
        "sequence": {"type": "array", "minItems": 1, "maxItems": MAX_STEPS,
                     "items": copy.deepcopy(STEP_SCHEMA),
                     "description": "ordered steps (temporal composition: A, then B within T s)"},
        "absent": {"type": "array", "maxItems": MAX_ABSENT, "items": copy.deepcopy(ABSENT_SCHEMA),
                   "description": "scoped negations of a sequence rule"},
    },
}


def rule_schema() -> dict:
    """The one JSON Schema every rule is validated against (a copy)."""
    return copy.deepcopy(RULE_SCHEMA)
