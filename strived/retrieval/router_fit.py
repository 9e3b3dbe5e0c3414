"""A fusion router fitted on labelled queries: per query kind, the source weights that ranked the
labelled videos best.

The word-list router (`router.offline_route`) encodes the paper's three facts, which assume a
*visual* dense source; the shipped dense source is text generated from perception, and its weights
were never checked against data. This router keeps the word-list router's reading of the query
(who moves: ego / another road user / a scene; where the motion ends: central / off-centre;
whether it has surface words), adds the library's dense embedder kind, and learns one weight
triple per kind of query from labelled queries:

- candidate triples: every (rule, dense, bm25) in {0, 0.25, 0.5, 1}³ with a 1 (the main source);
- objective: mean average precision of the weighted-RRF fusion (k = 60; a source's equal scores
  share a rank, as in search) over the training queries
  of that kind; a kind with fewer than ``MIN_QUERIES`` training queries uses the triple fitted on
  all training queries; ties go to the triple closest to equal weights (the least committal);
- prior: a cell keeps equal weights (``"equal"``; the word-list router's per-query weights,
  ``"wordlist"``, as an ablation) unless a fixed triple beats them by ``MIN_GAIN`` mean AP on its
  training queries.

`strived eval` fits it on the other queries only (leave one query out), so its numbers are
out-of-sample; the shipped ``resources/router.json`` is fitted on every bench-dev query.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..query import ParsedQuery
from .fusion import RRF_K, weighted_rrf
from .metrics import average_precision
from .router_words import SOURCES, offline_route

GRID = (0.0, 0.25, 0.5, 1.0)
MIN_QUERIES = 3
MIN_GAIN = 0.10   # a fitted triple replaces the word-list weights only when it gains this much mean AP
FORMAT = "strived.router/1"
WORDLIST = "wordlist"   # a cell that keeps the word-list router's per-query weights
EQUAL = "equal"         # a cell that keeps equal weights (the prior since issue 31)
PRIORS = (EQUAL, WORDLIST)


def candidate_weights() -> list[dict[str, float]]:
    out = []
    for t in itertools.product(GRID, repeat=3):
        if max(t) == 1.0:
            out.append(dict(zip(SOURCES, t)))
    # least committal first, so that ties keep it
    out.sort(key=lambda w: (sum(abs(1.0 - v) for v in w.values()), tuple(-v for v in w.values())))
    return out


def query_kind(query: "str | ParsedQuery", dense_kind: str = "text") -> str:
    """The cell a query falls in: subject / end position / surface words / dense kind."""
    d = offline_route(query).details
    surf = "surface" if d.get("surface_tokens") else "plain"
    return f"{d.get('subject')}|{d.get('end_position')}|{surf}|{dense_kind}"


@dataclass
class Example:
    """One labelled query: its per-source rankings over the items, and its labels."""

    query: str
    rankings: dict[str, list[str]]
    relevant: set[str]
    ambiguous: set[str] = field(default_factory=set)
    kind: str = ""
    # each source's scores aligned with its ranking (equal scores share a rank, as in search);
    # a source without scores ranks by position
    scores: dict[str, list[float]] = field(default_factory=dict)


def _ap(ex: Example, w: dict[str, float]) -> float:
    rk = {s: r for s, r in ex.rankings.items() if s in w}
    fused = [v for v, _ in weighted_rrf(rk, w, rrf_k=RRF_K,
                                        scores={s: ex.scores[s] for s in rk if s in ex.scores})]
    return average_precision(fused, ex.relevant, ex.ambiguous)


def wordlist_weights(query: "str | ParsedQuery") -> dict[str, float]:
    """The word-list router's weights for ``query`` (the prior a fitted cell must beat)."""
    w = offline_route(query).weights
    return {s: float(w.get(s, 0.0)) for s in SOURCES}


def prior_weights(prior: str, query: "str | ParsedQuery") -> dict[str, float]:
    return wordlist_weights(query) if prior == WORDLIST else {s: 1.0 for s in SOURCES}


def _best(examples: list[Example], min_gain: float = MIN_GAIN,
          prior: str = EQUAL) -> tuple["dict[str, float] | str", float]:
    """The fixed triple with the best mean AP, unless it beats the prior's per-query weights by
    less than ``min_gain`` (a handful of labelled queries cannot justify a small difference: the
    prior then). The prior is equal weights: on footage from sources never used for design,
    equal weights beat both the word-list router and a router fitted on bench-dev (issue 31); the
    word-list prior stays as an ablation (``full-wordlist``)."""
    base = sum(_ap(ex, prior_weights(prior, ex.query)) for ex in examples) / len(examples)
    best_w, best = None, -1.0
    for w in candidate_weights():
        m = sum(_ap(ex, w) for ex in examples) / len(examples)
        if m > best + 1e-12:
            best_w, best = w, m
    if best < base + min_gain:
        return prior, base
    return best_w, best


@dataclass
class FittedRouter:
    cells: "dict[str, dict[str, float] | str]"
    default: "dict[str, float] | str"
    provenance: dict = field(default_factory=dict)

    def weights(self, query: "str | ParsedQuery", dense_kind: str = "text") -> tuple[dict[str, float], str]:
        kind = query_kind(query, dense_kind)
        w = self.cells.get(kind, self.default)
        return (prior_weights(w, query) if isinstance(w, str) else dict(w)), kind

    def to_dict(self) -> dict:
        return {"format": FORMAT, "provenance": self.provenance, "default": self.default,
                "cells": self.cells}

    def save(self, path: str | Path) -> None:
        p = Path(path)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(p)

    @classmethod
    def load(cls, path: str | Path) -> "FittedRouter":
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file")

        def weights(x) -> "dict[str, float] | str":
            if x in PRIORS:
                return x
            w = {s: float(x[s]) for s in SOURCES}
            if any(v < 0 or v > 1 for v in w.values()) or max(w.values()) <= 0:
                raise ValueError(f"{path}: weights must be in [0, 1] with one positive")
            return w
        return cls({str(k): weights(v) for k, v in (d.get("cells") or {}).items()}, weights(d["default"]),
                   dict(d.get("provenance") or {}))


def fit_router(examples: list[Example], min_queries: int = MIN_QUERIES, provenance: dict | None = None,
               prior: str = EQUAL) -> FittedRouter:
    """Fit the weights (see module doc). ``examples`` need ``kind`` set (`query_kind`)."""
    if not examples:
        raise ValueError("no labelled queries to fit the router on")
    default, _ = _best(examples, prior=prior)
    cells = {}
    by_kind: dict[str, list[Example]] = {}
    for ex in examples:
        by_kind.setdefault(ex.kind, []).append(ex)
    for kind, exs in sorted(by_kind.items()):
        if len(exs) >= min_queries:
            cells[kind], _ = _best(exs, prior=prior)
    prov = {"queries": len(examples), "min_queries_per_cell": min_queries, "prior": prior,
            "min_gain_map": MIN_GAIN, "fusion": f"weighted RRF k={RRF_K}, equal scores share a rank",
            **(provenance or {})}
    return FittedRouter(cells, default, prov)


_SHIPPED: list = []


def shipped_router() -> FittedRouter | None:
    """The router fitted on the development benchmark (``resources/router.json``), or None."""
    if not _SHIPPED:
        p = Path(__file__).resolve().parents[2] / "resources" / "router.json"
        try:
            _SHIPPED.append(FittedRouter.load(p) if p.is_file() else None)
        except (OSError, ValueError, KeyError, TypeError):
            _SHIPPED.append(None)
    return _SHIPPED[0]
