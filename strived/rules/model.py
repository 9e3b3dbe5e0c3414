"""The rule DSL: frozen dataclasses, parsing with errors that point into the JSON (the one JSON
Schema and the field tables: `schema`).

A rule has three parts (paper, Section "Symbolic Path" and appendix "Rule Scoring"):
``entity`` (who), ``hard_gates`` (what must hold), ``soft_scores`` (how strongly).

Canonical storage: ``temporal_change`` carries ``magnitude`` (the normaliser delta of the paper's
formal definition). ``min_delta`` (the prompts' threshold at which the score is 0.5) is accepted on
input and stored as ``magnitude = 2 * min_delta``. Operators ``<``, ``<=``, ``>``, ``>=`` are
accepted and stored as ``lt``, ``le``, ``gt``, ``ge``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import RuleError
from .fastcheck import conforms
from .schema import EGO_FIELDS, MAX_DEPTH, OBJECT_FIELDS, OP_SYMBOL, OPS, RULE_SCHEMA
# the field tables, bounds and schema live in `schema`; these are re-exported because many modules
# (app, engine, rulelib, rules, tests) import them from here
from .schema import ALL_FIELDS as ALL_FIELDS, FIELD_UNITS as FIELD_UNITS, MAX_SECONDS as MAX_SECONDS
from .schema import rule_schema as rule_schema

#: Classes the records format names (docs/formats.md) plus those the event library uses. Other class
#: names are allowed (an unknown class is a class of its own) but draw a warning with a suggestion.
KNOWN_CLASSES = ("car", "truck", "bus", "pedestrian", "motorcycle", "bicycle", "barrier",
                 "traffic_cone", "other", "emergency_vehicle", "ambulance", "police", "fire_truck",
                 "animal", "dog", "cat", "deer", "bird", "horse", "cow")
CLASS_SYNONYMS = {"person": "pedestrian", "people": "pedestrian", "walker": "pedestrian",
                  "child": "pedestrian", "cyclist": "bicycle", "bike": "bicycle",
                  "motorbike": "motorcycle", "scooter": "motorcycle", "moped": "motorcycle",
                  "van": "car", "suv": "car", "sedan": "car", "vehicle": "car", "lorry": "truck",
                  "cone": "traffic_cone", "coach": "bus"}


@dataclass(frozen=True)
class Entity:
    role: str = "object"
    class_filter: tuple[str, ...] | None = None
    selection: str = "any"
    agg_mode: str = "any"

    def to_dict(self) -> dict:
        return {"role": self.role,
                "class_filter": None if self.class_filter is None else list(self.class_filter),
                "selection": self.selection, "agg_mode": self.agg_mode}


@dataclass(frozen=True)
class Gate:
    field: str
    op: str
    value: float
    min_time_fraction: float | None = None
    #: seconds: the condition holds over an unbroken run of samples at least this long
    min_seconds: float | None = None

    def describe(self) -> str:
        q = "" if self.min_time_fraction is None else f" for ≥{self.min_time_fraction:.0%} of frames"
        if self.min_seconds is not None:
            q = f" held for ≥{self.min_seconds:g} s"
        return f"{self.field} {OP_SYMBOL[self.op]} {self.value:g}{q}"

    def to_dict(self) -> dict:
        gd = {"field": self.field, "op": self.op, "value": self.value}
        if self.min_time_fraction is not None:
            gd["min_time_fraction"] = self.min_time_fraction
        if self.min_seconds is not None:
            gd["min_seconds"] = self.min_seconds
        return gd


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

    def to_dict(self) -> dict:
        if self.type == "temporal_change":
            sd = {"type": self.type, "field": self.field, "window_seconds": self.window_s,
                  "magnitude": self.magnitude, "direction": self.direction, "weight": self.weight}
        else:
            sd = {"type": self.type, "field": self.field, "direction": self.direction,
                  "min_duration_seconds": self.min_duration_s, "weight": self.weight}
        if self.min_fraction is not None:
            sd["min_fraction"] = self.min_fraction
        return sd


@dataclass(frozen=True)
class Step:
    """One step of a sequence rule (see `strived.rules.sequence`): a fragment realised by one unit
    at one anchor time. ``min_gap_s``/``max_gap_s``: the time from the previous step's anchor
    (None for the first step)."""

    entity: Entity
    hard_gates: tuple[Gate, ...]
    soft_scores: tuple[SoftScore, ...]
    weight: float = 1.0
    min_gap_s: float | None = None
    max_gap_s: float | None = None
    same_track: bool = False
    name: str | None = None

    def label(self, k: int) -> str:
        return self.name or f"step {k + 1}"

    def to_dict(self) -> dict:
        d = _fragment_dict(self)
        d["weight"] = self.weight
        if self.max_gap_s is not None:
            d["gap"] = {"min_seconds": self.min_gap_s, "max_seconds": self.max_gap_s}
            d["same_track"] = self.same_track
        return d


def _fragment_dict(f) -> dict[str, Any]:
    """The keys a sequence step and a negation share: name (when set), entity, gates, scores."""
    d: dict[str, Any] = {} if f.name is None else {"name": f.name}
    d["entity"] = f.entity.to_dict()
    d["hard_gates"] = [g.to_dict() for g in f.hard_gates]
    d["soft_scores"] = [c.to_dict() for c in f.soft_scores]
    return d


@dataclass(frozen=True)
class Absence:
    """A scoped negation: the fragment must not hold within [t - before_s, t + after_s] of the
    anchor time t of step ``step``; its gates give the spatial scope."""

    entity: Entity
    hard_gates: tuple[Gate, ...]
    soft_scores: tuple[SoftScore, ...]
    step: int
    before_s: float = 0.0
    after_s: float = 0.0
    name: str | None = None

    def label(self, n: int) -> str:
        return self.name or f"absent {n + 1}"

    def to_dict(self) -> dict:
        d = _fragment_dict(self)
        d.update({"step": self.step, "before_seconds": self.before_s, "after_seconds": self.after_s})
        return d


@dataclass(frozen=True)
class Rule:
    entity: Entity
    hard_gates: tuple[Gate, ...]
    soft_scores: tuple[SoftScore, ...]
    event: str | None = None
    description: str | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    sequence: tuple[Step, ...] | None = None
    absent: tuple[Absence, ...] = ()
    #: (JSON pointer, message) notes that do not invalidate the rule (e.g. an unknown class name)
    warnings: tuple[tuple[str, str], ...] = field(default=(), compare=False, hash=False)

    @classmethod
    def from_dict(cls, d: Any) -> "Rule":
        return parse_rule(d)

    @property
    def is_sequence(self) -> bool:
        return self.sequence is not None

    def to_dict(self) -> dict:
        """Canonical JSON form (round-trips through parse_rule)."""
        out: dict[str, Any] = {}
        if self.event is not None:
            out["event"] = self.event
        if self.description is not None:
            out["description"] = self.description
        if self.sequence is not None:
            out["sequence"] = [s.to_dict() for s in self.sequence]
            if self.absent:
                out["absent"] = [a.to_dict() for a in self.absent]
            return out
        out["entity"] = self.entity.to_dict()
        out["hard_gates"] = [g.to_dict() for g in self.hard_gates]
        out["soft_scores"] = [s.to_dict() for s in self.soft_scores]
        return out

    def parts(self) -> list:
        """The fragments of the rule: itself, or its steps then its negations."""
        if self.sequence is None:
            return [self]
        return list(self.sequence) + list(self.absent)

    def fields(self) -> list[str]:
        seen: list[str] = []
        for p in self.parts():
            for f in [g.field for g in p.hard_gates] + [s.field for s in p.soft_scores]:
                if f not in seen:
                    seen.append(f)
        return seen


def _pointer(path) -> str:
    return "/" + "/".join(str(p) for p in path) if path else ""


def _nonfinite(d: Any) -> list[tuple[str, str]]:
    """Pointers to NaN/Infinity numbers anywhere in a document (JSON Schema bounds let NaN through),
    and a stop at documents nested deeper than any rule (no recursion: no RecursionError)."""
    out: list[tuple[str, str]] = []
    stack = [((), d)]
    while stack:
        path, x = stack.pop()
        if len(path) > MAX_DEPTH:
            out.append((_pointer(path), f"nested deeper than {MAX_DEPTH} levels: not a rule"))
            continue
        if isinstance(x, float) and not math.isfinite(x):
            out.append((_pointer(path), f"must be a finite number; found {x!r}"))
        elif isinstance(x, dict):
            stack.extend((path + (k,), v) for k, v in x.items())
        elif isinstance(x, list):
            stack.extend((path + (i,), v) for i, v in enumerate(x))
    return sorted(out)


def suggest_class(name: str) -> str | None:
    """The known class a mistyped or plural class name most likely means (None if no guess)."""
    import difflib

    n = name.strip().lower()
    for cand in (n, n[:-2] if n.endswith("es") else n, n[:-1] if n.endswith("s") else n):
        if cand in KNOWN_CLASSES:
            return cand
        if cand in CLASS_SYNONYMS:
            return CLASS_SYNONYMS[cand]
    close = difflib.get_close_matches(n, KNOWN_CLASSES + tuple(CLASS_SYNONYMS), n=1, cutoff=0.75)
    if close:
        return CLASS_SYNONYMS.get(close[0], close[0])
    return None


def parse_rule(d: Any) -> Rule:
    """Validate a rule document against the schema and semantic checks; return a frozen Rule.

    Raises RuleError whose ``errors`` are (JSON pointer, message) pairs, e.g.
    ``("/soft_scores/1/window_seconds", "must be > 0")``. Class names outside `KNOWN_CLASSES`
    are accepted (an unknown class is a class of its own) with a warning in ``Rule.warnings``.
    """
    errors: list[tuple[str, str]] = []
    if not isinstance(d, dict):
        raise RuleError([("", "a rule must be a JSON object")])
    errors.extend(_nonfinite(d))
    if errors:
        raise RuleError(errors)
    if not conforms(d, RULE_SCHEMA):      # (a fast yes for valid documents; else jsonschema says why)
        import jsonschema

        validator = jsonschema.Draft202012Validator(RULE_SCHEMA)
        for e in sorted(validator.iter_errors(d), key=lambda e: list(map(str, e.absolute_path))):
            errors.append((_pointer(e.absolute_path), _friendly(e)))
        if errors:
            raise RuleError(errors)
    warnings: list[tuple[str, str]] = []
    known = {"event", "description", "entity", "hard_gates", "soft_scores", "sequence", "absent"}
    extra = {k: v for k, v in d.items() if k not in known}
    if "sequence" in d:
        for k in ("entity", "hard_gates", "soft_scores"):
            if k in d and (k == "entity" or d[k]):
                errors.append((f"/{k}", "not used by a sequence rule: each step has its own "
                                        "entity, hard_gates and soft_scores"))
        steps = []
        for k, sd in enumerate(d["sequence"]):
            p = f"/sequence/{k}"
            ent, gates, softs = _fragment(sd, p, errors, warnings, in_sequence=True)
            gap = sd.get("gap")
            same = bool(sd.get("same_track", False))
            lo = hi = None
            if k == 0:
                if gap is not None:
                    errors.append((f"{p}/gap", "the first step has no previous step: no gap"))
                if same:
                    errors.append((f"{p}/same_track", "the first step has no previous step"))
            else:
                if gap is None:
                    errors.append((f"{p}/gap", "required for every step after the first "
                                               "(max_seconds from the previous step)"))
                else:
                    lo, hi = float(gap.get("min_seconds", 0.0)), float(gap["max_seconds"])
                    if lo > hi:
                        errors.append((f"{p}/gap/min_seconds", f"must be ≤ max_seconds ({hi:g}); found {lo:g}"))
                if same and (ent.role != "object" or steps and steps[-1].entity.role != "object"):
                    errors.append((f"{p}/same_track", "needs this step and the previous one to be "
                                                      "object steps (a track, not the ego)"))
            steps.append(Step(ent, gates, softs, float(sd.get("weight", 1.0)), lo, hi, same,
                              sd.get("name")))
        absent = []
        for n, ad in enumerate(d.get("absent") or []):
            p = f"/absent/{n}"
            ent, gates, softs = _fragment(ad, p, errors, warnings, in_sequence=True)
            k = int(ad.get("step", len(steps) - 1))
            if k >= len(steps):
                errors.append((f"{p}/step", f"the sequence has {len(steps)} step(s); found {k}"))
            if not gates and not softs:
                errors.append((p, "a negation needs a hard gate (its spatial scope) or a soft score"))
            absent.append(Absence(ent, gates, softs, k, float(ad.get("before_seconds", 0.0)),
                                  float(ad.get("after_seconds", 0.0)), ad.get("name")))
        if errors:
            raise RuleError(errors)
        return Rule(entity=Entity(), hard_gates=(), soft_scores=(), event=d.get("event"),
                    description=d.get("description"), extra=extra, sequence=tuple(steps),
                    absent=tuple(absent), warnings=tuple(warnings))
    if d.get("absent"):
        errors.append(("/absent", "a scoped negation needs a 'sequence' (one step is enough): "
                                  "its time window is anchored to a step"))
    entity, gates, softs = _fragment(d, "", errors, warnings, in_sequence=False)
    if errors:
        raise RuleError(errors)
    return Rule(entity=entity, hard_gates=gates, soft_scores=softs,
                event=d.get("event"), description=d.get("description"), extra=extra,
                warnings=tuple(warnings))


def _fragment(d: dict, base: str, errors: list, warnings: list, *, in_sequence: bool):
    """(Entity, gates, soft scores) of a rule or a sequence fragment, with semantic checks."""
    entity = _entity(d, base, errors, warnings, in_sequence=in_sequence)
    gates = _gates(d, base, errors, entity.role, in_sequence=in_sequence)
    softs = [_soft(s, f"{base}/soft_scores/{i}", errors, entity.role, in_sequence=in_sequence)
             for i, s in enumerate(d.get("soft_scores") or [])]
    if softs and sum(s.weight for s in softs) <= 0:
        errors.append((f"{base}/soft_scores", "the weights sum to zero: at least one weight must be > 0"))
    if not softs and not gates and not in_sequence:
        errors.append((base, "a rule needs at least one hard gate or soft score"))
    return entity, tuple(gates), tuple(softs)


def _entity(d: dict, base: str, errors: list, warnings: list, *, in_sequence: bool) -> Entity:
    """The fragment's entity; its role/selection/class checks, unknown classes as warnings."""
    ent = d.get("entity") or {}
    role = ent.get("role", "object") or "object"
    cf = ent.get("class_filter")
    entity = Entity(role=role,
                    class_filter=None if cf is None else tuple(dict.fromkeys(c.strip().lower() for c in cf)),
                    selection=ent.get("selection", "any") or "any",
                    agg_mode=ent.get("agg_mode", "any") or "any")
    if role == "ego" and entity.selection == "closest":
        errors.append((f"{base}/entity/selection", "'closest' needs role 'object' (the ego is one series)"))
    if role == "ego" and cf:
        errors.append((f"{base}/entity/class_filter", "must be null when role is 'ego'"))
    if in_sequence and entity.agg_mode != "any":
        errors.append((f"{base}/entity/agg_mode", "a step or negation is realised by one unit: only 'any'"))
    for i, c in enumerate(cf or []):
        name = c.strip().lower()
        if name and name not in KNOWN_CLASSES:
            guess = suggest_class(name)
            hint = f"; did you mean '{guess}'?" if guess else f" (known: {', '.join(KNOWN_CLASSES[:9])})"
            warnings.append((f"{base}/entity/class_filter/{i}",
                             f"unknown class '{c}': not a class the records format or the detector "
                             f"uses, so probably no track matches{hint}"))
    return entity


