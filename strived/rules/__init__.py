"""The rule DSL: schema and parsing (`model`), fast corpus scorer (`scorer`; sequences in
`sequence`), naive reference (`reference`), per-video explanation (`explain`) and field statistics
(`stats`)."""

from .model import (ALL_FIELDS, EGO_FIELDS, OBJECT_FIELDS, Absence, Entity, Gate, Rule, SoftScore, Step,
                    parse_rule, rule_schema)
from .scorer import RuleScorer, ScoreResult

__all__ = ["ALL_FIELDS", "EGO_FIELDS", "OBJECT_FIELDS", "Absence", "Entity", "Gate", "Rule", "SoftScore", "Step",
           "parse_rule", "rule_schema", "RuleScorer", "ScoreResult"]
