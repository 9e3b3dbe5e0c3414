"""The evaluation method registry: what a method receives (`EvalContext`), what it returns
(`MethodOutput`), and the name -> method table that `methods.py` fills and `runner.py` runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import StrivedError
from .bench import BenchQuery, Benchmark


class MethodUnavailable(StrivedError):
    pass


@dataclass
class MethodOutput:
    ranking: list[str]
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


@dataclass
class EvalContext:
    bench: Benchmark
    library: object
    llm: object = None
    cv_folds: int = 0  # > 0: calibrated rules are cross-fitted (each item scored by a library
    #                     calibrated without its fold); 0: the shipped library as it is
    rule_library: object = None  # a user's RuleLibrary: used as it is for the calibrated rule methods
    cache: dict = field(default_factory=dict)


MethodFn = Callable[[EvalContext, BenchQuery], MethodOutput]
METHODS: dict[str, tuple[MethodFn, str]] = {}


def method(name: str, description: str):
    def deco(fn: MethodFn) -> MethodFn:
        METHODS[name] = (fn, description)
        return fn
    return deco


DEFAULT_METHODS = ("full", "equal", "rule", "dense", "bm25", "rule-hand", "full-uncalibrated",
                   "full-no-adapter", "full-binarised", "full-no-gates", "full-no-entity",
                   "rule-uncalibrated", "rule-one-profile", "full-one-profile", "full-wordlist", "full-rerank")
