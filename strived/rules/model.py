"""The rule DSL: one JSON Schema, frozen dataclasses, parsing with errors that point into the JSON.

A rule has three parts (paper, Section "Symbolic Path" and appendix "Rule Scoring"):
``entity`` (who), ``hard_gates`` (what must hold), ``soft_scores`` (how strongly).

Canonical storage: ``temporal_change`` carries ``magnitude`` (the normaliser delta of the paper's
formal definition). ``min_delta`` (the prompts' threshold at which the score is 0.5) is accepted on
input and stored as ``magnitude = 2 * min_delta``. Operators ``<``, ``<=``, ``>``, ``>=`` are
accepted and stored as ``lt``, ``le``, ``gt``, ``ge``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import RuleError

OBJECT_FIELDS = ("distance", "loc_x", "loc_z", "lane_rel", "bbox_area", "score", "abs_loc_x")
EGO_FIELDS = ("speed", "yaw_rate", "accel", "heading", "jolt")
ALL_FIELDS = OBJECT_FIELDS + EGO_FIELDS
FIELD_UNITS = {"distance": "m", "loc_x": "m", "loc_z": "m", "lane_rel": "lanes", "bbox_area": "px²",
               "score": "", "abs_loc_x": "m", "speed": "m/s", "yaw_rate": "rad/s", "accel": "m/s²",
               "heading": "rad", "jolt": "rad/s"}
OPS = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
OP_SYMBOL = {"lt": "<", "le": "≤", "gt": ">", "ge": "≥"}

RULE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://strived.local/schema/rule/1",
    "title": "STRIVE-D symbolic rule",
    "description": "S = S_hard · S_entity. Gates: a video passes gate g if some candidate track (or the "
                   "ego series, for ego fields) satisfies op(field, value) in some frame. Soft scores "
                   "give a per-track score in [0, 1]; the entity selector aggregates tracks.",
    "type": "object",
    "required": ["entity", "soft_scores"],
    "additionalProperties": False,
    "properties": {
        "event": {"type": ["string", "null"], "description": "event name (snake_case)"},
        "description": {"type": ["string", "null"]},
        "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "scoring_notes": {"type": ["string", "null"]},
        "entity": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "role": {"enum": ["object", "ego"], "default": "object",
                         "description": "object = other road users; ego = the ego vehicle's own series"},
                "class_filter": {"type": ["array", "null"], "items": {"type": "string", "minLength": 1},
                                 "description": "classes to consider; null = any class"},
                "selection": {"enum": ["any", "closest"], "default": "any",
                              "description": "closest = only the track with the smallest mean distance"},
                "agg_mode": {"enum": ["any", "consensus"], "default": "any",
                             "description": "any = max over tracks; consensus = (max + mean) / 2"},
            },
        },
        "hard_gates": {
            "type": "array",
            "items": {
                "type": "object", "additionalProperties": False,
                "required": ["field", "op", "value"],
                "properties": {
                    "field": {"enum": list(ALL_FIELDS)},
                    "op": {"enum": list(OPS)},
                    "value": {"type": "number"},
                    "min_time_fraction": {
                        "type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1,
                        "description": "extension: the condition must hold in at least this fraction "
                                       "of the track's frames (null = in at least one frame)"},
                },
            },
        },
        "soft_scores": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "field"],
                "properties": {
                    "type": {"enum": ["temporal_change", "max_change", "monotonic_trend"]},
                    "field": {"enum": list(ALL_FIELDS)},
                    "window_seconds": {"type": "number", "exclusiveMinimum": 0},
                    "magnitude": {"type": "number", "exclusiveMinimum": 0,
                                  "description": "normaliser delta: score = min(1, change / delta)"},
                    "min_delta": {"type": "number", "exclusiveMinimum": 0,
                                  "description": "threshold at which the score is 0.5 (= magnitude / 2)"},
                    "direction": {"enum": [None, "positive", "negative", "increasing", "decreasing"]},
                    "min_duration_seconds": {"type": "number", "exclusiveMinimum": 0},
                    "weight": {"type": "number", "minimum": 0, "default": 1.0},
                    "min_fraction": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                },
            },
        },
    },
}


def rule_schema() -> dict:
    """The one JSON Schema every rule is validated against (a copy)."""
    return copy.deepcopy(RULE_SCHEMA)


@dataclass(frozen=True)
class Entity:
    role: str = "object"
    class_filter: tuple[str, ...] | None = None
    selection: str = "any"
    agg_mode: str = "any"


@dataclass(frozen=True)
class Gate:
    field: str
    op: str
    value: float
    min_time_fraction: float | None = None

    def describe(self) -> str:
        q = "" if self.min_time_fraction is None else f" for ≥{self.min_time_fraction:.0%} of frames"
        return f"{self.field} {OP_SYMBOL[self.op]} {self.value:g}{q}"


@dataclass(frozen=True)
class SoftScore:
    type: str  # "temporal_change" | "monotonic_trend"
    field: str
    weight: float = 1.0
    window_s: float | None = None  # temporal_change
    magnitude: float | None = None  # temporal_change
    direction: str | None = None  # temporal_change: None/positive/negative; trend: increasing/decreasing
    min_duration_s: float | None = None  # monotonic_trend
    min_fraction: float | None = None

    def describe(self) -> str:
        if self.type == "temporal_change":
            d = {"positive": "+", "negative": "−", None: "±"}[self.direction]
            return f"Δ{d}{self.field} ≥ {self.magnitude:g} in {self.window_s:g}s"
        return f"{self.field} {self.direction} for {self.min_duration_s:g}s"

    @property
    def name(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class Rule:
    entity: Entity
    hard_gates: tuple[Gate, ...]
    soft_scores: tuple[SoftScore, ...]
    event: str | None = None
    description: str | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_dict(cls, d: Any) -> "Rule":
        return parse_rule(d)

    def to_dict(self) -> dict:
        """Canonical JSON form (round-trips through parse_rule)."""
        out: dict[str, Any] = {}
        if self.event is not None:
            out["event"] = self.event
        if self.description is not None:
            out["description"] = self.description
        out["entity"] = {"role": self.entity.role,
                         "class_filter": None if self.entity.class_filter is None else list(self.entity.class_filter),
                         "selection": self.entity.selection, "agg_mode": self.entity.agg_mode}
        out["hard_gates"] = []
        for g in self.hard_gates:
            gd = {"field": g.field, "op": g.op, "value": g.value}
            if g.min_time_fraction is not None:
                gd["min_time_fraction"] = g.min_time_fraction
            out["hard_gates"].append(gd)
        out["soft_scores"] = []
        for s in self.soft_scores:
            if s.type == "temporal_change":
                sd = {"type": s.type, "field": s.field, "window_seconds": s.window_s,
                      "magnitude": s.magnitude, "direction": s.direction, "weight": s.weight}
            else:
                sd = {"type": s.type, "field": s.field, "direction": s.direction,
                      "min_duration_seconds": s.min_duration_s, "weight": s.weight}
            if s.min_fraction is not None:
                sd["min_fraction"] = s.min_fraction
            out["soft_scores"].append(sd)
        return out

    def fields(self) -> list[str]:
        seen: list[str] = []
        for f in [g.field for g in self.hard_gates] + [s.field for s in self.soft_scores]:
            if f not in seen:
                seen.append(f)
        return seen


def _pointer(path) -> str:
    return "/" + "/".join(str(p) for p in path) if path else ""


def parse_rule(d: Any) -> Rule:
    """Validate a rule document against the schema and semantic checks; return a frozen Rule.

    Raises RuleError whose ``errors`` are (JSON pointer, message) pairs, e.g.
    ``("/soft_scores/1/window_seconds", "must be > 0")``.
    """
    import jsonschema

    errors: list[tuple[str, str]] = []
    if not isinstance(d, dict):
        raise RuleError([("", "a rule must be a JSON object")])
    validator = jsonschema.Draft202012Validator(RULE_SCHEMA)
    for e in sorted(validator.iter_errors(d), key=lambda e: list(map(str, e.absolute_path))):
        errors.append((_pointer(e.absolute_path), _friendly(e)))
    if errors:
        raise RuleError(errors)

    ent = d.get("entity") or {}
    role = ent.get("role", "object") or "object"
    cf = ent.get("class_filter")
    entity = Entity(role=role,
                    class_filter=None if cf is None else tuple(dict.fromkeys(c.strip().lower() for c in cf)),
                    selection=ent.get("selection", "any") or "any",
                    agg_mode=ent.get("agg_mode", "any") or "any")
    if role == "ego" and entity.selection == "closest":
        errors.append(("/entity/selection", "'closest' needs role 'object' (the ego is one series)"))
    if role == "ego" and cf:
        errors.append(("/entity/class_filter", "must be null when role is 'ego'"))

    gates = []
    for i, g in enumerate(d.get("hard_gates") or []):
        v = float(g["value"])
        if not math.isfinite(v):
            errors.append((f"/hard_gates/{i}/value", "must be a finite number"))
        if role == "ego" and g["field"] in OBJECT_FIELDS:
            errors.append((f"/hard_gates/{i}/field",
                           f"'{g['field']}' is an object field; an ego rule can gate only on "
                           f"{', '.join(EGO_FIELDS)}"))
        gates.append(Gate(field=g["field"], op=OPS[g["op"]], value=v,
                          min_time_fraction=g.get("min_time_fraction")))

    softs = []
    for i, s in enumerate(d.get("soft_scores") or []):
        p = f"/soft_scores/{i}"
        typ = "temporal_change" if s["type"] == "max_change" else s["type"]
        w = float(s.get("weight", 1.0))
        if role == "ego" and s["field"] in OBJECT_FIELDS:
            errors.append((f"{p}/field", f"'{s['field']}' is an object field; an ego rule scores only "
                                         f"{', '.join(EGO_FIELDS)}"))
        mf = s.get("min_fraction")
        if typ == "temporal_change":
            extra = set(s) - {"type", "field", "window_seconds", "magnitude", "min_delta", "direction",
                              "weight", "min_fraction"}
            for k in sorted(extra):
                errors.append((f"{p}/{k}", "not a key of a temporal_change soft score"))
            if "window_seconds" not in s:
                errors.append((f"{p}/window_seconds", "required for temporal_change"))
            if "magnitude" in s and "min_delta" in s:
                errors.append((f"{p}/min_delta", "give either magnitude or min_delta, not both"))
            elif "magnitude" not in s and "min_delta" not in s:
                errors.append((f"{p}/magnitude", "required for temporal_change (or min_delta)"))
            direction = s.get("direction")
            if direction in ("increasing", "decreasing"):
                errors.append((f"{p}/direction", "temporal_change takes null, 'positive' or 'negative'"))
            mag = float(s["magnitude"]) if "magnitude" in s else 2.0 * float(s.get("min_delta", 0.5))
            softs.append(SoftScore(type=typ, field=s["field"], weight=w,
                                   window_s=float(s.get("window_seconds", 1.0)), magnitude=mag,
                                   direction=direction, min_fraction=mf))
        else:
            extra = set(s) - {"type", "field", "direction", "min_duration_seconds", "weight", "min_fraction"}
            for k in sorted(extra):
                errors.append((f"{p}/{k}", "not a key of a monotonic_trend soft score"))
            direction = s.get("direction")
            if direction not in ("increasing", "decreasing"):
                errors.append((f"{p}/direction", "monotonic_trend needs 'increasing' or 'decreasing'"))
            if "min_duration_seconds" not in s:
                errors.append((f"{p}/min_duration_seconds", "required for monotonic_trend"))
            softs.append(SoftScore(type=typ, field=s["field"], weight=w, direction=direction,
                                   min_duration_s=float(s.get("min_duration_seconds", 1.0)),
                                   min_fraction=mf))
    if softs and sum(s.weight for s in softs) <= 0:
        errors.append(("/soft_scores", "the weights sum to zero: at least one weight must be > 0"))
    if not softs and not gates:
        errors.append(("", "a rule needs at least one hard gate or soft score"))
    if errors:
        raise RuleError(errors)
    known = {"event", "description", "entity", "hard_gates", "soft_scores"}
    return Rule(entity=entity, hard_gates=tuple(gates), soft_scores=tuple(softs),
                event=d.get("event"), description=d.get("description"),
                extra={k: v for k, v in d.items() if k not in known})


def _friendly(e) -> str:
    v = e.validator
    if v == "enum":
        return f"must be one of {', '.join(map(repr, e.validator_value))}; found {e.instance!r}"
    if v == "exclusiveMinimum":
        return f"must be > {e.validator_value}; found {e.instance!r}"
    if v == "minimum":
        return f"must be ≥ {e.validator_value}; found {e.instance!r}"
    if v == "maximum":
        return f"must be ≤ {e.validator_value}; found {e.instance!r}"
    if v == "required":
        return e.message.replace("is a required property", "is required")
    if v == "additionalProperties":
        return e.message.replace("Additional properties are not allowed", "unknown key")
    if v == "type":
        return f"must be {e.validator_value}; found {type(e.instance).__name__} {e.instance!r}"
    return e.message
