"""The rule DSL: schema (`schema`) and parsing (`model`), fast corpus scorer (`scorer`; sequences in
`sequence`; track columns and their features in `columns`), naive reference (`reference`),
per-video explanation (`explain`) and field statistics (`stats`)."""

from .model import Absence, Entity, Gate, Rule, SoftScore, Step, parse_rule
from .schema import ALL_FIELDS, EGO_FIELDS, OBJECT_FIELDS, rule_schema
from .scorer import RuleScorer, ScoreResult

__all__ = ["ALL_FIELDS", "EGO_FIELDS", "OBJECT_FIELDS", "Absence", "Entity", "Gate", "Rule", "SoftScore", "Step",
           "parse_rule", "rule_schema", "RuleScorer", "ScoreResult"]