def _gates(d: dict, base: str, errors: list, role: str, *, in_sequence: bool) -> list:
    """The fragment's hard gates, with their checks."""
    gates = []
    for i, g in enumerate(d.get("hard_gates") or []):
        v = float(g["value"])
        if role == "ego" and g["field"] in OBJECT_FIELDS:
            errors.append((f"{base}/hard_gates/{i}/field",
                           f"'{g['field']}' is an object field; an ego rule can gate only on "
                           f"{', '.join(EGO_FIELDS)}"))
        if in_sequence and g.get("min_time_fraction") is not None:
            errors.append((f"{base}/hard_gates/{i}/min_time_fraction",
                           "not available in a step or negation: its gates hold at one time"))
        secs = g.get("min_seconds")
        if in_sequence and secs is not None:
            errors.append((f"{base}/hard_gates/{i}/min_seconds",
                           "not available in a step or negation: its gates hold at one time "
                           "(separate steps in time with the gap's min_seconds)"))
        elif secs is not None and g.get("min_time_fraction") is not None:
            errors.append((f"{base}/hard_gates/{i}/min_seconds",
                           "give either min_seconds (a duration) or min_time_fraction (a share of "
                           "the clip), not both"))
        gates.append(Gate(field=g["field"], op=OPS[g["op"]], value=v,
                          min_time_fraction=g.get("min_time_fraction"),
                          min_seconds=None if secs is None else float(secs)))
    return gates


def _soft(s: dict, p: str, errors: list, role: str, *, in_sequence: bool) -> SoftScore:
    """One soft score (at JSON pointer ``p``), with its checks."""
    typ = "temporal_change" if s["type"] == "max_change" else s["type"]
    w = float(s.get("weight", 1.0))
    if role == "ego" and s["field"] in OBJECT_FIELDS:
        errors.append((f"{p}/field", f"'{s['field']}' is an object field; an ego rule scores only "
                                     f"{', '.join(EGO_FIELDS)}"))
    mf = s.get("min_fraction")
    if in_sequence and mf is not None:
        errors.append((f"{p}/min_fraction", "not available in a step or negation (one unit realises it)"))
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
        return SoftScore(type=typ, field=s["field"], weight=w,
                         window_s=float(s.get("window_seconds", 1.0)), magnitude=mag,
                         direction=direction, min_fraction=mf)
    else:
        extra = set(s) - {"type", "field", "direction", "min_duration_seconds", "weight", "min_fraction"}
        for k in sorted(extra):
            errors.append((f"{p}/{k}", "not a key of a monotonic_trend soft score"))
        direction = s.get("direction")
        if direction not in ("increasing", "decreasing"):
            errors.append((f"{p}/direction", "monotonic_trend needs 'increasing' or 'decreasing'"))
        if "min_duration_seconds" not in s:
            errors.append((f"{p}/min_duration_seconds", "required for monotonic_trend"))
        return SoftScore(type=typ, field=s["field"], weight=w, direction=direction,
                         min_duration_s=float(s.get("min_duration_seconds", 1.0)),
                         min_fraction=mf)


def _friendly(e) -> str:
    v = e.validator
    if v == "anyOf" and not e.absolute_path:
        return ("a rule needs 'entity' and 'soft_scores' (one pattern) or 'sequence' (steps in "
                "order, each with its own entity)")
    if v == "enum":
        return f"must be one of {', '.join(map(repr, e.validator_value))}; found {e.instance!r}"
    if v == "exclusiveMinimum":
        return f"must be > {e.validator_value}; found {e.instance!r}"
    if v == "minimum":
        return f"must be ≥ {e.validator_value}; found {e.instance!r}"
    if v == "maximum":
        return f"must be ≤ {e.validator_value:g}; found {e.instance!r}"
    if v == "required":
        return e.message.replace("is a required property", "is required")
    if v == "additionalProperties":
        return e.message.replace("Additional properties are not allowed", "unknown key")
    if v == "type":
        return f"must be {e.validator_value}; found {type(e.instance).__name__} {e.instance!r}"
    if v == "maxItems":
        return f"at most {e.validator_value} items"
    if v == "maxLength":
        return f"at most {e.validator_value} characters"
    return e.message
